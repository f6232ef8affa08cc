"""Settings of a posterior imported from the paper's authors' released networks instead of
trained (`posterior: {source: checkpoints, checkpoints: {...}}`, docs/checkpoints.md), and the
table of those releases: each one's symbnn architecture and the renames from symbnn's
parameter names to TorchUncertainty's (`RELEASES`; `symbnn.checkpoints` reads the files)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

from symbnn.settings import base
from symbnn.settings.base import Section

# torchvision's ResNet names -> TorchUncertainty's (torch_uncertainty.models.resnet): the
# projection shortcut is `shortcut` there, the classifier `linear`.
RESNET_RENAMES = (
    (r"^(layer\d+\.\d+)\.downsample\.", r"\1.shortcut."),
    (r"^fc\.", "linear."),
)


@dataclasses.dataclass(frozen=True)
class Release:
    name: str  # the setting's folder in the dataset: models/<name>/<name>-<first>-<last>.tgz
    description: str
    # symbnn model spec (a file's own may add to it: `checkpoints.releases.architecture_of`)
    architecture: dict[str, Any]
    renames: tuple[tuple[str, str], ...] = ()

    def source_name(self, name: str) -> str:
        """The TorchUncertainty name of symbnn state_dict entry ``name``."""
        for pattern, replacement in self.renames:
            name = re.sub(pattern, replacement, name)
        return name


RELEASES: dict[str, Release] = {
    release.name: release
    for release in (
        Release(
            "mnist-optunet",
            "OptuNets (OptuMNIST-v1: conv1 2x1x4x4, max-pool 3, grouped conv2 10x1x5x5, "
            "global average pool, fc1 10->3, fc2 3->10) trained on MNIST",
            # symbnn's OptuNet defaults are OptuMNIST-v1, with the same parameter names
            {"name": "optunet"},
        ),
        Release(
            "cifar10-resnet18",
            "ResNet-18s trained on CIFAR-10",
            {"name": "resnet18", "num_classes": 10},
            RESNET_RENAMES,
        ),
        Release(
            "cifar100-resnet18",
            "ResNet-18s trained on CIFAR-100",
            {"name": "resnet18", "num_classes": 100},
            RESNET_RENAMES,
        ),
        Release(
            "cifar10-resnet20-frn-silu",
            "ResNet-20s with filter response normalisation and SiLU trained on CIFAR-10 "
            "(permutation symmetries only: SiLU and FRN admit no scaling)",
            # symbnn's ResNet20FrnSilu keeps TorchUncertainty's names
            {"name": "resnet20_frn_silu", "num_classes": 10},
        ),
        Release(
            "tiny-imagenet-resnet18",
            "ResNet-18s trained on TinyImageNet (200 classes)",
            {"name": "resnet18", "num_classes": 200},
            RESNET_RENAMES,
        ),
    )
}

# The settings of the release (RELEASES above; a test keeps them equal).
ReleasedSetting = Literal[
    "mnist-optunet",
    "cifar10-resnet18",
    "cifar100-resnet18",
    "cifar10-resnet20-frn-silu",
    "tiny-imagenet-resnet18",
]


# Fields call base.setting: the field named `setting` would shadow the bare name in the body.
@dataclasses.dataclass(frozen=True)
class Checkpoints(Section):
    DOC = "the authors' released networks (Hugging Face dataset torch-uncertainty/Checkpoints)"
    path: str = base.setting(
        doc="a bundle (<setting>-<first>-<last>.tgz), a folder of bundles or an untarred bundle, "
        "relative to the working directory; with `download`, the folder the bundles go to"
    )
    setting: ReleasedSetting = base.setting(doc="the released setting the networks belong to")
    first: int = base.setting(
        0, "release index of the first target network", ge=0, le=base.MAX_NETWORKS
    )
    dtype: Literal["float32", "float16"] = base.setting(
        "float32", "stored weights: float32 (exact widening of the released float16) or float16"
    )
    pool: bool = base.setting(
        False,
        "also import the methods' pool: the `methods.pool` networks after the target's "
        "(instead of training it)",
    )
    evaluate: bool = base.setting(
        True,
        "measure each network's accuracy on the experiment's test split (the convergence "
        "flags and the training report need it)",
    )
    download: bool = base.setting(
        False, "fetch the missing bundles from the Hugging Face hub into `path` (needs internet)"
    )

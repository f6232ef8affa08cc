"""Settings of a posterior imported from the paper's authors' released networks instead of
trained (`posterior: {source: checkpoints, checkpoints: {...}}`, docs/checkpoints.md)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from symbnn.settings import base
from symbnn.settings.base import Section

# The settings of the release (symbnn.checkpoints.releases.RELEASES; a test keeps them equal).
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

"""What determines a trained network: its data, its architecture, its recipe; and the target
posterior's seeds and the resources of a training job."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

from symbnn import user_code
from symbnn.settings.base import (
    MAX_BATCH,
    MAX_EPOCHS,
    MAX_NETWORKS,
    MAX_SEED,
    MAX_WIDTH,
    ConfigError,
    ImportPath,
    Section,
    setting,
    type_hints,
)
from symbnn.settings.checkpoints import Checkpoints

TrainDataset = Literal["digits", "mnist", "fashionmnist", "cifar10", "cifar100", "tinyimagenet"]
OodDataset = Literal["natural_patches", "fashionmnist", "mnist", "svhn", "textures"]
Schedule = Literal["constant", "multistep", "cosine"]


@dataclasses.dataclass(frozen=True)
class OodOptions(Section):
    DOC = "options passed to the OOD loader so its images match the in-distribution shape"
    n: int | None = setting(None, "images (none: the loader's default)", ge=1, le=10_000_000)
    size: int | None = setting(None, "side of the square images", ge=8, le=4096)
    channels: Literal[1, 3] | None = setting(None, "colour channels")
    seed: int | None = setting(None, "seed of the loader's random choices", ge=0, le=MAX_SEED)

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in super().to_dict().items() if value is not None}


@dataclasses.dataclass(frozen=True)
class Data(Section):
    DOC = "the in-distribution and out-of-distribution datasets"
    train: TrainDataset | ImportPath = setting(
        doc="in-distribution dataset (train split for training, test split for evaluation): "
        "a shipped one, or the import path 'package.module:function' of a loader of your own, "
        "called as function(split, root) and returning an ImageData (docs/extending.md)"
    )
    ood: OodDataset | ImportPath = setting(
        doc="out-of-distribution dataset (its test split): a shipped one, or the import path "
        "of a loader of your own, called with ood_options as keyword arguments"
    )
    ood_options: OodOptions = setting(OodOptions(), "options of the OOD loader")
    train_limit: int | None = setting(
        None,
        "use only N training images: a stratified subset (each class in proportion to its "
        "share of the split, rounded by largest remainder to exactly N; each class's first "
        "images in file order, kept in file order)",
        ge=1,
        le=10**9,
    )
    test_limit: int | None = setting(
        None,
        "use only N test images, a stratified subset chosen as for train_limit",
        ge=1,
        le=10**9,
    )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        return {k: v for k, v in out.items() if v is not None and v != {}}


@dataclasses.dataclass(frozen=True)
class ModelSection(Section):
    """A model spec: ``name`` picks the architecture, the other keys are its constructor's
    options; an option left out takes the architecture's own default (one place: the model
    class), so the spec, as stores record it, holds only what was chosen. `HAND_WRITTEN`:
    the batched trainer has a hand-written stacked pass for the architecture
    (`symbnn.train.batched.hand_written`, without augmentation), so the methods fit all its
    modes in one batched run."""

    HAND_WRITTEN: ClassVar[bool] = False

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in super().to_dict().items() if value is not None}


# options several architectures share, declared once so they read and bound alike
def _num_classes() -> Any:
    return setting(None, "classes", ge=2, le=MAX_WIDTH)


def _in_channels() -> Any:
    return setting(None, "input channels", ge=1, le=MAX_WIDTH)


@dataclasses.dataclass(frozen=True)
class OptunetModel(ModelSection):
    DOC = "OptuNet, the paper's small MNIST CNN with a grouped second convolution"
    HAND_WRITTEN: ClassVar[bool] = True
    name: Literal["optunet"] = setting(doc="architecture")
    in_channels: int | None = _in_channels()
    num_classes: int | None = _num_classes()
    conv1_channels: int | None = setting(
        None, "channels of the first convolution", ge=1, le=MAX_WIDTH
    )
    conv2_channels: int | None = setting(
        None, "channels of the second (grouped) convolution", ge=1, le=MAX_WIDTH
    )
    kernel1: int | None = setting(None, "kernel size of the first convolution", ge=1, le=MAX_WIDTH)
    kernel2: int | None = setting(None, "kernel size of the second convolution", ge=1, le=MAX_WIDTH)
    groups: int | None = setting(None, "groups of the second convolution", ge=1, le=MAX_WIDTH)
    pool: int | None = setting(None, "max-pooling size and stride", ge=1, le=MAX_WIDTH)
    hidden: int | None = setting(None, "width of the hidden linear layer", ge=1, le=MAX_WIDTH)


@dataclasses.dataclass(frozen=True)
class MlpModel(ModelSection):
    DOC = "a ReLU multilayer perceptron (inputs flattened)"
    HAND_WRITTEN: ClassVar[bool] = True
    name: Literal["mlp"] = setting(doc="architecture")
    widths: tuple[int, ...] = setting(
        doc="input, hidden and output widths", ge=1, min_items=2, le=MAX_WIDTH
    )
    bias: bool | None = setting(None, "whether the linear layers have biases")


@dataclasses.dataclass(frozen=True)
class Resnet18Model(ModelSection):
    DOC = "ResNet-18 (torchvision's), by default with a 3x3 stem and no max-pool"
    name: Literal["resnet18"] = setting(doc="architecture")
    num_classes: int | None = _num_classes()
    in_channels: int | None = _in_channels()
    stem: Literal["cifar", "imagenet"] | None = setting(
        None, "cifar: 3x3 stride-1 convolution, no max-pool; imagenet: 7x7 stride 2 and max-pool"
    )


@dataclasses.dataclass(frozen=True)
class Resnet20FrnSiluModel(ModelSection):
    DOC = "ResNet-20 with filter response normalisation and SiLU (permutation symmetries only)"
    name: Literal["resnet20_frn_silu"] = setting(doc="architecture")
    num_classes: int | None = _num_classes()
    in_channels: int | None = _in_channels()
    width: int | None = setting(
        None, "channels of the first stage (doubled at each stage)", ge=1, le=MAX_WIDTH
    )


@dataclasses.dataclass(frozen=True)
class ImportedModel(ModelSection):
    DOC = "a model of your own: an nn.Module subclass named by its import path"
    # how the settings layer's error names this form beside the shipped names
    NAME_FORM = "an import path 'package.module:attribute'"
    name: str = setting(
        doc="an import path 'package.module:Class' (a subclass of torch.nn.Module; the "
        "module must be importable: installed, or on PYTHONPATH)",
        pattern=r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*",
    )
    options: dict[str, Any] | None = setting(
        None,
        "keyword arguments of the class: numbers, strings, booleans, null, and lists or "
        "mappings of them (never an import path)",
    )
    input_shape: tuple[int, ...] | None = setting(
        None,
        "shape of one input, e.g. [1, 28, 28]: one batch of it is traced to derive the "
        "symmetry structure (default: guessed from the first layer, 32 x 32 maps for a conv)",
        ge=1,
        min_items=1,
        le=MAX_WIDTH,
    )

    def check(self, where: str) -> None:
        # a store's architecture carries these options too: plain data, never code
        problem = user_code.options_problem(self.options or {}, f"{where}.options")
        if problem is not None:
            raise ConfigError(problem)


Model = OptunetModel | MlpModel | Resnet18Model | Resnet20FrnSiluModel | ImportedModel


@dataclasses.dataclass(frozen=True)
class Recipe(Section):
    """SGD with the semantics of `torch.optim.SGD` (dampening 0) and a per-epoch schedule:

    - "constant": lr throughout;
    - "multistep": lr * gamma**(number of milestones <= epoch), like `MultiStepLR`;
    - "cosine": lr * (1 + cos(pi * epoch / epochs)) / 2, like `CosineAnnealingLR(T_max=epochs)`.

    `augment` "crop" draws random crops of the zero-padded (4 pixels) image (the paper's
    MNIST recipe); "crop_flip" adds horizontal flips, the usual CIFAR augmentation (wrong for
    digits).
    """

    DOC = "training recipe of every network of the target posterior (paper appendix B.1)"
    epochs: int = setting(doc="passes over the training set", ge=1, le=MAX_EPOCHS)
    batch_size: int = setting(doc="images per SGD step", ge=1, le=MAX_BATCH)
    lr: float = setting(doc="learning rate of the first epoch", gt=0)
    momentum: float = setting(0.0, "SGD momentum", ge=0, lt=1)
    nesterov: bool = setting(False, "Nesterov momentum")
    weight_decay: float = setting(0.0, "L2 penalty added to the gradient", ge=0)
    schedule: Schedule = setting("multistep", "learning-rate schedule")
    milestones: tuple[int, ...] = setting(
        (), "epochs at which multistep multiplies lr by gamma", ge=1, increasing=True, le=MAX_EPOCHS
    )
    gamma: float = setting(0.1, "multistep's factor", gt=0, le=1)
    augment: Literal["none", "crop", "crop_flip"] = setting(
        "none", "random crops with zero padding 4 (crop), and horizontal flips (crop_flip)"
    )

    def check(self, where: str) -> None:
        if self.nesterov and self.momentum == 0:
            raise ConfigError(f"{where}.nesterov: Nesterov momentum needs momentum > 0")
        if self.milestones and self.schedule != "multistep":
            raise ConfigError(
                f"{where}.milestones: only schedule multistep uses them, not {self.schedule!r}"
            )
        for index, milestone in enumerate(self.milestones):
            if milestone >= self.epochs:  # epochs are numbered 0 .. epochs - 1
                raise ConfigError(
                    f"{where}.milestones[{index}]: milestone {milestone} is not below epochs "
                    f"({self.epochs}): it would never take effect"
                )

    def lr_at(self, epoch: int) -> float:
        """Learning rate used throughout epoch `epoch` (0-based)."""
        if not 0 <= epoch < self.epochs:
            raise ValueError(f"epoch {epoch} outside 0..{self.epochs - 1}")
        if self.schedule == "cosine":
            return self.lr * (1 + math.cos(math.pi * epoch / self.epochs)) / 2
        if self.schedule == "constant":
            return self.lr
        lr = self.lr
        for milestone in self.milestones:  # repeated products, as MultiStepLR computes them
            if epoch >= milestone:
                lr *= self.gamma
        return lr

    def final_lr(self) -> float:
        """Learning rate of the last epoch: the one a trained network ended with."""
        return self.lr_at(self.epochs - 1)

    def stretched(self, factor: int) -> Recipe:
        """The same recipe run `factor` times as long: epochs and milestones scaled, so the
        schedule keeps its shape (cosine scales with the epochs by itself)."""
        return self.replace(
            epochs=self.epochs * factor, milestones=tuple(m * factor for m in self.milestones)
        )


def recipe_changes(name: str, doc: str, **defaults: Any) -> type[Section]:
    """A section of optional changes to the experiment's recipe (same keys and bounds as
    `Recipe`, each defaulting to "as the recipe" unless ``defaults`` says otherwise)."""
    hints = type_hints(Recipe)
    specs = []
    for f in dataclasses.fields(Recipe):
        default = defaults.get(f.name)
        field = dataclasses.field(default=default, metadata=f.metadata)
        specs.append((f.name, hints[f.name] | None, field))

    def apply(self, recipe: Recipe, where: str | None = None) -> Recipe:
        """``recipe`` with these changes (checked like any recipe; errors name ``where``, the
        config path of these changes)."""
        changes = {k: v for k, v in self.to_dict().items() if v is not None}
        return Recipe.parse({**recipe.to_dict(), **changes}, where or self.WHERE)

    cls = dataclasses.make_dataclass(
        name,
        specs,
        bases=(Section,),
        frozen=True,
        namespace={"DOC": doc, "apply": apply, "WHERE": name},
    )
    return cls


@dataclasses.dataclass(frozen=True)
class Posterior(Section):
    DOC = "the target posterior: N networks trained from seeds first_seed .. first_seed + N - 1"
    n_samples: int = setting(doc="networks of the target posterior", ge=2, le=MAX_NETWORKS)
    shard_size: int = setting(
        doc="seeds trained by one job (a batch of networks trained at once)", ge=1, le=MAX_NETWORKS
    )
    first_seed: int = setting(0, "seed of the first network", ge=0, le=MAX_SEED)
    min_accuracy: float = setting(
        0.5, "test accuracy under which a network is flagged as not converged", ge=0, le=1
    )
    plateau_seeds: int | None = setting(
        None,
        "the first N target seeds are trained again for twice the recipe's epochs, to show "
        "that the recipe reaches its plateau (the report compares their test accuracy at 1x "
        "and 2x); none: no such check",
        ge=2,
        le=MAX_NETWORKS,
    )
    max_below_median: float | None = setting(
        None,
        "also drop a network whose test accuracy is more than this below the median of the "
        "networks trained alike (a straggler); none: min_accuracy alone decides",
        gt=0,
        le=1,
    )
    source: Literal["train", "checkpoints"] = setting(
        "train",
        "train: networks trained from seeds; checkpoints: the authors' released networks, "
        "imported (n_samples of them from checkpoints.first)",
    )
    checkpoints: Checkpoints | None = setting(
        None, "the released networks to import when source is checkpoints"
    )

    def check(self, where: str) -> None:
        if self.source == "checkpoints" and self.checkpoints is None:
            raise ConfigError(
                f"{where}.checkpoints: missing (source checkpoints imports the networks it names)"
            )
        if self.source == "train" and self.checkpoints is not None:
            raise ConfigError(
                f"{where}.checkpoints: only read when source is checkpoints (set "
                f"{where}.source: checkpoints, or remove it)"
            )
        if self.shard_size > self.n_samples:
            raise ConfigError(
                f"{where}.shard_size: {self.shard_size} exceeds n_samples ({self.n_samples})"
            )
        if self.plateau_seeds is not None and self.plateau_seeds > self.n_samples:
            raise ConfigError(
                f"{where}.plateau_seeds: {self.plateau_seeds} exceeds n_samples "
                f"({self.n_samples}): the check retrains target seeds"
            )

    def shard_ids(self) -> list[str]:
        """Zero-padded shard names: 000, 001, ..."""
        return [f"{i:03d}" for i in range(-(-self.n_samples // self.shard_size))]

    def shard_seeds(self, shard: str | int) -> list[int]:
        """The seeds shard ``shard`` trains: a contiguous block, the last one possibly shorter."""
        index = int(shard)
        n, size = self.n_samples, self.shard_size
        if not 0 <= index < -(-n // size):
            raise ValueError(
                f"shard {shard!r} is out of range for n_samples={n}, shard_size={size}"
            )
        return list(
            range(self.first_seed + index * size, self.first_seed + min(n, (index + 1) * size))
        )

    @property
    def seeds(self) -> range:
        return range(self.first_seed, self.first_seed + self.n_samples)


@dataclasses.dataclass(frozen=True)
class Compute(Section):
    DOC = "resources of one training, sampling or prediction job (never a rerun trigger)"
    gpus: int = setting(0, "GPUs per job (0: CPU only)", ge=0, le=64)
    threads: int = setting(1, "CPU threads per job", ge=1, le=4096)
    mem_mb: int = setting(2000, "memory per job in MB", ge=100, le=100_000_000)
    runtime_min: int = setting(60, "wall-time limit per job in minutes", ge=1, le=525_600)

"""Training recipes: the optimiser and schedule settings every seed of a posterior shares.

A recipe comes from a config dict (`Recipe.from_dict`), optionally starting from one of the
paper's presets (SPEC section 4, paper appendix B.1) and overriding some of its fields:
``{"preset": "optunet_mnist", "epochs": 10}``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

SCHEDULES = ("constant", "multistep", "cosine")


def _as_int(key: str, value: Any, minimum: int) -> int:
    # bool is an int subclass; a YAML `true` where a count belongs is a mistake, not 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"recipe key {key!r}: expected an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"recipe key {key!r}: must be >= {minimum}, got {value!r}")
    return value


def _as_float(key: str, value: Any) -> float:
    # PyYAML (YAML 1.1) reads `2e-4` as the string '2e-4', so numeric strings are accepted
    if isinstance(value, bool):
        raise ValueError(f"recipe key {key!r}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"recipe key {key!r}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"recipe key {key!r}: must be finite, got {value!r}")
    return number


def _as_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"recipe key {key!r}: expected true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class Recipe:
    """SGD settings with the semantics of `torch.optim.SGD` (dampening 0) and a per-epoch
    learning-rate schedule:

    - "constant": lr throughout;
    - "multistep": lr * gamma**(number of milestones <= epoch), like `MultiStepLR`;
    - "cosine": lr * (1 + cos(pi * epoch / epochs)) / 2, like `CosineAnnealingLR(T_max=epochs)`.

    `augment` applies random crops (zero padding 4) and horizontal flips, the usual CIFAR
    augmentation; it is meant for ResNet / CIFAR-like data, not for digits.
    """

    epochs: int
    batch_size: int
    lr: float
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    schedule: str = "multistep"
    milestones: tuple[int, ...] = ()
    gamma: float = 0.1
    augment: bool = False

    def __post_init__(self) -> None:
        # normalise and check every field so that a Recipe in hand is always valid
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("epochs", _as_int("epochs", self.epochs, 1))
        set_("batch_size", _as_int("batch_size", self.batch_size, 1))
        for name in ("lr", "momentum", "weight_decay", "gamma"):
            set_(name, _as_float(name, getattr(self, name)))
        set_("nesterov", _as_bool("nesterov", self.nesterov))
        set_("augment", _as_bool("augment", self.augment))
        if self.lr <= 0:
            raise ValueError(f"recipe key 'lr': must be > 0, got {self.lr!r}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"recipe key 'momentum': must lie in [0, 1), got {self.momentum!r}")
        if self.nesterov and self.momentum == 0:
            raise ValueError("recipe key 'nesterov': Nesterov momentum needs momentum > 0")
        if self.weight_decay < 0:
            raise ValueError(f"recipe key 'weight_decay': must be >= 0, got {self.weight_decay!r}")
        if self.gamma <= 0:
            raise ValueError(f"recipe key 'gamma': must be > 0, got {self.gamma!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"recipe key 'schedule': unknown schedule {self.schedule!r} "
                f"(known: {', '.join(SCHEDULES)})"
            )
        if isinstance(self.milestones, (str, bytes)) or not hasattr(self.milestones, "__iter__"):
            raise ValueError(
                f"recipe key 'milestones': expected a list of epochs, got {self.milestones!r}"
            )
        milestones = tuple(_as_int("milestones", m, 1) for m in self.milestones)
        if any(b <= a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(
                f"recipe key 'milestones': must be strictly increasing, got {list(milestones)}"
            )
        if milestones and self.schedule != "multistep":
            raise ValueError(
                f"recipe key 'milestones': only used by schedule 'multistep', not {self.schedule!r}"
            )
        set_("milestones", milestones)

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

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> Recipe:
        """Build from a config mapping; "preset" names a starting recipe (see PRESETS)."""
        if not isinstance(config, dict):
            raise ValueError(f"a recipe must be a mapping, got {type(config).__name__}")
        config = dict(config)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - known - {"preset"})
        if unknown:
            raise ValueError(
                f"unknown recipe key {unknown[0]!r} (known: preset, {', '.join(sorted(known))})"
            )
        preset = config.pop("preset", None)
        if preset is not None:
            if preset not in PRESETS:
                raise ValueError(
                    f"recipe key 'preset': unknown preset {preset!r} (known: {', '.join(PRESETS)})"
                )
            return replace(PRESETS[preset], **config)
        missing = [name for name in ("epochs", "batch_size", "lr") if name not in config]
        if missing:
            raise ValueError(f"recipe is missing key {missing[0]!r}")
        return cls(**config)

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (milestones as a list), so the dict can be stored as metadata."""
        out = asdict(self)
        out["milestones"] = list(self.milestones)
        return out


# Paper appendix B.1 / SPEC section 4
OPTUNET_MNIST = Recipe(
    epochs=60,
    batch_size=64,
    lr=0.04,
    weight_decay=2e-4,
    schedule="multistep",
    milestones=(15, 30),
    gamma=0.5,
)
RESNET18_CIFAR100 = Recipe(
    epochs=75,
    batch_size=128,
    lr=0.1,
    momentum=0.9,
    nesterov=True,
    weight_decay=5e-4,
    schedule="multistep",
    milestones=(25, 50),
    gamma=0.1,
    augment=True,
)

PRESETS: dict[str, Recipe] = {
    "optunet_mnist": OPTUNET_MNIST,
    "resnet18_cifar100": RESNET18_CIFAR100,
}

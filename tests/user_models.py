"""A model of a user's own, for the tests that name a model by import path
(``user_models:SmallCNN``): shaped like nothing symbnn ships (LeakyReLU, a feature map
flattened into a linear layer, biases everywhere), so its structure must be derived. The
others are what a model named by import path must not be: a function (even one returning a
module), a class that is no module, a module whose constructor raises."""

from __future__ import annotations

from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, channels: int = 4, hidden: int = 12, num_classes: int = 10, side: int = 28):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 5, padding=2),
            nn.LeakyReLU(0.1),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(2 * channels * (side // 4) ** 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def not_a_model(**_):
    return "a string"


def small_cnn(**options):
    """A factory returning a module: refused all the same (a model is its class)."""
    return SmallCNN(**options)


class NotAModule:
    def __init__(self, channels: int = 4):
        self.channels = channels


class Raising(nn.Module):
    def __init__(self, width: int = 3):
        super().__init__()
        raise RuntimeError(f"cannot build a net of width {width}")

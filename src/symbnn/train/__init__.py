"""Training engine: recipes, seeded initialisation and data order, loop and batched trainers.

from symbnn.train import OPTUNET_MNIST, train_seeds
result = train_seeds({"name": "optunet"}, OPTUNET_MNIST, train, test, seeds=range(32))
"""

from symbnn.train.engine import TrainResult, train_seeds
from symbnn.train.recipe import OPTUNET_MNIST, PRESETS, RESNET18_CIFAR100, Recipe

__all__ = ["Recipe", "PRESETS", "OPTUNET_MNIST", "RESNET18_CIFAR100", "TrainResult", "train_seeds"]

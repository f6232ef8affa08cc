"""Training engine: seeded initialisation and data order, loop and batched trainers.

from symbnn.settings import Recipe
from symbnn.train import train_seeds
recipe = Recipe(epochs=12, batch_size=128, lr=0.04, momentum=0.8)
result = train_seeds({"name": "optunet"}, recipe, train, test, seeds=range(32))
"""

from symbnn.train.engine import TrainResult, train_seeds

__all__ = ["TrainResult", "train_seeds"]

"""The paper's Table 1, typed in from Laurent, Aldea & Franchi, "A Symmetry-Aware Exploration
of Bayesian Neural Network Posteriors", ICLR 2024, Table 1 (the figures as printed: x100,
MMD and NS MMD the median of the aggregated kernels). A dash in the paper (no BNN on
TinyImageNet) is a missing row here. The paper reports SGHMC single-mode only.

Used to print the paper's figures beside ours, never to compute ours.
"""

from __future__ import annotations

import polars as pl

COLUMNS = ("MMD", "NS MMD", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI")

# block -> (group, method) -> the nine figures of COLUMNS
TABLE1 = {
    "MNIST - OptuNet": {
        ("one mode", "MC Dropout"): (15.0, 14.3, 83.3, 33.4, 26.1, 96.4, 98.6, 26.1, 22.2),
        ("one mode", "BNN"): (18.8, 17.1, 78.1, 7.4, 30.9, 67.9, 93.7, 0.1, 0.1),
        ("one mode", "SGHMC"): (16.7, 17.7, 95.1, 7.6, 2.8, 73.7, 98.4, 4.3, 14.5),
        ("one mode", "SWAG"): (16.0, 14.6, 88.3, 17.7, 4.9, 73.4, 68.6, 4.0, 8.7),
        ("one mode", "Laplace"): (10.6, 9.5, 87.9, 18.1, 4.8, 48.2, 74.6, 6.2, 5.9),
        ("multi mode", "MC Dropout"): (2.1, 2.1, 92.1, 29.2, 36.8, 97.2, 78.2, 36.6, 52.5),
        ("multi mode", "BNN"): (2.8, 2.5, 86.5, 17.5, 24.4, 96.9, 27.2, 21.1, 52.3),
        ("multi mode", "SWAG"): (1.8, 1.3, 95.0, 13.1, 17.5, 88.7, 24.6, 27.6, 62.2),
        ("multi mode", "Laplace"): (1.8, 0.8, 94.8, 12.8, 15.8, 95.4, 32.1, 21.1, 52.2),
        ("multi mode", "Deep Ensembles"): (0.0, 0.0, 95.3, 10.7, 13.5, 95.7, 12.8, 19.3, 62.6),
    },
    "CIFAR100 - ResNet18": {
        ("one mode", "MC Dropout"): (4.5, 7.5, 69.3, 12.1, 44.3, 80.1, 64.0, 6.0, 9.6),
        ("one mode", "BNN"): (9.0, 10.2, 57.6, 21.8, 62.5, 81.7, 62.6, 0.8, 2.2),
        ("one mode", "SGHMC"): (7.5, 7.9, 69.3, 4.3, 41.5, 87.5, 41.4, 0.0, 0.1),
        ("one mode", "SWAG"): (6.7, 7.2, 66.7, 1.7, 43.8, 30.7, 17.1, 2.7, 14.7),
        ("one mode", "Laplace"): (5.7, 7.0, 70.7, 1.4, 40.0, 84.5, 40.6, 31.3, 70.6),
        ("multi mode", "MC Dropout"): (0.7, 4.5, 75.5, 4.8, 64.2, 93.5, 23.7, 23.8, 77.0),
        ("multi mode", "BNN"): (6.1, 5.6, 66.3, 1.3, 45.6, 91.0, 30.9, 44.5, 110.4),
        ("multi mode", "SWAG"): (5.0, 5.4, 68.4, 2.3, 42.1, 97.9, 17.1, 7.5, 33.0),
        ("multi mode", "Laplace"): (0.6, 4.3, 75.2, 7.8, 35.2, 95.1, 20.1, 50.5, 128.3),
        ("multi mode", "Deep Ensembles"): (0.0, 0.0, 75.9, 2.3, 33.3, 97.1, 16.1, 26.5, 90.1),
    },
    "TinyImageNet - ResNet18": {
        ("one mode", "MC Dropout"): (9.5, 4.9, 56.4, 14.2, 60.3, 70.8, 87.6, 9.5, 13.5),
        ("one mode", "SGHMC"): (9.8, 5.3, 54.4, 2.3, 58.9, 78.1, 74.4, 0.1, 0.2),
        ("one mode", "SWAG"): (9.1, 3.9, 61.7, 10.0, 51.8, 84.6, 66.7, 3.3, 9.0),
        ("one mode", "Laplace"): (5.5, 6.1, 29.7, 7.4, 81.3, 62.3, 82.3, 211.7, 254.8),
        ("multi mode", "MC Dropout"): (4.3, 1.8, 65.3, 10.5, 48.2, 90.9, 57.7, 41.9, 93.2),
        ("multi mode", "SWAG"): (6.7, 5.4, 64.8, 2.3, 46.6, 98.4, 53.6, 20.5, 55.2),
        ("multi mode", "Laplace"): (0.5, 3.1, 34.4, 13.0, 79.3, 64.4, 77.2, 227.4, 267.2),
        ("multi mode", "Deep Ensembles"): (0.0, 0.0, 65.4, 8.5, 47.3, 94.2, 41.6, 44.7, 108.5),
    },
}

# the paper's block an experiment compares with, by its in-distribution dataset
BLOCK_OF_DATASET = {
    "digits": "MNIST - OptuNet",
    "mnist": "MNIST - OptuNet",
    "cifar100": "CIFAR100 - ResNet18",
    "tinyimagenet": "TinyImageNet - ResNet18",
}


def paper_table1(block: str) -> pl.DataFrame:
    """One block of the paper's Table 1 with columns group, method and COLUMNS."""
    rows = [
        {"group": group, "method": method, **dict(zip(COLUMNS, values))}
        for (group, method), values in TABLE1[block].items()
    ]
    return pl.DataFrame(rows)

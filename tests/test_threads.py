"""symbnn leaves the caller's thread settings as it found them: after the uncertainty metrics,
the MMD, the alignment and the batched trainer (OptuNet's numba conv1 pass included), torch
and numba read back the counts the caller set, whether numba's pool was started before
(in this process, by earlier tests) or is started by symbnn itself (a fresh process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
import torch

from symbnn import api
from symbnn.data.core import ImageData
from symbnn.metrics import uncertainty_metrics
from symbnn.mmd import two_sample_mmd
from symbnn.models import build_model
from symbnn.settings import Recipe
from symbnn.train.engine import train_seeds

OPTUNET = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}
MLP = {"name": "mlp", "widths": [12, 8, 3]}


def _metrics() -> None:
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(4, 64, 10, generator=g), -1)
    labels = torch.randint(0, 10, (64,), generator=g)
    uncertainty_metrics(probs, labels, torch.softmax(torch.randn(4, 64, 10, generator=g), -1))


def _mmd() -> None:
    rng = np.random.default_rng(0)
    two_sample_mmd(rng.normal(size=(12, 30)), rng.normal(size=(10, 30)), device="cpu")


def _align() -> None:
    torch.manual_seed(0)
    a, b = build_model(MLP), build_model(MLP)
    api.align(a, b, example_input=torch.randn(2, 12))


def _train() -> None:
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (32, 1, 28, 28), generator=g, dtype=torch.uint8)
    data = ImageData(images, torch.randint(0, 10, (32,), generator=g), 10, (0.5,), (0.25,), "x")
    recipe = Recipe(epochs=1, batch_size=16, lr=0.04)
    train_seeds(OPTUNET, recipe, data, data, [0, 1], batched=True)


ENTRY_POINTS = {"metrics": _metrics, "mmd": _mmd, "align": _align, "batched trainer": _train}
COUNTS = [1, 2] if (os.cpu_count() or 1) >= 2 else [1]


@pytest.fixture
def restore_counts():
    before = torch.get_num_threads(), numba.get_num_threads()
    yield
    numba.set_num_threads(before[1])
    torch.set_num_threads(before[0])


@pytest.mark.usefixtures("restore_counts")
@pytest.mark.parametrize("threads", COUNTS)
def test_torch_and_numba_read_back_the_callers_counts_after_each_entry_point(threads):
    numba.set_num_threads(threads)  # first: starting numba's pool moves torch's count
    torch.set_num_threads(threads)
    for name, call in ENTRY_POINTS.items():
        call()
        assert (torch.get_num_threads(), numba.get_num_threads()) == (threads, threads), name


@pytest.mark.usefixtures("restore_counts")
def test_unequal_counts_are_both_kept():
    numba.set_num_threads(COUNTS[-1])
    torch.set_num_threads(1)
    for name, call in ENTRY_POINTS.items():
        call()
        assert (torch.get_num_threads(), numba.get_num_threads()) == (1, COUNTS[-1]), name


FRESH = """
import sys, numba, torch
sys.path.insert(0, {tests!r})
torch.set_num_threads(1)  # numba's pool not started yet: symbnn's call starts it
import test_threads
test_threads.ENTRY_POINTS[{name!r}]()
print(torch.get_num_threads(), numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS)
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_starting_numbas_pool_in_a_fresh_process_keeps_torchs_count(name):
    """numba's pool starts at the first numba path of a process and sets the OpenMP count
    torch reads (to NUMBA_NUM_THREADS): the count set before must still be read after."""
    code = FRESH.format(tests=str(Path(__file__).parent), name=name)
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    torch_count, numba_count, default = map(int, done.stdout.split())
    assert (torch_count, numba_count) == (1, default) == (1, 2)

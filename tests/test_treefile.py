"""Tree files (a method's fits): tensors and JSON in one safetensors file, read back without
unpickling anything; a file that is not one is an error naming it."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from symbnn.treefile import TreeFileError, load_tree, outline, save_tree


def test_a_fit_shaped_tree_round_trips(tmp_path):
    shared = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tree = {
        "modes": [0, 1],
        "mode_seeds": [np.int64(7), 9],  # NumPy's integers too
        "fits": [
            {
                "net": {"fc.weight": shared, "fc.bias": shared[0], "bn.n": torch.tensor(3)},
                "mu": [shared.T, torch.zeros(0)],  # views of one storage, an empty tensor
                "train_seed": 11,
                "test_accuracy": 0.875,
                "flags": (True, None, "text"),
                "moments": {"n": 2, "mask": torch.tensor([True, False])},
                "odd": [math.inf, -math.inf],
            }
        ],
    }
    save_tree(tree, tmp_path / "f.safetensors")
    back = load_tree(tmp_path / "f.safetensors")
    fit = back["fits"][0]
    assert back["modes"] == [0, 1] and back["mode_seeds"] == [7, 9]
    assert torch.equal(fit["net"]["fc.weight"], shared) and torch.equal(fit["mu"][0], shared.T)
    assert torch.equal(fit["net"]["fc.bias"], shared[0]) and fit["net"]["bn.n"].dtype == torch.int64
    assert fit["mu"][1].shape == (0,) and fit["moments"]["mask"].dtype == torch.bool
    assert fit["flags"] == [True, None, "text"]  # a tuple comes back as a list
    assert fit["train_seed"] == 11 and fit["test_accuracy"] == 0.875
    assert fit["odd"] == [math.inf, -math.inf]


def test_a_nan_survives(tmp_path):
    save_tree({"x": math.nan}, tmp_path / "n.safetensors")
    assert math.isnan(load_tree(tmp_path / "n.safetensors")["x"])


@pytest.mark.parametrize(
    "tree, message",
    [
        ({1: torch.zeros(1)}, "dict keys must be strings"),
        ({"a": object()}, "tree.a: cannot store a object"),
        ({"$tensor": "t0"}, "reserved"),
    ],
)
def test_what_cannot_be_stored_is_named(tmp_path, tree, message):
    with pytest.raises(TreeFileError, match=message):
        save_tree(tree, tmp_path / "x.safetensors")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_a_pickle_or_a_damaged_file_is_refused_by_name(tmp_path):
    pickled = tmp_path / "old.pt"
    torch.save({"a": torch.zeros(2)}, pickled)  # what fits were before: never unpickled now
    with pytest.raises(TreeFileError, match="old.pt: not a readable safetensors file"):
        load_tree(pickled)
    good = tmp_path / "g.safetensors"
    save_tree({"a": torch.zeros(2)}, good)
    data = bytearray(good.read_bytes())
    cut = good.with_name("cut.safetensors")
    cut.write_bytes(bytes(data[:-3]))
    with pytest.raises(TreeFileError, match="cut.safetensors"):
        load_tree(cut)
    from safetensors.torch import save_file

    plain = tmp_path / "plain.safetensors"
    save_file({"a": torch.zeros(1)}, str(plain))
    with pytest.raises(TreeFileError, match="plain.safetensors: not a symbnn-tree file"):
        load_tree(plain)
    save_file({"a": torch.zeros(1)}, str(plain), metadata={"format": "symbnn-tree", "tree": "["})
    with pytest.raises(TreeFileError, match="malformed tree"):
        load_tree(plain)
    tree = '{"$tensor": "zz"}'
    save_file({"a": torch.zeros(1)}, str(plain), metadata={"format": "symbnn-tree", "tree": tree})
    with pytest.raises(TreeFileError, match="lacks"):
        load_tree(plain)


# A fit-shaped tree (tensors of several dtypes, nested dicts, non-finite floats), written
# SAVES times by a child Python given a hash seed.
WRITER = """
import sys, torch
from symbnn.treefile import save_tree
torch.manual_seed(0)
tree = {"modes": [0, 1], "fits": [{"net": {"w": torch.randn(3, 4), "n": torch.tensor(3)},
        "mask": torch.tensor([True, False]), "half": torch.ones(2, dtype=torch.float16),
        "attempts": [0.5, float("nan")], "settings": {"rate": 0.2, "rank": 1, "flag": None}}]}
for i in range(int(sys.argv[2])):
    save_tree(tree, f"{sys.argv[1]}/{sys.argv[3]}-{i}.safetensors")
"""
SAVES = 4


@pytest.mark.slow
def test_a_tree_file_is_the_same_bytes_in_every_process(tmp_path):
    """Two processes (their hash seeds differ) write a tree file of the same tree several
    times: every file has the same bytes, so a resumed run's fits equal an uninterrupted
    run's. (safetensors keeps metadata in a hash map seeded afresh for each map: with two
    metadata keys, their order in the header changed from one file to the next.)"""
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", WRITER, str(tmp_path), str(SAVES), seed],
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
    files = sorted(tmp_path.glob("*.safetensors"))
    assert len(files) == 2 * SAVES
    first = files[0].read_bytes()
    assert all(path.read_bytes() == first for path in files), [p.name for p in files]
    tree = load_tree(files[0])
    assert tree["fits"][0]["settings"] == {"rate": 0.2, "rank": 1, "flag": None}


def test_a_tree_file_of_the_earlier_layout_still_reads(tmp_path):
    """Before, the metadata had two keys: format and the tree's JSON."""
    from safetensors.torch import save_file

    old = tmp_path / "old.safetensors"
    tree = '{"modes": [0], "fits": [{"w": {"$tensor": "t0"}, "seed": 7}]}'
    metadata = {"format": "symbnn-tree", "tree": tree}
    save_file({"t0": torch.arange(3.0)}, str(old), metadata=metadata)
    back = load_tree(old)
    assert back["modes"] == [0] and back["fits"][0]["seed"] == 7
    assert torch.equal(back["fits"][0]["w"], torch.arange(3.0))
    assert outline(old)["fits"][0]["w"] == {"$tensor": "t0"}

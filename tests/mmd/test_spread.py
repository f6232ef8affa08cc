import numpy as np
import polars as pl
import pytest

from symbnn.mmd.spread import canonical_spread, width_notes
from symbnn.store import write_store


def test_a_unit_as_wide_as_the_target_has_ratio_one(tmp_path):
    rng = np.random.default_rng(0)
    target = {"w": rng.normal(0, 2.0, (200, 3)).astype(np.float32)}
    write_store(tmp_path / "t.zarr", target, attrs={"kind": "canonical"}, kind="canonical")
    # unit 0: as wide as the target; unit 1: a tenth as wide
    wide = rng.normal(0, 2.0, (200, 3))
    narrow = rng.normal(0, 0.2, (200, 3))
    samples = {"w": np.concatenate([wide, narrow]).astype(np.float32)}
    info = {"unit": np.repeat([0, 1], 200)}
    write_store(
        tmp_path / "s.zarr",
        samples,
        info,
        {"method": "laplace", "variant": "single"},
        kind="canonical",
    )
    spread = canonical_spread(tmp_path / "t.zarr", tmp_path / "s.zarr", list(range(200)))
    ratios = dict(zip(spread["unit"], spread["ratio"]))
    assert ratios[0] == pytest.approx(1.0, abs=0.15) and ratios[1] == pytest.approx(0.1, abs=0.02)
    note = width_notes(spread).row(0, named=True)
    assert note["method"] == "laplace" and note["width"].startswith("width x target: w 0.5")


def test_many_layers_are_summarized_by_their_range():
    spread = pl.DataFrame(
        {
            "method": ["swag"] * 10,
            "variant": ["multi"] * 10,
            "unit": [0] * 10,
            "layer": [f"l{i}" for i in range(10)],
            "ratio": [0.1 * (i + 1) for i in range(10)],
        }
    )
    assert (
        width_notes(spread)["width"][0] == "width x target: 0.10 to 1.00 over 10 layers (widest l9)"
    )

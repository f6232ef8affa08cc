"""Layer-wise MMD straight from weight stores, the network figure, and `symbnn mmd`."""

import json
import sys

import numpy as np
import polars as pl
import pytest

from symbnn.cli import main
from symbnn.mmd import (
    AggTestConfig,
    MMDInputError,
    default_layers,
    layerwise_mmd,
    per_layer_schema,
    two_sample_mmd,
)
from symbnn.store import write_store

SMALL_TEST = AggTestConfig(b1=99, b2=99, b3=20)


def make_state(rng, n, shift=0.0):
    return {
        "conv.weight": (rng.standard_normal((n, 64, 300)) + shift).astype(
            np.float32
        ),  # > 64 KB/sample
        "bn.weight": rng.standard_normal((n, 4)).astype(np.float32),
        "bn.bias": rng.standard_normal((n, 4)).astype(np.float32),
        "bn.running_mean": rng.standard_normal((n, 4)).astype(np.float32),
        "bn.running_var": rng.random((n, 4)).astype(np.float32),
        "bn.num_batches_tracked": np.full(n, 7, dtype=np.int64),
        "fc.weight": rng.standard_normal((n, 3, 5)).astype(np.float32),
        "fc.bias": (rng.standard_normal((n, 3)) + 4 * shift).astype(np.float32),
    }


@pytest.fixture
def stores(tmp_path):
    rng = np.random.default_rng(0)
    target_state, method_state = make_state(rng, 70), make_state(rng, 10, shift=0.5)
    target = write_store(tmp_path / "target.zarr", target_state, {"seed": np.arange(70)})
    method = write_store(tmp_path / "method.zarr", method_state, {"seed": np.arange(10)})
    return target, method, target_state, method_state


def test_default_layers_skip_batchnorm_buffers(stores):
    target = stores[0]
    assert list(default_layers(target)) == [
        "conv.weight",
        "bn.weight",
        "bn.bias",
        "fc.weight",
        "fc.bias",
    ]
    assert default_layers(target, by_module=True) == {
        "conv": ["conv.weight"],
        "bn": ["bn.weight", "bn.bias"],
        "fc": ["fc.weight", "fc.bias"],
    }


def test_store_streaming_matches_in_memory_engine(stores):
    target, method, ts, ms = stores
    # The target's big layer comes in two column blocks, the method's in one: aligned reads.
    assert len(list(target.iter_param_blocks("conv.weight", 1))) == 2
    per_layer, summary = layerwise_mmd(target.path, method.path, max_bytes=1, device="cpu")
    assert per_layer.schema == pl.Schema(per_layer_schema())
    assert per_layer["layer"].to_list() == list(default_layers(target))
    for row in per_layer.iter_rows(named=True):
        # float32 weights are processed in float32 (partial sums; float64 accumulators), so
        # compare with the float64 truth at float32 accuracy.
        want = two_sample_mmd(
            ts[row["layer"]].astype(np.float64), ms[row["layer"]], device="cpu"
        ).values
        np.testing.assert_allclose(
            row["mmd_values"], want, rtol=1e-4, atol=1e-6 * np.abs(want).max()
        )
        assert row["n_params"] == ts[row["layer"]][0].size and row["p_value"] is None
    weights = per_layer["n_params"].to_numpy()
    assert summary["mmd"] == pytest.approx(
        np.average(per_layer["mmd_median"].to_numpy(), weights=weights)
    )
    assert summary["metric"] == "MMD" and summary["n_params"] == 64 * 300 + 8 + 15 + 3
    assert summary["n_target"] == 70 and summary["n_method"] == 10
    # Pooling entries into one layer concatenates their parameters.
    pooled, _ = layerwise_mmd(
        target.path, method.path, layers={"fc": ["fc.weight", "fc.bias"]}, device="cpu"
    )
    cat = lambda s: np.concatenate(
        [s["fc.weight"].reshape(len(s["fc.bias"]), -1), s["fc.bias"]], axis=1
    )
    np.testing.assert_allclose(
        pooled["mmd_values"][0].to_numpy(),
        two_sample_mmd(cat(ts), cat(ms)).values,
        rtol=1e-5,
        atol=1e-9,
    )


def test_target_rows_select_samples_and_shifts_are_detected(stores):
    target, method, ts, ms = stores
    rows = np.arange(0, 70, 3)
    per_layer, summary = layerwise_mmd(
        target.path,
        method.path,
        layers=["fc.bias", "bn.bias"],
        target_rows=rows,
        pvalue=True,
        config=SMALL_TEST,
        device="cpu",
    )
    want = two_sample_mmd(
        ts["fc.bias"][rows], ms["fc.bias"], pvalue=True, config=SMALL_TEST, device="cpu"
    )
    np.testing.assert_allclose(
        per_layer["mmd_values"][0].to_numpy(), want.values, rtol=1e-5, atol=1e-9
    )
    assert per_layer["p_value"][0] == pytest.approx(want.test.p_value)
    # fc.bias is shifted by 2 in the method store, bn.bias is not.
    assert per_layer["reject"].to_list() == [True, False]
    assert summary["n_layers_rejected"] == 1 and summary["n_target"] == len(rows)
    sliced, _ = layerwise_mmd(
        target.path,
        method.path,
        layers=["fc.bias"],
        target_rows=slice(10, 40),
        method_rows=[1, 3, 5, 7],
        device="cpu",
    )
    want = two_sample_mmd(ts["fc.bias"][10:40], ms["fc.bias"][[1, 3, 5, 7]], device="cpu")
    np.testing.assert_allclose(
        sliced["mmd_values"][0].to_numpy(), want.values, rtol=1e-5, atol=1e-9
    )


def test_bad_stores_give_clear_errors(stores, tmp_path):
    target, method, ts, ms = stores
    wrong = dict(ms, **{"fc.weight": ms["fc.weight"][:, :, :4]})
    other = write_store(tmp_path / "wrong.zarr", wrong, {"seed": np.arange(10)})
    with pytest.raises(MMDInputError, match=r"'fc.weight' has shape \(3, 5\).*but \(3, 4\)"):
        layerwise_mmd(target.path, other.path)
    with pytest.raises(MMDInputError, match="no state entry 'nope'"):
        layerwise_mmd(target.path, method.path, layers=["nope"])
    with pytest.raises(MMDInputError, match="not floating point"):
        layerwise_mmd(target.path, method.path, layers=["bn.num_batches_tracked"])
    with pytest.raises(MMDInputError, match="at least 2 samples.*1 target"):
        layerwise_mmd(target.path, method.path, target_rows=[5])
    with pytest.raises(MMDInputError, match="duplicates"):
        layerwise_mmd(target.path, method.path, target_rows=[5, 5, 6])
    nan = dict(ms, **{"fc.bias": ms["fc.bias"].copy()})
    nan["fc.bias"][3, 1] = np.nan
    bad = write_store(tmp_path / "nan.zarr", nan, {"seed": np.arange(10)})
    with pytest.raises(MMDInputError, match=r"nan.zarr: state entry 'fc.bias' holds NaN"):
        layerwise_mmd(target.path, bad.path, layers=["fc.bias"])
    with pytest.raises(MMDInputError, match="rows of the same store overlap"):
        layerwise_mmd(target.path, target.path, target_rows=slice(0, 40), method_rows=slice(30, 50))
    ok, _ = layerwise_mmd(
        target.path,
        target.path,
        layers="fc.bias",
        target_rows=slice(0, 40),
        method_rows=slice(40, 70),
        device="cpu",
    )
    assert ok["n_target"][0] == 40 and ok["n_method"][0] == 30
    canon = write_store(tmp_path / "canon.zarr", ms, {"seed": np.arange(10)}, kind="canonical")
    with pytest.raises(MMDInputError, match="one store is canonical and the other is not"):
        layerwise_mmd(target.path, canon.path)


def test_cli_writes_table_and_summary(stores, tmp_path, capsys):
    target, method, *_ = stores
    out = tmp_path / "res" / "mmd.parquet"
    assert (
        main(
            [
                "mmd",
                str(target.path),
                str(method.path),
                str(out),
                "--pvalue",
                "--b1",
                "49",
                "--b2",
                "49",
                "--layers",
                "fc.bias",
                "bn.weight",
                "--target-rows",
                "0:40",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    table = pl.read_parquet(out)
    assert table["layer"].to_list() == ["fc.bias", "bn.weight"] and table["n_target"][0] == 40
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary == json.loads(capsys.readouterr().out)
    assert summary["metric"] == "MMD" and summary["b1"] == 49
    assert sorted(p.name for p in out.parent.iterdir()) == ["mmd.parquet", "mmd.summary.json"]
    from symbnn.commands.mmd import DEFAULT_MAX_MIB
    from symbnn.mmd import DEFAULT_MAX_BYTES

    assert DEFAULT_MAX_MIB * 2**20 == DEFAULT_MAX_BYTES


def test_cli_canonical_without_symmetry_package_needs_canonical_stores(
    stores, tmp_path, capsys, monkeypatch
):
    target, method, ts, ms = stores
    monkeypatch.setitem(sys.modules, "symbnn.symmetry.canonical_store", None)  # as if absent
    out = tmp_path / "ns.parquet"
    assert main(["mmd", str(target.path), str(method.path), str(out), "--canonical"]) == 1
    assert "is not a canonical store" in capsys.readouterr().err and not out.exists()
    ct = write_store(tmp_path / "ct.zarr", ts, {"seed": np.arange(70)}, kind="canonical")
    cm = write_store(tmp_path / "cm.zarr", ms, {"seed": np.arange(10)}, kind="canonical")
    assert (
        main(["mmd", str(ct.path), str(cm.path), str(out), "--canonical", "--layers", "fc.bias"])
        == 0
    )
    assert json.loads(out.with_suffix(".summary.json").read_text())["metric"] == "NS MMD"
    assert main(["mmd", str(tmp_path / "missing.zarr"), str(cm.path), str(out)]) == 1
    assert "not a symbnn store" in capsys.readouterr().err


def test_cli_canonical_canonicalizes_stored_networks(optunet_store, tmp_path, capsys):
    pytest.importorskip("symbnn.symmetry.canonical_store")
    from symbnn.symmetry.canonical_store import canonicalize_store

    target, _ = optunet_store("t.zarr", n=12)
    method, _ = optunet_store("m.zarr", n=5, first_seed=100)
    out = tmp_path / "res" / "ns.parquet"
    assert (
        main(
            ["mmd", str(target.path), str(method.path), str(out), "--canonical", "--device", "cpu"]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["metric"] == "NS MMD" and summary["n_params"] > 0
    assert (
        summary["target"] == str(target.path)
        and summary["canonicalised_here"]["scale"] == "unitnorm"
        and summary["canonicalised_here"]["key"] == "first"  # the paper's key, as experiments
    )
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "ns.parquet",
        "ns.summary.json",
    ]  # scratch removed
    for name, store in (("ct.zarr", target), ("cm.zarr", method)):
        canonicalize_store(store.path, tmp_path / name, scale="unitnorm", key="first")
    want, _ = layerwise_mmd(tmp_path / "ct.zarr", tmp_path / "cm.zarr", device="cpu")
    assert pl.read_parquet(out).equals(want)

"""Tables 1 and 2, the findings computed from them, functional collapse, and the table formats."""

import math

import numpy as np
import polars as pl
import pytest
import zarr

from symbnn.report.collapse import collapse_summary, pairwise_mi, random_pairs
from symbnn.report.findings import findings, findings_summary
from symbnn.report.method_tables import table1, table2, to_latex
from symbnn.report.tables import to_html, write_table
from symbnn.store import StoreError


def _mmd(method, variant, mmd, ns):
    return {
        "method": method,
        "variant": variant,
        "mmd": mmd,
        "ns_mmd": ns,
        **{
            f"{p}_{s}": mmd if p == "mmd" else ns
            for p in ("mmd", "ns_mmd")
            for s in ("median", "mean", "max")
        },
    }


def _metrics(method, variant, acc, ece, aupr, fpr):
    return {
        "method": method,
        "variant": variant,
        "n_samples": 4,
        "ood_score": "msp",
        "accuracy": acc,
        "ece": ece,
        "brier": 0.3,
        "aupr": aupr,
        "fpr95": fpr,
        "idmi": 0.1,
        "oodmi": 0.2,
    }


@pytest.fixture
def tables():
    # given in a scrambled order: the tables sort one mode first, then registry order
    mmd = pl.DataFrame(
        [
            _mmd("de", "multi", 0.01, 0.02),
            _mmd("swag", "multi", 0.05, 0.04),
            _mmd("dropout", "single", 0.3, 0.2),
            _mmd("swag", "single", 0.2, 0.1),
            _mmd("dropout", "multi", 0.4, 0.1),
        ]
    )
    metrics = pl.DataFrame(
        [
            _metrics("swag", "single", 0.8, 0.05, 0.7, 0.6),
            _metrics("de", "multi", 0.9, 0.03, 0.9, 0.2),
            _metrics("dropout", "multi", 0.85, 0.08, 0.6, 0.7),
            _metrics("swag", "multi", 0.88, 0.07, 0.8, 0.5),
            _metrics("dropout", "single", 0.7, 0.06, 0.65, 0.65),
        ]
    )
    return mmd, metrics


def test_table1_orders_groups_scales_and_joins(tables):
    mmd, metrics = tables
    t = table1(mmd, metrics)
    assert t.columns == [
        "group",
        "method",
        "MMD",
        "NS MMD",
        "Acc",
        "ECE",
        "Brier",
        "AUPR",
        "FPR95",
        "IDMI",
        "OODMI",
    ]
    assert t.select("group", "method").rows() == [
        ("one mode", "MC Dropout"),
        ("one mode", "SWAG"),
        ("multi mode", "MC Dropout"),
        ("multi mode", "SWAG"),
        ("multi mode", "Deep Ensembles"),
    ]
    swag_multi = t.row(3, named=True)
    assert swag_multi["MMD"] == pytest.approx(5.0) and swag_multi["Acc"] == pytest.approx(88.0)
    assert swag_multi["FPR95"] == pytest.approx(50.0)
    t2 = table2(mmd)
    assert t2.columns[:3] == ["group", "method", "MMD median"] and t2.height == 5
    assert t2.row(4, named=True)["NS MMD max"] == pytest.approx(2.0)


def test_findings_are_computed_from_the_table(tables):
    t = table1(*tables)
    f = findings(t)
    holds = {(row["finding"], row["method"]): row["holds"] for row in f.iter_rows(named=True)}
    assert holds[("multi-mode MMD below single-mode", "SWAG")] is True  # 5 < 20
    assert holds[("multi-mode MMD below single-mode", "MC Dropout")] is False  # 40 > 30
    assert holds[("multi-mode NS MMD below single-mode", "MC Dropout")] is True
    assert (
        holds[("multi-mode better AUPR", "SWAG")] is True
        and holds[("multi-mode better AUPR", "MC Dropout")] is False
    )
    assert holds[("multi-mode better FPR95", "MC Dropout")] is False
    assert holds[("single-mode better ECE", "SWAG")] is True
    assert holds[("Deep Ensembles lowest MMD", "Deep Ensembles")] is True
    assert holds[("best approximation by MMD", "SWAG (multi mode)")] is None
    summary = dict(findings_summary(f).select("finding", "holds for").rows())
    assert summary["multi-mode MMD below single-mode"] == 1


def test_findings_report_when_deep_ensembles_are_not_lowest(tables):
    mmd, metrics = tables
    mmd = mmd.with_columns(
        pl.when(pl.col("method") == "de").then(0.9).otherwise(pl.col("mmd")).alias("mmd")
    )
    f = findings(table1(mmd, metrics))
    row = f.filter(pl.col("finding") == "Deep Ensembles lowest MMD").row(0, named=True)
    assert row["holds"] is False and "lowest: SWAG (multi mode)" in row["detail"]


def test_latex_and_html_tables(tables, tmp_path):
    t = table1(*tables)
    tex = to_latex(t)
    assert tex.startswith("\\begin{tabular}{llrrrrrrrrr}") and "\\bottomrule" in tex
    assert "multi mode & Deep Ensembles & 1.0 & 2.0 & 90.0" in tex
    html = to_html(
        pl.DataFrame(
            {"method": ["a<b"], "x": [1.23456], "y": [None]},
            schema={"method": pl.String, "x": pl.Float64, "y": pl.Float64},
        )
    )
    assert "<td>a&lt;b</td><td>1.235</td><td>&ndash;</td>" in html
    write_table(t, tmp_path / "t.tex")
    assert (tmp_path / "t.tex").read_text() == tex
    with pytest.raises(ValueError, match="unknown table format '.xlsx'"):
        write_table(t, tmp_path / "t.xlsx")


def test_random_pairs_are_distinct_and_bounded():
    rows = np.array([2, 5, 7, 9])
    pairs = random_pairs(rows, 100, seed=0)
    assert len(pairs) == 6  # all C(4, 2) pairs, no more
    assert len({tuple(sorted(p)) for p in pairs}) == 6 and set(pairs.ravel()) <= set(rows)
    assert (random_pairs(rows, 3, seed=1) == random_pairs(rows, 3, seed=1)).all()
    with pytest.raises(StoreError, match="at least 2 converged"):
        random_pairs(np.array([1]), 3, 0)


def _predictions(path, test, ood):
    group = zarr.open_group(path, mode="w", zarr_format=3)
    group.create_array("test", data=test.astype(np.float16))
    group.create_array("ood", data=ood.astype(np.float16))
    group.attrs.update({"format": "symbnn-predictions", "n_samples": len(test)})


def test_pairwise_mi_matches_a_direct_computation(tmp_path):
    rng = np.random.default_rng(0)
    test = rng.dirichlet(np.ones(3), size=(4, 20))
    ood = rng.dirichlet(np.ones(3), size=(4, 8))
    test[1] = test[0]  # networks 0 and 1 compute the same function: a collapsed pair
    _predictions(tmp_path / "p.zarr", test, ood)
    pairs = pairwise_mi(tmp_path / "p.zarr", np.arange(4), n_pairs=10, seed=0)
    assert pairs.height == 6
    stored_test = test.astype(np.float16).astype(np.float64)
    stored_test /= stored_test.sum(-1, keepdims=True)

    def entropy(p):
        return -(p * np.log(np.where(p > 0, p, 1))).sum(-1)

    for row in pairs.iter_rows(named=True):
        a, b = stored_test[row["a"]], stored_test[row["b"]]
        direct = (entropy((a + b) / 2) - (entropy(a) + entropy(b)) / 2).mean()
        assert row["id_mi"] == pytest.approx(direct, abs=1e-9)
    collapsed = pairs.filter(
        ((pl.col("a") == 0) & (pl.col("b") == 1)) | ((pl.col("a") == 1) & (pl.col("b") == 0))
    )
    assert collapsed["id_mi"][0] == pytest.approx(0, abs=1e-12)


def test_collapse_summary_correlation():
    pairs = pl.DataFrame(
        {
            "a": [0, 0, 1, 2],
            "b": [1, 2, 2, 3],
            "id_mi": [0.1, 0.2, 0.3, 0.4],
            "ood_mi": [0.2, 0.4, 0.6, 0.8],
        }
    )
    row = collapse_summary(pairs).row(0, named=True)
    assert row["pearson_r"] == pytest.approx(1.0) and row["pairs"] == 4
    assert row["id_mi_mean"] == pytest.approx(0.25)
    flat = collapse_summary(pairs.head(2)).row(0, named=True)
    assert math.isnan(flat["pearson_r"])  # two pairs: no correlation to report

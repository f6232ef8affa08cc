"""Tables 1 and 2, the findings computed from them, functional collapse, and the table formats."""

import math

import numpy as np
import polars as pl
import pytest
import zarr

from symbnn.predictions import FORMAT_VERSION
from symbnn.report.collapse import collapse_summary, pairwise_mi, random_pairs, relabelling_test
from symbnn.report.findings import findings
from symbnn.report.method_tables import (
    paper_comparison,
    table1,
    table1_display,
    table2,
    unit_table,
)
from symbnn.report.paper import paper_table1
from symbnn.report.tables import to_html, to_latex, write_table
from symbnn.store import ARRAY_CONFIG, CHECKSUM, CHECKSUM_CODECS, StoreError, seal


def _mmd(method, variant, mmd, ns, unit=0, reject=0.5):
    return {
        "method": method,
        "variant": variant,
        "unit": unit,
        "mmd": mmd,
        "ns_mmd": ns,
        "mmd_reject_share": reject,
        "ns_mmd_reject_share": reject / 2,
        **{
            f"{p}_{s}": mmd if p == "mmd" else ns
            for p in ("mmd", "ns_mmd")
            for s in ("median", "mean", "max")
        },
    }


def _metrics(method, variant, acc, ece, aupr, fpr, unit=0, nll=0.4, mode_acc=None):
    return {
        "method": method,
        "variant": variant,
        "unit": unit,
        "n_samples": 4,
        "ood_score": "msp",
        "accuracy": acc,
        "ece": ece,
        "brier": 0.3,
        "nll": nll,
        "aupr": aupr,
        "fpr95": fpr,
        "idmi": 0.1,
        "oodmi": 0.2,
        "mode_accuracy": mode_acc,
    }


# eight units per row (modes of a one-mode row, replicates of a multi-mode one): a spread the
# tests can decide on; each figure varies by +-1% of itself around its row's value
JITTER = [-0.010, -0.007, -0.004, -0.001, 0.001, 0.004, 0.007, 0.010]


def _units(make, *args, **kwargs):
    base = list(args)
    rows = []
    for unit, j in enumerate(JITTER):
        figures = [v * (1 + j) if isinstance(v, float) else v for v in base]
        rows.append(make(*figures, unit=unit, **kwargs))
    return rows


MMD_SCHEMA = {"unit": pl.Int64}
METRICS_SCHEMA = {"unit": pl.Int64, "mode_accuracy": pl.Float64}


@pytest.fixture
def tables():
    # given in a scrambled order: the tables sort one mode first, then registry order
    mmd = pl.DataFrame(
        [
            *_units(_mmd, "de", "multi", 0.01, 0.02),
            *_units(_mmd, "swag", "multi", 0.05, 0.04),
            *_units(_mmd, "dropout", "single", 0.3, 0.2),
            *_units(_mmd, "swag", "single", 0.3, 0.2),
            *_units(_mmd, "dropout", "multi", 0.4, 0.1),
        ],
        schema_overrides=MMD_SCHEMA,
    )
    metrics = pl.DataFrame(
        [
            *_units(_metrics, "swag", "single", 0.7, 0.05, 0.7, 0.6, mode_acc=0.69),
            *_units(_metrics, "de", "multi", 0.9, 0.03, 0.9, 0.2, mode_acc=0.7),
            *_units(_metrics, "dropout", "multi", 0.85, 0.08, 0.6, 0.7, mode_acc=0.7),
            *_units(_metrics, "swag", "multi", 0.88, 0.07, 0.8, 0.5, mode_acc=0.7),
            *_units(_metrics, "dropout", "single", 0.7, 0.06, 0.65, 0.65, mode_acc=0.7),
        ],
        schema_overrides=METRICS_SCHEMA,
    )
    return mmd, metrics


def test_table1_orders_groups_scales_joins_and_averages_over_units(tables):
    mmd, metrics = tables
    units = unit_table(mmd, metrics)
    assert units.height == 5 * 8 and units.columns[:3] == ["group", "method", "unit"]
    t = table1(units)
    figures = ["MMD", "NS MMD", "Acc", "ECE", "Brier", "NLL", "AUPR", "FPR95", "IDMI", "OODMI"]
    assert t.columns[:3] == ["group", "method", "units"]
    assert t.columns[3:16] == [*figures, "MMD rej", "NS MMD rej", "Modes acc"]
    assert t.columns[16:] == [f"{c} sd" for c in t.columns[3:16]]
    assert t.select("group", "method").rows() == [
        ("one mode", "MC Dropout"),
        ("one mode", "SWAG"),
        ("multi mode", "MC Dropout"),
        ("multi mode", "SWAG"),
        ("multi mode", "Deep Ensembles"),
    ]
    swag_one = t.row(1, named=True)
    assert swag_one["units"] == 8 and swag_one["MMD"] == pytest.approx(30.0)
    assert swag_one["MMD sd"] == pytest.approx(30 * np.std(JITTER, ddof=1))
    assert swag_one["Acc"] == pytest.approx(70.0) and swag_one["MMD rej"] == pytest.approx(50.0)
    assert swag_one["Modes acc"] == pytest.approx(69.0)
    swag_multi = t.row(3, named=True)
    assert swag_multi["MMD"] == pytest.approx(5.0) and swag_multi["Acc"] == pytest.approx(88.0)
    assert swag_multi["FPR95"] == pytest.approx(50.0) and swag_multi["MMD sd"] > 0
    assert swag_multi["NS MMD rej"] == pytest.approx(25.0) and swag_multi["NLL"] == pytest.approx(
        40.0
    )
    shown = table1_display(t)
    assert shown.row(1, named=True)["MMD (x100)"] == "30.0 ± 0.2"
    assert shown.row(3, named=True)["Acc (%)"] == "88.0 ± 0.6"
    t2 = table2(mmd)
    assert t2.columns[:3] == ["group", "method", "MMD median"] and t2.height == 5


def _row(f, name):
    return {r["finding"]: r for r in f.iter_rows(named=True)}[name]


def test_findings_are_tested_claims_only_where_the_papers_table_supports_them(tables):
    f = findings(unit_table(*tables), target_accuracy_sd=0.5)
    mmd = _row(f, "multi-mode MMD below single-mode")
    # the paper's MNIST table: 4 of 4 methods; ours: SWAG 5 < 30 holds, Dropout 40 > 30 is
    # contradicted, both far beyond their spread
    assert mmd["status"] == "claim" and mmd["paper"] == "4 of 4"
    assert mmd["ours"] == "1 hold, 0 within noise, 1 contradicted of 2"
    assert mmd["verdict"] == "contradicted" and "Mann-Whitney" in mmd["test"]
    assert "MC Dropout: contradicted; multi 40.00 vs one 30.00 (means;" in mmd["cases"]
    assert "n=8/8" in mmd["cases"]
    # one-mode better ECE holds in 1 of 4 of the paper's MNIST pairs: an observation
    ece = _row(f, "multi-mode ECE below single-mode")
    assert ece["status"].startswith("observation") and ece["paper"] == "3 of 4"
    assert _row(f, "multi-mode NLL below single-mode")["status"] == "claim (the paper's text)"
    assert _row(f, "Deep Ensembles lowest MMD among all rows")["verdict"] == "holds"
    # OOD MI 0.2 against ID MI 0.1 on every unit, paired: holds
    assert _row(f, "multi mode: OOD mutual information above in-distribution")["verdict"] == "holds"


def test_an_ordering_within_the_spread_is_not_a_holding_finding(tables):
    mmd, metrics = tables
    # multi-mode SWAG's MMD only 1% below its one-mode figure, both with a +-1% spread
    mmd = mmd.with_columns(
        pl.when((pl.col("method") == "swag") & (pl.col("variant") == "multi"))
        .then(pl.col("mmd") * 0.3 / 0.05 * 0.995)
        .otherwise(pl.col("mmd"))
        .alias("mmd")
    )
    row = _row(findings(unit_table(mmd, metrics)), "multi-mode MMD below single-mode")
    assert "SWAG: within noise" in row["cases"] and row["verdict"] != "holds"


def test_findings_count_only_the_cases_the_paper_could_test(tables):
    mmd, metrics = tables
    # SGHMC has no multi-mode row in the paper: its failing pair is shown, not counted
    mmd = pl.concat(
        [
            mmd,
            pl.DataFrame(
                [
                    *_units(_mmd, "sghmc", "single", 0.1, 0.1),
                    *_units(_mmd, "sghmc", "multi", 0.6, 0.6),
                ],
                schema=mmd.schema,
            ),
        ]
    )
    metrics = pl.concat(
        [
            metrics,
            pl.DataFrame(
                [
                    *_units(_metrics, "sghmc", "single", 0.8, 0.05, 0.7, 0.6, nll=0.3),
                    *_units(_metrics, "sghmc", "multi", 0.8, 0.05, 0.7, 0.6, nll=0.5),
                ],
                schema=metrics.schema,
            ),
        ]
    )
    f = findings(unit_table(mmd, metrics))
    mmd_row, nll = (
        _row(f, "multi-mode MMD below single-mode"),
        _row(f, "multi-mode NLL below single-mode"),
    )
    assert mmd_row["ours"].endswith("of 2")
    assert "SGHMC: contradicted; multi 60.00 vs one 10.00" in mmd_row["cases"]
    assert mmd_row["cases"].split("SGHMC:")[1].split("|")[0].strip().endswith("(beyond the paper)")
    # the text's NLL claim covers the methods the paper ran in both variants
    assert nll["ours"].endswith(" of 2") and nll["status"] == "claim (the paper's text)"
    assert "SGHMC: contradicted" in nll["cases"]


def test_findings_report_when_deep_ensembles_are_not_lowest(tables):
    mmd, metrics = tables
    mmd = mmd.with_columns(
        pl.when(pl.col("method") == "de").then(0.9).otherwise(pl.col("mmd")).alias("mmd")
    )
    row = _row(findings(unit_table(mmd, metrics)), "Deep Ensembles lowest MMD among all rows")
    assert row["verdict"] == "contradicted" and "vs SWAG (multi mode): contradicted" in row["cases"]


def test_findings_name_rows_whose_accuracy_comes_from_further_training(tables):
    mmd, metrics = tables
    name = "one-mode accuracy above its modes' by more than the target's spread"
    row = _row(findings(unit_table(mmd, metrics), target_accuracy_sd=0.5), name)
    # one-mode SWAG 70 vs modes 69: one point, beyond a half-point spread; one-mode Dropout 70
    # vs 70 is not; multi-mode rows (ensembles of several modes) are not judged
    assert row["verdict"] == "SWAG" and "SWAG: +1.00 points (beyond)" in row["cases"]
    assert "MC Dropout: +0.00 points" in row["cases"] and "multi" not in row["cases"]
    assert (
        _row(findings(unit_table(mmd, metrics), target_accuracy_sd=5.0), name)["verdict"] == "none"
    )


def test_paper_figures_sit_beside_ours(tables):
    t = table1(unit_table(*tables))
    both = paper_comparison(t, paper_table1("MNIST - OptuNet"))
    swag = both.filter((pl.col("group") == "multi mode") & (pl.col("method") == "SWAG")).row(
        0, named=True
    )
    assert swag["MMD"] == "5.0 / 1.8" and swag["Acc"] == "88.0 / 95.0"
    sghmc = both.filter((pl.col("group") == "one mode") & (pl.col("method") == "SGHMC")).row(
        0, named=True
    )
    assert sghmc["MMD"] == "- / 16.7"  # a row only the paper has


def test_latex_and_html_tables(tables, tmp_path):
    t = table1(unit_table(*tables))
    tex = to_latex(t)
    assert tex.startswith("\\begin{tabular}{llr") and "\\bottomrule" in tex
    assert "multi mode & Deep Ensembles & 8 & 1.0 & 2.0 & 90.0" in tex
    shown = to_latex(table1_display(t))
    assert "30.0 $\\pm$ 0.2" in shown
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
    """A predictions store as `write_predictions` leaves one: checksummed arrays, sealed."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    for name, values in (("test", test), ("ood", ood)):
        group.create_array(
            name, data=values.astype(np.float16), compressors=CHECKSUM_CODECS, config=ARRAY_CONFIG
        )
    group.attrs.update(
        {
            "format": "symbnn-predictions",
            "format_version": FORMAT_VERSION,
            "n_samples": len(test),
            "num_classes": test.shape[-1],
            "checksum": CHECKSUM,
        }
    )
    seal(path, ["test", "ood"])


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
    row = collapse_summary(pairs, 0.5, 4).row(0, named=True)
    assert row["pearson_r"] == pytest.approx(1.0) and row["pairs"] == 4
    assert row["id_mi_mean"] == pytest.approx(0.25) and row["relabelling_p"] == 0.5
    flat = collapse_summary(pairs.head(2), float("nan"), 2).row(0, named=True)
    assert math.isnan(flat["pearson_r"])  # two pairs: no correlation to report


def _overlapping_pairs(k, n_pairs, seed):
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(k, 1)
    pick = rng.permutation(len(i))[:n_pairs]
    return i[pick], j[pick], rng


def test_relabelling_test_finds_a_real_association():
    ia, ib, rng = _overlapping_pairs(30, 200, 0)
    spread = rng.gamma(2.0, size=30)  # each network's own diversity, in and out of distribution
    ood = spread[:, None] + spread[None, :]
    id_mi = spread[ia] + spread[ib] + rng.normal(0, 0.3, len(ia))
    assert relabelling_test(id_mi, ia, ib, ood, 199, seed=1) <= 0.01


def test_relabelling_test_holds_its_level_where_overlap_fools_the_naive_p_value():
    """No association between a pair's ID and OOD MI, but both depend on which networks the
    pair holds (ID via spread_id, OOD via an independent spread_ood): overlapping pairs make
    the naive Pearson p-value reject far too often, the relabelling test does not."""
    from scipy import stats

    naive, relabelled = [], []
    for seed in range(20):
        ia, ib, rng = _overlapping_pairs(12, 60, seed)
        spread_id, spread_ood = rng.gamma(2.0, size=12), rng.gamma(2.0, size=12)
        ood = spread_ood[:, None] + spread_ood[None, :]
        id_mi = spread_id[ia] + spread_id[ib]
        naive.append(stats.pearsonr(id_mi, ood[ia, ib]).pvalue < 0.05)
        relabelled.append(relabelling_test(id_mi, ia, ib, ood, 99, seed=seed) < 0.05)
    assert sum(relabelled) <= 3 and sum(naive) > sum(relabelled)


def test_a_column_no_row_has_is_not_printed(tables):
    mmd, metrics = tables
    untested = mmd.with_columns(
        pl.lit(None, pl.Float64).alias("mmd_reject_share"),
        pl.lit(None, pl.Float64).alias("ns_mmd_reject_share"),
    )
    shown = table1_display(table1(unit_table(untested, metrics)))
    assert not any(c.startswith(("MMD rej", "NS MMD rej")) for c in shown.columns)
    assert "MMD rej (% of layers)" in table1_display(table1(unit_table(mmd, metrics))).columns

"""The paper's Table 1 (MMD, NS MMD and uncertainty metrics per method, one-mode and
multi-mode) and Table 2 (median, mean and max of the twenty-kernel MMDs), from the per-method
MMD summaries and the metrics rows, and Table 1 beside the paper's figures.

A single-mode variant holds one single-mode posterior per mode (rows ``mode`` 0..M-1 in its
MMD summary and metrics); its Table 1 row is their mean, with their standard deviation in
the ``<column> sd`` columns (null for multi-mode rows), and ``modes`` says over how many.
"""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.methods.registry import LABELS, METHOD_NAMES
from symbnn.settings import Metrics

# library defaults are the settings layer's
METRICS = Metrics()

# Table 1 columns as the paper prints them: every figure x100 (percentages for Acc, ECE,
# AUPR, FPR95 and the MMD test's share of rejected layers; Brier, NLL, MI in nats and MMD
# scaled the same way)
TABLE1_COLUMNS = {
    "mmd": "MMD",
    "ns_mmd": "NS MMD",
    "accuracy": "Acc",
    "ece": "ECE",
    "brier": "Brier",
    "nll": "NLL",
    "aupr": "AUPR",
    "fpr95": "FPR95",
    "idmi": "IDMI",
    "oodmi": "OODMI",
    "mmd_reject_share": "MMD rej",
    "ns_mmd_reject_share": "NS MMD rej",
}
# what each column measures, for the report's headers
UNITS = {
    "MMD": "x100",
    "NS MMD": "x100",
    "Acc": "%",
    "ECE": "%",
    "Brier": "x100",
    "NLL": "nats x100",
    "AUPR": "%",
    "FPR95": "%",
    "IDMI": "nats x100",
    "OODMI": "nats x100",
    "MMD rej": "% of layers",
    "NS MMD rej": "% of layers",
}
GROUPS = {"single": "one mode", "multi": "multi mode"}


def metrics_row(
    predictions_path: str | os.PathLike,
    score: str = METRICS.ood_score,
    bins: int = METRICS.bins,
    modes: np.ndarray | None = None,
) -> pl.DataFrame:
    """Raw metrics (fractions and nats) of a method's stored predictions: one row, or with
    `modes` (each sample's mode index) one row per mode, each mode's samples an ensemble."""
    # imported here: they load torch, which the table formatting below (read by the Snakefile
    # for the report's front page) does not need
    from symbnn.metrics import uncertainty_metrics
    from symbnn.predictions import open_predictions

    pred = open_predictions(predictions_path)
    labels = pred.read("labels")
    groups = {None: slice(None)} if modes is None else _mode_runs(modes, predictions_path)
    rows = []
    for mode, sel in groups.items():
        test, ood = pred.group["test"], pred.group["ood"]
        if mode is not None:  # a mode's samples are read whole (n_samples x inputs x classes)
            test, ood = test[sel], ood[sel]
        values = uncertainty_metrics(
            test,
            labels,
            ood,
            score=score,
            bins=bins,
            names=(f"{predictions_path}: test", f"{predictions_path}: ood"),
        )
        rows.append(
            {
                "method": pred.attrs.get("method", "?"),
                "variant": pred.attrs.get("variant", "?"),
                "mode": mode,
                "n_samples": pred.n_samples if mode is None else sel.stop - sel.start,
                "ood_score": score,
                **values,
            }
        )
    return pl.DataFrame(rows, schema_overrides={"mode": pl.Int64})


def _mode_runs(modes: np.ndarray, where: str | os.PathLike) -> dict[int, slice]:
    """Each mode's rows: a sample store holds each mode's samples as one run of rows."""
    runs = {}
    for k in np.unique(modes):
        rows = np.flatnonzero(modes == k)
        if rows[-1] - rows[0] + 1 != len(rows):
            raise ValueError(f"{where}: the samples of mode {k} are not contiguous")
        runs[int(k)] = slice(int(rows[0]), int(rows[-1]) + 1)
    return runs


def _order(frame: pl.DataFrame) -> pl.DataFrame:
    rank = {name: i for i, name in enumerate(METHOD_NAMES)}
    return (
        frame.with_columns(
            pl.col("variant").replace_strict({"single": 0, "multi": 1}, default=2).alias("_group"),
            pl.col("method").replace_strict(rank, default=len(rank)).alias("_rank"),
        )
        .sort("_group", "_rank")
        .drop("_group", "_rank")
    )


def table1(mmd_summaries: pl.DataFrame, metrics: pl.DataFrame) -> pl.DataFrame:
    """Per (method, variant): the paper's Table 1 columns, x100, grouped one mode / multi
    mode; a single-mode row is the mean over its modes, their sd in ``<column> sd``."""
    mmd_keys = ("mmd", "ns_mmd", "mmd_reject_share", "ns_mmd_reject_share")
    mmd = mmd_summaries.select(
        "method",
        "variant",
        pl.col("mode").cast(pl.Int64),
        *[
            pl.col(k) if k in mmd_summaries.columns else pl.lit(None, pl.Float64).alias(k)
            for k in mmd_keys
        ],
    )
    per_mode = mmd.join(
        metrics.drop("n_samples", "ood_score").with_columns(pl.col("mode").cast(pl.Int64)),
        on=["method", "variant", "mode"],
        how="full",
        coalesce=True,
        nulls_equal=True,
    )
    keys = list(TABLE1_COLUMNS)
    joined = per_mode.group_by("method", "variant", maintain_order=True).agg(
        pl.len().alias("modes"),
        *[pl.col(k).cast(pl.Float64).mean() for k in keys],
        *[pl.col(k).cast(pl.Float64).std().alias(f"{k}_sd") for k in keys],
    )
    joined = _order(joined)
    single = pl.col("variant") == "single"
    return joined.select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        pl.col("method").replace_strict(LABELS, default=pl.col("method")).alias("method"),
        pl.when(single).then(pl.col("modes")).otherwise(1).alias("modes"),
        *[(pl.col(key) * 100).alias(label) for key, label in TABLE1_COLUMNS.items()],
        *[
            pl.when(single).then(pl.col(f"{key}_sd") * 100).otherwise(None).alias(f"{label} sd")
            for key, label in TABLE1_COLUMNS.items()
        ],
    )


def table1_display(table: pl.DataFrame, digits: int = 1) -> pl.DataFrame:
    """Table 1 as the report prints it: units in the headers, a one-mode row's figures as
    "mean ± sd over its modes"."""
    columns = [pl.col("group"), pl.col("method")]
    for label in TABLE1_COLUMNS.values():
        value, sd = pl.col(label), pl.col(f"{label} sd")
        text = value.round(digits).cast(pl.String)
        spread = pl.concat_str(text, pl.lit(" ± "), sd.round(digits).cast(pl.String))
        columns.append(pl.when(sd.is_not_null()).then(spread).otherwise(text).alias(label))
    return with_units(table.select(columns))


def paper_comparison(table: pl.DataFrame, paper: pl.DataFrame) -> pl.DataFrame:
    """Ours beside the paper's figures: per (group, method) of either table, each column as
    "ours / paper" (a dash where one side has no such row or column)."""
    shared = [c for c in paper.columns if c in TABLE1_COLUMNS.values()]
    both = table.select("group", "method", *shared).join(
        paper.select("group", "method", *shared),
        on=["group", "method"],
        how="full",
        coalesce=True,
        suffix=" paper",
    )

    def shown(column: str) -> pl.Expr:
        return pl.col(column).round(1).cast(pl.String).fill_null("-")

    return both.select(
        "group",
        "method",
        *[pl.concat_str(shown(c), pl.lit(" / "), shown(f"{c} paper")).alias(c) for c in shared],
    )


def with_units(frame: pl.DataFrame, note: str = "") -> pl.DataFrame:
    """The report's headers: each Table 1 figure's column named with its unit, e.g.
    "MMD median (x100)", "Acc (%, ours / paper)" with `note` "ours / paper"."""

    def header(column: str) -> str:
        base = column.removesuffix(" median").removesuffix(" mean").removesuffix(" max")
        if "(" in column or base not in UNITS:
            return column
        return f"{column} ({', '.join(filter(None, [UNITS[base], note]))})"

    return frame.rename({c: header(c) for c in frame.columns})


def table2(mmd_summaries: pl.DataFrame) -> pl.DataFrame:
    """Per (method, variant): median, mean and max over the twenty kernels of MMD and NS MMD
    (each the parameter-weighted mean over layers), x100; a single-mode row is the mean over
    its modes."""
    stats = [
        f"{prefix}_{stat}" for prefix in ("mmd", "ns_mmd") for stat in ("median", "mean", "max")
    ]
    frame = mmd_summaries.group_by("method", "variant", maintain_order=True).agg(
        *[pl.col(name).mean() for name in stats]
    )
    frame = _order(frame)
    return frame.select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        pl.col("method").replace_strict(LABELS, default=pl.col("method")).alias("method"),
        *[
            (pl.col(name) * 100).alias(
                name.replace("ns_mmd", "NS MMD").replace("mmd", "MMD").replace("_", " ")
            )
            for name in stats
        ],
    )

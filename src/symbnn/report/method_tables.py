"""The paper's Table 1 (MMD, NS MMD and uncertainty metrics per method, one-mode and
multi-mode) and Table 2 (median, mean and max of the twenty-kernel MMDs), from the per-method
MMD summaries and the metrics rows, and Table 1 beside the paper's figures.

Every row is summarised over its units: a one-mode variant holds one single-mode posterior
per mode, a multi-mode variant one multi-mode posterior per replicate (rows ``unit`` in its MMD
summary and metrics). Its Table 1 row is their mean, with their standard deviation in the
``<column> sd`` columns, and ``units`` says over how many; `unit_table` keeps every unit's
figures for the findings' tests. Rows are labelled and ordered by ``labels`` (method name ->
row label, in row order: `symbnn.methods.registry.labels` of the experiment's methods, the
shipped methods' by default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import polars as pl

from symbnn.methods.registry import LABELS
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
    # the mean test accuracy of the modes a row's samples come from (pool networks): a method
    # whose Acc exceeds it gained from training further, not from its posterior
    "mode_accuracy": "Modes acc",
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
    "Modes acc": "%",
}
GROUPS = {"single": "one mode", "multi": "multi mode"}


def metrics_row(
    predictions_path: str | os.PathLike,
    score: str = METRICS.ood_score,
    bins: int = METRICS.bins,
    units: np.ndarray | None = None,
    mode_index: np.ndarray | None = None,
    mode_accuracy: np.ndarray | None = None,
) -> pl.DataFrame:
    """Raw metrics (fractions and nats) of a method's stored predictions: one row, or with
    `units` (each sample's unit: its mode in a one-mode variant, its replicate in a multi-mode
    one) one row per unit, each unit's samples an ensemble. With `mode_index` (each sample's
    mode) and `mode_accuracy` (each mode's own test accuracy), a unit's row also gives the mean
    accuracy of the modes its samples come from (``mode_accuracy``), so that a gain from the
    method's own further training shows beside its accuracy."""
    # imported here: they load torch, which the table formatting below (read by the Snakefile
    # for the report's front page) does not need
    from symbnn.metrics import uncertainty_metrics

    # local: keeps zarr out of importing symbnn.report.method_tables
    from symbnn.store.predictions import open_predictions

    pred = open_predictions(predictions_path)
    labels = pred.read("labels")
    groups = {None: slice(None)} if units is None else _unit_runs(units, predictions_path)
    rows = []
    for unit, sel in groups.items():
        test, ood = pred.group["test"], pred.group["ood"]
        if unit is not None:  # a unit's samples are read whole (n_samples x inputs x classes)
            test, ood = test[sel], ood[sel]
        values = uncertainty_metrics(
            test,
            labels,
            ood,
            score=score,
            bins=bins,
            names=(f"{predictions_path}: test", f"{predictions_path}: ood"),
        )
        modes_acc = None
        if mode_index is not None and mode_accuracy is not None:
            modes_acc = float(np.mean(mode_accuracy[mode_index[sel]]))
        rows.append(
            {
                "method": pred.attrs.get("method", "?"),
                "variant": pred.attrs.get("variant", "?"),
                "unit": unit,
                "n_samples": pred.n_samples if unit is None else sel.stop - sel.start,
                "ood_score": score,
                **values,
                "mode_accuracy": modes_acc,
            }
        )
    return pl.DataFrame(rows, schema_overrides={"unit": pl.Int64, "mode_accuracy": pl.Float64})


def _unit_runs(units: np.ndarray, where: str | os.PathLike) -> dict[int, slice]:
    """Each unit's rows: a sample store holds each unit's samples as one run of rows."""
    runs = {}
    for k in np.unique(units):
        rows = np.flatnonzero(units == k)
        if rows[-1] - rows[0] + 1 != len(rows):
            raise ValueError(f"{where}: the samples of unit {k} are not contiguous")
        runs[int(k)] = slice(int(rows[0]), int(rows[-1]) + 1)
    return runs


def _order(frame: pl.DataFrame, labels: Mapping[str, str]) -> pl.DataFrame:
    rank = {name: i for i, name in enumerate(labels)}
    return (
        frame.with_columns(
            pl.col("variant").replace_strict({"single": 0, "multi": 1}, default=2).alias("_group"),
            pl.col("method").replace_strict(rank, default=len(rank)).alias("_rank"),
        )
        .sort("_group", "_rank")
        .drop("_group", "_rank")
    )


def unit_table(
    mmd_summaries: pl.DataFrame, metrics: pl.DataFrame, labels: Mapping[str, str] = LABELS
) -> pl.DataFrame:
    """One row per (method, variant, unit) with the paper's Table 1 columns, x100: the figures
    each one-mode posterior (one per mode) and each multi-mode replicate gives, which Table 1
    summarises and the findings test."""
    mmd_keys = ("mmd", "ns_mmd", "mmd_reject_share", "ns_mmd_reject_share")
    mmd = mmd_summaries.select(
        "method",
        "variant",
        pl.col("unit").cast(pl.Int64),
        *[
            pl.col(k) if k in mmd_summaries.columns else pl.lit(None, pl.Float64).alias(k)
            for k in mmd_keys
        ],
    )
    if "mode_accuracy" not in metrics.columns:
        metrics = metrics.with_columns(pl.lit(None, pl.Float64).alias("mode_accuracy"))
    per_unit = mmd.join(
        metrics.drop("n_samples", "ood_score").with_columns(pl.col("unit").cast(pl.Int64)),
        on=["method", "variant", "unit"],
        how="full",
        coalesce=True,
        nulls_equal=True,
    )
    return _order(per_unit, labels).select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        _label(labels),
        "unit",
        *[
            (pl.col(key).cast(pl.Float64) * 100).alias(label)
            for key, label in TABLE1_COLUMNS.items()
        ],
    )


def table1(units: pl.DataFrame) -> pl.DataFrame:
    """Per (method, variant): the mean of its units' figures (`unit_table`), their standard
    deviation in ``<column> sd`` and their number in ``units`` (modes of a one-mode row,
    replicates of a multi-mode row)."""
    labels = list(TABLE1_COLUMNS.values())
    return units.group_by("group", "method", maintain_order=True).agg(
        pl.len().alias("units"),
        *[pl.col(label).mean() for label in labels],
        *[pl.col(label).std().alias(f"{label} sd") for label in labels],
    )


def _label(labels: Mapping[str, str]) -> pl.Expr:
    """The method column as its row label (the name where it has none)."""
    return pl.col("method").replace_strict(dict(labels), default=pl.col("method")).alias("method")


def with_width_notes(
    shown: pl.DataFrame, notes: pl.DataFrame, labels: Mapping[str, str] = LABELS
) -> pl.DataFrame:
    """Table 1 as printed, with a last column saying how wide each row's canonical samples
    are against the target's, layer by layer (`symbnn.mmd.spread.width_notes`): a one-mode
    row as wide as the target matches it by spreading, which its MMD alone does not show."""
    labelled = notes.select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        _label(labels),
        pl.col("width").alias("canonical width"),
    )
    return shown.join(labelled, on=["group", "method"], how="left", maintain_order="left")


def table1_display(table: pl.DataFrame, digits: int = 1) -> pl.DataFrame:
    """Table 1 as the report prints it: units in the headers, each row's figures as
    "mean ± sd" over its units (modes or replicates), and how many units; a column no row has
    a figure for (the MMD test's, when it was not run) is left out."""
    columns = [pl.col("group"), pl.col("method"), pl.col("units")]
    for label in TABLE1_COLUMNS.values():
        if table[label].null_count() == table.height:
            continue
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


def table2(mmd_summaries: pl.DataFrame, labels: Mapping[str, str] = LABELS) -> pl.DataFrame:
    """Per (method, variant): median, mean and max over the twenty kernels of MMD and NS MMD
    (each the parameter-weighted mean over layers), x100; the mean over the row's units."""
    stats = [
        f"{prefix}_{stat}" for prefix in ("mmd", "ns_mmd") for stat in ("median", "mean", "max")
    ]
    frame = mmd_summaries.group_by("method", "variant", maintain_order=True).agg(
        *[pl.col(name).mean() for name in stats]
    )
    frame = _order(frame, labels)
    return frame.select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        _label(labels),
        *[
            (pl.col(name) * 100).alias(
                name.replace("ns_mmd", "NS MMD").replace("mmd", "MMD").replace("_", " ")
            )
            for name in stats
        ],
    )

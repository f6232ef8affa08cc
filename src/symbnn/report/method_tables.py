"""The paper's Table 1 (MMD, NS MMD and uncertainty metrics per method, one-mode and
multi-mode) and Table 2 (median, mean and max of the twenty-kernel MMDs), from the per-method
MMD summaries and the metrics rows."""

from __future__ import annotations

import os

import polars as pl

from symbnn.methods.registry import LABELS, METHOD_NAMES
from symbnn.metrics import uncertainty_metrics
from symbnn.predictions import open_predictions
from symbnn.settings import Metrics

# library defaults are the settings layer's
METRICS = Metrics()

# Table 1 columns as the paper prints them: every figure x100 (percentages for Acc, ECE,
# AUPR and FPR95; Brier, MI in nats and MMD scaled the same way)
TABLE1_COLUMNS = {
    "mmd": "MMD",
    "ns_mmd": "NS MMD",
    "accuracy": "Acc",
    "ece": "ECE",
    "brier": "Brier",
    "aupr": "AUPR",
    "fpr95": "FPR95",
    "idmi": "IDMI",
    "oodmi": "OODMI",
}
GROUPS = {"single": "one mode", "multi": "multi mode"}


def metrics_row(
    predictions_path: str | os.PathLike, score: str = METRICS.ood_score, bins: int = METRICS.bins
) -> pl.DataFrame:
    """One row of raw metrics (fractions and nats) of a method's stored predictions."""
    pred = open_predictions(predictions_path)
    values = uncertainty_metrics(
        pred.group["test"],
        pred.read("labels"),
        pred.group["ood"],
        score=score,
        bins=bins,
        names=(f"{predictions_path}: test", f"{predictions_path}: ood"),
    )
    return pl.DataFrame(
        [
            {
                "method": pred.attrs.get("method", "?"),
                "variant": pred.attrs.get("variant", "?"),
                "n_samples": pred.n_samples,
                "ood_score": score,
                **values,
            }
        ]
    )


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
    """Per (method, variant): the paper's Table 1 columns, x100, grouped one mode / multi mode."""
    joined = mmd_summaries.select("method", "variant", "mmd", "ns_mmd").join(
        metrics.drop("n_samples", "ood_score"), on=["method", "variant"], how="full", coalesce=True
    )
    joined = _order(joined)
    return joined.select(
        pl.col("variant").replace_strict(GROUPS, default=pl.col("variant")).alias("group"),
        pl.col("method").replace_strict(LABELS, default=pl.col("method")).alias("method"),
        *[(pl.col(key) * 100).alias(label) for key, label in TABLE1_COLUMNS.items()],
    )


def table2(mmd_summaries: pl.DataFrame) -> pl.DataFrame:
    """Per (method, variant): median, mean and max over the twenty kernels of MMD and NS MMD
    (each the parameter-weighted mean over layers), x100."""
    stats = [
        f"{prefix}_{stat}" for prefix in ("mmd", "ns_mmd") for stat in ("median", "mean", "max")
    ]
    frame = _order(mmd_summaries.select("method", "variant", *stats))
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


def to_latex(frame: pl.DataFrame, float_precision: int = 1) -> str:
    """A booktabs tabular of `frame` (strings left, numbers right, one decimal as the paper)."""

    def cell(value) -> str:
        if value is None:
            return "--"
        if isinstance(value, float):
            return f"{value:.{float_precision}f}"
        return str(value).replace("_", r"\_").replace("&", r"\&").replace("%", r"\%")

    align = "".join("r" if dtype.is_numeric() else "l" for dtype in frame.dtypes)
    lines = [
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(cell(name) for name in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(cell(v) for v in row) + r" \\" for row in frame.iter_rows()]
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)

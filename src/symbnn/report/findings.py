"""Whether the paper's qualitative findings hold, computed from Table 1 (never written by hand).

Findings (paper section 4.3), per experiment:
- multi-mode MMD (and NS MMD) below single-mode, for each method with both variants;
- Deep Ensembles have the lowest MMD of all rows;
- the approximation (Deep Ensembles aside) with the best MMD, and with the best NS MMD;
- multi-mode better on OOD detection: higher AUPR and lower FPR95, for each method;
- single-mode better calibrated: lower ECE, for each method.
"""

from __future__ import annotations

import polars as pl

DE = "Deep Ensembles"


def _pairs(table1: pl.DataFrame) -> pl.DataFrame:
    """One row per method with both variants: its one-mode and multi-mode figures side by side."""
    one = table1.filter(pl.col("group") == "one mode").drop("group")
    multi = table1.filter(pl.col("group") == "multi mode").drop("group")
    return one.join(multi, on="method", suffix=" multi")


def findings(table1: pl.DataFrame) -> pl.DataFrame:
    """Rows (finding, method, holds, detail) from a Table 1 as `table1` builds it (x100 figures)."""
    rows = []

    def add(finding: str, method: str, holds: bool | None, detail: str) -> None:
        rows.append({"finding": finding, "method": method, "holds": holds, "detail": detail})

    pairs = _pairs(table1)
    for row in pairs.iter_rows(named=True):
        m = row["method"]
        for column in ("MMD", "NS MMD"):
            add(
                f"multi-mode {column} below single-mode",
                m,
                row[f"{column} multi"] < row[column],
                f"{row[f'{column} multi']:.3f} vs {row[column]:.3f}",
            )
        add(
            "multi-mode better AUPR",
            m,
            row["AUPR multi"] > row["AUPR"],
            f"{row['AUPR multi']:.1f} vs {row['AUPR']:.1f}",
        )
        add(
            "multi-mode better FPR95",
            m,
            row["FPR95 multi"] < row["FPR95"],
            f"{row['FPR95 multi']:.1f} vs {row['FPR95']:.1f}",
        )
        add(
            "single-mode better ECE",
            m,
            row["ECE"] < row["ECE multi"],
            f"{row['ECE']:.1f} vs {row['ECE multi']:.1f}",
        )

    labelled = table1.with_columns((pl.col("method") + " (" + pl.col("group") + ")").alias("row"))
    if labelled.height:
        for column in ("MMD", "NS MMD"):
            best = labelled.sort(column).row(0, named=True)
            if (labelled["method"] == DE).any():
                de = labelled.filter(pl.col("method") == DE).row(0, named=True)
                add(
                    f"Deep Ensembles lowest {column}",
                    DE,
                    best["method"] == DE,
                    f"Deep Ensembles {de[column]:.3f}; lowest: {best['row']} {best[column]:.3f}",
                )
            others = labelled.filter(pl.col("method") != DE)
            if others.height:
                top = others.sort(column).row(0, named=True)
                add(f"best approximation by {column}", top["row"], None, f"{top[column]:.3f}")
    return pl.DataFrame(
        rows,
        schema={
            "finding": pl.String,
            "method": pl.String,
            "holds": pl.Boolean,
            "detail": pl.String,
        },
    )


def findings_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per finding: for how many methods it holds, out of how many it was tested on."""
    tested = frame.filter(pl.col("holds").is_not_null())
    return tested.group_by("finding", maintain_order=True).agg(
        pl.col("holds").sum().alias("holds for"), pl.len().alias("of")
    )

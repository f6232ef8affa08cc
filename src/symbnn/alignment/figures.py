"""Interpolation plots: loss and accuracy along the linear path, without and with alignment."""

from __future__ import annotations

import os

import polars as pl

from symbnn.report.figures import plt, save_figure


def interpolation_figure(curves: pl.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Two panels (loss, accuracy) against t; one line per (alignment, split). With a
    ``pair`` column of several pairs, the line is the mean over pairs and the band spans
    their minimum to maximum."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    styles = {"none": "--", "weight_matching": "-"}
    several = "pair" in curves.columns and curves["pair"].n_unique() > 1
    for (alignment, split), part in curves.sort("t").group_by(
        ["alignment", "split"], maintain_order=True
    ):
        label = f"{split}, {'aligned' if alignment == 'weight_matching' else 'as trained'}"
        style = styles.get(alignment, ":")
        if several:
            label += f" (mean of {curves['pair'].n_unique()} pairs, min-max band)"
        for axis, column in ((left, "loss"), (right, "accuracy")):
            by_t = (
                part.group_by("t")
                .agg(
                    pl.col(column).mean().alias("mean"),
                    pl.col(column).min().alias("low"),
                    pl.col(column).max().alias("high"),
                )
                .sort("t")
            )
            (line,) = axis.plot(by_t["t"], by_t["mean"], style, marker="o", ms=3, label=label)
            if several:
                axis.fill_between(
                    by_t["t"], by_t["low"], by_t["high"], color=line.get_color(), alpha=0.15
                )
    left.set_xlabel("t   ((1 - t) A + t B)")
    left.set_ylabel("loss")
    right.set_xlabel("t   ((1 - t) A + t B)")
    right.set_ylabel("accuracy")
    left.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save_figure(fig, path)

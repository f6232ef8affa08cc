"""Interpolation plots: loss and accuracy along the linear path, without and with alignment."""

from __future__ import annotations

import os

import polars as pl

from symbnn.report.figures import plt, save_figure


def interpolation_figure(curves: pl.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Two panels (loss, accuracy) against t; one line per (alignment, split)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    styles = {"none": "--", "weight_matching": "-"}
    for (alignment, split), part in curves.sort("t").group_by(
        ["alignment", "split"], maintain_order=True
    ):
        label = f"{split}, {'aligned' if alignment == 'weight_matching' else 'as trained'}"
        style = styles.get(alignment, ":")
        left.plot(part["t"], part["loss"], style, marker="o", ms=3, label=label)
        right.plot(part["t"], part["accuracy"], style, marker="o", ms=3, label=label)
    left.set_xlabel("t   ((1 - t) A + t B)")
    left.set_ylabel("loss")
    right.set_xlabel("t   ((1 - t) A + t B)")
    right.set_ylabel("accuracy")
    left.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    save_figure(fig, path)

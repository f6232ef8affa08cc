"""The report's figures are legible: tick labels of the min-mass figure's log axis do not
overlap, whatever span of masses the networks cover."""

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest

from symbnn.report import figures


def minmass_table(low: float, high: float, rows: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    before = rng.uniform(low, high, rows)
    return pl.DataFrame(
        {
            "mass_before": before,
            "mass_after": before * rng.uniform(0.6, 0.9, rows),
            "degenerate": [False] * rows,
            "network_converged": [True] * (rows - 3) + [False] * 3,
            "max_abs_before.conv1": rng.uniform(0.5, 1.0, rows),
            "max_abs_after.conv1": rng.uniform(0.3, 0.6, rows),
        }
    )


def overlapping_tick_labels(axis) -> list[tuple[str, str]]:
    renderer = axis.figure.canvas.get_renderer()
    labels = [
        t
        for t in axis.get_ticklabels(minor=False) + axis.get_ticklabels(minor=True)
        if t.get_visible() and t.get_text()
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    return [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.overlaps(box_b)
    ]


@pytest.mark.parametrize(
    "low, high", [(8.0, 60.0), (20.0, 60.0), (35.0, 42.0), (0.5, 900.0), (1e-3, 1e4)]
)
def test_minmass_log_axis_labels_do_not_overlap(tmp_path, monkeypatch, low, high):
    kept = {}
    monkeypatch.setattr(figures.plt, "close", lambda fig: kept.setdefault("fig", fig))
    figures.minmass_figure(minmass_table(low, high), tmp_path / "minmass.png")
    left = kept["fig"].axes[0]
    kept["fig"].canvas.draw()
    assert overlapping_tick_labels(left.xaxis) == []
    shown = [t.get_text() for t in left.xaxis.get_ticklabels() if t.get_text()]
    assert len(shown) >= 2  # still readable: at least two labelled ticks
    plt.close(kept["fig"])

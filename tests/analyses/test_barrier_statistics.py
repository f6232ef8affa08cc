"""Barriers over pairs: the accuracy barrier's definition, the per-split rows and the summary."""

import polars as pl
import pytest

from symbnn.alignment.pairs import accuracy_barrier, curve_rows, summary


def test_accuracy_barrier_is_the_largest_drop_below_the_endpoints_line():
    assert accuracy_barrier([0, 0.5, 1], [0.9, 0.5, 0.7]) == pytest.approx(0.3)
    assert accuracy_barrier([0, 0.5, 1], [0.9, 0.95, 0.7]) == 0.0  # never negative


def curves(mid_loss):
    return pl.DataFrame(
        {
            "t": [0.0, 0.5, 1.0] * 2,
            "split": ["train"] * 3 + ["test"] * 3,
            "loss": [0.1, mid_loss, 0.3, 0.2, 0.2, 0.2],
            "accuracy": [1.0, 0.6, 0.8, 0.9, 0.9, 0.9],
        }
    )


def test_rows_and_summary_over_pairs():
    rows = curve_rows(curves(1.2), kind="sgd", pair=0, alignment="none")
    rows += curve_rows(curves(0.4), kind="sgd", pair=1, alignment="none")
    train = [r for r in rows if r["split"] == "train"]
    assert [r["loss_barrier"] for r in train] == pytest.approx([1.0, 0.2])
    assert train[0]["accuracy_barrier"] == pytest.approx(0.3)
    table = summary(pl.DataFrame(rows))
    row = table.filter(pl.col("split") == "train").row(0, named=True)
    assert row["pairs"] == 2
    assert row["loss_barrier_mean"] == pytest.approx(0.6)
    assert (row["loss_barrier_min"], row["loss_barrier_max"]) == pytest.approx((0.2, 1.0))
    assert row["worst_endpoint_accuracy"] == pytest.approx(0.8)

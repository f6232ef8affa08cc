"""The acceptance rule as the workflow's planning applies it (symbnn.acceptance): the same
table as the convergence rule writes, and the retry threshold that refits MC Dropout / BNN
only when another attempt would be kept."""

import numpy as np
import polars as pl
import pytest

from symbnn.acceptance import acceptance_table, kept_rows, retry_threshold


def networks(accuracy, measured=True, flagged=None):
    n = len(accuracy)
    return pl.DataFrame(
        {
            "row": np.arange(n),
            "seed": np.arange(100, 100 + n),
            "test_accuracy": np.asarray(accuracy, dtype=float),
            "flagged": np.ones(n, bool) if flagged is None else np.asarray(flagged),
            "measured": np.full(n, measured),
        }
    )


def test_rule_keeps_by_threshold_and_median():
    table = acceptance_table(networks([0.9, 0.2, 0.85, 0.6]), 0.5, max_below_median=0.1)
    # median 0.725: threshold max(0.5, 0.625)
    assert table["threshold"][0] == pytest.approx(0.625)
    assert kept_rows(table) == [0, 2]
    assert table["reason"].to_list() == [
        "kept",
        "below min_accuracy",
        "kept",
        "more than 0.1 below the median",
    ]


def test_store_without_accuracies_keeps_its_own_flags():
    table = acceptance_table(networks([np.nan] * 3, False, [True, False, True]), 0.9)
    assert kept_rows(table) == [0, 2] and table["reason"][1] == "flagged in the store"


def test_convergence_table_is_the_planning_table(optunet_store):
    from symbnn.acceptance import network_accuracies
    from symbnn.posterior import convergence_table

    store, _ = optunet_store()
    planned = acceptance_table(network_accuracies(store.path), 0.7, 0.1)
    assert convergence_table(store.path, 0.7, 0.1).equals(planned)


@pytest.mark.parametrize(
    "threshold, expected",
    [
        (0.65, 0.65),  # the recorded one
        (0.62, 0.65),  # still only the last attempt passes: the same fit, no refit
        (0.69, 0.65),
        (0.71, 0.71),  # the kept attempt fails it: refit
        (0.6, 0.6),  # an earlier attempt (0.6) would pass: refit
        (0.5, 0.5),
    ],
)
def test_retry_threshold_changes_only_with_the_attempt_kept(threshold, expected):
    # one mode's attempts: 0.4 and 0.6 failed the recorded 0.65, 0.7 was kept
    assert retry_threshold(threshold, 0.65, [[0.4, 0.6, 0.7]]) == pytest.approx(expected)


def test_retry_threshold_of_a_fit_not_yet_run_or_without_test_data():
    assert retry_threshold(0.6, None, None) == 0.6
    assert retry_threshold(0.6, 0.0, [[]]) == 0.0  # no test data: nothing to retry

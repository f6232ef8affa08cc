"""The report's raw-against-canonical table of the reference diagnostics
(symbnn.reference.report.side_by_side): each scope's figures on raw weights beside the same
figures on canonical weights, the function-space rows left out."""

import polars as pl

from symbnn.reference.report import side_by_side


def test_raw_and_canonical_figures_sit_side_by_side_per_scope():
    rows = []
    for quantity, rhat in (
        ("raw weights", 3.0),
        ("canonical weights", 1.1),
        ("test log-likelihood", 9.0),
    ):
        for scope, scale in (("all chains", 1.0), ("within modes", 0.5)):
            rows.append(
                {
                    "quantity": quantity,
                    "scope": scope,
                    "rhat_median": rhat * scale,
                    "rhat_max": 2 * rhat * scale,
                    "ess_bulk_median": 10 * rhat,
                    "ess_tail_median": 20 * rhat,
                }
            )
    table = side_by_side(pl.DataFrame(rows))
    assert table["scope"].to_list() == ["all chains", "within modes"]
    assert table.columns[1:3] == ["rhat_median raw", "rhat_median canonical"]
    assert table["rhat_median raw"].to_list() == [3.0, 1.5]
    assert table["rhat_median canonical"].to_list() == [1.1, 0.55]
    assert table["ess_tail_median canonical"].to_list() == [22.0, 22.0]
    assert 9.0 not in table["rhat_median raw"].to_list()

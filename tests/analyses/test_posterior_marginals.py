"""Layer-wise weight marginals of a stored posterior (symbnn.analyses.posterior_marginals)."""

import polars as pl

from symbnn.analyses.posterior_marginals import marginal_summary, posterior_marginal_tests
from symbnn.symmetry.canonical_store import canonicalize_store


def test_units_are_exchangeable_until_symmetries_are_removed(optunet_store, tmp_path):
    store, _ = optunet_store(n=300)
    canonicalize_store(store.path, tmp_path / "canonical.zarr", scale="unitnorm", key="first")
    tests = posterior_marginal_tests(
        {"stored": store.path, "canonical": tmp_path / "canonical.zarr"}
    )
    assert set(tests["group"].unique()) == {"conv1", "conv2", "fc1"}
    # fc1: 3 units, 3 pairs, 10 incoming weights each
    assert tests.filter((pl.col("stage") == "stored") & (pl.col("group") == "fc1")).height == 30
    summary = marginal_summary(tests, alpha=0.05)
    share = {
        (row["stage"], row["group"]): row["rejected_at_0.05"]
        for row in summary.iter_rows(named=True)
    }
    # freshly initialised units are i.i.d.: about 5% of the tests reject
    assert share[("stored", "fc1")] < 0.2 and share[("stored", "conv2")] < 0.2
    # sorted by their first incoming weight (the key), units no longer share its marginal
    key = tests.filter(
        (pl.col("stage") == "canonical") & (pl.col("group") == "fc1") & (pl.col("coordinate") == 0)
    )
    assert key.height == 3 and (key["pvalue"] < 1e-6).all()
    assert share[("canonical", "fc1")] > share[("stored", "fc1")]


def test_figure_shows_every_group_at_both_stages(optunet_store, tmp_path):
    from symbnn.analyses.posterior_marginals import (
        posterior_marginals_figure,
        sample_tests,
        stage_samples,
    )

    store, _ = optunet_store(n=8)
    canonicalize_store(store.path, tmp_path / "canonical.zarr", scale="unitnorm", key="first")
    samples = stage_samples({"stored": store.path, "canonical": tmp_path / "canonical.zarr"})
    assert samples["stored"]["conv2"].shape == (10, 25, 8)  # units, 1 x 5 x 5 inputs, networks
    summary = marginal_summary(sample_tests(samples))
    posterior_marginals_figure(samples, summary, tmp_path / "figure.png", title="t")
    assert (tmp_path / "figure.png").stat().st_size > 0

"""The HMC reference posterior in the workflow, end to end at toy size: the pool trained, the
chains run from its kept modes into reference/hmc.zarr (the target store's layout, under its
digest), the diagnostics, MMD, agreement/TV and findings tables written, and the report built
over reference_all. `make run`'s default target plans none of it."""

import numpy as np
import polars as pl
import pytest
import yaml
from conftest import plan_in_process, run_snakemake, tiny_experiment, workflow_config

from symbnn.store import open_store

pytestmark = pytest.mark.slow

CHAINS, MODES, DRAWS = 4, 2, 6
REFERENCE = {
    "chains": CHAINS,
    "modes": MODES,
    "burn_in": 4,
    "draws": DRAWS,
    "leapfrog_steps": 3,
    "test_digits": 5,
}
INFO = {"chain", "seed", "mode_index", "mode_seed", "unit", "step", "accepted"} | {
    "accept_prob",
    "energy_error",
    "step_size",
}


def reference_config(enabled=False, methods=()):
    """The tiny experiment with a tiny reference; `methods` names the methods run (none: the
    pool alone, which the default target then does not build)."""
    tiny = tiny_experiment(n_samples=2)
    tiny["methods"] = {"n_samples": 2, "modes": 2, "pool": 2, "first_seed": 1000}
    tiny["methods"].update({name: {} for name in methods})
    tiny["reference"] = {**REFERENCE, "enabled": enabled}
    return workflow_config({"tiny": tiny})


def planned(workdir, *targets):
    """The dry run's text: its jobs up to the checkpoints (the chains wait on the pool's
    accuracies, so the reference's table and the pool stand for them)."""
    result = plan_in_process(workdir, *targets, "-n")
    return result.stdout + result.stderr


def test_default_target_leaves_the_reference_alone_unless_enabled(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(reference_config()))
    default = planned(tmp_path)
    assert "train_shard" in default
    assert "reference_mmd_table" not in default and "gather_pool" not in default
    assert "predict_reference" not in default and "reference_findings" not in default
    asked = planned(tmp_path, "reference_all")
    assert "reference_mmd_table" in asked and "gather_pool" in asked
    assert "predict_reference" in asked and "reference_findings" in asked
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(reference_config(enabled=True)))
    assert "reference_mmd_table" in planned(tmp_path)


def test_reference_chains_and_diagnostics_end_to_end(tmp_path):
    # Deep Ensembles only (members of the pool, nothing fitted): one method's row vs HMC
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(reference_config(methods=("de",))))
    results = tmp_path / "results" / "tiny"
    # what `make run-hmc` asks for, then its report
    run_snakemake(tmp_path, "reference_all")
    run_snakemake(tmp_path, "--report", "report.html", "reference_all")
    store = open_store(results / "reference/hmc.zarr")
    pool = open_store(results / "modes/pool.zarr")
    assert store.digest is not None and store.validate() == []
    # the target store's layout: one array per state_dict entry, rows = kept samples
    assert store.state_names == pool.state_names and store.shapes == pool.shapes
    assert store.n_samples == CHAINS * DRAWS
    assert set(store.info_names) >= INFO
    assert store.info("chain").tolist() == np.repeat(np.arange(CHAINS), DRAWS).tolist()
    assert store.info("mode_index").tolist() == np.repeat(np.arange(CHAINS) % MODES, DRAWS).tolist()
    # chains start at pool networks (seeds disjoint from the target's 0, 1)
    assert set(store.info("mode_seed").tolist()) <= set(pool.info("seed").tolist())
    steps = store.info("step").reshape(CHAINS, DRAWS)
    assert (steps == np.arange(5, 5 + DRAWS)).all()
    probs = store.info("accept_prob")
    assert ((probs >= 0) & (probs <= 1)).all() and np.isfinite(store.info("energy_error")).all()
    assert store.info("accepted").any()

    chains = pl.read_parquet(results / "reference/chains.parquet")
    assert chains["chain"].to_list() == list(range(CHAINS))
    rate = store.info("accepted").reshape(CHAINS, DRAWS).mean(axis=1)
    assert np.allclose(chains["acceptance_rate"].to_numpy(), rate)
    table = pl.read_parquet(results / "reference/diagnostics.parquet")
    assert set(table["quantity"]) == {
        "raw weights",
        "canonical weights",
        "test log-likelihood",
        "predictive probability",
    }
    assert set(table["scope"]) == {"all chains", "within modes"}
    assert (table["rhat_median"].drop_nans() >= 0.5).all()
    page = (results / "report/reference_diagnostics.md").read_text()
    assert "canonical weights" in page and "acceptance_rate" in page
    # the paper's target (its 2 networks) measured against every reference sample
    mmd = pl.read_parquet(results / "reference/mmd/target/summary.parquet")
    assert mmd["n_target"].to_list() == [CHAINS * DRAWS] and mmd["n_samples"].to_list() == [2]
    assert (mmd["mmd"] >= 0).all() and (mmd["ns_mmd"] >= 0).all()

    # Izmailov et al.'s agreement and total variation vs HMC, of the target and of each unit
    units = pl.read_parquet(results / "reference/predictive.parquet")
    assert units["compared"].to_list()[0] == "target" and "de" in units["compared"].to_list()
    for column in ("agreement", "tv", "agreement_target", "tv_target"):
        values = units[column].drop_nulls().to_numpy()
        assert len(values) and ((values >= 0) & (values <= 1)).all(), column
    # the target's agreement with HMC cannot be 0 with two sane predictives on 200 digits
    assert units["agreement"][0] > 0 and units["n_samples"][0] == 2
    per_chain = pl.read_parquet(results / "reference/predictive_chains.parquet")
    assert per_chain["chain"].to_list() == list(range(CHAINS))
    assert ((per_chain["tv_rest"] >= 0) & (per_chain["tv_rest"] <= 1)).all()
    # decided by the verdicts' tests: 4 chains and 1 Deep Ensemble replicate cannot reach the
    # level, so both read "within noise", with that reason
    findings = pl.read_parquet(results / "reference/findings.parquet")
    assert findings["compared"].to_list() == ["target", "de"]
    assert findings["verdict"].to_list() == ["within noise", "within noise"]
    assert all("cannot reach p < 0.05" in text for text in findings["figures"].to_list())
    # Table 1's uncertainty metrics of HMC: all chains as one posterior, then chain by chain
    metrics = pl.read_parquet(results / "reference/metrics.parquet")
    assert metrics["scope"].to_list() == ["all chains"] + ["one chain"] * CHAINS
    assert metrics["n_samples"].to_list() == [CHAINS * DRAWS] + [DRAWS] * CHAINS
    assert ((metrics["accuracy"] >= 0) & (metrics["accuracy"] <= 1)).all()
    assert (metrics["nll"] > 0).all()
    for page in ("chains", "diagnostics", "mmd", "predictive", "metrics", "findings"):
        assert "<table" in (results / f"report/reference_{page}.html").read_text(), page
    side = (results / "report/reference_diagnostics.html").read_text()
    assert "rhat_median raw" in side and "rhat_median canonical" in side
    assert (tmp_path / "report.html").stat().st_size > 0

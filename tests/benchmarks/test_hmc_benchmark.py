"""benchmarks/hmc.py cannot break unseen: at its quick size it samples the batched chains and
their loop, pyro-ppl's HMC where pyro is installed (a line saying why not where it is not),
and the prior-started chains against the pool-started ones, printing its tables with finite,
positive figures and writing nothing into the docs."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import hmc  # noqa: E402

PYRO = importlib.util.find_spec("pyro") is not None


@pytest.mark.slow
def test_the_quick_benchmark_prints_its_tables_with_finite_figures(tmp_path, capsys):
    doc = REPO / "docs" / "benchmarks.md"
    before = doc.read_text() if doc.exists() else None
    threads = torch.get_num_threads()
    out = tmp_path / "hmc.json"
    assert hmc.main(["--quick", "--settle", "0", "--threads", "1", "--json", str(out)]) == 0
    assert torch.get_num_threads() == threads  # at_threads put the count back
    assert (doc.read_text() if doc.exists() else None) == before  # quick: nothing written
    printed = capsys.readouterr().out
    assert "| sampler | threads | chains | wall s |" in printed
    assert "| comparison | samples | samples | MMD^2 median | p-value |" in printed
    assert "Verdict: " in printed

    result = json.loads(out.read_text())
    rows = result["samplers"]
    labels = [r["sampler"] for r in rows]
    assert labels[:2] == ["symbnn batched", "symbnn loop"]
    sizes = hmc.QUICK
    batched, loop = rows[0], rows[1]
    assert batched["chains"] == sizes.chains and loop["chains"] == sizes.loop_chains
    assert loop["identical"] is True  # the loop's chain is the batch's, bit for bit
    for r in rows:
        assert r["threads"] == 1, r
        assert r["wall"] > 0 and r["gradients"] > 0, r
        assert math.isfinite(r["gradients_per_s"]) and r["gradients_per_s"] > 0, r
        assert math.isfinite(r["ess_per_s"]) and r["ess_per_s"] >= 0, r
        assert 0 <= r["acceptance"] <= 1 and r["step_size"] > 0, r
    # a chain makes its iterations' gradients alone or in the batch; in the batch the step
    # size search runs until its last chain is done
    least = (sizes.burn_in + sizes.draws) * sizes.leapfrog_steps
    assert loop["gradients"] > least * sizes.loop_chains
    assert batched["gradients"] >= loop["gradients"] * sizes.chains // sizes.loop_chains
    if PYRO:
        assert len(rows) == 3 and labels[2].startswith("pyro-ppl 1.9.2 HMC")
        peer = rows[2]
        # burn-in and draws of the given leapfrog steps, plus the start's gradient
        assert peer["gradients"] == (sizes.burn_in + sizes.draws) * sizes.leapfrog_steps + 1
        assert peer["potential_rel_diff"] < 1e-5  # the same posterior as symbnn's
        assert peer["step_size"] > 0
    else:
        assert len(rows) == 2
        assert result["peer_note"].startswith("pyro-ppl: not installed here")

    comparisons = result["pool_vs_prior"]
    assert comparisons[0]["comparison"] == "pool start vs prior start"
    assert comparisons[1]["comparison"].startswith("control: pool modes")
    assert comparisons[0]["n"] == sizes.chains * sizes.draws
    assert comparisons[0]["m"] == sizes.prior_chains * sizes.prior_draws
    for c in comparisons:
        assert math.isfinite(c["mmd_median"]) and 0 < c["p_value"] <= 1, c
    for side in ("pool", "prior"):
        fit = result["fits"][side]
        assert math.isfinite(fit["loglik"]) and fit["loglik"] < 0, fit
        assert 0 <= fit["accuracy"] <= 1, fit


def test_sizes_are_checked():
    with pytest.raises(SystemExit):
        hmc.parse_args(["--size", "draws=x"])
    with pytest.raises(SystemExit):
        hmc.parse_args(["--size", "nonsense=3"])
    with pytest.raises(SystemExit):
        hmc.parse_args(["--quick", "--size", "loop_chains=5"])
    args = hmc.parse_args(["--quick", "--size", "draws=12"])
    assert args.sizes.draws == 12 and args.sizes.chains == hmc.QUICK.chains
    assert hmc.parse_args([]).sizes == hmc.FULL

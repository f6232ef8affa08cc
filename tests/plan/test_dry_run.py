"""The workflow plans what the planning library says, and planning imports no torch: a dry
run of the tiny workflow in a fresh folder, in a Python process of its own."""

import re
import subprocess
import sys
from collections import Counter

import pytest
import yaml
from conftest import REPO, tiny_workflow_config

from symbnn.plan import jobs
from symbnn.settings import config_from_mapping

pytestmark = pytest.mark.slow

PROBE = """\
import atexit, runpy, sys
atexit.register(lambda: print("torch imported:", "torch" in sys.modules, file=sys.stderr))
sys.argv = ["snakemake", *sys.argv[1:]]
runpy.run_module("snakemake", run_name="__main__")
"""


def planned_jobs(output):
    """{rule: count} of the dry run's job table."""
    table = output[output.index("Job stats:") :].split("total")[0]
    return Counter({rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)})


def test_a_dry_run_plans_the_jobs_of_the_plan_without_torch(tmp_path):
    mapping = tiny_workflow_config()
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False))
    args = ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--cores", "1", "-n"],
        capture_output=True,
        text=True,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "torch imported: False" in output, output[-3000:]
    counts = planned_jobs(output)
    config = config_from_mapping(mapping)
    variants = jobs.method_variants(config, "tiny")
    methods = {method for method, _ in variants}
    assert counts["train_shard"] == len(jobs.shard_ids(config, "tiny"))
    assert counts["train_pool_shard"] == len(jobs.pool_posterior(config, "tiny").shard_ids())
    assert counts["fit"] == sum(len(jobs.fit_blocks(config, "tiny", m)) for m in methods)
    for rule in ("sample", "predict", "metrics", "mmd_method"):
        assert counts[rule] == len(variants), rule
    assert not (tmp_path / "results").exists()


def test_the_planning_library_imports_no_torch():
    code = (
        "import sys, symbnn.plan.jobs, symbnn.plan.kept, symbnn.plan.params, "
        "symbnn.plan.paths, symbnn.plan.resources; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stdout + result.stderr

"""`symbnn why` on a finished tiny run with two methods: up to date it has nothing to run; after
one edit of the rerun table (tests/workflow/test_workflow.py, `RERUNS`) it gives one line per
job the table expects, each naming the setting old -> new or the input rebuilt first, and
"missing output" for an output removed. One tiny run and two planning runs."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import TINY_SAMPLING, TINY_SETTINGS, run_snakemake, tiny_experiment, workflow_config

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def rerun_table():
    """tests/workflow/test_workflow.py's `RERUNS`: config edits and the rules they rerun."""
    path = REPO / "tests" / "workflow" / "test_workflow.py"
    spec = importlib.util.spec_from_file_location("rerun_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RERUNS


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """The tiny experiment with two methods (dropout, whose rate the edit changes, and
    laplace, which must be left alone), no further analyses."""
    tiny = tiny_experiment(n_samples=2)
    methods = {name: TINY_SETTINGS[name] for name in ("dropout", "laplace")}
    tiny["methods"] = {**TINY_SAMPLING, **methods}
    workdir = tmp_path_factory.mktemp("why")
    (workdir / "config.yaml").write_text(yaml.safe_dump(workflow_config({"tiny": tiny})))
    run_snakemake(workdir)
    return workdir


def why(workdir, *args):
    command = [sys.executable, "-m", "symbnn.cli", "why", "--snakefile", str(REPO / "Snakefile")]
    result = subprocess.run(
        [*command, *args], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_an_up_to_date_run_has_nothing_to_run(finished_run):
    assert why(finished_run) == ["nothing to run: every output is up to date"]


def test_a_method_setting_names_its_jobs_and_the_value(finished_run, tmp_path):
    edit, expected, _, word = rerun_table()["dropout rate"]
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    removed = workdir / "results" / "tiny" / "report" / "symmetry_counts.md"
    removed.unlink()

    *lines, count = why(workdir)
    assert count == f"{len(lines)} job(s) to run"
    by_rule = {}
    for line in lines:
        rule, _, rest = line.partition(" ")
        by_rule.setdefault(rule, []).append(rest)
    assert set(by_rule) == expected | {"symmetry_counts"}, lines
    # one of its outputs removed: that one named
    (counts,) = by_rule["symmetry_counts"]
    assert counts.endswith(": missing output results/tiny/report/symmetry_counts.md"), counts
    for rule, rests in by_rule.items():
        if rule not in ("method_tables", "symmetry_counts"):
            # this method's jobs only, every one
            assert all(word in rest.partition(":")[0] for rest in rests), rests
            assert "/laplace/" not in " ".join(rests)
    # the jobs whose params hold the rate name it, old -> new; what reads their outputs says so
    for rule in ("fit", "sample"):
        assert all("settings.rate 0.2 -> 0.3" in rest for rest in by_rule[rule]), by_rule[rule]
    assert all(
        "input rebuilt first: results/tiny/methods/dropout/" in rest
        for rest in by_rule["predict"] + by_rule["metrics"]
    )

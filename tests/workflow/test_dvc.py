"""Results under DVC (docs/dvc.md), end to end in a temporary git repository.

A copy of the workflow with a tiny two-experiment config is run once; its results are pushed to
the default local remote (a folder beside the checkout), pulled into fresh clones with the
documented make targets, and round-tripped through an S3-compatible server (moto) on 127.0.0.1.
The dry-run tests check that Snakemake's params trigger reruns exactly one experiment's chain.
"""

import copy
import filecmp
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import (
    NO_ANALYSES,
    TINY_ANALYSES,
    plan_in_process,
    stop_process,
    tiny_experiment,
    workflow_config,
)
from dvc_repos import DVC_ENV, sh

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
pytestmark = pytest.mark.slow

# What a clone of the project holds that the workflow and DVC need (the library is imported
# from the test environment; src/symbnn is copied because dvc.yaml records it as a dependency).
PROJECT_FILES = [
    "Snakefile",
    "rules",
    "workflow_scripts",
    "report",
    "profiles",
    "envs",
    "src/symbnn",
    "dvc.yaml",
    "dvc.mk",
    ".dvcignore",
    ".dvc/config",
    ".dvc/.gitignore",
    ".gitignore",
]
EXPERIMENTS = ("tiny-a", "tiny-b")


def tiny_config():
    tiny = tiny_experiment(n_samples=2)  # too few networks for the Deep Ensembles check
    other = copy.deepcopy(tiny)
    other["recipe"]["lr"] = 0.02
    # the analyses stage of dvc.yaml versions results/analyses: build it, small (one analysis
    # is enough for the bookkeeping; tests/workflow/test_workflow.py runs them all)
    analyses = {**NO_ANALYSES, "toy": TINY_ANALYSES["toy"]}
    return workflow_config({"tiny-a": tiny, "tiny-b": other}, analyses)


def snakemake(cwd, *args, **kw):
    return sh(cwd, PY, "-m", "snakemake", "--cores", "2", *args, **kw)


def plan(cwd, *args):
    """A planning-only `snakemake ARGS` (dry run, summary) in `cwd`, in this process."""
    return plan_in_process(cwd, *args, snakefile=cwd / "Snakefile", env=DVC_ENV)


def dvc(cwd, *args, **kw):
    return sh(cwd, PY, "-m", "dvc", *args, **kw)


def make(cwd, target, *args, **kw):
    """A dvc.mk target, as documented, with this interpreter's venv (no .venv in the copy)."""
    return sh(
        cwd,
        "make",
        "--no-print-directory",
        "-f",
        "dvc.mk",
        target,
        f"DVC_PY={PY}",
        "DVC_STAMP=",
        *args,
        **kw,
    )


def out(result):
    return result.stdout + result.stderr


def planned_jobs(cwd, *args):
    """(rule, output file) of every output Snakemake plans to (re)create, from `--summary`."""
    summary = plan(cwd, "--summary", *args).stdout
    rows = [line.split("\t") for line in summary.splitlines()]
    header = rows[0]
    rule, status = header.index("rule"), header.index("plan")
    return sorted(
        (row[rule], row[0])
        for row in rows[1:]
        if len(row) == len(header) and row[status] == "update pending"
    )


def edit_config(cwd, edit):
    config = yaml.safe_load((cwd / "config.yaml").read_text())
    edit(config)
    (cwd / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def tree_files(root):
    """Files DVC versions under an experiment's folder (logs and benchmarks included; not
    Snakemake's mtime carriers)."""
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and p.name != ".snakemake_timestamp"
    )


def assert_identical(a, b):
    files = tree_files(a)
    assert files and files == tree_files(b)
    _, mismatch, errors = filecmp.cmpfiles(a, b, [str(f) for f in files], shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


def stores(root):
    return sorted(p for p in root.rglob("*.zarr") if p.is_dir())


def clone(origin, name):
    target = origin.parent / name
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    sh(origin.parent, "git", "clone", "-q", origin, target)
    return target


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """The machine that ran the workflow: results computed, pushed, dvc.lock committed.

    Only tiny-a is trained; tiny-b's results are a copy of tiny-a's, adopted with
    `snakemake --touch` (what `make adopt` runs). These tests check bookkeeping (what DVC moves,
    what Snakemake plans), not training, and this halves the time they take."""
    root = tmp_path_factory.mktemp("dvc") / "origin"
    for name in PROJECT_FILES:
        source, target = REPO / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    (root / "config.yaml").write_text(yaml.safe_dump(tiny_config(), sort_keys=False))
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "workflow")
    snakemake(root, "--config", 'run=["tiny-a"]')
    shutil.copytree(root / "results" / "tiny-a", root / "results" / "tiny-b")
    snakemake(root, "--touch", "--forceall", "--config", 'run=["tiny-b"]')
    push = make(root, "push")
    assert "dvc.lock changed" in out(push)
    sh(root, "git", "add", "dvc.lock")
    sh(root, "git", "commit", "-qm", "results")
    return root


@pytest.fixture(scope="module")
def pulled(origin):
    """A fresh clone beside the origin after `make pull` (default remote, nothing configured)."""
    target = clone(origin, "clone")
    PULL_OUTPUT[target] = out(make(target, "pull"))
    return target


PULL_OUTPUT = {}  # what `make pull` printed, by clone


def test_default_remote_is_a_folder_beside_the_checkout(origin):
    assert (origin.parent / "symbnn-dvc-remote" / "files" / "md5").is_dir()
    tracked = sh(origin, "git", "ls-files").stdout.split()
    assert "dvc.lock" in tracked and not any(path.startswith("results/") for path in tracked)


def test_fresh_clone_after_pull_has_nothing_to_do(pulled):
    assert "Nothing to be done" in out(plan(pulled, "--dry-run"))
    assert "up to date" in out(dvc(pulled, "status"))
    # a summary, not a line per file
    printed = PULL_OUTPUT[pulled]
    assert "pull: snakemake -n has nothing to do" in printed, printed
    assert len(printed.splitlines()) < 10, printed


def test_pulled_results_are_byte_identical(origin, pulled):
    for experiment in EXPERIMENTS:
        assert_identical(origin / "results" / experiment, pulled / "results" / experiment)
    assert [p.relative_to(pulled) for p in stores(pulled / "results")] == [
        p.relative_to(origin) for p in stores(origin / "results")
    ]
    # shard 000, the target and its predictions (for functional collapse)
    assert [p.name for p in stores(pulled / "results" / "tiny-a" / "posterior")] == [
        "predictions.zarr",
        "000.zarr",
        "target.zarr",
    ]
    # per-job logs and timings travel with the results
    benchmark = pulled / "results" / "tiny-a" / "benchmarks" / "train_shard" / "000.tsv"
    assert float(benchmark.read_text().splitlines()[1].split("\t")[0]) > 0
    assert (pulled / "results" / "tiny-a" / "logs" / "train_shard" / "000.log").is_file()


@pytest.fixture(scope="module")
def plain_pulled(origin):
    """A fresh clone after DVC's own `dvc pull`, as a user types it (no make)."""
    target = clone(origin, "clone-plain")
    dvc(target, "pull")  # as docs/dvc.md types it
    return target


def test_plain_dvc_pull_then_snakemake_plans_nothing(plain_pulled):
    first = out(plan(plain_pulled, "--dry-run"))
    assert "Nothing to be done" in first
    # the Snakefile adopted the restored folders once, saying so
    assert "results/tiny-a, results/tiny-b, results/analyses as dvc.lock records them" in first
    again = out(plan(plain_pulled, "--dry-run"))
    assert "Nothing to be done" in again and "dvc.lock records them" not in again
    assert "up to date" in out(dvc(plain_pulled, "status"))


def test_pulled_clone_report_shows_real_runtimes(plain_pulled):
    """Snakemake's provenance records travel with the results: the report built on a clone
    shows each job's real run time, and the origin's report is pulled too."""
    assert "<html" in (plain_pulled / "results" / "report.html").read_text()[:2000].lower()
    snakemake(plain_pulled, "--report", "rebuilt.html")
    html = (plain_pulled / "rebuilt.html").read_text()
    runtimes = {}  # the longest job of each rule (tiny-b's results were only touched)
    for rule, seconds in re.findall(r'"rule": ?"(\w+)", ?"runtime": ?([0-9.e+-]+)', html):
        runtimes[rule] = max(runtimes.get(rule, 0.0), float(seconds))
    assert runtimes.get("train_shard", 0) > 0.5, runtimes


def test_pull_from_an_unreachable_remote_names_it(origin):
    target = clone(origin, "clone-unreachable")
    missing = origin.parent / "no-such-remote"
    result = make(target, "pull", f"DVC_REMOTE={missing}", check=False)
    assert result.returncode != 0
    assert f"the DVC remote 'results' at {missing} (no such folder)" in out(result)
    assert "make push uploads them" in out(result) and "make dvc-remote" in out(result)


@pytest.fixture(scope="module")
def chain(origin):
    """Every output of the DAG by experiment: {experiment: [(rule, path), ...]}."""
    everything = planned_jobs(origin, "--forceall")
    return {
        e: [job for job in everything if job[1].startswith(f"results/{e}/")] for e in EXPERIMENTS
    }


def test_editing_one_experiment_reruns_its_chain_only(origin, chain):
    """On the machine that ran it: Snakemake's params trigger; DVC plays no part."""
    assert {rule for rule, _ in chain["tiny-a"]} >= {
        "train_shard",
        "gather_posterior",
        "posterior_tables",
    }
    try:
        edit_config(origin, lambda c: c["experiments"]["tiny-a"]["recipe"].update(lr=0.07))
        assert planned_jobs(origin) == chain["tiny-a"]
        edit_config(
            origin, lambda c: c["experiments"]["tiny-b"]["posterior"].update(min_accuracy=0.1)
        )
        # tiny-b's convergence flags and what reads them; no training, no symmetry removal
        planned_b = [job for job in planned_jobs(origin) if job[1].startswith("results/tiny-b/")]
        rules_b = {rule for rule, _ in planned_b}
        assert set(planned_b) <= set(chain["tiny-b"]) and "convergence" in rules_b
        untouched = {"train_shard", "gather_posterior", "canonicalize", "minmass", "predict_target"}
        # (permutation_frequency may rerun: it leaves out runs below min_accuracy)
        assert not rules_b & untouched, rules_b
    finally:
        sh(origin, "git", "checkout", "config.yaml")


def test_editing_a_downstream_setting_never_retrains(origin):
    """A stage's own settings rerun that stage and what follows it, in that experiment only."""
    setting, rule = ("symmetry", "scale"), "canonicalize"
    if setting[0] not in tiny_config()["experiments"]["tiny-a"]:
        pytest.skip(f"no {setting[0]} settings in config.yaml yet")
    expected = [
        job
        for job in planned_jobs(origin, "--forcerun", rule)
        if job[1].startswith("results/tiny-a/")
    ]
    assert expected and not {"train_shard", "gather_posterior"} & {r for r, _ in expected}
    try:

        def toggle(config):
            section = config["experiments"]["tiny-a"][setting[0]]
            section[setting[1]] = "unitnorm" if section.get(setting[1]) == "unitstd" else "unitstd"

        edit_config(origin, toggle)
        assert planned_jobs(origin) == expected
    finally:
        sh(origin, "git", "checkout", "config.yaml")


def test_editing_what_does_not_change_results_reruns_nothing(origin):
    try:
        edit_config(origin, lambda c: c["experiments"]["tiny-a"]["compute"].update(runtime_min=31))
        edit_config(origin, lambda c: c["experiments"]["tiny-b"].update(description="renamed"))
        assert planned_jobs(origin) == []
    finally:
        sh(origin, "git", "checkout", "config.yaml")


def test_reordering_config_keys_reruns_nothing(origin):
    try:
        config = yaml.safe_load((origin / "config.yaml").read_text())
        (origin / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True))
        assert planned_jobs(origin) == []
    finally:
        sh(origin, "git", "checkout", "config.yaml")


def test_editing_one_experiment_on_a_clone_reruns_its_chain(pulled, chain):
    """`make pull` recorded Snakemake's provenance, so a clone sees edits as the origin does."""
    try:
        edit_config(pulled, lambda c: c["experiments"]["tiny-b"]["recipe"].update(epochs=3))
        assert planned_jobs(pulled) == chain["tiny-b"]
        result = make(
            pulled, "adopt", check=False
        )  # and adopting results of other settings is refused
        assert result.returncode != 0
        assert "experiments.tiny-b" in out(result) and "refusing" in out(result)
    finally:
        sh(pulled, "git", "checkout", "config.yaml")


def test_push_refuses_when_the_workflow_is_not_finished(origin):
    try:
        edit_config(origin, lambda c: c["experiments"]["tiny-b"]["recipe"].update(lr=0.03))
        result = make(origin, "push", check=False)
        assert result.returncode != 0 and "jobs left to run" in out(result)
    finally:
        sh(origin, "git", "checkout", "config.yaml")
    assert sh(origin, "git", "status", "--porcelain").stdout == ""


def test_a_finished_run_is_recorded_so_plain_dvc_push_uploads_it(origin):
    """`make run` ends with `make record`: once Snakemake has nothing left to do, dvc.lock
    records the results, so DVC's own `dvc status -c` and `dvc push` see them (before, dvc.lock
    waited for `make push`, and a plain push said "Everything is up to date")."""
    target = clone(origin, "clone-record")
    make(target, "pull")
    edit_config(target, lambda c: c["experiments"]["tiny-a"]["symmetry"].update(key="max"))
    pending = make(target, "record")
    assert "jobs left to run" in out(pending) and "dvc.lock left as it was" in out(pending)
    assert sh(target, "git", "status", "--porcelain", "dvc.lock").stdout == ""
    snakemake(target)
    recorded = make(target, "record")
    assert "record: dvc.lock records the results" in out(recorded), out(recorded)
    assert sh(target, "git", "status", "--porcelain", "dvc.lock").stdout.strip()
    missing = out(dvc(target, "status", "--cloud"))
    assert "new:" in missing and "results/tiny-a" in missing, missing
    pushed = out(dvc(target, "push"))
    assert "Everything is up to date" not in pushed and re.search(r"\d+ files? pushed", pushed)
    assert "in sync" in out(dvc(target, "status", "--cloud"))


def test_pull_one_experiments_checkpoints(origin):
    target = clone(origin, "clone-one")
    make(target, "pull-experiment", "EXP=tiny-a")
    results = target / "results"
    assert_identical(origin / "results/tiny-a/posterior", results / "tiny-a/posterior")
    assert not (results / "tiny-a" / "report").exists() and not (results / "tiny-b").exists()
    # The checkpoints are adopted: what is left to compute is downstream of them, never them.
    left = planned_jobs(target, "--config", 'run=["tiny-a"]')
    assert left and "posterior_tables" in {rule for rule, _ in left}
    assert not any(path.startswith("results/tiny-a/posterior/") for _, path in left)
    verified = out(make(target, "verify", "EXP=tiny-a"))
    # the checkpoint folders' stores: canonical target, target predictions, shard, target
    for store in (
        "canonical/target",
        "posterior/predictions",
        "posterior/shards/000",
        "posterior/target",
    ):
        assert f"OK: results/tiny-a/{store}.zarr" in verified
    assert "verify: 4 store(s) OK" in verified
    # the rest of the folder was left out on purpose: said, and no failure (make checked it)
    assert re.search(
        r"verify: \d+ file\(s\) under results/tiny-a were left out on purpose", verified
    )
    # a plain `make verify` (all the results) fails on what is not pulled, saying what to do
    whole = make(target, "verify", check=False)
    assert whole.returncode != 0, out(whole)
    assert "make pull or dvc pull downloads them; make run recomputes them" in out(whole)
    assert "make verify EXP=tiny-a checks what it pulled" in out(whole)
    # a file missing from what was pulled fails the experiment's verify
    log = target / "results/tiny-a/logs/train_shard/000.log"
    kept = log.read_bytes()
    log.unlink()
    try:
        missing = make(target, "verify", "EXP=tiny-a", check=False)
        assert missing.returncode != 0, out(missing)
        assert "results/tiny-a/logs/train_shard/000.log" in out(missing)
        assert "1 missing file(s)" in out(missing)
    finally:
        log.write_bytes(kept)


def test_truncated_or_missing_chunk_is_detected(pulled):
    store = pulled / "results" / "tiny-a" / "posterior" / "target.zarr"
    chunk = next(
        p for p in sorted((store / "state").rglob("*")) if p.is_file() and p.name != "zarr.json"
    )
    array = chunk.relative_to(store / "state").parts[0]
    original = chunk.read_bytes()
    try:
        chunk.write_bytes(original[: len(original) // 2])
        assert re.search(r"modified:\s+results/tiny-a", out(dvc(pulled, "status")))
        verify = make(pulled, "verify", check=False)
        assert verify.returncode != 0, out(verify)
        assert f"modified: {chunk.relative_to(pulled)}" in out(verify)
        assert f"INVALID: {store.relative_to(pulled)}: cannot read state/{array}" in out(verify)

        chunk.unlink()  # a missing chunk reads back as zeros; DVC's record of the store catches it
        verify = make(pulled, "verify", "EXP=tiny-a", check=False)
        assert verify.returncode != 0 and f"deleted: {chunk.relative_to(pulled)}" in out(verify)
    finally:
        dvc(pulled, "checkout", "--force", "--quiet")
    assert chunk.read_bytes() == original


def test_corrupted_object_on_the_remote_fails_the_pull(origin):
    remote = origin.parent / "remote-corrupt"
    shutil.rmtree(remote, ignore_errors=True)
    shutil.copytree(origin.parent / "symbnn-dvc-remote", remote)
    chunk = next(
        p
        for p in sorted((origin / "results/tiny-b/posterior/target.zarr/state").rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    )
    md5 = hashlib.md5(chunk.read_bytes()).hexdigest()
    obj = remote / "files" / "md5" / md5[:2] / md5[2:]
    obj.write_bytes(obj.read_bytes()[:10])
    target = clone(origin, "clone-corrupt")
    result = make(target, "pull", f"DVC_REMOTE={remote}", check=False)
    assert result.returncode != 0 and "results/tiny-b" in out(result)
    landed = target / chunk.relative_to(origin)
    assert not landed.exists() or landed.read_bytes() == chunk.read_bytes()


# --- S3-compatible remote: moto's server in its own virtualenv (its botocore pin conflicts with
# dvc-s3's), built once under the temp folder and reused.

MOTO_VENV = Path(
    os.environ.get(
        "SYMBNN_MOTO_VENV", Path(tempfile.gettempdir()) / "symbnn-test-cache" / "moto-venv"
    )
)


def moto_server_bin():
    binary = MOTO_VENV / "bin" / "moto_server"
    ready = MOTO_VENV / ".ready"
    if ready.exists() and binary.exists():
        return binary
    import fcntl

    MOTO_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(MOTO_VENV.parent / "moto-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists() and binary.exists():
            return binary
        shutil.rmtree(MOTO_VENV, ignore_errors=True)
        steps = [
            [PY, "-m", "venv", MOTO_VENV],
            [
                MOTO_VENV / "bin" / "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "moto[server]",
            ],
        ]
        for step in steps:
            try:
                result = subprocess.run(
                    [str(s) for s in step], capture_output=True, text=True, timeout=600
                )
            except subprocess.TimeoutExpired:
                pytest.skip("moto[server] could not be installed: pip timed out after 600 s")
            if result.returncode != 0:
                pytest.skip(
                    f"moto[server] could not be installed ({' '.join(map(str, step[:3]))}): "
                    f"{(result.stderr or result.stdout).strip()[-500:]}"
                )
        ready.touch()
    return binary


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server on 127.0.0.1 with a bucket `symbnn`; its endpoint URL. Module-scoped and
    requested before `origin`, so that a skip costs no workflow run."""
    if importlib.util.find_spec("dvc_s3") is None:
        pytest.skip(
            "dvc-s3 is not installed in this environment: DVC cannot talk to S3 (pip install dvc-s3)"
        )
    binary = moto_server_bin()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "w") as handle:
        server = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", "0"], stdout=handle, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while not (match := re.search(r"Running on http://127\.0\.0\.1:(\d+)", log.read_text())):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto server did not start:\n{log.read_text()}")
            time.sleep(0.2)
        endpoint = f"http://127.0.0.1:{match[1]}"
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint}/symbnn", method="PUT"), timeout=30
        )
        yield endpoint
    finally:
        stop_process(server, 10)


def test_s3_round_trip(s3_server, origin):
    env = {
        **DVC_ENV,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    url = "s3://symbnn/dvc-remote"
    # What `dvc remote add --local [--force] NAME URL` + `dvc remote modify --local NAME
    # endpointurl URL` write (docs/dvc.md), written directly to spare two DVC start-ups each.
    local_config = f"['remote \"{{}}\"']\n    url = {url}\n    endpointurl = {s3_server}\n"
    try:
        # Push from the origin to a second remote; the clone uses it as its `results` remote.
        (origin / ".dvc" / "config.local").write_text(local_config.format("s3"))
        dvc(origin, "push", "-r", "s3", env=env)
    finally:
        (origin / ".dvc" / "config.local").unlink(missing_ok=True)
    # One level deeper than the origin, so the default remote (../symbnn-dvc-remote) is absent
    # and only the S3 remote can serve the pull.
    target = clone(origin, "s3/clone")
    assert not (target.parent / "symbnn-dvc-remote").exists()
    (target / ".dvc" / "config.local").write_text(local_config.format("results"))
    make(target, "pull", env=env)
    assert "Nothing to be done" in out(plan(target, "--dry-run"))
    for experiment in EXPERIMENTS:
        assert_identical(origin / "results" / experiment, target / "results" / experiment)

"""Every command in README.md and docs/*.md is executed, so the documentation cannot drift
from the code: each documented line must match one of the runners below (a new kind of
command fails `test_every_documented_command_has_a_runner` until it gets one), and runs as
typed or, where running it in full is impossible here (a Slurm submission, a download, an
upload), in its dry-run form. The job counts docs/slurm.md quotes are the ones the dry runs
plan. Commands that read a finished run's results run in tests/workflow/test_workflow.py, on its
results (`result_commands`)."""

import contextlib
import functools
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import user_shell_env
from documented_commands import (
    COMMANDS,
    result_commands,
    run,
    runner_of,
)

REPO = Path(__file__).resolve().parents[2]
FULL = ("mnist-optunet", "cifar100-resnet18", "tinyimagenet-resnet18", "cifar10-resnet20")


def commands_of(kind):
    return [
        pytest.param(command, id=f"{where} {command[:60]}")
        for where, command in COMMANDS
        if runner_of(command) == kind
    ]


def test_every_documented_command_has_a_runner():
    assert len(COMMANDS) > 30  # the parser found the blocks
    unknown = [f"{where}: {command}" for where, command in COMMANDS if runner_of(command) is None]
    assert not unknown, "documented commands no test runs:\n" + "\n".join(unknown)


def symbnn_help(path):
    from symbnn.cli import build_parser

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        build_parser().parse_args([*path, "--help"])
    return text.getvalue()


@pytest.mark.parametrize("command", commands_of("synopsis"))
def test_synopsis_names_real_commands_and_options(command):
    """e.g. `symbnn store info|validate PATH`: both sub-commands exist; `symbnn config check
    [PATH] [--resolved] | schema`: check takes --resolved, schema exists."""
    words = command.split()[1:]
    path = []  # the sub-command words, each a list of alternatives (info|validate)
    for word in words:
        if not re.fullmatch(r"[a-z]+(\|[a-z]+)*", word):
            break
        path.append(word.split("|"))
    if "|" in words:  # `... | schema`: an alternative to the last sub-command word
        path[-1].append(words[words.index("|") + 1])
    paths = [[]]
    for choices in path:
        paths = [[*p, c] for p in paths for c in choices]
    helps = [symbnn_help(p) for p in paths]
    for option in re.findall(r"--[a-z][a-z-]*", command):
        assert any(option in text for text in helps), (option, paths)


@pytest.mark.parametrize("command", commands_of("config"))
@pytest.mark.slow
def test_documented_config_command_runs(command):
    """`symbnn config check --resolved` and `symbnn config schema` on the repository's
    config.yaml, as typed from the repository root."""
    argv = [sys.executable, "-m", "symbnn.cli", *shlex.split(command)[1:]]
    result = run(argv)
    assert result.returncode == 0, result.stdout[-1000:] + result.stderr[-1000:]
    assert result.stdout.strip()


def snakemake_argv(words, workdir):
    """The documented Snakemake command (its words) with this interpreter, run from the
    repository root (where `--profile slurm` is looked up) on a folder of its own, always as
    a dry run."""
    argv = [sys.executable, "-m", "snakemake", *words[1:], "--directory", str(workdir)]
    return argv if "-n" in argv or "--dry-run" in argv else [*argv, "-n"]


@functools.cache
def dry_run(words):
    """The dry run of a documented Snakemake command (a tuple of its words), once per
    distinct command (some are documented twice), on the repository's config.yaml in a
    folder of its own."""
    workdir = Path(tempfile.mkdtemp(prefix="symbnn-docs-"))
    try:
        shutil.copy(REPO / "config.yaml", workdir / "config.yaml")
        return run(snakemake_argv(words, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def planned_total(output):
    match = re.search(r"^total\s+(\d+)$", output, re.M)
    assert match, output[-3000:]
    return int(match[1])


@pytest.mark.slow
@pytest.mark.parametrize("command", commands_of("snakemake"))
def test_documented_snakemake_command_plans(command):
    result = dry_run(tuple(shlex.split(command)))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    if "-n" in command.split() or "--dry-run" in command.split() or "run=" in command:
        assert planned_total(result.stdout) > 0


# docs/slurm.md's full-reproduction table: the rule counted by each numeric column
COUNTED = ("train_shard", "train_pool_shard", "fit", "total")


def quoted_job_counts():
    """{experiment: {rule: jobs}} from docs/slurm.md's full-reproduction table."""
    counts = {}
    for line in (REPO / "docs" / "slurm.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in FULL and len(cells) == 1 + len(COUNTED):
            counts[cells[0]] = dict(zip(COUNTED, map(int, cells[1:]), strict=True))
    return counts


def job_stats(output):
    """{rule: jobs} from Snakemake's "Job stats" table (with `total`)."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {name: int(n) for name, n in re.findall(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.slow
def test_job_counts_in_docs_are_what_the_dry_runs_plan():
    """docs/slurm.md quotes, for each full-reproduction experiment, the jobs that the
    documented `snakemake --profile slurm --config 'run=["NAME"]' download=True` plans."""
    planned = {}
    for name in FULL:
        words = (".venv/bin/snakemake", "--profile", "slurm", "--config", f'run=["{name}"]')
        result = dry_run((*words, "download=True"))
        assert result.returncode == 0, result.stderr[-2000:]
        stats = job_stats(result.stdout)
        planned[name] = {rule: stats.get(rule, 0) for rule in COUNTED}
    assert quoted_job_counts() == planned, f"docs/slurm.md should quote {planned}"


@pytest.mark.parametrize("command", commands_of("make"))
def test_documented_make_command_dry_runs(command):
    """`make -n`: the target exists and its recipe expands (nothing is executed)."""
    for part in command.split("&&"):
        argv = shlex.split(part)
        env = user_shell_env()  # as typed in a shell, whatever make ran the tests
        while "=" in argv[0]:  # VAR=value make ...
            key, value = argv.pop(0).split("=", 1)
            env[key] = value
        args = [a for a in argv[1:] if not a.startswith("[")]  # [EXP=NAME]: optional
        result = run(["make", "-n", "--no-print-directory", *args], env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "No rule to make target" not in result.stderr


@pytest.fixture
def dvc_checkout(tmp_path):
    """A git repository with the project's DVC configuration."""
    shutil.copytree(REPO / ".dvc", tmp_path / ".dvc", ignore=shutil.ignore_patterns("tmp", "cache"))
    (tmp_path / ".dvc" / "config.local").unlink(missing_ok=True)
    run(["git", "init", "-q"], cwd=tmp_path)
    return tmp_path


@pytest.mark.slow
def test_documented_dvc_remote_commands_configure_the_remote(dvc_checkout):
    """The S3 and SSH recipes, in their order: each writes .dvc/config.local."""
    for command in [param.values[0] for param in commands_of("dvc-remote")]:
        argv = shlex.split(command)
        argv = [sys.executable, "-m", "dvc", *argv[1:]]
        result = run([os.path.expanduser(a) for a in argv], cwd=dvc_checkout)
        assert result.returncode == 0, (command, result.stderr)
        local = (dvc_checkout / ".dvc" / "config.local").read_text()
        assert shlex.split(command)[-1] in local.replace(os.path.expanduser("~"), "~"), local


@pytest.mark.slow
@pytest.mark.parametrize("command", commands_of("dvc-pull"))
def test_documented_dvc_pull_runs(command, dvc_checkout):
    """As typed, in a checkout with nothing recorded yet; tests/workflow/test_dvc.py pulls real
    results with the same command (`plain_pulled`)."""
    (dvc_checkout / "dvc.yaml").write_text("stages: {}\n")
    result = run([sys.executable, "-m", "dvc", *shlex.split(command)[1:]], cwd=dvc_checkout)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", commands_of("dvc-push"))
def test_documented_dvc_push_runs(command, dvc_checkout):
    """As typed, in a checkout with nothing recorded yet; tests/workflow/test_dvc.py pushes the results
    a run recorded with the same command."""
    (dvc_checkout / "dvc.yaml").write_text("stages: {}\n")
    result = run([sys.executable, "-m", "dvc", *shlex.split(command)[1:]], cwd=dvc_checkout)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("command", commands_of("pip"))
def test_documented_pip_install_resolves(command):
    """`pip install --dry-run`: the package exists (needs the package index; skipped
    without it)."""
    name = command.split()[-1]
    result = run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", name])
    if result.returncode != 0 and re.search(r"connection|resolve|network", result.stderr, re.I):
        pytest.skip(f"no package index reachable: {result.stderr.strip()[-200:]}")
    assert result.returncode == 0, result.stderr
    installed = rf"Would install {name}-\d|Requirement already satisfied: {name} "
    assert re.search(installed, result.stdout), result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", commands_of("pytest"))
def test_documented_pytest_command_collects(command):
    argv = shlex.split(command)
    result = run([sys.executable, *argv[1:], "--collect-only"])
    assert result.returncode == 0, result.stdout[-2000:]
    assert re.search(r"\d+ tests? collected", result.stdout)


@pytest.mark.parametrize("command", commands_of("git"))
def test_documented_git_command(command, tmp_path):
    """`git clone URL symbnn`: a clone of this repository; `git add dvc.lock`: the file git
    is told to add is not ignored (make push writes it)."""
    if command.startswith("git clone"):
        target = tmp_path / "symbnn"
        argv = shlex.split(command.split("&&")[0].replace("URL", str(REPO)))
        result = run([*argv[:-1], str(target)], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert (target / "Snakefile").is_file() and (target / "dvc.yaml").is_file()
    else:
        for path in shlex.split(command.split("&&")[0])[2:]:
            ignored = run(["git", "check-ignore", "-q", path])
            assert ignored.returncode == 1, f"{path} is ignored by git"


def test_result_commands_are_few_and_known():
    """The commands tests/workflow/test_workflow.py runs on its results."""
    commands = result_commands()
    assert any(c.startswith(".venv/bin/symbnn store info results/") for c in commands)
    assert any(c.startswith("xdg-open results/report.html") for c in commands)


# Documented make commands run in full elsewhere, or not at all, and why; every other one runs
# in full here (test_documented_make_command_runs). test_documented_make_command_dry_runs checks
# that each target exists and its recipe expands.
RUN_ELSEWHERE = {
    "run": "hours of training: tests/workflow/test_workflow.py runs the workflow on a tiny config, "
    "and resumes a killed run on a terminal",
    "smoke": "tests/workflow/test_workflow.py runs it for its tiny workflow run",
    "test": "the whole suite, which this test is part of",
    "test-fast": "the unit tests, which this test is part of",
    "install": "builds .venv with torch (minutes, network): a fresh machine's `make test` runs it",
    "push": "tests/workflow/test_dvc.py, to a local remote and to moto's S3 on 127.0.0.1",
    "pull": "tests/workflow/test_dvc.py, on fresh clones and from a missing remote",
    "verify": "tests/workflow/test_dvc.py, tests/workflow/test_reliability.py and "
    "tests/commands/test_cli_errors.py, on pulled and damaged results",
    "adopt": "tests/workflow/test_dvc.py, after a partial pull and refusing changed settings",
    "upgrade-stores": "tests/store/test_store_integrity.py, on stores of the older format",
}


def make_target(command):
    return next(word for word in shlex.split(command.split("&&")[0]) if "=" not in word)


def test_every_documented_make_command_runs_somewhere():
    targets = {
        shlex.split(part)[shlex.split(part).index("make") + 1]
        for _, c in COMMANDS
        if runner_of(c) == "make"
        for part in c.split("&&")
    }
    ran_here = {"pull-experiment", "dvc-remote"}
    assert targets - set(RUN_ELSEWHERE) - ran_here == set()
    for target, why in RUN_ELSEWHERE.items():
        print(f"make {target}: not run here: {why}")


@pytest.fixture
def fresh_clone(tmp_path):
    """What a fresh clone holds for DVC: the config, dvc.yaml, dvc.mk and .dvc/, no dvc.lock."""
    for name in ("config.yaml", "dvc.yaml", "dvc.mk", ".dvcignore", ".dvc/config"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    run(["git", "init", "-q"], cwd=tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        c
        for _, c in COMMANDS
        if runner_of(c) == "make"
        and make_target(c) == "make"
        and shlex.split(c)[1] in ("pull-experiment", "dvc-remote")
    ],
)
def test_documented_make_command_runs(command, fresh_clone):
    """As typed, on a fresh clone: `make dvc-remote` configures the remote; `make
    pull-experiment` (nothing recorded yet) says why there is nothing to pull, not DVC's
    "does not exist as an output or a stage name"."""
    argv = shlex.split(command)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    result = run(
        [
            "make",
            "--no-print-directory",
            "-f",
            "dvc.mk",
            *argv[1:],
            f"DVC_PY={sys.executable}",
            "DVC_STAMP=",
        ],
        cwd=fresh_clone,
        env=env,
    )
    text = result.stdout + result.stderr
    assert "does not exist as an output" not in text and "Traceback" not in text, text
    if argv[1] == "dvc-remote":
        assert result.returncode == 0, text
        assert argv[-1].split("=", 1)[1] in (fresh_clone / ".dvc" / "config.local").read_text()
    else:
        assert "pull-experiment: dvc.lock records no results of" in text, text

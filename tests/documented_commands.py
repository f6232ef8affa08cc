"""The commands README.md and docs/*.md document (```bash blocks), the kind of runner each
gets, and how one that reads a finished run's results is run on a run's folder."""

import os
import re
import shlex
import subprocess
import sys

from conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def documented_commands():
    """(file:line, command) for every command line of a ```bash block, comments removed and
    backslash continuations joined."""
    commands = []
    for doc in DOCS:
        block, pending = False, ""
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("```"):
                block = line.strip() in ("```bash", "```sh") and not block
                continue
            if not block:
                continue
            text = pending + re.sub(r"(^|\s)#.*$", "", line).strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            if text:
                commands.append((f"{doc.relative_to(REPO)}:{number}", text))
    return commands


COMMANDS = documented_commands()


def runner_of(command):
    """The kind of runner a documented command gets (None: no runner yet)."""
    kinds = [
        # a usage synopsis of the symbnn command line: every sub-command and option exists
        ("synopsis", r"(\.venv/bin/)?symbnn [a-z]+\b.*[\[|A-Z]"),
        # needs a finished run's results: tests/workflow/test_workflow.py runs them
        (
            "results",
            r"(\.venv/bin/)?symbnn (store (info|validate) |summary$)|cat results/|xdg-open ",
        ),
        ("config", r"\.venv/bin/symbnn config (check|schema)\b"),
        ("snakemake", r"\.venv/bin/snakemake "),
        ("make", r"(\w+=\S+ )?make \w"),
        ("dvc-remote", r"\.venv/bin/dvc remote (add|modify) --local "),
        ("dvc-pull", r"\.venv/bin/dvc pull$"),
        ("dvc-push", r"\.venv/bin/dvc push$"),
        ("pip", r"\.venv/bin/pip install [\w-]+$"),
        ("pytest", r"\.venv/bin/python -m pytest "),
        ("git", r"git (clone|add) "),
    ]
    return next((kind for kind, pattern in kinds if re.match(pattern, command)), None)


def result_commands():
    """The documented commands that read a finished run's results (for test_workflow.py)."""
    return [command for _, command in COMMANDS if runner_of(command) == "results"]


def run(cmd, cwd=REPO, env=None, timeout=300):
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env=env or os.environ, timeout=timeout
    )


def run_result_command(command, workdir, experiment):
    """Run one documented results command inside a finished run's folder `workdir`, whose
    experiment is `experiment` (documented as `default`); PATH means the target store."""
    store = f"results/{experiment}/posterior/target.zarr"
    command = command.replace("results/default/", f"results/{experiment}/")
    command = re.sub(r"\bPATH\b", store, command)
    if command.startswith("xdg-open "):  # no desktop here: the file it opens is a report
        path = workdir / command.split()[1]
        assert "<html" in path.read_text()[:5000].lower(), path
        return
    argv = shlex.split(command)
    if argv[0].endswith("symbnn"):
        argv = [sys.executable, "-m", "symbnn.cli", *argv[1:]]
    result = run(argv, cwd=workdir)
    assert result.returncode == 0, (command, result.stdout[-1000:], result.stderr[-1000:])
    assert result.stdout.strip(), command

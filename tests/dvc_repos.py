"""Throwaway git + DVC repositories and the project's dvc.mk run against them, as a user's
shell would (no make variables of an enclosing make)."""

import subprocess
import sys

import numpy as np
import yaml
from conftest import REPO, stacked_state, user_shell_env
from optunet_stores import ARCH

from symbnn.store import write_store

DVC_ENV = user_shell_env()


def sh(cwd, *cmd, check=True, env=None):
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=env or DVC_ENV
    )
    if check and result.returncode != 0:
        command = " ".join(map(str, cmd))
        raise AssertionError(
            f"{command} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def make(cwd, target, *args, check=False, env=None):
    return sh(
        cwd,
        "make",
        "--no-print-directory",
        "-f",
        REPO / "dvc.mk",
        target,
        f"DVC_PY={sys.executable}",
        "DVC_STAMP=",
        "DVC_RESULTS=results",
        *args,
        check=check,
        env=env,
    )


def dvc_repository(root, experiments):
    """At ``root``, a git + DVC repository with each of ``experiments`` recorded (a store and
    a table in results/NAME, one DVC stage each) and a Snakefile with nothing to do; its
    default remote is a folder beside it."""
    state = {k: v.numpy() for k, v in stacked_state(ARCH, 3).items()}
    stages = {}
    for name in experiments:
        (root / "results" / name).mkdir(parents=True)
        write_store(root / "results" / name / "target.zarr", state, {"seed": np.arange(3)})
        (root / "results" / name / "table.csv").write_text("a\n1\n")
        stages[name] = {"cmd": "true", "outs": [{f"results/{name}": {"persist": True}}]}
    tables = ", ".join(f'"results/{name}/table.csv"' for name in experiments)
    (root / "Snakefile").write_text(f"rule all:\n    input: {tables}\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    sh(root, "git", "init", "-q")
    sh(root, sys.executable, "-m", "dvc", "init", "-q")
    (root / ".dvc" / "config").write_text(
        "[core]\n    remote = results\n['remote \"results\"']\n    url = ../../remote\n"
        "    verify = true\n"
    )
    assert make(root, "push").returncode == 0
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "results")
    return root

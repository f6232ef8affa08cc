"""Results restored by a plain `dvc pull` (or `dvc checkout`) made up to date for Snakemake
when the workflow starts, so that DVC's own commands are enough (docs/dvc.md).

DVC restores files with fresh timestamps in an order of its own; Snakemake reruns a job whose
input is newer than its output, so it would recompute part of what was just pulled. DVC also
versions Snakemake's provenance records (`.snakemake/metadata`: params, code, input set and
run times of each output), so a clone knows which settings produced each result and how long
each job ran. What is left to fix is the timestamps: when a result folder of `dvc.lock` is on
disk exactly as recorded there (`dvc status`), it is a finished snapshot (`make push` refuses
an unfinished run), so every file and folder in it gets one and the same timestamp, and no
output is older than its inputs. Each folder is adopted once per recorded hash
(`.snakemake/symbnn-adopted.json`). SYMBNN_ADOPT=0 turns this off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

LOCK = Path("dvc.lock")
STAMP = Path(".snakemake") / "symbnn-adopted.json"
PROVENANCE = ".snakemake/metadata"


def locked_outputs(lock: Path = LOCK) -> dict[str, tuple[str, str]]:
    """{output path: (stage, md5)} of every stage output dvc.lock records."""
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    return {
        out["path"]: (name, out.get("md5", ""))
        for name, stage in stages.items()
        for out in stage.get("outs", [])
    }


def mark_adopted(lock: Path = LOCK) -> None:
    """Record every output of dvc.lock as adopted: `make push` calls it on the machine that
    computed them, whose timestamps are Snakemake's own."""
    STAMP.parent.mkdir(exist_ok=True)
    STAMP.write_text(json.dumps({p: md5 for p, (_, md5) in locked_outputs(lock).items()}))


def changed_outputs(stages: list[str]) -> set[str]:
    """Output paths of `stages` whose workspace copy `dvc status` finds changed or absent."""
    run = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json", *stages], capture_output=True, text=True
    )
    if run.returncode:
        raise RuntimeError(f"dvc status failed: {(run.stdout + run.stderr).strip()[-300:]}")
    return {
        path
        for changes in json.loads(run.stdout or "{}").values()
        for change in changes
        if isinstance(change, dict)
        for path in change.get("changed outs", {})
    }


def set_one_timestamp(folder: Path, when: float) -> int:
    """Every file and folder under `folder` (Snakemake's hidden `.snakemake_timestamp` files
    included) gets the timestamp `when`; returns how many paths were set."""
    paths = [folder, *folder.rglob("*")]
    for path in paths:
        os.utime(path, (when, when), follow_symlinks=False)
    return len(paths)


def adopt_pulled_results(workflow: Any, folders: list[str]) -> list[str]:
    """Adopt the result `folders` (those the current config builds) that DVC restored;
    returns those adopted."""
    if os.environ.get("SYMBNN_ADOPT", "1") == "0" or not LOCK.is_file():
        return []
    if not Path(".dvc").is_dir() or not workflow.is_main_process:
        return []
    recorded = locked_outputs()
    adopted = json.loads(STAMP.read_text()) if STAMP.is_file() else {}
    pending = [
        f
        for f in folders
        if f in recorded and adopted.get(f) != recorded[f][1] and Path(f).exists()
    ]
    if not pending:
        return []
    try:
        changed = changed_outputs(sorted({recorded[f][0] for f in pending}))
    except (RuntimeError, ValueError) as exc:
        print(f"symbnn: pulled results not adopted: {exc}", file=sys.stderr)
        return []
    # what is not as recorded is being recomputed, or was partly pulled: leave it alone
    pending = [f for f in pending if f not in changed]
    if not pending:
        return []
    when = time.time()
    count = sum(set_one_timestamp(Path(f), when) for f in pending)
    note = ""
    if not Path(PROVENANCE).is_dir():
        note = f" ({PROVENANCE} was not restored: Snakemake cannot tell which settings made them)"
    print(
        f"symbnn: {', '.join(pending)} as dvc.lock records them: "
        f"one timestamp for their {count} files and folders{note}",
        file=sys.stderr,
    )
    STAMP.parent.mkdir(exist_ok=True)
    STAMP.write_text(json.dumps({**adopted, **{f: recorded[f][1] for f in pending}}, indent=1))
    return pending

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
(`.snakemake/symbnn-adopted.json`); a folder found not as recorded is checked again only
once it or its hash changes. SYMBNN_ADOPT=0 turns this off.
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

from symbnn.settings.load import yaml_problem

LOCK = Path("dvc.lock")
STAMP = Path(".snakemake") / "symbnn-adopted.json"
# Folders `dvc status` found not as recorded, with what they looked like then: `dvc status`
# hashes them, so it runs again only once they (or dvc.lock) change.
NOT_AS_RECORDED = Path(".snakemake") / "symbnn-not-adopted.json"
PROVENANCE = ".snakemake/metadata"
# The parts of a result folder that `make pull-experiment` pulled on purpose, by folder: `make
# verify EXP=NAME` lets the rest of that folder be absent; `make pull` forgets them.
PARTIAL_PULLS = Path(".snakemake") / "symbnn-partial-pulls.json"


class LockError(ValueError):
    """dvc.lock cannot be read, is not YAML, or is not shaped as DVC writes it."""


def locked_outputs(lock: Path = LOCK) -> dict[str, tuple[str, str]]:
    """{output path: (stage, md5)} of every stage output dvc.lock records; LockError naming
    the file (and the line of a YAML error) when it cannot be read."""
    try:
        data = yaml.safe_load(lock.read_text())
    except OSError as exc:
        raise LockError(f"{lock}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise LockError(f"{lock}: not a text file ({exc.reason})") from None
    except yaml.YAMLError as exc:
        raise LockError(f"{lock}{yaml_problem(exc)}") from None
    try:
        return {
            out["path"]: (name, out.get("md5", ""))
            for name, stage in ((data or {}).get("stages") or {}).items()
            for out in stage.get("outs") or []
        }
    except (AttributeError, KeyError, TypeError):
        raise LockError(
            f"{lock}: not shaped as DVC writes it (stages: NAME: outs: [{{path, md5}}, ...]); "
            "restore it from git (git checkout dvc.lock)"
        ) from None


def read_record(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record, indent=1))


def record_partial_pull(folder: str, parts: list[str]) -> None:
    """Remember that only ``parts`` of the result ``folder`` were pulled, on purpose."""
    pulled = sorted(str(Path(part)) for part in parts)
    write_record(PARTIAL_PULLS, {**read_record(PARTIAL_PULLS), str(Path(folder)): pulled})


def forget_partial_pulls() -> None:
    """A whole pull: nothing is left out on purpose any more."""
    PARTIAL_PULLS.unlink(missing_ok=True)


def partially_pulled() -> dict[str, list[str]]:
    """{result folder: the parts of it `make pull-experiment` pulled} since the last whole pull."""
    return read_record(PARTIAL_PULLS)


def pulled_parts(folder: str) -> list[str] | None:
    """The parts of ``folder`` that `make pull-experiment` pulled; None when it was not
    pulled in part."""
    return partially_pulled().get(str(Path(folder)))


def mark_adopted(lock: Path = LOCK) -> None:
    """Record every output of dvc.lock as adopted: `make push` calls it on the machine that
    computed them, whose timestamps are Snakemake's own."""
    write_record(STAMP, {p: md5 for p, (_, md5) in locked_outputs(lock).items()})


def fingerprint(folder: Path) -> list[int]:
    """Files, bytes, and the sums of mtimes and inodes of everything under ``folder``: a
    listing and a stat per file, no data read. A file written or restored (a new inode, even
    when DVC links it from its cache with an old mtime) changes it."""
    total = [0, 0, 0, 0]
    for root, _, names in os.walk(folder):
        for name in names:
            stat = os.stat(os.path.join(root, name), follow_symlinks=False)
            for i, value in enumerate((1, stat.st_size, stat.st_mtime_ns, stat.st_ino)):
                total[i] += value
    return total


def changed_outputs(stages: list[str]) -> dict[str, str]:
    """{output path: how it differs} for the outputs of `stages` that `dvc status` finds not
    as dvc.lock records them ("modified", "deleted", "not in cache", ...)."""
    run = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json", *stages], capture_output=True, text=True
    )
    if run.returncode:
        raise RuntimeError(f"dvc status failed: {(run.stdout + run.stderr).strip()[-300:]}")
    return {
        path: state
        for changes in json.loads(run.stdout or "{}").values()
        for change in changes
        if isinstance(change, dict)
        for path, state in change.get("changed outs", {}).items()
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
    if os.environ.get("SYMBNN_ADOPT", "1") == "0" or not workflow.is_main_process:
        return []
    if not LOCK.is_file() or not Path(".dvc").is_dir():
        return []
    try:
        recorded = locked_outputs()
    except LockError as exc:
        print(f"symbnn: pulled results not adopted: {exc}", file=sys.stderr)
        return []
    adopted = read_record(STAMP)
    pending = [
        f
        for f in folders
        if f in recorded and adopted.get(f) != recorded[f][1] and Path(f).exists()
    ]
    if not pending:
        return []
    seen = read_record(NOT_AS_RECORDED)
    looks = {f: [recorded[f][1], *fingerprint(Path(f))] for f in pending}
    pending = [f for f in pending if seen.get(f) != looks[f]]  # else unchanged since seen
    if not pending:
        return []
    try:
        changed = changed_outputs(sorted({recorded[f][0] for f in pending}))
    except (RuntimeError, ValueError) as exc:
        print(f"symbnn: pulled results not adopted: {exc}", file=sys.stderr)
        return []
    # a folder that differs on disk does so until it changes; one whose objects are missing
    # from the DVC cache may be fetched without changing, so it is not remembered
    stale = {f: looks[f] for f in pending if changed.get(f, "not in cache") != "not in cache"}
    if stale:
        write_record(NOT_AS_RECORDED, {**seen, **stale})
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
    write_record(STAMP, {**adopted, **{f: recorded[f][1] for f in pending}})
    return pending

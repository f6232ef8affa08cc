"""What the README's first command leaves on a terminal: `make run` in a fresh clone of this
checkout's HEAD (its own virtualenv installed first, then the default workflow, the report,
dvc.lock and the summary), on a pseudo-terminal of 50 rows x 120 columns, everything it
writes read by a terminal emulator (benchmarks/terminal.py: pyte; the live view redraws in
place), then the lines left on the screen and in its scrollback counted, and the ending
compared with the run's summary (the target's `symbnn summary` command, run again
afterwards). The goal: under 60 lines, ending with the summary.

    python benchmarks/terminal_lines.py                   # `make run`; writes the block
    python benchmarks/terminal_lines.py --target smoke    # another target: prints only

The whole final terminal text goes to benchmarks/results/terminal_lines-<target>.txt (--out),
and what the command wrote, escapes and all, beside it (.raw). Only committed work is
measured (a clone of HEAD). A full run takes 12 minutes or more on 2 cores; run it on an
otherwise idle machine (the load gate, as for every block).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import ROOT, Conditions, LoadGate, add_gate_arguments, publish, written
from terminal import COLUMNS, ROWS, run_in_terminal, terminal_rows, wrapped

from symbnn.atomic import atomic_write

BLOCK, SCRIPT = "terminal-lines", "benchmarks/terminal_lines.py"
GOAL = 60  # lines left by a whole `make run`: fewer than this
INTRO = (
    "The `terminal-lines` block counts what the README's first command leaves on a terminal: "
    "`make run` in a fresh clone (its install, the workflow, the report, dvc.lock, the "
    "summary) on a pseudo-terminal, read by a terminal emulator (pyte), so that the live "
    "view's redraws in place count as a terminal shows them; the lines left are the non-blank "
    "ones on the screen and in its scrollback once the run ends. The goal is fewer than "
    f"{GOAL}, ending with the run's summary. Rerun it with `python benchmarks/terminal_lines.py`."
)
# what a caller's environment must not pass to the clone's make (its own .venv, its own make)
UNSET = ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "NO_COLOR")


def clean_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    venv_bin = str(ROOT / ".venv" / "bin")  # an activated virtualenv of this checkout
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def summary_command(clone: Path, target: str, env: dict[str, str]) -> str | None:
    """The summary command `make TARGET` ends with (the last line of `make -n TARGET` that
    runs `symbnn summary`), None where it has none."""
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if "symbnn summary" in line]
    return lines[-1].strip() if lines else None


def summary_in(clone: Path, target: str, width: int, env: dict[str, str]) -> list[str]:
    """The summary `make TARGET` ends with, printed again afterwards at `width` columns (none,
    with the reason on stderr, where the target has none or it fails)."""
    command = summary_command(clone, target, env)
    if command is None:
        print(f"no summary to compare: make {target} runs no `symbnn summary`", file=sys.stderr)
        return []
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=clone,
        env={**env, "COLUMNS": str(width)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"{command} failed in {clone}:\n{done.stdout[-2000:]}{done.stderr}", file=sys.stderr)
        return []
    return done.stdout.splitlines()


def ends_with(left: list[str], summary: list[str], width: int) -> bool:
    """Whether the terminal's last non-blank lines are the summary's, as the terminal wraps them."""
    expected = wrapped(summary, width)
    return bool(expected) and left[-len(expected) :] == expected


def body_text(
    target: str,
    status: int,
    minutes: float,
    rows: list[str],
    summary: list[str],
    width: int,
    height: int,
    commit: str,
    clone: Path,
) -> tuple[str, bool]:
    """The block's text (the clone's temporary path shown as <clone>), and whether the run met
    the goal."""
    left = [row for row in rows if row.strip()]
    expected = wrapped(summary, width)
    ending = ends_with(left, summary, width)
    met = status == 0 and ending and len(left) < GOAL
    lines = [
        f"| `make {target}` in a fresh clone (commit {commit}), on a {height} x {width} terminal | |",
        "|---|---:|",
        f"| lines left (non-blank, screen and scrollback) | {len(left)} "
        f"({'under' if len(left) < GOAL else 'NOT under'} the goal of {GOAL}) |",
        f"| of which the summary (`symbnn summary` again, as the terminal wraps it) | "
        f"{len(expected)} |",
        f"| ends with the summary | {'yes' if ending else 'NO'} |",
        f"| exit status | {status} |",
        f"| wall time (install and run) | {minutes:.1f} min |",
        "",
        "<details><summary>What the terminal shows at the end (screen and scrollback)</summary>",
        "",
        "```text",
        *(row.replace(str(clone), "<clone>") for row in rows),
        "```",
        "",
        "</details>",
    ]
    return "\n".join(lines), met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="run", help="the make target (default: run)")
    parser.add_argument("--keep", type=Path, help="clone here and keep it (default: a temp dir)")
    parser.add_argument(
        "--out",
        type=Path,
        help="the final terminal text (default: benchmarks/results/terminal_lines-TARGET.txt; "
        "what the command wrote goes beside it, .raw)",
    )
    parser.add_argument("--rows", type=int, default=ROWS, help=f"terminal rows ({ROWS})")
    parser.add_argument(
        "--columns", type=int, default=COLUMNS, help=f"terminal columns ({COLUMNS})"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before it is killed")
    parser.add_argument("--no-write", action="store_true", help="print only")
    add_gate_arguments(parser)
    args = parser.parse_args()
    write = not args.no_write and args.target == "run"
    if args.target != "run" and not args.no_write:
        print(f"make {args.target}: printed only (the block is for `make run`)", file=sys.stderr)
    out = args.out or ROOT / "benchmarks" / "results" / f"terminal_lines-{args.target}.txt"
    clone = args.keep or Path(tempfile.mkdtemp(prefix="symbnn-terminal-lines-")) / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True
    ).stdout.strip()
    env = clean_environment()
    try:
        gate = LoadGate(args.settle) if write else None
        conditions = Conditions()
        start = time.perf_counter()
        status, raw = run_in_terminal(
            ["make", args.target], clone, env, args.columns, args.rows, args.timeout
        )
        minutes = (time.perf_counter() - start) / 60
        rows = terminal_rows(raw, args.columns, args.rows)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda tmp: tmp.write_text("\n".join(rows) + "\n"))
        raw_path = out.with_suffix(".raw")
        atomic_write(raw_path, lambda tmp: tmp.write_text(raw))
        summary = summary_in(clone, args.target, args.columns, env) if status == 0 else []
        body, met = body_text(
            args.target, status, minutes, rows, summary, args.columns, args.rows, commit, clone
        )
        body += "\n\n" + conditions.line()
    finally:
        if args.keep is None:
            shutil.rmtree(clone.parent, ignore_errors=True)
    print(body)
    print(f"the final terminal text: {out}; what make wrote: {raw_path}", file=sys.stderr)
    if status != 0:
        print(f"error: make {args.target} exited with {status}: not written", file=sys.stderr)
        return 1
    if write:
        code = written(lambda: publish(BLOCK, SCRIPT, INTRO, body, gate, args.allow_load))
        return code or (0 if met else 1)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

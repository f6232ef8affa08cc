"""How long the test suite takes: `make test-fast` (the unit tests) and `make test` (all of
it, what CI runs), each timed as a whole in this checkout, with the pass counts pytest printed,
the machine's load and a calibration figure.

    python benchmarks/test_suite.py                 # both, writes the block `test-suite`
    python benchmarks/test_suite.py --targets test-fast --no-write

Run it in a fresh clone on an otherwise idle machine (the suite's own end-to-end runs start
processes one after another, so other work on the machine lengthens it).
"""

from __future__ import annotations

import argparse
import re
import sys

from machine import ROOT, Conditions, LoadGate, add_gate_arguments, publish, run_make, written

BLOCK, SCRIPT = "test-suite", "benchmarks/test_suite.py"
INTRO = (
    'The `test-suite` block times `make test-fast` (the unit tests, `pytest -m "not slow"`) '
    "and `make test` (every test, what CI runs) on 2 cores, in a clone whose virtualenv is "
    "already built. Rerun it with `python benchmarks/test_suite.py`."
)
# pytest's last line, e.g. "1129 passed, 2 skipped, 2 warnings in 191.40s (0:03:11)"
SUMMARY = re.compile(r"^=*\s*(\d+ passed.*?) in [\d.]+s")


def run_target(target: str) -> tuple[float, str, int]:
    """(wall seconds, pytest's counts, exit status) of `make <target>`."""
    seconds, done = run_make(ROOT, target)
    counts = next(
        (m.group(1) for line in done.stdout.splitlines()[::-1] if (m := SUMMARY.match(line))),
        "no pytest summary",
    )
    return seconds, counts, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=["test-fast", "test"])
    parser.add_argument("--no-write", action="store_true", help="print only")
    add_gate_arguments(parser)
    args = parser.parse_args()
    gate = LoadGate(args.settle)
    conditions = Conditions()
    rows = []
    for target in args.targets:
        seconds, counts, status = run_target(target)
        rows.append(f"| `make {target}` | {seconds / 60:.1f} | {counts} | {status} |")
        print(rows[-1], flush=True)
    body = "\n".join(
        [
            "| command | minutes (wall) | pytest | exit status |",
            "|---|---:|---|---:|",
            *rows,
            "",
            conditions.line(),
        ]
    )
    print(body)
    if not args.no_write:
        return written(lambda: publish(BLOCK, SCRIPT, INTRO, body, gate, args.allow_load))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`symbnn summary [RESULTS] [--experiment NAME]`: what a finished run found, in a few lines (what `make run` ends
with): Table 1 beside the paper's, the findings' verdicts, the target's accuracy and plateau
check, job time, and where the report and the logs are (`symbnn.report.run_summary`)."""

from __future__ import annotations

import shutil
from pathlib import Path

CONFIG = Path("config.yaml")


def _configured() -> tuple[str, list[str] | None]:
    """(results folder, experiments to run) as config.yaml here names them, read as plain
    YAML: the summary reads results and needs no valid configuration."""
    import yaml

    try:
        config = yaml.safe_load(CONFIG.read_text()) if CONFIG.is_file() else {}
    except (OSError, yaml.YAMLError):
        config = {}
    config = config if isinstance(config, dict) else {}
    run = config.get("run")
    return str(config.get("results", "results")), run if isinstance(run, list) else None


def _summary(args) -> int:
    # local: keeps polars, scipy out of the command line's start
    from symbnn.report.run_summary import experiments_in, summary_lines

    results, run = _configured()
    folder = Path(args.results or results)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such results folder (`make run` writes results/)")
    # the experiments asked for; else config.yaml's when it is this folder's configuration,
    # else every one there
    present = experiments_in(folder)
    missing = [name for name in args.experiment or () if name not in present]
    if missing:
        raise ValueError(
            f"{folder}: no results of experiment {', '.join(missing)} "
            f"(there: {', '.join(present) or 'none'})"
        )
    chosen = (
        list(args.experiment)
        if args.experiment
        else [n for n in run if n in present]
        if run and folder.resolve() == Path(results).resolve()
        else present
    )
    width = shutil.get_terminal_size((100, 24)).columns
    lines = summary_lines(folder, chosen, width=width, report=args.report)
    if not chosen:
        lines.insert(0, f"{folder}: no experiment has results yet")
    print("\n".join(lines))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "summary", help="what a finished run found: Table 1, the findings, the logs"
    )
    parser.add_argument(
        "results", nargs="?", help="the results folder (default: config.yaml's, or results)"
    )
    parser.add_argument(
        "--report", type=Path, help="the HTML report (default: RESULTS/report.html)"
    )
    parser.add_argument(
        "--experiment",
        action="append",
        metavar="NAME",
        help="summarise this experiment (repeatable; default: config.yaml's run, or every one "
        "in RESULTS); `make smoke` names smoke",
    )
    parser.set_defaults(handler=_summary)

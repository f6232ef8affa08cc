"""`symbnn why [TARGET ...]`: for each job the next run would execute, one line saying why:
the settings whose values changed (old -> new), the inputs that changed or are rebuilt first,
or "missing output"; "nothing to run" when the results are up to date
(`symbnn.rerun_plan`)."""

from __future__ import annotations

from pathlib import Path

from symbnn.rerun_plan import planned_jobs


def _why(args) -> int:
    from snakemake.cli import parse_config
    from snakemake.exceptions import RuleException, WorkflowError

    if not args.snakefile.is_file():
        raise ValueError(f"{args.snakefile}: no such Snakefile (run this in the checkout)")
    try:
        config = parse_config(args.config)
    except ValueError as exc:
        raise ValueError(f"--config: {exc}") from None
    try:
        jobs = planned_jobs(args.snakefile, args.targets, config)
    except (WorkflowError, RuleException) as exc:  # Snakemake's message names the rule or file
        raise ValueError(" ".join(str(exc).split())) from None
    if not jobs:
        print("nothing to run: every output is up to date")
        return 0
    for job in jobs:
        print(job.line())
    print(f"{len(jobs)} job(s) to run")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "why",
        help="why each job of the next run would run: settings changed (old -> new), "
        "inputs changed, or missing output; one line per job",
    )
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="rules or files to build (default: the workflow's default target, what "
        "`make run` builds)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override config.yaml, as `snakemake --config` does (e.g. 'run=[\"smoke\"]'); "
        "repeat it for more keys",
    )
    parser.add_argument(
        "--snakefile",
        type=Path,
        default=Path("Snakefile"),
        help="the workflow (default: ./Snakefile; run it in the checkout)",
    )
    parser.set_defaults(handler=_why)

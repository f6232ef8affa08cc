"""Why each job of the next run would run (`symbnn why`): Snakemake plans the run in this
process, as `snakemake -n` does, and each job it would execute is told in one line: the
settings whose values changed (old -> new, `symbnn.param_diff`), the inputs that changed or
are rebuilt first, or the output that is missing.

`snakemake -n` prints the whole old and new params of a job instead, and `snakemake
--list-changes params` (Snakemake 9.27) lists an output of every job whose params it
compared, changed or not (its ParamsChange iterates over the outputs compared): this reads
the same planning and records, and names only what differs. The planning goes through
Snakemake's API and two of its workflow methods that `--list-changes` calls itself
(`_prepare_dag`, `_build_dag`): the one place here that knows Snakemake's insides."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symbnn.param_diff import changed_params

# Input files named per reason before "+N more".
FILES_SHOWN = 2
# How Snakemake writes a param it can compute only once a checkpoint has run.
TO_BE_DETERMINED = repr("<TBD>")


@dataclass(frozen=True)
class PlannedJob:
    rule: str
    outputs: tuple[str, ...]
    reasons: tuple[str, ...]

    def line(self) -> str:
        """``rule output: reason; reason`` (``(+N outputs)`` after the first one)."""
        where = self.outputs[0] if self.outputs else "(no output)"
        if len(self.outputs) > 1:
            where += f" (+{len(self.outputs) - 1} outputs)"
        return f"{self.rule} {where}: {'; '.join(self.reasons)}"


def files(paths: Any) -> str:
    """A few paths, sorted, then how many more."""
    names = sorted(str(p) for p in paths)
    more = len(names) - FILES_SHOWN
    return ", ".join(names[:FILES_SHOWN]) + (f" (+{more} more)" if more > 0 else "")


def planned_jobs(snakefile: Path, targets: list[str], config: dict[str, Any]) -> list[PlannedJob]:
    """The jobs a run of `targets` (none: the default target) in the current folder would
    execute, in the order they can run, each with its reasons. `config` overrides config.yaml
    as `snakemake --config` does. Nothing is written: no lock, no log, no metadata."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
    )

    # Snakemake's progress lines ("Building DAG of jobs...") hidden, its warnings kept
    output = OutputSettings(dryrun=True, quiet={Quietness.ALL}, log_level_override=logging.WARNING)
    with SnakemakeApi(output) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(config=config),
            snakefile=snakefile.resolve(),
            workdir=Path.cwd(),
        )
        # an interrupted job's outputs are rerun (the workflow profile's rerun-incomplete)
        dag_api = workflow_api.dag(DAGSettings(targets=frozenset(targets), force_incomplete=True))
        workflow = dag_api.workflow_api._workflow
        workflow._prepare_dag(
            forceall=False, ignore_incomplete=False, lock_warn_only=True, nolock=True
        )
        workflow._build_dag()
        dag = workflow.dag
        found = []
        for level in dag.toposorted():
            jobs = [job for job in level if dag.needrun(job) and not dag.finished(job)]
            for job in sorted(jobs, key=lambda job: (job.rule.name, [str(f) for f in job.output])):
                if job.is_norun and not job.output:
                    continue  # a target rule (all): it runs nothing
                found.append(
                    PlannedJob(
                        job.rule.name,
                        tuple(str(f) for f in job.output),
                        tuple(_reasons(workflow, dag.reason(job), job)),
                    )
                )
        return found


def _reasons(workflow: Any, reason: Any, job: Any) -> list[str]:
    """Why `job` runs, in words: Snakemake's reason, and the settings and input files that
    changed since its outputs were made. Snakemake compares those only for a job that has no
    other reason to run, so that a job whose input is rebuilt first would hide its own edited
    setting: they are compared here for every job, as Snakemake compares them."""
    persistence = workflow.persistence
    told = []
    if reason.forced:  # only incomplete outputs are forced here
        told.append("incomplete output (its job was interrupted)")
    if reason.missing_output:
        # Snakemake names only the outputs other jobs read: say which are not on disk
        absent = [str(f) for f in job.output if not os.path.lexists(f)]
        whole = len(absent) in (0, len(job.output))
        told.append("missing output" if whole else f"missing output {files(absent)}")
    if reason.incomplete_output:
        told.append(f"incomplete output {files(reason.incomplete_output)}")
    # a job reading a checkpoint's output that is rebuilt first: its input files, and the
    # params computed from them, are known only once the checkpoint has run
    pending = any(f.flags.get("checkpoint_target") for f in job.input)
    change = reason.params_changed or persistence.params_changed(job)
    if change:
        told += _params_change(change, job)
    if not pending and (reason.input_changed or any(persistence.input_changed(job))):
        told.append(_input_set_change(workflow, job))
    newer = set(reason.updated_input) - set(reason.updated_input_run)
    if newer:
        told.append(f"input newer than the output: {files(newer)}")
    if reason.updated_input_run:
        told.append(f"input rebuilt first: {files(reason.updated_input_run)}")
    if reason.code_changed:
        told.append("code changed (the rule, or its script is newer than the output)")
    if reason.software_stack_changed:
        told.append("software environment changed")
    if reason.noio or reason.nooutput:
        told.append("runs every time (no output)")
    return told or [str(reason) or "planned by Snakemake"]


def _input_set_change(workflow: Any, job: Any) -> str:
    """The input files added and removed since the job's outputs were made."""
    now = {str(f) for f in job.input}
    before = set()
    for output in job.output:
        before.update(workflow.persistence.input(output) or [])
    added, removed = now - before, before - now
    parts = [f"input added: {files(added)}"] if added else []
    parts += [f"input removed: {files(removed)}"] if removed else []
    return "; ".join(parts) or "set of input files changed"


def _params_change(change: Any, job: Any) -> list[str]:
    """The settings whose values changed, by the names the rule gives its params; those
    computed from a checkpoint's output that is rebuilt first are named as not known yet."""
    names = {repr(value): name for name, value in job.params.items()}
    only_new = [(names.get(text, "params"), text) for text in sorted(change.only_new)]
    later = [name for name, text in only_new if text == TO_BE_DETERMINED]
    known = [(name, text) for name, text in only_new if text != TO_BE_DETERMINED]
    told = changed_params(list(change.only_old), known, complete=not later)
    if later:
        told.append(f"{', '.join(later)}: known once the checkpoint it reads has run")
    return told or ["params changed"]

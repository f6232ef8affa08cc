"""What Snakemake prints for each job. A rule's `message:` replaces Snakemake's own job
summary, which is the only place a dry run shows threads, memory and GPUs; so every message
gets the job's resources appended, and a dry run still says what each job will ask for,
the Slurm partition included where the job has one (its rule's, or the profile's default)."""

from __future__ import annotations

from typing import Any

# (resource, how it reads in a message); only those a rule declares are shown
SHOWN = (("mem_mb", "{resources.mem_mb} MB"), ("runtime", "{resources.runtime} min"))


def resources_note(resources: Any) -> str:
    """The bracketed note for a rule declaring `resources` (names): threads, memory, time
    limit, GPUs ("no GPU" for a rule that cannot ask for one), and the Slurm partition when
    the rule or the default resources (the Slurm profile's) name one."""
    parts = ["{threads} thread(s)"]
    parts += [text for name, text in SHOWN if name in resources]
    parts.append("GPUs: {resources.gpu}" if "gpu" in resources else "no GPU")
    if "slurm_partition" in resources:
        parts.append("partition {resources.slurm_partition}")
    return " [" + ", ".join(parts) + "]"


def add_resources_to_messages(workflow: Any) -> None:
    """Append `resources_note` to the message of every rule that has one (once: a Snakefile
    read twice, as by `--report`, does not append twice)."""
    for rule in workflow.rules:
        if rule.message and "{threads} thread(s)" not in rule.message:
            rule.message += resources_note(rule.resources)

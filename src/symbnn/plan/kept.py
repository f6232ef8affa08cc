"""Which networks the acceptance rule keeps, decided while planning (`symbnn.acceptance`).

A job that reads only the kept networks holds their store rows in its params (and reads the
convergence table as ancient): an edit of the rule that keeps the same networks reruns the
convergence tables alone. A store's accuracies table is the output of the workflow's
`accuracies` checkpoint, so the functions here take it as `accuracies`: a function returning
its path, called only where the table is needed (a call asks Snakemake for the checkpoint)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import polars as pl

from symbnn import acceptance, treefile
from symbnn.analyses.plan import has_small_model
from symbnn.plan.jobs import mode_blocks
from symbnn.plan.paths import fit_file
from symbnn.reference.plan import start_rows
from symbnn.settings import Config

Accuracies = Callable[[], str]


@functools.cache
def _read(path: str, mtime_ns: int) -> pl.DataFrame:
    return pl.read_parquet(path)


def acceptance_of(config: Config, experiment: str, accuracies: Accuracies) -> pl.DataFrame:
    """The convergence table the acceptance rule gives the networks of a store."""
    path = accuracies()
    posterior = config.experiments[experiment].posterior
    return acceptance.acceptance_table(
        _read(path, os.stat(path).st_mtime_ns),
        posterior.min_accuracy,
        posterior.max_below_median,
    )


def kept_target_rows(config: Config, experiment: str, accuracies: Accuracies) -> list[int]:
    """The target networks the acceptance rule keeps (store rows)."""
    return acceptance.kept_rows(acceptance_of(config, experiment, accuracies))


def kept_mode_rows(
    config: Config, experiment: str, accuracies: Accuracies, modes: list[int]
) -> list[int | None]:
    """The pool rows of `modes` (mode k is the k-th kept pool network; None where the pool
    keeps too few, which the job reports)."""
    rows = acceptance.kept_rows(acceptance_of(config, experiment, accuracies))
    return [rows[k] if k < len(rows) else None for k in modes]


def method_mode_rows(
    config: Config, experiment: str, method: str, accuracies: Accuracies
) -> list[int | None]:
    """The pool rows of every mode a method's variants use."""
    modes = [k for block in mode_blocks(config, experiment, method) for k in block]
    return kept_mode_rows(config, experiment, accuracies, modes)


def mode_count_params(config: Config, experiment: str, accuracies: Accuracies) -> list[int]:
    """The kept target networks where the symmetry-counts table measures them (small
    models)."""
    if not has_small_model(config, experiment):
        return []
    return kept_target_rows(config, experiment, accuracies)


def reference_start_rows(
    config: Config, experiment: str, accuracies: Accuracies
) -> list[int | None]:
    """The pool rows the HMC reference's chains start from."""
    modes = start_rows(config, experiment)
    return kept_mode_rows(config, experiment, accuracies, modes) if modes else []


def retry_threshold(
    config: Config, experiment: str, method: str, block: str, accuracies: Accuracies
) -> float:
    """The pool's acceptance threshold for a fit that retries seeds until its own network
    reaches it, as its params hold it: the threshold it last ran with while the new one would
    keep the same attempts (its fit file records each attempt's accuracy), so that such an
    edit refits nothing."""
    threshold = float(acceptance_of(config, experiment, accuracies)["threshold"][0])
    path = fit_file(config, experiment, method, block)
    try:
        fits = treefile.outline(path)["fits"]
        recorded = {fit["threshold"] for fit in fits}
        attempts = [fit["attempts"] for fit in fits]
    except (FileNotFoundError, treefile.TreeFileError, KeyError, TypeError):
        return threshold
    if len(recorded) != 1:
        return threshold
    return acceptance.retry_threshold(threshold, recorded.pop(), attempts)

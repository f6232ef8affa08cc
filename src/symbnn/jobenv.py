"""What workflow jobs inherit from the Snakemake process that starts them: symbnn's sources,
the checked settings, and the environment a job runs in (data folder, downloads, device),
which Snakemake passes through `config` rather than params so that it never reruns a job."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symbnn import trust
from symbnn.config_code import check_imports, check_loaders_in_child
from symbnn.settings import Config, Experiment, Methods, config_from_mapping
from symbnn.settings.load import check_duplicated_keys


def put_sources_on_pythonpath(basedir: str | os.PathLike) -> str:
    """Prepend the checkout's src/ to PYTHONPATH, so that jobs running in a conda environment
    (`--sdm conda`, envs/symbnn.yaml: symbnn's dependencies, not symbnn) import symbnn from this
    checkout. Local jobs inherit it, and Slurm jobs get it through `sbatch --export=ALL`."""
    source = str(Path(basedir).resolve() / "src")
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != source]
    os.environ["PYTHONPATH"] = os.pathsep.join([source, *parts])
    return os.environ["PYTHONPATH"]


def workflow_settings(config: dict[str, Any], workflow: Any) -> Config:
    """The Snakefile's `config` (config.yaml with --config overrides) checked; errors name
    the last config file given and, where the key is in it, its line. Snakemake reads the
    files with a plain YAML loader, which keeps the later of two equal keys: they are read
    again here to refuse that. The models and methods the experiments to run name by import
    path must import and be what they claim to be; their dataset loaders are checked in a
    child process (`symbnn.config_code`: no torch here), by the process that plans
    only. Every import path the configuration names is trusted here and, through
    SYMBNN_TRUSTED_IMPORTS, in every job."""
    files = [str(f) for f in getattr(workflow, "configfiles", [])]
    source = files[-1] if files else "config.yaml"
    check_duplicated_keys(files)
    settings = config_from_mapping(config, source)
    check_imports(settings, settings.run, source, datasets=False)
    trust.export_to_environment()
    if getattr(workflow, "is_main_process", True):  # a job re-planning was checked already
        check_loaders_in_child(settings, settings.run, source)
    return settings


@dataclass(frozen=True)
class Environment:
    """Where a job finds data and computes: never a rerun trigger."""

    data_root: str
    download: bool
    device: str


def environment(snakemake: Any) -> Environment:
    """The environment of a workflow script's job, from the run's settings."""
    config = config_from_mapping(snakemake.config, "config")
    return Environment(config.data_root, config.download, config.device)


def job_experiment(snakemake: Any) -> Experiment:
    """The settings of the job's experiment (its `experiment` wildcard)."""
    config = config_from_mapping(snakemake.config, "config")
    return config.experiments[snakemake.wildcards.experiment]


def predict_batch(snakemake: Any) -> int:
    """Test images per forward pass of the job's experiment (a resource: the predictions do
    not depend on it)."""
    methods = job_experiment(snakemake).methods
    return methods.predict_batch if methods else Methods.default("predict_batch")

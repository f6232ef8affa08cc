"""The environment workflow jobs inherit from the Snakemake process that starts them."""

from __future__ import annotations

import os
from pathlib import Path


def put_sources_on_pythonpath(basedir: str | os.PathLike) -> str:
    """Prepend the checkout's src/ to PYTHONPATH, so that jobs running in a conda environment
    (`--sdm conda`, envs/symbnn.yaml: symbnn's dependencies, not symbnn) import symbnn from this
    checkout. Local jobs inherit it, and Slurm jobs get it through `sbatch --export=ALL`."""
    source = str(Path(basedir).resolve() / "src")
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != source]
    os.environ["PYTHONPATH"] = os.pathsep.join([source, *parts])
    return os.environ["PYTHONPATH"]

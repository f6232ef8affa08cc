"""Fetching released bundles from the Hugging Face hub: only when asked (`download=True` or
``--download``), never as a side effect of an import. huggingface_hub resumes interrupted
downloads and checks each file against the hub's checksum."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from symbnn.checkpoints.releases import HUB_REPOSITORY, HUB_REPOSITORY_TYPE, CheckpointError
from symbnn.checkpoints.sources import Bundle, is_bundle_file
from symbnn.settings.checkpoints import Checkpoints


def download_bundles(
    setting: str,
    dest: str | os.PathLike,
    first: int = Checkpoints.default("first"),
    count: int | None = None,
) -> Path:
    """Download the bundles of ``setting`` that hold networks ``first .. first + count - 1``
    into ``dest`` (the hub's layout kept: ``dest/models/<setting>/``); return that folder."""
    try:
        # an optional extra (symbnn[checkpoints]), so imported by name, and only here
        hub = importlib.import_module("huggingface_hub")
    except ImportError:
        raise CheckpointError(
            "downloading released bundles needs huggingface_hub (pip install "
            "'symbnn[checkpoints]'); or download them yourself and import the folder"
        ) from None
    stop = None if count is None else first + count
    prefix = f"models/{setting}/"
    wanted = []
    for name in hub.list_repo_files(HUB_REPOSITORY, repo_type=HUB_REPOSITORY_TYPE):
        base = name.removeprefix(prefix)
        if not name.startswith(prefix) or "/" in base or not is_bundle_file(Path(base)):
            continue
        if Bundle.at(Path(base)).outside(first, stop):
            continue
        wanted.append(name)
    if not wanted:
        raise CheckpointError(
            f"{HUB_REPOSITORY}: no bundle of {setting!r} under {prefix} holds networks from {first}"
        )
    for name in wanted:
        hub.hf_hub_download(
            HUB_REPOSITORY, name, repo_type=HUB_REPOSITORY_TYPE, local_dir=os.fspath(dest)
        )
    return Path(dest) / prefix

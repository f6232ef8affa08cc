"""Content fingerprints of the datasets an experiment loads with loaders of the user's own
(``data.train`` / ``data.ood`` named by import path).

A shipped dataset is fixed by its name; a loader of the user's own may return other images
tomorrow under the same import path. The workflow therefore hashes what the loader returns
(images, labels, class count, statistics of every split the experiment reads) when it plans,
and the training rules carry the hash as a param: a changed dataset reruns the trainings and
everything after them, an unchanged one reruns nothing. (A rule writing the hash to a file
would not do: it would have to run at every start, and Snakemake reruns every consumer of a
job that runs, changed output or not.)

The hash is computed in a child process (``python -m symbnn.fingerprint``), so that the
Snakefile's process, which plans, never imports torch or the user's loader.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from symbnn.child_process import ask_child
from symbnn.runlog import log_to
from symbnn.settings import Data
from symbnn.trust import is_import_path


def loaded_splits(data: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(loader import path, split, options) of every split the experiment reads from a loader
    of the user's own (``data`` a `symbnn.settings.Data`)."""
    splits = []
    if is_import_path(data.train):
        splits += [(data.train, "train", {}), (data.train, "test", {})]
    if is_import_path(data.ood):
        splits.append((data.ood, "test", data.ood_options.to_dict()))
    return splits


def of_data(data: Any, root: str | os.PathLike) -> str | None:
    """The sha256 of what the user's loaders return for ``data`` (None when it names shipped
    datasets only), computed in a child process; ValueError with the child's message when a
    loader fails or returns a bad set."""
    if not loaded_splits(data):
        return None
    return ask_child(
        "symbnn.fingerprint",
        {"data": data.to_dict(), "root": os.fspath(root)},
        "fingerprinting data.train / data.ood failed",
    )


def digest(data: Any, root: str | os.PathLike) -> str:
    """The sha256 of what the user's loaders return (this process: torch and the loaders
    are imported here)."""
    # local: keeps torch out of importing symbnn.fingerprint
    from symbnn.data import load_dataset

    sha = hashlib.sha256()
    for path, split, options in loaded_splits(data):
        loaded = load_dataset(path, split, root, **options)
        header = {
            "loader": path,
            "split": split,
            "shape": list(loaded.images.shape),
            "num_classes": loaded.num_classes,
            "mean": [float(v) for v in loaded.mean],
            "std": [float(v) for v in loaded.std],
        }
        sha.update(json.dumps(header, sort_keys=True).encode())
        sha.update(loaded.images.contiguous().numpy().tobytes())
        sha.update(loaded.labels.contiguous().numpy().tobytes())
    return sha.hexdigest()


def main() -> None:
    """The child: a JSON request {"data": ..., "root": ...} on stdin, the digest on stdout."""
    with log_to(None):  # an expected failure: one line on stderr, exit status 1
        request = json.loads(sys.stdin.read())
        print(digest(Data.parse(request["data"], "data"), request["root"]))


if __name__ == "__main__":
    main()

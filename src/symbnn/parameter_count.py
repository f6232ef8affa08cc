"""The parameter count of an experiment's model, computed in a child process
(``python -m symbnn.parameter_count``): the workflow sizes a job's resources by it (a GPU for
a large model's MMD, minutes per GB of weights) while the process that plans, the Snakefile's,
never imports torch. The model is built on the meta device, so no weight memory is used.

Every planning pass needs the count (a Slurm job re-plans too), and the child costs about two
seconds of importing torch; so the count of a shipped model is kept in a small JSON cache
(``$SYMBNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/symbnn``, else ``~/.cache/symbnn``), keyed by
the model's settings and the source of ``symbnn.models``: an edited model definition is
counted anew. A model of the user's own is always counted by the child (its code may change
under the same name).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from symbnn.atomic import atomic_write
from symbnn.cachedir import cache_dir
from symbnn.child_process import ask_child
from symbnn.runlog import log_to
from symbnn.trust import is_import_path

CACHE_FILE = "parameter_counts.json"


def _models_source_digest() -> str:
    """sha256 of the shipped model definitions (read, never imported: no torch here)."""
    sha = hashlib.sha256()
    for path in sorted((Path(__file__).parent / "models").glob("*.py")):
        sha.update(path.name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()


def _cache_key(spec: Mapping[str, Any]) -> str:
    settings = json.dumps(dict(spec), sort_keys=True)
    return hashlib.sha256(f"{settings}\0{_models_source_digest()}".encode()).hexdigest()


def _read_cache(path: Path) -> dict[str, int]:
    """The cached counts; an absent, unreadable or damaged cache is an empty one."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def in_child(spec: Mapping[str, Any]) -> int:
    """The number of trainable parameters of the model ``spec`` (a model section's dict);
    ValueError with the child's last line when the model cannot be built. A shipped model's
    count comes from the cache when an earlier pass counted it."""
    failure = f"counting the parameters of model {spec.get('name')!r}"
    if is_import_path(spec.get("name")):
        return int(ask_child("symbnn.parameter_count", dict(spec), failure))
    path, key = cache_dir() / CACHE_FILE, _cache_key(spec)
    counts = _read_cache(path)
    if key not in counts:
        counts[key] = int(ask_child("symbnn.parameter_count", dict(spec), failure))
        # a cache that cannot be written only costs the next pass the child again
        with contextlib.suppress(OSError):
            atomic_write(path, lambda tmp: tmp.write_text(json.dumps(counts, indent=1)))
    return counts[key]


def main() -> None:
    """The child: a model spec as JSON on stdin, its parameter count on stdout."""
    import torch

    # local: keeps torch out of importing symbnn.parameter_count
    from symbnn.models import build_model, count_parameters

    with log_to(None), torch.device("meta"):  # an expected failure: one line, exit status 1
        print(count_parameters(build_model(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()

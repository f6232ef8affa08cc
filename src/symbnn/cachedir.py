"""Where symbnn keeps what it may recompute at any time (parameter counts, compiled kernels)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SYMBNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/symbnn``, else ``~/.cache/symbnn``."""
    if os.environ.get("SYMBNN_CACHE_DIR"):
        return Path(os.environ["SYMBNN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "symbnn"

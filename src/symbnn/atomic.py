"""Write a file so that it appears whole or not at all (a killed job leaves no half file)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a hidden sibling of ``path``, then rename it into place. The
    temporary name keeps the suffix, for writers that pick the format from it (matplotlib)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)

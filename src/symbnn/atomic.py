"""Write a file so that it appears whole or not at all (a killed job leaves no half file)."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path


class WriteError(OSError):
    """Writing an output failed (full disk, read-only folder, ...); the message names the
    output, never the hidden temporary file it was being written to."""


def _io_failure(exc: BaseException) -> bool:
    """An OSError, or a polars error (polars reports a failed write as ComputeError)."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] == "polars"


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a hidden sibling of ``path``, then rename it into place. The
    temporary name keeps the suffix, for writers that pick the format from it (matplotlib).
    An I/O failure is raised as WriteError naming ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except Exception as exc:
        if not _io_failure(exc):
            raise
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        code = re.search(r"os error (\d+)", reason)  # polars and Rust name errno this way
        if code:
            reason = os.strerror(int(code[1]))
        reason = reason.replace(str(tmp), str(path))
        raise WriteError(f"cannot write {path}: {reason}") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)

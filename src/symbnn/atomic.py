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


def polars_io_error(exc: BaseException) -> bool:
    """polars' ComputeError: how it reports a failed read or write (a full disk, a damaged
    parquet file). Its other errors (a missing column, ...) are bugs, not I/O."""
    return type(exc).__module__.split(".")[0] == "polars" and type(exc).__name__ == "ComputeError"


def _io_failure(exc: BaseException) -> bool:
    return isinstance(exc, OSError) or polars_io_error(exc)


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

"""Refuse, before allocating, work whose memory an option sizes beyond what the machine has.

A value such as ``--b1 1000000000000`` would otherwise end in an allocation error deep inside
numpy (or in the kernel killing the process without a word). Each function whose memory grows
with one of its parameters estimates its bytes first and calls `require_memory`, which raises
`MemoryLimitError` naming the parameter, the estimate and the memory available (each in
readable units and in bytes). On the command line (`options_as_flags`) the parameter is named
as its flag: ``points`` -> ``--points``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

# The memory a process may take is read from here; a cgroup limit applies too, where set.
MEMINFO = "/proc/meminfo"
CGROUP_LIMIT = "/sys/fs/cgroup/memory.max"
CGROUP_USAGE = "/sys/fs/cgroup/memory.current"

_AS_FLAGS: contextvars.ContextVar[bool] = contextvars.ContextVar("as_flags", default=False)


class MemoryLimitError(ValueError):
    """An estimate of the memory a parameter's value needs exceeds the memory available."""


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable of /proc/meminfo (or the free
    physical pages where that is missing), capped by the cgroup's limit; None when unknown."""
    free = _meminfo_available()
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            free = None
    limit = _cgroup_room()
    if free is None or limit is None:
        return free if limit is None else limit
    return min(free, limit)


def _meminfo_available() -> int | None:
    try:
        with open(MEMINFO) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    try:
        with open(CGROUP_LIMIT) as handle:
            limit = handle.read().strip()
        if limit == "max":
            return None
        with open(CGROUP_USAGE) as handle:
            return max(0, int(limit) - int(handle.read().strip()))
    except (OSError, ValueError):
        return None


def describe_bytes(nbytes: float) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def describe_bytes_exactly(nbytes: float) -> str:
    """1536 -> '1.5 KiB (1,536 bytes)': readable, and exact for a reader who compares."""
    return f"{describe_bytes(nbytes)} ({round(nbytes):,} bytes)"


def option_name(parameter: str) -> str:
    """How the user named ``parameter``: as a flag on the command line, else as is."""
    return f"--{parameter.replace('_', '-')}" if _AS_FLAGS.get() else parameter


@contextlib.contextmanager
def options_as_flags() -> Iterator[None]:
    """Within the block, `require_memory` names parameters as command-line flags."""
    token = _AS_FLAGS.set(True)
    try:
        yield
    finally:
        _AS_FLAGS.reset(token)


def require_memory(option: str | tuple[str, ...], nbytes: float, what: str) -> None:
    """MemoryLimitError when ``nbytes`` (the estimate for ``what``, sized by the parameter(s)
    ``option``) exceeds the memory available; nothing when it fits or is unknown."""
    available = available_memory()
    if available is None or nbytes <= available:
        return
    names = "/".join(
        option_name(name) for name in ((option,) if isinstance(option, str) else option)
    )
    raise MemoryLimitError(
        f"{names}: {what} would need about {describe_bytes_exactly(nbytes)}, more than the "
        f"{describe_bytes_exactly(available)} of memory available; choose a smaller value"
    )

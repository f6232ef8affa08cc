"""Serial numba execution for small problems: waking a team of threads costs more than the
work below a few million inner iterations, and far more on a busy, shared CPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba

SERIAL_BELOW = 4_000_000


@contextmanager
def threads_for(work: int) -> Iterator[None]:
    """Run the numba parallel regions inside on one thread when ``work`` is small."""
    if work >= SERIAL_BELOW:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


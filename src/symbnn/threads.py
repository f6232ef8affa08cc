"""Run small parallel work on one thread: waking a team of threads costs more than the work
below a size, and far more on a busy, shared CPU.

- numba kernels (`numba_threads_for`): serial below a few million inner iterations.
- torch CPU work on weights (`torch_threads_for`): the symmetry steps are gathers, products
  and reductions, memory-bound, so extra threads gain little and hand-offs dominate on a busy
  machine (a log of 2000 numbers took 16 ms on two threads instead of 7 us on one; a
  ResNet-18's min-mass 1-2.5 s instead of 0.2-0.4 s). Below SMALL_PROBLEM weights (about six
  ResNet-18s) it runs on one thread.

Neither changes the caller's settings: both restore the counts they found. numba's OpenMP
pool shares its runtime with torch, and starting it (numba's first parallel region, or its
first get/set_num_threads in the process) sets the OpenMP count of the starting thread to
NUMBA_NUM_THREADS, which is the count torch reads there: every numba path goes through
`numba_threads_for`, which puts torch's count back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numba
import torch

SERIAL_BELOW = 4_000_000
SMALL_PROBLEM = 2**26


@contextlib.contextmanager
def _one_thread(get: Callable[[], int], set_: Callable[[int], None]) -> Iterator[None]:
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


@contextlib.contextmanager
def _counts_kept() -> Iterator[None]:
    """torch's and numba's thread counts on leaving as they were on entering."""
    torch_before = torch.get_num_threads()  # read first: numba's first call may change it
    numba_before = numba.get_num_threads()
    try:
        yield
    finally:
        if numba.get_num_threads() != numba_before:
            numba.set_num_threads(numba_before)
        if torch.get_num_threads() != torch_before:
            torch.set_num_threads(torch_before)


@contextlib.contextmanager
def numba_threads_for(work: int) -> Iterator[None]:
    """The numba parallel regions inside on one thread when ``work`` is small; torch's and
    numba's thread counts restored afterwards."""
    with _counts_kept():
        if work < SERIAL_BELOW:
            numba.set_num_threads(1)
        yield


@contextlib.contextmanager
def torch_threads_for(n_weights: int, device=None) -> Iterator[None]:
    """One torch thread for CPU work on fewer than SMALL_PROBLEM weights; restored afterwards."""
    if (device is not None and torch.device(device).type != "cpu") or n_weights >= SMALL_PROBLEM:
        yield
        return
    with _one_thread(torch.get_num_threads, torch.set_num_threads):
        yield

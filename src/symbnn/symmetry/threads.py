"""Run small, memory-bound torch work on one CPU thread.

The symmetry steps are gathers, products and reductions over weights: memory-bound, so extra
threads gain little, and on a busy machine thread hand-offs dominate (a log of 2000 numbers
took 16 ms on two threads instead of 7 us on one; a ResNet-18's min-mass 1-2.5 s instead of
0.2-0.4 s). Below SMALL_PROBLEM weights (about six ResNet-18s) CPU work runs on one thread.
"""

from __future__ import annotations

import contextlib

import torch

SMALL_PROBLEM = 2**26


@contextlib.contextmanager
def cpu_threads_for(n_weights: int, device=None):
    """One torch thread for CPU work on fewer than SMALL_PROBLEM weights; restored afterwards."""
    if (device is not None and torch.device(device).type != "cpu") or n_weights >= SMALL_PROBLEM:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)

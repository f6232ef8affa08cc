"""Shards of stacked models on several CPU threads, every torch op single-threaded.

The batched trainer's ops are many and small: splitting each op over threads (torch's
intra-op parallelism) leaves most of them serial, while independent models on separate
threads keep every core busy (torch releases the GIL inside its ops). A single-threaded op
also computes the same bits whatever the thread count, so a model's weights depend neither on
how many threads trained it nor on the models trained beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")


def cpu_workers(device: torch.device | str, k: int) -> int:
    """Threads for `k` models: torch's CPU thread count on a CPU (at most one per model), one
    on an accelerator."""
    if torch.device(device).type != "cpu":
        return 1
    return max(1, min(torch.get_num_threads(), k))


@contextmanager
def one_thread_per_op(device: torch.device | str) -> Iterator[None]:
    """On a CPU, torch ops run on one thread in this thread until the block ends (torch's
    thread count is restored afterwards)."""
    threads = torch.get_num_threads()
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def in_threads(fn: Callable[[T], R], jobs: Sequence[T]) -> list[R]:
    """[fn(job) for job in jobs]: here for a single job, else each job on a thread of its own
    whose torch ops run on one thread."""
    if len(jobs) == 1:
        return [fn(jobs[0])]
    with ThreadPoolExecutor(len(jobs), initializer=torch.set_num_threads, initargs=(1,)) as pool:
        return list(pool.map(fn, jobs))

"""Chunks of stacked models on several CPU threads, every torch op single-threaded in them.

The batched trainer's ops are many and small: splitting each op over threads (torch's
intra-op parallelism) leaves most of them serial, while whole chunks of models on separate
threads keep every core busy (torch releases the GIL inside its ops). A single-threaded op
also computes the same bits whatever the thread count, so a model's weights do not depend on
how many threads trained it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

Run = Callable[[Callable[..., None], Sequence[tuple]], None]


def cpu_workers(device: torch.device | str, k: int) -> int:
    """Threads for `k` models: torch's CPU thread count on a CPU (at most one per model), one
    on an accelerator (a single chunk holds every model there)."""
    if torch.device(device).type != "cpu":
        return 1
    return max(1, min(torch.get_num_threads(), k))


@contextmanager
def chunk_runner(workers: int, device: torch.device | str = "cpu") -> Iterator[Run]:
    """`run(fn, jobs)` calls fn(*job) for every job and returns when all are done: on
    `workers` threads (this one if 1). On a CPU every torch op then runs on one thread, this
    one's included (torch's thread count is restored afterwards): a model alone computes
    exactly what it computes in a chunk on a worker."""
    threads = torch.get_num_threads()
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)
    pool = (
        ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
        if workers > 1
        else None
    )

    def run(fn, jobs):
        if pool is None:
            for job in jobs:
                fn(*job)
            return
        for future in [pool.submit(fn, *job) for job in jobs]:
            future.result()

    try:
        yield run
    finally:
        if pool is not None:
            pool.shutdown()
        torch.set_num_threads(threads)

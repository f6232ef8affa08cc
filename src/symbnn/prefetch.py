"""Run a producer one step ahead on a thread: `prefetched(items, depth)` yields what
``items`` yields, while a worker thread already computes the next ``depth`` items. Worth it
when producing an item releases the GIL (inflating a gzip stream) and consuming it is other
work (writing a store): the two then share two cores.

An exception in the producer is raised at the consumer's next step; a consumer that stops
early (break, an error of its own) stops the producer and closes it before returning.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()
_POLL_SECONDS = 0.1  # how often a blocked producer checks whether the consumer has left


def prefetched(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
            offer((_DONE, None))
        except BaseException as exc:  # handed to the consumer, which raises it
            offer((_DONE, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="symbnn-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        worker.join()

"""Send a workflow script's output to its Snakemake log file."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Redirect stdout, stderr and `logging` to ``path`` for the block (no-op for None).
    An exception is written to the log before it propagates, so the log explains a failure."""
    if not path:
        yield
        return
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    with (
        open(path, "w", buffering=1) as handle,
        contextlib.redirect_stdout(handle),
        contextlib.redirect_stderr(handle),
    ):
        logging.basicConfig(
            stream=handle,
            level=logging.INFO,
            force=True,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        try:
            yield
        except BaseException:
            import traceback

            traceback.print_exc(file=handle)
            raise
        finally:
            sys.stdout.flush()

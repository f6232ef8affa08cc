"""Progress bars for long steps (training, sampling, prediction) that stay readable in
Snakemake logs: a live bar on a terminal, and in a log file (not a terminal) one plain line at
most every LOG_INTERVAL seconds plus the final one, instead of a line per update.
SYMBNN_PROGRESS=0 in the environment turns them off."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm

LOG_INTERVAL = 30.0  # seconds between lines when writing to a log file


def progress(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    enabled: bool = True,
) -> Any:
    """A tqdm bar over `iterable` (or a manual one of `total` steps, advanced by `update`)."""
    stream = sys.stderr
    interactive = hasattr(stream, "isatty") and stream.isatty()
    off = not enabled or os.environ.get("SYMBNN_PROGRESS", "1") == "0"
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        file=stream,
        disable=off,
        mininterval=0.1 if interactive else LOG_INTERVAL,
        ascii=not interactive,
        dynamic_ncols=interactive,
    )

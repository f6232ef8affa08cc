"""Progress bars for long steps (training, sampling, prediction) that stay readable in
Snakemake logs: a live bar on a terminal, and in a log file (not a terminal) one plain line at
most every LOG_INTERVAL seconds plus the final one, instead of a line per update. tqdm
redraws its bar with carriage returns; in a log they would join every state into one line
that `cat` shows as the last state only, so there each state ends with a newline instead.
SYMBNN_PROGRESS=0 in the environment turns them off."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm

LOG_INTERVAL = 30.0  # seconds between lines when writing to a log file


class LineStream:
    """A text stream for tqdm that turns its redraws (carriage return, bar, blank padding)
    into one line per state."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.pending = ""  # the state being drawn, not yet ended by a newline

    def write(self, text: str) -> int:
        *ended, rest = text.replace("\n", "\r").split("\r")
        for piece in ended:
            self._end_line(piece)
        self.pending += rest
        return len(text)

    def _end_line(self, piece: str) -> None:
        line = (self.pending + piece).rstrip()
        self.pending = ""
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        # a state tqdm has drawn stays pending until the next redraw ends it: write it now
        if self.pending.strip():
            self._end_line("")
        self.stream.flush()


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
        file=stream if interactive else LineStream(stream),
        disable=off,
        mininterval=0.1 if interactive else LOG_INTERVAL,
        ascii=not interactive,
        dynamic_ncols=interactive,
    )

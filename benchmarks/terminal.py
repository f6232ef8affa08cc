"""A command run in a pseudo-terminal as a person runs it, and what the terminal shows of it
once it ends, read by a terminal emulator (pyte, a VT100/xterm emulator in Python): the live
view redraws itself in place (cursor moves and erasures), lines pushed off the top of the
screen go to the scrollback, and long lines wrap at the terminal's width, as on a real
terminal. `lines_left` counts what a person scrolling back would see afterwards.

Used by benchmarks/terminal_lines.py (a fresh clone's `make run`) and the tests
(tests/console.py; tests/workflow/test_workflow.py checks the smoke run with it).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROWS, COLUMNS = 50, 120  # the terminal's size, as the measurement's docs block states it
SCROLLBACK = 100_000  # lines the emulator keeps above the screen (a terminal's is finite too)


def run_in_terminal(
    argv: Sequence[str],
    cwd: Path | str,
    env: dict[str, str] | None = None,
    width: int = COLUMNS,
    height: int = ROWS,
    timeout: float = 1800,
    interrupt_when: Callable[[], bool] | None = None,
) -> tuple[int, str]:
    """Run `argv` with a pseudo-terminal of `height` rows and `width` columns as its stdin,
    stdout and stderr (TERM=xterm-256color), in a process group of its own; returns (exit
    status, everything it wrote, decoded). Killed (the whole group) after `timeout` seconds.
    With `interrupt_when`, type Ctrl-C once `interrupt_when()` is true: SIGINT to the whole
    group, the command and the jobs it started, as a terminal sends it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    env = {**(env or os.environ), "TERM": "xterm-256color", "COLUMNS": str(width)}
    env["LINES"] = str(height)
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if interrupt_when is not None and interrupt_when():
                os.killpg(process.pid, signal.SIGINT)
                interrupt_when = None
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # the terminal closes when the last writer exits
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
        else:
            os.killpg(process.pid, signal.SIGKILL)
    finally:
        status = process.wait()
        os.close(master)
    return status, b"".join(chunks).decode(errors="replace")


def terminal_rows(raw: str, width: int = COLUMNS, height: int = ROWS) -> list[str]:
    """The rows a terminal of `height` x `width` shows after `raw` (what a command wrote to
    it, a pseudo-terminal's output: newlines already as CR LF): its scrollback, then its
    screen, each row without trailing spaces; the blank rows below the last text dropped."""
    import pyte

    screen = pyte.HistoryScreen(width, height, history=SCROLLBACK, ratio=0.5)
    pyte.Stream(screen).feed(raw)

    def text(row) -> str:
        return "".join(row[x].data for x in range(width)).rstrip()

    rows = [text(row) for row in screen.history.top]
    rows += [line.rstrip() for line in screen.display]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def lines_left(raw: str, width: int = COLUMNS, height: int = ROWS) -> list[str]:
    """The non-blank lines a terminal of `height` x `width` shows after `raw`, on its screen
    and in its scrollback: what a person scrolling back sees of a finished command."""
    return [row for row in terminal_rows(raw, width, height) if row.strip()]


def wrapped(lines: Sequence[str], width: int = COLUMNS) -> list[str]:
    """`lines` as a terminal `width` columns wide shows them: each cut into rows of `width`
    characters, trailing spaces and blank lines dropped (to compare with `lines_left`)."""
    rows = []
    for line in lines:
        line = line.rstrip()
        rows += [line[i : i + width].rstrip() for i in range(0, len(line), width)]
    return [row for row in rows if row.strip()]

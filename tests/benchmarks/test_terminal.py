"""benchmarks/terminal.py: what a terminal shows once a command ends, as pyte's emulator draws
it: a redraw in place leaves only its last state, lines pushed off the screen stay in the
scrollback, long lines wrap at the width; and a command run on a pseudo-terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from terminal import lines_left, run_in_terminal, terminal_rows, wrapped  # noqa: E402


def crlf(text: str) -> str:
    """`text` as a pseudo-terminal passes it on (its line discipline turns \\n into \\r\\n)."""
    return text.replace("\n", "\r\n")


def test_a_redraw_in_place_leaves_its_last_state():
    # a two-line view drawn three times over (cursor up, erase line), then a final line
    view = "".join(f"\x1b[2K{k}/3 jobs done\n\x1b[2Krunning: job {k}\n\x1b[2A" for k in range(3))
    raw = crlf("kept\n" + view + "\x1b[2K\n\x1b[2K\x1b[1A" + "\x1b[32m3 of 3 jobs done\x1b[0m\n")
    assert lines_left(raw, width=40, height=10) == ["kept", "3 of 3 jobs done"]


def test_lines_pushed_off_the_screen_stay_in_the_scrollback():
    raw = crlf("".join(f"line {i}\n" for i in range(25)))
    rows = terminal_rows(raw, width=40, height=10)
    assert rows == [f"line {i}" for i in range(25)]


def test_long_lines_wrap_at_the_width_and_blank_lines_are_not_counted():
    raw = crlf("x" * 50 + "\n\n\nend\n")
    assert terminal_rows(raw, width=20, height=10) == ["x" * 20, "x" * 20, "x" * 10, "", "", "end"]
    assert lines_left(raw, width=20, height=10) == ["x" * 20, "x" * 20, "x" * 10, "end"]
    assert wrapped(["x" * 50, "  ", "end"], width=20) == lines_left(raw, width=20, height=10)


def test_a_screen_erased_at_the_end_shows_what_is_above_it():
    raw = crlf("first\nsecond\n") + "\x1b[1A\x1b[J" + crlf("done\n")
    assert lines_left(raw, width=20, height=5) == ["first", "done"]


@pytest.mark.slow
def test_a_command_on_a_pseudo_terminal_sees_one_of_the_given_size(tmp_path):
    script = (
        "import os, shutil, sys; print(sys.stdout.isatty(), sys.stderr.isatty()); "
        "print(*shutil.get_terminal_size()); print(*os.get_terminal_size(1)); "
        "print(os.environ['TERM'])"
    )
    status, raw = run_in_terminal([sys.executable, "-c", script], tmp_path, width=90, height=30)
    assert status == 0, raw
    assert lines_left(raw, width=90, height=30) == ["True True", "90 30", "90 30", "xterm-256color"]

"""A command run in a pseudo-terminal, and what a terminal would show of it afterwards: a small
screen model that follows the cursor movements and erasures a live display draws with (rich
redraws its view in place and erases it at the end), so that the lines left on the screen
can be counted, as a person scrolling back would see them. The pseudo-terminal itself, and a
full terminal emulator's count (pyte: a screen of fixed height with its scrollback), come
from benchmarks/terminal.py, which benchmarks/terminal_lines.py measures with too."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))
from terminal import COLUMNS, ROWS, lines_left, run_in_terminal, wrapped
from terminal_lines import GOAL  # a whole run on a terminal leaves fewer lines than this

__all__ = ["COLUMNS", "GOAL", "ROWS", "lines_left", "run_in_terminal", "wrapped"]


# CSI sequences (cursor moves, erasures, colours), OSC strings, and other two-byte escapes
def plugin_environment() -> dict[str, str]:
    """This environment with the checkout's src/ first, where Snakemake finds the `symbnn`
    logger plugin (profiles/default sets `--logger symbnn`)."""
    repo = Path(__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": str(repo / "src")}


ESCAPE = re.compile(
    r"\x1b\[([?0-9;]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b."
)


class Screen:
    """Lines of a terminal `width` columns wide with unlimited scrollback."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[str] = [""]
        self.row = self.col = 0

    def _put(self, char: str) -> None:
        if self.col >= self.width:
            self._newline()
        line = self.lines[self.row].ljust(self.col)
        self.lines[self.row] = line[: self.col] + char + line[self.col + 1 :]
        self.col += 1

    def _newline(self) -> None:
        self.row += 1
        self.col = 0
        if self.row == len(self.lines):
            self.lines.append("")

    def _control(self, params: str, final: str) -> None:
        numbers = [int(n) for n in params.lstrip("?").split(";") if n.isdigit()]
        n = numbers[0] if numbers else 0
        if final == "A":
            self.row = max(0, self.row - max(n, 1))
        elif final == "B":
            for _ in range(max(n, 1)):
                self._newline()
        elif final == "C":
            self.col += max(n, 1)
        elif final == "D":
            self.col = max(0, self.col - max(n, 1))
        elif final == "G":
            self.col = max(n, 1) - 1
        elif final == "K":
            line = self.lines[self.row]
            if n == 0:
                self.lines[self.row] = line[: self.col]
            elif n == 1:
                self.lines[self.row] = " " * self.col + line[self.col :]
            else:
                self.lines[self.row] = ""
        elif final == "J" and n == 0:
            self.lines = self.lines[: self.row + 1]
            self.lines[self.row] = self.lines[self.row][: self.col]

    def feed(self, text: str) -> None:
        position = 0
        for match in ESCAPE.finditer(text):
            self._text(text[position : match.start()])
            if match.group(2):
                self._control(match.group(1), match.group(2))
            position = match.end()
        self._text(text[position:])

    def _text(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self._newline()
            elif char == "\r":
                self.col = 0
            elif char == "\b":
                self.col = max(0, self.col - 1)
            elif char >= " ":
                self._put(char)

    def shown(self) -> list[str]:
        """The non-empty lines left on the screen and in its scrollback."""
        return [line.rstrip() for line in self.lines if line.strip()]

"""Writing polars tables in the formats the report uses (CSV, Markdown, HTML, LaTeX, parquet), atomically."""

from __future__ import annotations

import html
import os
from pathlib import Path

import polars as pl

from symbnn.atomic import atomic_write


def to_markdown(frame: pl.DataFrame, float_precision: int = 4) -> str:
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=200,
        float_precision=float_precision,
    ):
        return str(frame) + "\n"


def to_html(frame: pl.DataFrame, float_precision: int = 3) -> str:
    """A self-contained HTML page holding `frame` as a table (for Snakemake's report)."""

    def cell(value) -> str:
        if value is None:
            return "&ndash;"
        text = f"{value:.{float_precision}f}" if isinstance(value, float) else str(value)
        return html.escape(text)

    head = "".join(f"<th>{html.escape(name)}</th>" for name in frame.columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in frame.iter_rows()
    )
    style = (
        "table{border-collapse:collapse;font-family:sans-serif;font-size:14px}"
        "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}"
        "td:first-child,td:nth-child(2){text-align:left}"
    )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><style>{style}</style></head><body>\n"
        f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n</body></html>\n"
    )


def write_table(frame: pl.DataFrame, path: str | os.PathLike) -> None:
    """Write ``frame`` in the format the suffix names: .csv, .md or .parquet."""
    path = Path(path)
    if path.suffix == ".csv":
        atomic_write(path, frame.write_csv)
    elif path.suffix == ".parquet":
        atomic_write(path, frame.write_parquet)
    elif path.suffix == ".md":
        atomic_write(path, lambda tmp: tmp.write_text(to_markdown(frame)))
    elif path.suffix == ".html":
        atomic_write(path, lambda tmp: tmp.write_text(to_html(frame)))
    elif path.suffix == ".tex":
        from symbnn.report.method_tables import to_latex

        atomic_write(path, lambda tmp: tmp.write_text(to_latex(frame)))
    else:
        raise ValueError(
            f"{path}: unknown table format {path.suffix!r} (use .csv, .md, .html, .tex or .parquet)"
        )

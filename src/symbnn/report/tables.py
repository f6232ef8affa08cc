"""Writing polars tables in the formats the report uses (CSV, Markdown, parquet), atomically."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from symbnn.atomic import atomic_write


def to_markdown(frame: pl.DataFrame, float_precision: int = 4) -> str:
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True,
                   tbl_hide_dataframe_shape=True, tbl_rows=-1, tbl_cols=-1,
                   tbl_width_chars=10_000, fmt_str_lengths=200, float_precision=float_precision):
        return str(frame) + "\n"


def write_table(frame: pl.DataFrame, path: str | os.PathLike) -> None:
    """Write ``frame`` in the format the suffix names: .csv, .md or .parquet."""
    path = Path(path)
    if path.suffix == ".csv":
        atomic_write(path, frame.write_csv)
    elif path.suffix == ".parquet":
        atomic_write(path, frame.write_parquet)
    elif path.suffix == ".md":
        atomic_write(path, lambda tmp: tmp.write_text(to_markdown(frame)))
    else:
        raise ValueError(f"{path}: unknown table format {path.suffix!r} (use .csv, .md or .parquet)")

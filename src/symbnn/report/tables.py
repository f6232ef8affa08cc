"""Writing polars tables in the formats the report uses (CSV, Markdown, HTML, LaTeX, parquet), atomically."""

from __future__ import annotations

import html
import os
import re
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


def to_latex(frame: pl.DataFrame, float_precision: int = 1) -> str:
    """A booktabs tabular of `frame` (strings left, numbers right, one decimal as the paper)."""

    def cell(value) -> str:
        if value is None:
            return "--"
        if isinstance(value, float):
            return f"{value:.{float_precision}f}"
        text = str(value).replace("_", r"\_").replace("&", r"\&").replace("%", r"\%")
        return text.replace("±", r"$\pm$")

    align = "".join("r" if dtype.is_numeric() else "l" for dtype in frame.dtypes)
    lines = [
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(cell(name) for name in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(cell(v) for v in row) + r" \\" for row in frame.iter_rows()]
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


# Which way is better, by a column header's name (before its unit in brackets): the report's
# HTML tables mark each such column's best value. Others (counts, MI, settings) are unmarked.
LOWER_IS_BETTER = ("MMD", "NS MMD", "ECE", "Brier", "NLL", "FPR95")
HIGHER_IS_BETTER = ("Acc", "AUPR")
NUMBER = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)", re.IGNORECASE)

# Click a header to sort its table by it (again: the other way); numbers sort as numbers, by
# the first number of a cell ("12.3 ± 0.4", "12.3 / 15.0"); a dash sorts last. A page may hold
# several tables: each header sorts its own.
SORT_SCRIPT = """
document.querySelectorAll('th').forEach(function (th) {
  th.addEventListener('click', function () {
    var column = th.cellIndex;
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var up = th.getAttribute('aria-sort') !== 'ascending';
    th.closest('tr').querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
    function key(row) {
      var text = row.cells[column].textContent.trim(), n = parseFloat(text);
      return isNaN(n) ? text : n;
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), order;
      if (typeof x === typeof y) { order = x < y ? -1 : x > y ? 1 : 0; }
      else { order = typeof x === 'number' ? -1 : 1; }
      return up ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""


TABLE_STYLE = (
    "table.symbnn{border-collapse:collapse;font-family:sans-serif;font-size:14px}"
    "table.symbnn th,table.symbnn td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "table.symbnn th{background:#f3f3f3;cursor:pointer}"
    "table.symbnn td.best{background:#eaf5ea}"
    "table.symbnn td:first-child,table.symbnn td:nth-child(2){text-align:left}"
    "table.symbnn td:first-child{white-space:nowrap}"
    ".legend{font-family:sans-serif;font-size:12px;color:#555}"
    "h3.symbnn{font-family:sans-serif;font-size:15px;margin:18px 0 6px}"
)


def better_direction(header: str) -> str | None:
    """ "min", "max" or None for a column header such as "MMD (x100)" or "Acc (%)"."""
    name = header.split(" (")[0].strip()
    # Table 2's statistics; a rejection share goes the way of its MMD
    name = re.sub(r" (median|mean|max|rej)$", "", name)
    if name in LOWER_IS_BETTER:
        return "min"
    return "max" if name in HIGHER_IS_BETTER else None


def first_number(value) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = NUMBER.match(str(value)) if value is not None else None
    return float(match[1]) if match else None


def best_rows(frame: pl.DataFrame) -> dict[str, set[int]]:
    """{column: rows holding its best value} for the columns `better_direction` knows."""
    best = {}
    for column in frame.columns:
        direction = better_direction(column)
        values = [first_number(v) for v in frame[column].to_list()]
        numbers = [v for v in values if v is not None and v == v]
        if direction is None or not numbers:
            continue
        target = min(numbers) if direction == "min" else max(numbers)
        best[column] = {i for i, v in enumerate(values) if v == target}
    return best


def _html_table(frame: pl.DataFrame, float_precision: int, sortable: bool) -> tuple[str, bool]:
    """(the <table> element, whether a column has its best value marked)."""

    def cell(value) -> str:
        if value is None:
            return "&ndash;"
        text = f"{value:.{float_precision}f}" if isinstance(value, float) else str(value)
        return html.escape(text)

    best = best_rows(frame)
    hint = " title='click to sort'" if sortable else ""
    arrows = {"min": " &darr;", "max": " &uarr;"}
    head = "".join(
        f"<th{hint}>{html.escape(name)}{arrows.get(better_direction(name) or '', '')}</th>"
        for name in frame.columns
    )
    body = "\n".join(
        "<tr>"
        + "".join(
            f"<td class='best' title='best in column'><b>{cell(v)}</b></td>"
            if i in best.get(name, ())
            else f"<td>{cell(v)}</td>"
            for name, v in zip(frame.columns, row, strict=True)
        )
        + "</tr>"
        for i, row in enumerate(frame.iter_rows())
    )
    table = (
        f"<table class='symbnn'>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n"
        "</tbody>\n</table>"
    )
    return table, bool(best)


def to_html(frame: pl.DataFrame, float_precision: int = 3) -> str:
    """A self-contained HTML page holding `frame` as a table (for Snakemake's report):
    sortable by a click on a header, each column's best value in bold where the header says
    which way is better."""
    return sections_to_html([("", frame)], float_precision)


def sections_to_html(sections: list[tuple[str, pl.DataFrame]], float_precision: int = 3) -> str:
    """`to_html` for a table too wide to read whole: one page of several tables, each under
    its title (e.g. a wide table's columns split into groups that share the first column)."""
    tables, marked = [], False
    for title, frame in sections:
        table, best = _html_table(frame, float_precision, sortable=True)
        heading = f"<h3 class='symbnn'>{html.escape(title)}</h3>\n" if title else ""
        tables.append(heading + table)
        marked |= best
    legend = "Click a header to sort. "
    if marked:
        legend += (
            "Bold: the best value of a column marked &darr; (lower is better) or &uarr; "
            "(higher is better)."
        )
    body = "\n".join(tables)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><style>{TABLE_STYLE}</style></head>"
        f"<body>\n{body}\n<p class='legend'>{legend}</p>\n<script>{SORT_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def split_columns(
    frame: pl.DataFrame, groups: list[tuple[str, list[str]]], key: str
) -> list[tuple[str, pl.DataFrame]]:
    """`frame`'s columns in titled groups, each led by the `key` column (e.g. the
    architecture), rows where every column of the group is empty left out; columns no group
    names are left out too."""
    sections = []
    for title, columns in groups:
        part = frame.select(key, *columns)
        part = part.filter(~pl.all_horizontal(pl.col(columns).is_null()))
        if part.height:
            sections.append((title, part))
    return sections


def table_fragment(frame: pl.DataFrame, float_precision: int = 3) -> str:
    """The table of `to_html` with its style, no page, legend or script: for a page that
    inserts it into its own (the report's first page)."""
    table, _ = _html_table(frame, float_precision, sortable=False)
    # a narrow column of the page: the table scrolls sideways instead of overlapping it
    return f"<style>{TABLE_STYLE}</style>\n<div style='overflow-x:auto'>{table}</div>"


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
        atomic_write(path, lambda tmp: tmp.write_text(to_latex(frame)))
    else:
        raise ValueError(
            f"{path}: unknown table format {path.suffix!r} (use .csv, .md, .html, .tex or .parquet)"
        )

"""Rule method_tables: the paper's Tables 1 and 2 for one experiment, Table 1 beside the
paper's figures, and the findings."""

import polars as pl

from symbnn.mmd.spread import width_notes
from symbnn.report.findings import findings
from symbnn.report.method_tables import (
    paper_comparison,
    table1,
    table1_display,
    table2,
    unit_table,
    with_units,
    with_width_notes,
)
from symbnn.report.paper import BLOCK_OF_DATASET, paper_table1
from symbnn.report.tables import write_table
from symbnn.runlog import log_to


def formats(data, text=None, html=None):
    """The frame written in each format: `data` for programs (parquet, CSV), `text` for
    readers (Markdown, LaTeX; default `data`), `html` for the report (default `text`)."""
    text = data if text is None else text
    html = text if html is None else html
    return {"parquet": data, "csv": data, "md": text, "tex": text, "html": html}


with log_to(snakemake.log[0]):
    mmd = pl.concat([pl.read_parquet(path) for path in snakemake.input.mmd], how="diagonal_relaxed")
    metrics = pl.concat(
        [pl.read_parquet(path) for path in snakemake.input.metrics], how="diagonal_relaxed"
    )
    labels = snakemake.params.labels  # row label of each method, in row order
    units = unit_table(mmd, metrics, labels)
    first = table1(units)
    target = pl.read_parquet(snakemake.input.converged).filter(pl.col("converged"))
    target_sd = float(target["test_accuracy"].std() * 100) if target.height > 1 else None
    block = BLOCK_OF_DATASET.get(snakemake.params.dataset)
    paper = paper_table1(block) if block else first.head(0).select(["group", "method"])
    spread = pl.concat([pl.read_parquet(path) for path in snakemake.input.spread])
    # "mean ± sd" text, units in the headers, each row's canonical width against the target's
    shown = with_width_notes(table1_display(first), width_notes(spread), labels)
    second = table2(mmd, labels)
    beside = paper_comparison(first, paper)
    found = findings(units, target_accuracy_sd=target_sd)
    tables = {
        "table1": formats(first, text=shown),
        "spread": formats(spread),
        "table1_units": formats(units),
        "findings": formats(found),
        # the report's HTML tables carry each figure's unit in its header
        "table2": formats(second, html=with_units(second)),
        "table1_paper": formats(beside, html=with_units(beside, "ours / paper")),
    }
    for name, table in tables.items():
        for suffix, frame in table.items():
            key = f"{name}_{suffix}"
            if key in snakemake.output.keys():  # noqa: SIM118 (a Namedlist: `in` tests its values)
                write_table(frame, snakemake.output[key])
    print(shown)
    print(found)

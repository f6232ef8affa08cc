"""Rule method_tables: the paper's Tables 1 and 2 for one experiment, Table 1 beside the
paper's figures, and the findings."""

import polars as pl

from symbnn.report.findings import findings
from symbnn.report.method_tables import (
    paper_comparison,
    table1,
    table1_display,
    table2,
    with_units,
)
from symbnn.report.paper import BLOCK_OF_DATASET, paper_table1
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    mmd = pl.concat([pl.read_parquet(path) for path in snakemake.input.mmd], how="diagonal_relaxed")
    metrics = pl.concat(
        [pl.read_parquet(path) for path in snakemake.input.metrics], how="diagonal_relaxed"
    )
    first = table1(mmd, metrics)
    block = BLOCK_OF_DATASET.get(snakemake.params.dataset)
    paper = paper_table1(block) if block else first.head(0).select(["group", "method"])
    shown = table1_display(first)
    tables = {
        # figures for programs (parquet, CSV), "mean ± sd" text for readers (Markdown, LaTeX, HTML)
        "table1": {"parquet": first, "csv": first, "md": shown, "tex": shown, "html": shown},
        "findings": findings(first),
    }
    # the report's HTML tables carry each figure's unit in its header
    second = table2(mmd)
    tables["table2"] = dict.fromkeys(("parquet", "csv", "md", "tex"), second)
    tables["table2"]["html"] = with_units(second)
    beside = paper_comparison(first, paper)
    tables["table1_paper"] = dict.fromkeys(("parquet", "csv", "md", "tex"), beside)
    tables["table1_paper"]["html"] = with_units(beside, "ours / paper")
    for name, table in tables.items():
        for suffix in ("parquet", "csv", "md", "tex", "html"):
            key = f"{name}_{suffix}"
            frame = table[suffix] if isinstance(table, dict) else table
            if key in snakemake.output.keys():  # noqa: SIM118 (a Namedlist: `in` tests its values)
                write_table(frame, snakemake.output[key])
    print(shown)
    print(tables["findings"])

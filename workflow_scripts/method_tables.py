"""Rule method_tables: the paper's Tables 1 and 2 for one experiment, and its findings."""

import polars as pl

from symbnn.report.findings import findings
from symbnn.report.method_tables import table1, table2
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    mmd = pl.concat([pl.read_parquet(path) for path in snakemake.input.mmd], how="diagonal_relaxed")
    metrics = pl.concat(
        [pl.read_parquet(path) for path in snakemake.input.metrics], how="diagonal_relaxed"
    )
    first = table1(mmd, metrics)
    tables = {"table1": first, "table2": table2(mmd), "findings": findings(first)}
    for name, table in tables.items():
        for suffix in ("parquet", "csv", "md", "tex", "html"):
            key = f"{name}_{suffix}"
            if key in snakemake.output.keys():  # noqa: SIM118 (a Namedlist: `in` tests its values)
                write_table(table, snakemake.output[key])
        print(table)

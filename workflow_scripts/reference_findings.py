"""Rule reference_findings: is the paper's target close to the HMC posterior, and is each
method closer to HMC than to the target (symbnn.reference.findings)?"""

import polars as pl

from symbnn.reference.findings import reference_findings
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    table = reference_findings(
        pl.read_parquet(snakemake.input.units), pl.read_parquet(snakemake.input.chains)
    )
    write_table(table, snakemake.output.table)
    write_table(table, snakemake.output.summary_md)
    write_table(table, snakemake.output.summary_html)
    print(table)

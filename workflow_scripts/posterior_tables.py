"""Rule posterior_tables: training summary, per-sample results and store layout tables."""

import polars as pl

from symbnn.report.posterior_tables import per_sample_table, store_table, training_summary
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.store import open_store

with log_to(snakemake.log[0]):
    store = open_store(snakemake.input.store)
    convergence = pl.read_parquet(snakemake.input.converged)
    summary = training_summary(store, convergence)
    layout = store_table(store)
    write_table(summary, snakemake.output.training_csv)
    write_table(summary, snakemake.output.training_md)
    write_table(summary, snakemake.output.training_html)
    write_table(per_sample_table(store, convergence), snakemake.output.samples_csv)
    write_table(layout, snakemake.output.store_csv)
    write_table(layout, snakemake.output.store_md)
    print(summary)

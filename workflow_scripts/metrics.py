"""Rule metrics: accuracy, ECE, Brier, NLL, AUPR, FPR95, IDMI and OODMI of one method's
predictions, one row per unit (a mode of a one-mode variant, a replicate of a multi-mode one:
each unit's samples an ensemble)."""

import polars as pl

from symbnn.report.method_tables import metrics_row
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.store import open_store

with log_to(snakemake.log[0]):
    samples = open_store(snakemake.input.samples)
    pool = pl.read_parquet(snakemake.input.pool_converged).filter(pl.col("converged"))
    rows = metrics_row(
        snakemake.input.predictions,
        score=snakemake.params.score,
        bins=snakemake.params.bins,
        units=samples.info("unit"),
        mode_index=samples.info("mode_index"),
        # mode k is the pool's k-th converged network
        mode_accuracy=pool["test_accuracy"].to_numpy(),
    )
    write_table(rows, snakemake.output.row)
    print(rows)

"""Rule reference_metrics: the uncertainty metrics of Table 1 (accuracy, ECE, Brier, NLL, AUPR,
FPR95, IDMI, OODMI) of the HMC reference's predictions, all chains as one posterior and each
chain as its own ensemble."""

import polars as pl

from symbnn.report.method_tables import metrics_row
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.store import open_store

with log_to(snakemake.log[0]):
    chains = open_store(snakemake.input.store).info("chain")
    options = {"score": snakemake.params.score, "bins": snakemake.params.bins}
    whole = metrics_row(snakemake.input.predictions, **options)
    per_chain = metrics_row(snakemake.input.predictions, units=chains, **options)
    table = pl.concat(
        [
            whole.with_columns(pl.lit("all chains").alias("scope")),
            per_chain.with_columns(pl.lit("one chain").alias("scope")),
        ],
        how="diagonal_relaxed",
    )
    table = table.with_columns(pl.lit("hmc").alias("method")).drop("variant", "mode_accuracy")
    table = table.select("method", "scope", pl.exclude("method", "scope"))
    write_table(table, snakemake.output.table)
    write_table(table, snakemake.output.summary_md)
    write_table(table, snakemake.output.summary_html)
    print(table)

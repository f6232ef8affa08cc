"""Rule minmass_report: Figure-2-style plot and a summary table of the min-mass results,
converged and unconverged networks apart."""

import polars as pl

from symbnn.report.figures import minmass_figure, minmass_summary, with_network_convergence
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    experiment = snakemake.wildcards.experiment
    table = with_network_convergence(
        pl.read_parquet(snakemake.input.table), pl.read_parquet(snakemake.input.converged)
    )
    minmass_figure(table, snakemake.output.figure, title=f"{experiment}: min-mass")
    summary = minmass_summary(table, experiment)
    write_table(summary, snakemake.output.summary)
    print(summary)

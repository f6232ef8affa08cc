"""Checkpoint accuracies: every network's test accuracy in a store (what the acceptance rule
is applied to, while planning and by the convergence rules)."""

from symbnn.acceptance import network_accuracies
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    table = network_accuracies(snakemake.input.store)
    write_table(table, snakemake.output.table)
    print(f"{table.height} networks of {snakemake.input.store}")

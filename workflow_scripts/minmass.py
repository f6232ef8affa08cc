"""Rule minmass: the min-mass problem for every network of a store, as a table."""

from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.symmetry.minmass import minmass_table

with log_to(snakemake.log[0]):
    table = minmass_table(snakemake.input.store, solver=snakemake.params.solver)
    write_table(table, snakemake.output.table)
    print(table.select("mass_before", "mass_after", "iterations").describe())

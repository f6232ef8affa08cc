"""Rule plateau: the target's first seeds at 1x and 2x the recipe's epochs, compared."""

from symbnn.plateau import plateau_table
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    table = plateau_table(snakemake.input.target, snakemake.input.longer)
    for key in ("parquet", "md", "html"):
        write_table(table, snakemake.output[key])
    print(table)

"""Rule reference_mmd_table: every comparison with the HMC reference in one table."""

from symbnn.reference.compare import reference_mmd_table
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    table = reference_mmd_table(list(snakemake.input.summaries))
    write_table(table, snakemake.output.table)
    write_table(table, snakemake.output.summary_md)
    write_table(table, snakemake.output.summary_html)
    print(table)

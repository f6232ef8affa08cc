"""Rule convergence: flag each network of a posterior store converged or not."""

from symbnn.posterior import convergence_table
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    table = convergence_table(
        snakemake.input.store,
        snakemake.params.acceptance["min_accuracy"],
        snakemake.params.acceptance["max_below_median"],
    )
    write_table(table, snakemake.output.table)
    print(f"{int(table['converged'].sum())} of {table.height} networks kept")
    print(table.group_by("reason").len().sort("reason"))

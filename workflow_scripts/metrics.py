"""Rule metrics: accuracy, ECE, Brier, AUPR, FPR95, IDMI and OODMI of one method's predictions."""

from symbnn.report.method_tables import metrics_row
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    row = metrics_row(
        snakemake.input.predictions, score=snakemake.params.score, bins=snakemake.params.bins
    )
    write_table(row, snakemake.output.row)
    print(row)

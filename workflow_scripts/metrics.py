"""Rule metrics: accuracy, ECE, Brier, NLL, AUPR, FPR95, IDMI and OODMI of one method's
predictions; for a single-mode variant one row per mode (each mode's samples an ensemble)."""

from symbnn.report.method_tables import metrics_row
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.store import open_store

with log_to(snakemake.log[0]):
    single = snakemake.wildcards.variant == "single"
    modes = open_store(snakemake.input.samples).info("mode_index") if single else None
    rows = metrics_row(
        snakemake.input.predictions,
        score=snakemake.params.score,
        bins=snakemake.params.bins,
        modes=modes,
    )
    write_table(rows, snakemake.output.row)
    print(rows)

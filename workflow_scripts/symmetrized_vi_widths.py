"""Rule symmetrised_vi_widths: mean-field vs symmetrised VI on one-hidden-layer MLPs of
several widths on the packaged digits, against a deep-ensemble reference; the per-fit table,
its summary by width and family, and the paired gaps."""

import torch

from symbnn.analyses import symmetrized_vi_widths
from symbnn.jobenv import environment
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import SymmetrizedViWidths

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = SymmetrizedViWidths.parse(
        snakemake.params.settings, "analyses.symmetrised_vi_widths"
    )
    table = symmetrized_vi_widths.compare(settings, environment(snakemake).data_root)
    summary = symmetrized_vi_widths.summary(table)
    gaps = symmetrized_vi_widths.gaps(table)
    write_table(table, snakemake.output.runs)
    write_table(summary, snakemake.output.table)
    write_table(summary, snakemake.output.html)
    write_table(gaps, snakemake.output.gaps)
    write_table(gaps, snakemake.output.gaps_html)
    print(summary)
    print(gaps)

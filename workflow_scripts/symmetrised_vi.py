"""Rule symmetrised_vi: symmetrised vs plain mean-field VI on the two-Gaussian MLP task."""

import torch

from symbnn.analyses import symmetrised_vi
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import SymmetrisedVi

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = SymmetrisedVi.parse(snakemake.params.settings, "analyses.symmetrised_vi")
    table = symmetrised_vi.compare(settings)
    summary = symmetrised_vi.summary(table)
    write_table(table, snakemake.output.runs)
    write_table(summary, snakemake.output.table)
    write_table(summary, snakemake.output.html)
    print(table)
    print(summary)

"""Rule symmetrised_vi: symmetrised vs plain mean-field VI on the two-Gaussian MLP task."""

import torch

from symbnn.analyses import symmetrized_vi
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import SymmetrizedVi

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = SymmetrizedVi.parse(snakemake.params.settings, "analyses.symmetrised_vi")
    table = symmetrized_vi.compare(settings)
    summary = symmetrized_vi.summary(table)
    write_table(table, snakemake.output.runs)
    write_table(summary, snakemake.output.table)
    write_table(summary, snakemake.output.html)
    print(table)
    print(summary)

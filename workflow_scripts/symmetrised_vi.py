"""Rule symmetrised_vi: symmetrised vs plain mean-field VI on the two-Gaussian MLP task."""

import torch

from symbnn import symvi
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    table = symvi.compare(snakemake.params.settings)
    summary = symvi.summary(table)
    write_table(table, snakemake.output.runs)
    write_table(summary, snakemake.output.table)
    write_table(summary, snakemake.output.html)
    print(table)
    print(summary)

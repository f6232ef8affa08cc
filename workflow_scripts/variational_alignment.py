"""Rule variational_alignment: two mean-field posteriors of the toy MLP, the path between
them without and with alignment (means and stds), barrier table and plot."""

import torch

from symbnn.alignment.figures import interpolation_figure
from symbnn.alignment.interpolation import barrier_table
from symbnn.analyses import symmetrized_vi
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import SymmetrizedVi

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = SymmetrizedVi.parse(snakemake.params.settings, "analyses.symmetrised_vi")
    curves = symmetrized_vi.variational_alignment_curves(settings)
    barriers = barrier_table(curves)
    write_table(curves, snakemake.output.curves)
    write_table(barriers, snakemake.output.table)
    write_table(barriers, snakemake.output.html)
    interpolation_figure(
        curves, snakemake.output.figure, title="mean-field VI, two-Gaussian MLP task"
    )
    print(barriers)

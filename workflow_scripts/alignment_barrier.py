"""Rule alignment_barrier: two target networks, the loss along the path between them without
and with alignment (weight matching), the barrier table and the interpolation plot."""

import torch

from symbnn.alignment.figures import interpolation_figure
from symbnn.alignment.stores import converged_pair, store_barriers
from symbnn.jobenv import environment
from symbnn.posterior import converged_rows
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Alignment

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    store = snakemake.input.store
    row_a, row_b = converged_pair(store, converged_rows(snakemake.input.converged))
    options = Alignment.parse(snakemake.params.alignment, "alignment")
    curves, barriers = store_barriers(
        store,
        store,
        row_a=row_a,
        row_b=row_b,
        data_root=environment(snakemake).data_root,
        splits=options.splits,
        points=options.points,
        bn_batches=options.bn_batches,
        max_sweeps=options.max_sweeps,
    )
    barriers = barriers.with_columns(row_a=row_a, row_b=row_b)
    write_table(curves, snakemake.output.curves)
    write_table(barriers, snakemake.output.table)
    write_table(barriers, snakemake.output.html)
    interpolation_figure(
        curves,
        snakemake.output.figure,
        title=f"{snakemake.wildcards.experiment}: target networks {row_a} and {row_b}",
    )
    print(barriers)

"""Rule barrier_statistics: loss and accuracy barriers over pairs of SGD and mean-field VI
MLPs on the packaged digits, before and after alignment; the per-pair table and its summary."""

import torch

from symbnn.alignment.pairs import summary
from symbnn.analyses import barrier_statistics
from symbnn.jobenv import environment
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import BarrierStatistics

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = BarrierStatistics.parse(snakemake.params.settings, "analyses.barrier_statistics")
    table = barrier_statistics.barrier_pairs(settings, environment(snakemake).data_root)
    stats = summary(table)
    write_table(table, snakemake.output.pairs)
    write_table(stats, snakemake.output.table)
    write_table(stats, snakemake.output.html)
    print(stats)

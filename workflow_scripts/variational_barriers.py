"""Rule variational_barriers: pairs of the experiment's mean-field VI posteriors, the expected
loss and predictive accuracy along the path between each pair as fitted and after aligning
them (means and standard deviations together); per-pair barriers, their summary, the plot."""

import torch

from symbnn.alignment.figures import interpolation_figure
from symbnn.alignment.pairs import load_fits, pair_rows, report_table, variational_curves
from symbnn.alignment.stores import evaluation_sets
from symbnn.device import resolve_device
from symbnn.jobenv import environment
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Alignment, Data

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    training, samples = snakemake.params.training, snakemake.params.samples
    settings = Alignment.parse(snakemake.params.alignment, "alignment")
    sets, _ = evaluation_sets(
        Data.parse(training["data"], "data"), env.data_root, settings.splits, env.download
    )
    fits = load_fits(snakemake.input.fits)
    curves = variational_curves(
        training["model"], fits, sets, settings, samples, resolve_device(env.device)
    )
    rows = pair_rows(curves, "mean_field_vi")
    write_table(curves, snakemake.output.curves)
    write_table(rows, snakemake.output.pairs)
    table = report_table(rows)
    write_table(table, snakemake.output.table)
    write_table(table, snakemake.output.html)
    interpolation_figure(
        curves,
        snakemake.output.figure,
        title=f"{snakemake.wildcards.experiment}: {len(fits) // 2} pairs of mean-field VI posteriors",
    )
    print(table)

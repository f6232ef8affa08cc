"""Rule toy_posterior: the toy posterior of paper Figure 1 (training, outliers, symmetry forms, function check)."""

import torch

from symbnn.analyses.toy import run_toy, summary_table, toy_figure, weights_table
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Toy

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = Toy.parse(snakemake.params.settings, "analyses.toy")
    result = run_toy(settings)  # raises if a symmetry form changes some network's function
    write_table(weights_table(result), snakemake.output.weights)
    summary = summary_table(result, settings)
    write_table(summary, snakemake.output.summary_md)
    write_table(summary, snakemake.output.summary_html)
    toy_figure(result, snakemake.output.figure)
    print(summary)

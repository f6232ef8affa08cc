"""Rule marginals: layer-wise marginals before and after symmetry removal, with KS tests (paper
D.3); the networks of each stage saved for rule marginals_figure."""

import torch

from symbnn.analyses.marginals import run_marginals, save_stages
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Marginals

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = Marginals.parse(snakemake.params.settings, "analyses.marginals")
    result = run_marginals(settings)
    write_table(result.tests, snakemake.output.tests)
    write_table(result.summary, snakemake.output.summary_md)
    write_table(result.summary, snakemake.output.summary_html)
    save_stages(result.stages, snakemake.output.stages)
    print(result.summary)

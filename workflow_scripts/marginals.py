"""Rule marginals: layer-wise marginals before and after symmetry removal, with KS tests (paper D.3)."""

import torch

from symbnn.analyses.marginals import MarginalSettings, marginals_figure, run_marginals
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    settings = MarginalSettings.from_dict(snakemake.params.settings)
    result = run_marginals(settings)
    write_table(result.tests, snakemake.output.tests)
    write_table(result.summary, snakemake.output.summary_md)
    write_table(result.summary, snakemake.output.summary_html)
    inputs = result.stages["trained"]["layers.0.weight"].shape[-1]  # (networks, units, inputs)
    marginals_figure(
        result,
        snakemake.output.figure,
        units=settings.plot_units,
        title=f"{settings.n_networks} MLPs {[inputs, *settings.hidden, 1]} on {settings.dataset}: "
        f"marginals of {settings.plot_units} units per layer",
    )
    print(result.summary)

"""Rule marginals: layer-wise marginals before and after symmetry removal, with KS tests (paper D.3)."""

import torch

from symbnn.analyses.marginals import marginals_figure, run_marginals
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
    inputs = result.stages["trained"]["layers.0.weight"].shape[-1]  # (networks, units, inputs)
    marginals_figure(
        result,
        snakemake.output.figure,
        units=settings.plot_units,
        title=f"{settings.n_networks} MLPs {[inputs, *settings.hidden, 1]} on {settings.dataset}: "
        f"marginals of {settings.plot_units} units per layer",
    )
    print(result.summary)

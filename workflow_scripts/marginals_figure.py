"""Rule marginals_figure: Figure 9's marginals of the MLPs' units, from the networks rule
marginals saved (a figure-only setting redraws it without training)."""

import polars as pl

from symbnn.analyses.marginals import drawable_result, marginals_figure
from symbnn.runlog import log_to
from symbnn.settings import config_from_mapping

with log_to(snakemake.log[0]):
    # what the figure's title says comes from the settings that made the networks
    settings = config_from_mapping(snakemake.config, "config").analyses.marginals
    units = snakemake.params.figure["plot_units"]
    result = drawable_result(snakemake.input.stages, pl.read_parquet(snakemake.input.tests))
    inputs = result.stages["trained"]["layers.0.weight"].shape[-1]  # (networks, units, inputs)
    marginals_figure(
        result,
        snakemake.output.figure,
        units=units,
        title=f"{settings.n_networks} MLPs {[inputs, *settings.hidden, 1]} on {settings.dataset}: "
        f"marginals of {units} units per layer",
    )

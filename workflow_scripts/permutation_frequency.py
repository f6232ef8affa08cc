"""Rule permutation_frequency: Kendall's tau between consecutive sorting permutations during training (paper 5.2)."""

import torch

from symbnn.analyses.permutation_frequency import (
    FrequencySettings,
    frequency_figure,
    mean_tau,
    milestone_steps,
    run_frequency,
    summary,
)
from symbnn.device import resolve_device
from symbnn.posterior import load_in_distribution
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    experiment = snakemake.wildcards.experiment
    settings = FrequencySettings.from_dict(snakemake.params.settings)
    recipe = settings.recipe(snakemake.params.recipe)
    train, _ = load_in_distribution(
        snakemake.params.data, snakemake.params.data_root, snakemake.params.download
    )
    device = resolve_device(snakemake.params.device)
    table, permutations = run_frequency(snakemake.params.model, recipe, train, settings, device)
    write_table(table, snakemake.output.table)
    write_table(permutations, snakemake.output.permutations)
    milestones = milestone_steps(recipe, len(train))
    counts = summary(table, milestones)
    write_table(counts, snakemake.output.summary_md)
    write_table(counts, snakemake.output.summary_html)
    frequency_figure(
        mean_tau(table),
        milestones,
        snakemake.output.figure,
        title=f"{experiment}: {settings.runs} runs, {recipe.epochs} epochs, "
        f"snapshots every {settings.every_k_steps} steps",
    )
    print(counts)

"""Rule permutation_frequency: Kendall's tau between consecutive sorting permutations during training (paper 5.2)."""

import torch

from symbnn.analyses.permutation_frequency import (
    analysis_recipe,
    frequency_figure,
    mean_tau,
    milestone_steps,
    run_frequency,
    summary,
)
from symbnn.data.experiment import load_in_distribution
from symbnn.device import resolve_device
from symbnn.jobenv import environment
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Data, PermutationFrequency, Recipe

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    experiment = snakemake.wildcards.experiment
    env = environment(snakemake)
    settings = PermutationFrequency.parse(
        snakemake.params.settings, "analyses.permutation_frequency"
    )
    training = snakemake.params.training
    recipe = analysis_recipe(settings, Recipe.parse(training["recipe"], "recipe"))
    train, test = load_in_distribution(
        Data.parse(training["data"], "data"), env.data_root, env.download, training["model"]
    )
    device = resolve_device(env.device)
    table, permutations = run_frequency(
        training["model"],
        recipe,
        train,
        settings,
        device,
        test=test,
        min_accuracy=snakemake.params.min_accuracy,
    )
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

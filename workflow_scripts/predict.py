"""Rule predict: every sample's probabilities on the test and OOD sets."""

import torch

from symbnn.data.experiment import load_in_distribution, load_out_of_distribution
from symbnn.device import resolve_device
from symbnn.jobenv import environment, predict_batch
from symbnn.predictions import open_predictions, write_predictions
from symbnn.runlog import log_to
from symbnn.settings import Data
from symbnn.store import open_store

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    data = Data.parse(snakemake.params.data, "data")
    # the samples' architecture must take the test images (the OOD set matches their shape)
    model = open_store(snakemake.input.store).architecture or None
    _, test = load_in_distribution(data, env.data_root, env.download, model)
    ood = load_out_of_distribution(data, env.data_root, test, env.download)
    write_predictions(
        snakemake.input.store,
        snakemake.output.predictions,
        test,
        ood,
        device=resolve_device(env.device),
        batch=predict_batch(snakemake),
        # a linearised predictive (Laplace) expands each sample's network at its pool mode
        linearize_at=snakemake.input.get("pool")
        if snakemake.params.predictive == "linearised"
        else None,
    )
    accuracy = open_predictions(snakemake.output.predictions).read("test_accuracy")
    print(
        f"{len(accuracy)} samples, test accuracy min {accuracy.min():.4f} "
        f"median {float(sorted(accuracy)[len(accuracy) // 2]):.4f} max {accuracy.max():.4f}"
    )

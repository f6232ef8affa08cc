"""Rule predict: every sample's probabilities on the test and OOD sets."""

import torch

from symbnn.device import resolve_device
from symbnn.posterior import load_in_distribution, load_out_of_distribution
from symbnn.predictions import open_predictions, write_predictions
from symbnn.runlog import log_to

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    data = snakemake.params.data
    _, test = load_in_distribution(data, snakemake.params.data_root, snakemake.params.download)
    ood = load_out_of_distribution(
        data, snakemake.params.data_root, test, snakemake.params.download
    )
    write_predictions(
        snakemake.input.store,
        snakemake.output.predictions,
        test,
        ood,
        device=resolve_device(snakemake.params.device),
        batch=snakemake.params.batch,
    )
    accuracy = open_predictions(snakemake.output.predictions).read("test_accuracy")
    print(
        f"{len(accuracy)} samples, test accuracy min {accuracy.min():.4f} "
        f"median {float(sorted(accuracy)[len(accuracy) // 2]):.4f} max {accuracy.max():.4f}"
    )

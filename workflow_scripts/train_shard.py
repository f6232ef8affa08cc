"""Rule train_shard: train one shard of seeds into a shard store."""

import torch

from symbnn.jobenv import environment
from symbnn.posterior import train_shard
from symbnn.runlog import log_to
from symbnn.settings import Data, Recipe

# Use exactly the cores Snakemake granted: oversubscribed BLAS threads slow tiny nets 10x.
torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    training = snakemake.params.training
    store = train_shard(
        snakemake.output.store,
        snakemake.wildcards.experiment,
        Data.parse(training["data"], "data"),
        training["model"],
        Recipe.parse(training["recipe"], "recipe"),
        snakemake.params.seeds,
        data_root=env.data_root,
        download=env.download,
        device=env.device,
        progress=True,
    )
    print(f"wrote {store}")

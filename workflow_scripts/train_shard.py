"""Rule train_shard: train one shard of seeds into a shard store."""

import torch

from symbnn.posterior import train_shard
from symbnn.runlog import log_to

# Use exactly the cores Snakemake granted: oversubscribed BLAS threads slow tiny nets 10x.
torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    store = train_shard(
        snakemake.output.store,
        snakemake.wildcards.experiment,
        snakemake.params.experiment,
        snakemake.params.seeds,
        data_root=snakemake.params.data_root,
        download=snakemake.params.download,
        device=snakemake.params.device,
        progress=True,
    )
    print(f"wrote {store}")

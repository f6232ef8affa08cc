"""Rule sample: one block of modes of a method's variant, written as a sample store."""

import torch

from symbnn.methods.sampling import sample_mode_store
from symbnn.runlog import log_to

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    store = sample_mode_store(
        snakemake.output.store,
        snakemake.wildcards.experiment,
        snakemake.config["experiments"][snakemake.wildcards.experiment],
        snakemake.wildcards.method,
        snakemake.wildcards.variant,
        int(snakemake.wildcards.block),
        snakemake.input.pool,
        data_root=snakemake.params.data_root,
        download=snakemake.params.download,
        device=snakemake.params.device,
    )
    print(f"wrote {store}")

"""Rule gather_posterior: assemble the shard stores into the posterior store."""

from symbnn.posterior import gather_shards
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    store = gather_shards(list(snakemake.input.shards), snakemake.output.store)
    print(f"wrote {store}")

"""Rule gather_samples: assemble a variant's block stores into its sample store."""

from symbnn.methods.sampling import SAMPLE_ATTRS
from symbnn.posterior import gather_shards
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    store = gather_shards(
        list(snakemake.input.blocks), snakemake.output.store, shared_attrs=SAMPLE_ATTRS
    )
    print(f"wrote {store}")

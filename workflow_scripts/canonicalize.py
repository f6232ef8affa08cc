"""Rule canonicalize: write the canonical form of every network of a store."""

from symbnn.runlog import log_to
from symbnn.store import open_store
from symbnn.symmetry.canonical_store import canonicalize_store

with log_to(snakemake.log[0]):
    canonicalize_store(
        snakemake.input.store,
        snakemake.output.store,
        scale=snakemake.params.scale,
        key=snakemake.params.key,
    )
    print(f"wrote {open_store(snakemake.output.store)}")

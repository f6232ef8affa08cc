"""Rules reference_mmd_target and reference_mmd_method: layer-wise MMD and NS MMD of the
paper's target (its kept networks) or of a method's variant (unit by unit) against the HMC
reference (every sample)."""

from symbnn.jobenv import environment
from symbnn.reference.compare import against_reference
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    per_layer, summary = against_reference(
        (snakemake.input.reference, snakemake.input.reference_canonical),
        (snakemake.input.samples, snakemake.input.samples_canonical),
        snakemake.params.kept,
        seed=snakemake.params.seed,
        device=environment(snakemake).device,
    )
    write_table(per_layer, snakemake.output.per_layer)
    write_table(summary, snakemake.output.summary)
    print(summary)

"""Rule mmd_method: MMD and NS MMD of one method's samples against the target posterior."""

from symbnn.jobenv import environment
from symbnn.mmd.ensembles import method_mmd
from symbnn.mmd.spread import canonical_spread
from symbnn.posterior import converged_rows
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    kept = converged_rows(snakemake.input.converged)
    per_layer, summary = method_mmd(
        (snakemake.input.target, snakemake.input.target_canonical),
        (snakemake.input.samples, snakemake.input.samples_canonical),
        kept,
        pvalue=snakemake.params.pvalue,
        seed=snakemake.params.seed,
        device=environment(snakemake).device,
    )
    write_table(per_layer, snakemake.output.per_layer)
    write_table(summary, snakemake.output.summary)
    spread = canonical_spread(
        snakemake.input.target_canonical, snakemake.input.samples_canonical, kept
    )
    write_table(spread, snakemake.output.spread)
    print(summary)

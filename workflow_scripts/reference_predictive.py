"""Rule reference_predictive: Izmailov et al.'s top-1 agreement and total variation of the
paper's target and of every method's variant (unit by unit) against the HMC reference's
posterior predictive, and per HMC chain against the target and the other chains."""

from symbnn.reference.predictive import predictive_tables, summary_table
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.store import open_store

with log_to(snakemake.log[0]):
    methods = [
        (method, variant, predictions, open_store(samples).info("unit"))
        for (method, variant), predictions, samples in zip(
            snakemake.params.variants, snakemake.input.predictions, snakemake.input.samples
        )
    ]
    per_unit, chains = predictive_tables(
        snakemake.input.reference,
        open_store(snakemake.input.reference_store),
        snakemake.input.target,
        snakemake.params.kept,
        methods,
    )
    summary = summary_table(per_unit)
    write_table(per_unit, snakemake.output.units)
    write_table(chains, snakemake.output.chains)
    write_table(summary, snakemake.output.table)
    write_table(summary, snakemake.output.summary_md)
    write_table(summary, snakemake.output.summary_html)
    print(summary)
    print(chains)

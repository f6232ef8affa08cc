"""Rule mmd_deep_ensembles: MMD and NS MMD of an ensemble of target checkpoints vs the rest."""

from symbnn.mmd.ensembles import deep_ensembles_check
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    settings = snakemake.params.mmd
    per_layer, summary = deep_ensembles_check(
        snakemake.input.target,
        snakemake.input.canonical,
        settings["de_members"],
        pvalue=settings.get("pvalue", False),
        seed=settings.get("seed", 0),
        device=snakemake.params.device,
    )
    write_table(per_layer, snakemake.output.per_layer)
    write_table(summary, snakemake.output.summary)
    write_table(summary, snakemake.output.summary_md)
    write_table(summary, snakemake.output.summary_html)
    print(summary)

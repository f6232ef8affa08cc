"""Rule mmd_deep_ensembles: MMD and NS MMD of an ensemble of target checkpoints vs the rest."""

from symbnn.jobenv import environment
from symbnn.mmd.ensembles import deep_ensembles_check
from symbnn.posterior import converged_rows
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Mmd

with log_to(snakemake.log[0]):
    settings = Mmd.parse(snakemake.params.mmd, "mmd")
    per_layer, summary = deep_ensembles_check(
        snakemake.input.target,
        snakemake.input.canonical,
        converged_rows(snakemake.input.converged),
        settings.de_members,
        pvalue=settings.pvalue,
        seed=settings.seed,
        device=environment(snakemake).device,
        n_target=settings.de_target,
    )
    write_table(per_layer, snakemake.output.per_layer)
    write_table(summary, snakemake.output.summary)
    write_table(summary, snakemake.output.summary_md)
    write_table(summary, snakemake.output.summary_html)
    print(summary)

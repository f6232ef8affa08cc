"""Rule functional_collapse: pairwise MI of random pairs of converged target networks."""

from symbnn.posterior import converged_rows
from symbnn.report.collapse import collapse_summary, pairwise_mi
from symbnn.report.figures import collapse_figure
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    rows = converged_rows(snakemake.input.converged)
    pairs = pairwise_mi(
        snakemake.input.predictions, rows, snakemake.params.pairs, snakemake.params.seed
    )
    summary = collapse_summary(pairs)
    write_table(pairs, snakemake.output.pairs)
    write_table(summary, snakemake.output.summary_md)
    write_table(summary, snakemake.output.summary_html)
    collapse_figure(
        pairs,
        summary,
        snakemake.output.figure,
        title=f"{snakemake.wildcards.experiment}: functional collapse",
    )
    print(summary)

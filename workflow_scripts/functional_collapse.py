"""Rule functional_collapse: pairwise MI of random pairs of converged target networks, and
the network-relabelling test of the ID-OOD correlation."""

from symbnn.posterior import converged_rows
from symbnn.report.collapse import collapse_summary, pairwise_mi, relabelling_pvalue
from symbnn.report.figures import collapse_figure
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Collapse

with log_to(snakemake.log[0]):
    settings = Collapse.parse(snakemake.params.collapse, "collapse")
    rows = converged_rows(snakemake.input.converged)
    pairs = pairwise_mi(snakemake.input.predictions, rows, settings.pairs, settings.seed)
    pvalue, tested = relabelling_pvalue(
        snakemake.input.predictions,
        pairs,
        settings.permutations,
        settings.test_networks,
        settings.seed,
    )
    summary = collapse_summary(pairs, pvalue, tested)
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

"""Rule posterior_marginals: KS tests between the units' weight marginals of a posterior
store, stored and canonical, and their figure (paper appendix D.3, Figure 9)."""

from symbnn.analyses.posterior_marginals import (
    marginal_summary,
    posterior_marginals_figure,
    sample_tests,
    stage_samples,
)
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    samples = stage_samples(
        {"stored": snakemake.input.store, "canonical": snakemake.input.canonical}
    )
    tests = sample_tests(samples)
    write_table(tests, snakemake.output.tests)
    summary = marginal_summary(tests)
    write_table(summary, snakemake.output.summary)
    write_table(summary, snakemake.output.summary_html)
    networks = next(iter(samples["stored"].values())).shape[2]
    posterior_marginals_figure(
        samples,
        summary,
        snakemake.output.figure,
        title=f"{snakemake.wildcards.experiment}: marginals of 4 units per group, "
        f"{networks} target networks",
    )
    print(summary)

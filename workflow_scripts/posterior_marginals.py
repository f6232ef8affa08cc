"""Rule posterior_marginals: KS tests between the units' weight marginals of a posterior
store, stored and canonical (paper appendix D.3)."""

from symbnn.analyses.posterior_marginals import marginal_summary, posterior_marginal_tests
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

with log_to(snakemake.log[0]):
    tests = posterior_marginal_tests(
        {"stored": snakemake.input.store, "canonical": snakemake.input.canonical}
    )
    write_table(tests, snakemake.output.tests)
    summary = marginal_summary(tests)
    write_table(summary, snakemake.output.summary)
    print(summary)

"""Rule reference_diagnostics: per-chain acceptance and energy error, and split-R-hat, bulk
and tail ESS on raw and canonical weights and on function-space quantities
(symbnn.reference.report)."""

from symbnn.data.experiment import load_in_distribution
from symbnn.jobenv import environment
from symbnn.reference.report import reference_diagnostics, side_by_side, write_markdown
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Data

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    data = Data.parse(snakemake.params.data, "data")
    _, test = load_in_distribution(data, env.data_root, env.download)
    chains, summary = reference_diagnostics(
        snakemake.input.store, snakemake.input.canonical, test, snakemake.params.digits
    )
    write_table(chains, snakemake.output.chains)
    write_table(summary, snakemake.output.table)
    write_markdown(chains, summary, snakemake.output.summary_md)
    write_table(chains, snakemake.output.chains_html)
    write_table(side_by_side(summary), snakemake.output.side_by_side_html)
    print(chains)
    print(summary)

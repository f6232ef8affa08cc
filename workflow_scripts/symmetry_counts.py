"""Rule symmetry_counts: the symmetry counts of every architecture the report covers (paper
D.4) with the D.1 mode count, measured on the experiment's converged canonical target
networks when its model is small (the rule then has a canonical store as input)."""

import polars as pl

from symbnn.analyses.mode_count import mode_count_summary, mode_counts
from symbnn.atomic import atomic_write
from symbnn.report.symmetry_counts import html_sections, spec_key, symmetry_counts_table
from symbnn.report.tables import sections_to_html, write_table
from symbnn.runlog import log_to
from symbnn.store import open_store
from symbnn.symmetry import unit_groups

with log_to(snakemake.log[0]):
    measured, per_network = {}, pl.DataFrame(schema={"row": pl.Int64, "seed": pl.Int64})
    if hasattr(snakemake.input, "canonical"):
        flags = pl.read_parquet(snakemake.input.converged).filter(pl.col("converged"))
        store = open_store(snakemake.input.canonical)
        if flags.height:
            state = {k: t.double() for k, t in store.state_dicts(flags["row"].to_list()).items()}
            counts = mode_counts(state, unit_groups(store.architecture))
            measured[spec_key(store.architecture)] = mode_count_summary(counts)
            per_network = flags.select("row", "seed").with_columns(
                pl.DataFrame(counts).drop("network")
            )
    write_table(per_network, snakemake.output.modes)
    table = symmetry_counts_table(snakemake.params.architectures, measured)
    for path in (snakemake.output.csv, snakemake.output.md):
        write_table(table, path)
    # 16 columns, three of them sentences: the report shows them as three narrower tables
    html = sections_to_html(html_sections(table))
    atomic_write(snakemake.output.html, lambda tmp: tmp.write_text(html))
    print(table)

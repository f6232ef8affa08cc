"""Rule alignment_barrier: pairs of converged target networks, the loss and accuracy along
the path between each pair without and with alignment (weight matching); the per-pair
barriers, their summary over pairs and the interpolation plot."""

import polars as pl
import torch

from symbnn.alignment.figures import interpolation_figure
from symbnn.alignment.pairs import converged_pairs, pair_rows, report_table
from symbnn.alignment.stores import converged_pair, data_sets, interpolation_curves
from symbnn.device import resolve_device
from symbnn.jobenv import environment
from symbnn.posterior import converged_rows
from symbnn.report.tables import write_table
from symbnn.runlog import log_to
from symbnn.settings import Alignment
from symbnn.store import open_store

torch.set_num_threads(snakemake.threads)

with log_to(snakemake.log[0]):
    env = environment(snakemake)
    store = snakemake.input.store
    settings = Alignment.parse(snakemake.params.alignment, "alignment")
    converged = converged_rows(snakemake.input.converged)
    pairs = (
        [converged_pair(store, converged)]
        if settings.pairs == 1
        else converged_pairs(converged, settings.pairs, store)
    )
    # the store and the data sets are read once for every pair
    target = open_store(store)
    sets, train = data_sets(target, env.data_root, settings.splits)
    device = resolve_device(env.device)
    curves = []
    for pair, (row_a, row_b) in enumerate(pairs):
        curve = interpolation_curves(
            target.architecture,
            target.state_dict(row_a),
            target.state_dict(row_b),
            sets,
            settings.points,
            reset_data=train,
            bn_batches=settings.bn_batches,
            max_sweeps=settings.max_sweeps,
            device=device,
        )
        curves.append(curve.with_columns(pair=pl.lit(pair), row_a=row_a, row_b=row_b))
        print(f"pair {pair}: networks {row_a} and {row_b}")
    curves = pl.concat(curves)
    rows = pair_rows(curves, "sgd").join(
        curves.select("pair", "row_a", "row_b").unique(), on="pair", how="left"
    )
    write_table(curves, snakemake.output.curves)
    write_table(rows, snakemake.output.pairs)
    table = report_table(rows)
    write_table(table, snakemake.output.table)
    write_table(table, snakemake.output.html)
    experiment = snakemake.wildcards.experiment
    title = (
        f"{experiment}: target networks {pairs[0][0]} and {pairs[0][1]}"
        if len(pairs) == 1
        else f"{experiment}: {len(pairs)} pairs of target networks"
    )
    interpolation_figure(curves, snakemake.output.figure, title=title)
    print(table)

"""Alignment and barriers on weight stores (what `symbnn align` and `symbnn barrier` run).

`align_store` aligns every network of store B to one network of store A: to A's row
``reference`` (default 0: every sample of B lands in the same basin as that one network, so
the aligned store is a sample modulo permutations around it), or with ``pairwise=True`` row i
of B to row i of A. The output store has kind "aligned", every state entry of B permuted,
B's info arrays, and

    info/align_perm.<unit group>  (n, width) int64   aligned unit i = B's unit perm[i]
    info/align_objective_before / _after (n,)        <A, B> and <A, P B> summed over tensors
    info/align_reference          (n,) int64         the row of A each sample was aligned to
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import polars as pl
import torch

from symbnn.alignment.interpolation import barrier_table, grid, network_curve
from symbnn.alignment.matching import DenseState, align_state, dense_state
from symbnn.data.experiment import load_in_distribution
from symbnn.settings import Alignment, Config, ConfigError, Data
from symbnn.store import Store, StoreError, StoreWriter, open_store
from symbnn.symmetry.architectures import unit_groups
from symbnn.symmetry.store_blocks import DEFAULT_BLOCK_BYTES, finite_state_dict, iter_state_blocks

# library defaults are the settings layer's
ALIGNMENT = Alignment()


def _check_same_architecture(a: Store, b: Store) -> None:
    if a.architecture != b.architecture:
        raise StoreError(
            f"{b.path}: architecture {b.architecture} differs from {a.path}'s {a.architecture}"
        )


def _row(store: Store, row: int, what: str) -> int:
    if not -store.n_samples <= row < store.n_samples:
        raise ValueError(
            f"{what}: row {row} is out of range for {store.path} ({store.n_samples} samples)"
        )
    return row % store.n_samples


def align_store(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    reference: int = 0,
    pairwise: bool = False,
    max_sweeps: int = ALIGNMENT.max_sweeps,
    overwrite: bool = False,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Store:

    a, b = open_store(a_path), open_store(b_path)
    _check_same_architecture(a, b)
    if pairwise and a.n_samples < b.n_samples:
        raise ValueError(
            f"pairwise alignment: {a.path} has {a.n_samples} samples, fewer than {b.path}'s {b.n_samples}"
        )
    sym = unit_groups(b.architecture)
    refs = (
        np.arange(b.n_samples)
        if pairwise
        else np.full(b.n_samples, _row(a, reference, "--reference"))
    )
    attrs = {
        **b.attrs,
        "alignment": {
            "reference_store": os.fspath(a_path),
            "source": os.fspath(b_path),
            "reference": "pairwise" if pairwise else int(refs[0]),
            "method": "weight matching",
            "max_sweeps": max_sweeps,
        },
    }
    with StoreWriter(
        out_path, attrs, kind="aligned", expected_samples=b.n_samples, overwrite=overwrite
    ) as writer:
        cached: dict[
            int, DenseState
        ] = {}  # A's reference row, prepared once for all rows aligned to it
        for rows, block in iter_state_blocks(b, block_bytes):
            states, results = [], []
            for i in range(rows.start, rows.stop):
                ref = int(refs[i])
                if ref not in cached:
                    cached = {ref: dense_state(finite_state_dict(a, ref), sym)}
                aligned, result = align_state(
                    cached[ref], {k: v[i - rows.start] for k, v in block.items()}, sym, max_sweeps
                )
                states.append(aligned)
                results.append(result)
            info: dict[str, Any] = {name: b.info(name, rows) for name in b.info_names}
            info.update(
                {
                    f"align_perm.{g}": torch.stack([r.perms[g] for r in results])
                    .numpy()
                    .astype(np.int64)
                    for g in results[0].perms
                }
            )
            info["align_objective_before"] = np.array([r.objective_before for r in results])
            info["align_objective_after"] = np.array([r.objective_after for r in results])
            info["align_reference"] = refs[rows].astype(np.int64)
            writer.append(
                {name: torch.stack([s[name] for s in states]).numpy() for name in b.state_names},
                info,
            )
    return open_store(out_path)


def interpolation_curves(
    spec: dict[str, Any],
    a: dict[str, torch.Tensor],
    b: dict[str, torch.Tensor],
    sets: dict,
    points: int = ALIGNMENT.points,
    reset_data=None,
    bn_batches: int = ALIGNMENT.bn_batches,
    max_sweeps: int = ALIGNMENT.max_sweeps,
    device: torch.device | str = "cpu",
) -> pl.DataFrame:
    """Curves of theta(t) between A and B as stored ("none") and after aligning B to A
    ("weight_matching"), stacked with an ``alignment`` column; evaluated on ``device``."""
    aligned, _ = align_state(a, b, unit_groups(spec), max_sweeps)
    ts = grid(points)
    parts = [
        network_curve(
            spec, a, other, ts, sets, reset_data=reset_data, bn_batches=bn_batches, device=device
        ).with_columns(pl.lit(name).alias("alignment"))
        for name, other in (("none", b), ("weight_matching", aligned))
    ]
    return pl.concat(parts).select("alignment", "split", "t", "loss", "accuracy")


def data_sets(
    store: Store,
    data_root: str | os.PathLike,
    splits: tuple[str, ...] = ALIGNMENT.splits,
    download: bool = Config.default("download"),
):
    """The experiment's (train, test) data named by the store's ``data`` attribute."""
    data_cfg = store.attrs.get("data")
    if not isinstance(data_cfg, dict) or "train" not in data_cfg:
        raise StoreError(
            f"{store.path}: attribute 'data' ({data_cfg!r}) does not name the experiment's dataset; "
            "`symbnn barrier` needs it to evaluate the losses"
        )
    try:
        data = Data.parse(data_cfg, "data")
    except ConfigError as exc:
        raise StoreError(f"{store.path}: attribute {exc}") from None
    return evaluation_sets(data, data_root, splits, download, store.architecture or None)


def evaluation_sets(
    data,
    data_root: str | os.PathLike,
    splits: tuple[str, ...],
    download: bool = Config.default("download"),
    model: dict | None = None,
):
    """({split: data} for the barrier's splits, the training set) of an experiment's `data`,
    checked against the ``model`` spec when given."""
    unknown = set(splits) - {"train", "test"}
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)} (known: train, test)")
    train, test = load_in_distribution(data, data_root, download, model)
    every = {"train": train, "test": test}
    return {s: every[s] for s in splits}, train


def store_barriers(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike,
    *,
    row_a: int = 0,
    row_b: int = 0,
    data_root: str | os.PathLike = "data",
    splits: tuple[str, ...] = ALIGNMENT.splits,
    points: int = ALIGNMENT.points,
    bn_batches: int = ALIGNMENT.bn_batches,
    max_sweeps: int = ALIGNMENT.max_sweeps,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(curves, barriers) between network ``row_a`` of A and ``row_b`` of B, without and
    with alignment, on the data of A's ``data`` attribute; BatchNorm statistics re-estimated
    on the training set along the path when the model has BatchNorm."""
    a, b = open_store(a_path), open_store(b_path)
    _check_same_architecture(a, b)
    grid(points)  # a path too long for memory fails here, before the data are loaded
    state_a = finite_state_dict(a, _row(a, row_a, "--row-a"))
    state_b = finite_state_dict(b, _row(b, row_b, "--row-b"))
    sets, train = data_sets(a, data_root, splits)
    curves = interpolation_curves(
        a.architecture,
        state_a,
        state_b,
        sets,
        points,
        reset_data=train,
        bn_batches=bn_batches,
        max_sweeps=max_sweeps,
    )
    return curves, barrier_table(curves)


def converged_pair(path: str | os.PathLike, converged: list[int]) -> tuple[int, int]:
    """The first two converged networks of a store (`converged`: its converged rows; rows 0
    and 1 when fewer than two converged): the pair the workflow aligns."""
    store = open_store(path)
    if store.n_samples < 2:
        raise ValueError(
            f"{store.path}: alignment needs two networks, the store has {store.n_samples}"
        )
    return (converged[0], converged[1]) if len(converged) >= 2 else (0, 1)

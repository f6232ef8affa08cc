"""Layer-wise MMD between two weight stores, streamed block by block, and the network figure.

A "layer" is by default one float state entry (a weight or a bias on its own). BatchNorm
running statistics (running_mean, running_var) and integer buffers (num_batches_tracked) are
left out: they are buffers, not parameters, and several methods do not sample them. Pass
``layers`` to choose entries, or a mapping name -> entries to pool several entries into one
layer (their parameters are concatenated; `default_layers(by_module=True)` pools each
module's weight and bias).

Network figure (docs/maths.md, section 5): the mean over layers weighted by each layer's number of parameters;
"MMD" on stored weights, "NS MMD" when both stores are canonical (attrs kind == "canonical").
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from symbnn.memory import option_name, require_memory
from symbnn.mmd.aggtest import MMD, AggTestConfig, require_permutation_memory
from symbnn.mmd.distances import PooledDistances, resolve_device
from symbnn.mmd.engine import MMDInputError, check_sample_sizes, mmd_from_distances
from symbnn.store import Store, open_store
from symbnn.store.sameness import same_networks

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 2**20
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")
CANONICAL_KIND = "canonical"


def default_layers(store: Store, *, by_module: bool = False) -> dict[str, list[str]]:
    """Float state entries that are not BatchNorm buffers, as layer name -> entries."""
    entries = [
        name
        for name in store.state_names
        if np.dtype(store.state_array(name).dtype).kind == "f"
        and not name.endswith(BUFFER_SUFFIXES)
    ]
    if not by_module:
        return {name: [name] for name in entries}
    layers: dict[str, list[str]] = {}
    for name in entries:
        layers.setdefault(name.rpartition(".")[0] or name, []).append(name)
    return layers


def _as_layers(
    layers: Sequence[str] | Mapping[str, Sequence[str]] | None, target: Store
) -> dict[str, list[str]]:
    if layers is None:
        return default_layers(target)
    if isinstance(layers, str):
        return {layers: [layers]}
    if isinstance(layers, Mapping):
        return {str(k): list(v) for k, v in layers.items()}
    return {name: [name] for name in layers}


def _check_layers(layers: dict[str, list[str]], target: Store, method: Store) -> None:
    if not layers:
        raise MMDInputError(f"{target.path}: no layers to compare")
    for entries in layers.values():
        for name in entries:
            for store in (target, method):
                if name not in store.state_names:
                    raise MMDInputError(f"{store.path}: no state entry {name!r}")
                if np.dtype(store.state_array(name).dtype).kind != "f":
                    raise MMDInputError(f"{store.path}: state entry {name!r} is not floating point")
            if target.shape(name) != method.shape(name):
                raise MMDInputError(
                    f"layer {name!r} has shape {target.shape(name)} in {target.path} "
                    f"but {method.shape(name)} in {method.path}"
                )


def _as_rows(rows: Any, store: Store, side: str = "sample") -> slice | np.ndarray:
    """A slice or an array of distinct in-range sample indices; a range reaching beyond the
    store is an error (Python would cut it short silently)."""
    if rows is None:
        return slice(None)
    if isinstance(rows, slice):
        n = store.n_samples
        bounds = [b for b in (rows.start, rows.stop) if b is not None]
        if rows.step not in (None, 1) or any(b < 0 or b > n for b in bounds):
            raise MMDInputError(
                f"{store.path}: {side} rows {rows.start or 0}:"
                f"{n if rows.stop is None else rows.stop} are not a range within its "
                f"{n} samples (0:{n})"
            )
        return rows
    index = np.asarray(rows, dtype=np.int64).reshape(-1)
    if index.size and (index.min() < 0 or index.max() >= store.n_samples):
        raise MMDInputError(f"{store.path}: sample rows out of range 0..{store.n_samples - 1}")
    if np.unique(index).size != index.size:
        raise MMDInputError(f"{store.path}: sample rows contain duplicates")
    return index


def _row_indices(rows: slice | np.ndarray, store: Store) -> np.ndarray:
    return np.arange(store.n_samples)[rows]


def _rows_text(store: Store, rows: slice | np.ndarray) -> str:
    if isinstance(rows, slice):
        stop = store.n_samples if rows.stop is None else rows.stop
        return f"{store.path} rows {rows.start or 0}:{stop}"
    return f"{store.path} {len(rows)} chosen rows"


def _check_disjoint(target: Store, method: Store, target_rows, method_rows) -> None:
    """Comparing a store with itself (e.g. a Deep Ensemble check) needs disjoint samples; a
    copy of a store (equal digests: the same metadata and chunks) is the same store; and two
    stores holding the same networks at the rows compared (weights copied under other
    attributes) have an MMD of zero by construction."""
    same = target.path.resolve() == method.path.resolve()
    if not same and (target.digest is None or target.digest != method.digest):
        if same_networks(target, method, target_rows, method_rows):
            raise MMDInputError(
                f"{target.path} and {method.path} hold the same networks at the rows compared "
                f"({_rows_text(target, target_rows)}, {_rows_text(method, method_rows)}: every "
                "state entry they share is equal, whatever their attributes say): their MMD is "
                "zero by construction; compare the method's own samples, or disjoint rows of "
                f"one store ({option_name('target_rows')}/{option_name('method_rows')})"
            )
        return
    shared = np.intersect1d(_row_indices(target_rows, target), _row_indices(method_rows, method))
    if shared.size:
        where = f"{target.path}:" if same else (
            f"{target.path} and {method.path} hold the same store (equal digests: a copy);"
        )  # fmt: skip
        raise MMDInputError(
            f"{where} target and method rows of the same store overlap ({shared.size} "
            f"shared samples, e.g. {shared[:5].tolist()}); pass disjoint "
            f"{option_name('target_rows')}/{option_name('method_rows')}"
        )


def check_distinct(target_path, method_path, target_rows=None, method_rows=None) -> None:
    """MMDInputError when the two stores are one (same path, or a copy) and the rows overlap:
    checked on the stores as given, before `symbnn mmd --canonical` canonicalises them."""
    target, method = open_store(target_path), open_store(method_path)
    target_rows = _as_rows(target_rows, target, "target")
    _check_disjoint(target, method, target_rows, _as_rows(method_rows, method, "method"))


def pooled_blocks(
    target: Store, method: Store, name: str, target_rows, method_rows, max_bytes: int
) -> Iterator[np.ndarray]:
    """Column blocks of the pooled (n + m, d) sample of one entry. The two stores may chunk
    differently, so each emitted block is the overlap of the current blocks of both."""
    blocks_t = target.iter_param_blocks(name, max_bytes, rows=target_rows)
    blocks_m = method.iter_param_blocks(name, max_bytes, rows=method_rows)
    cur_t, cur_m = next(blocks_t, None), next(blocks_m, None)
    while cur_t is not None and cur_m is not None:
        (a_t, b_t, x), (a_m, b_m, y) = cur_t, cur_m
        lo, hi = max(a_t, a_m), min(b_t, b_m)
        xs, ys = x[:, lo - a_t : hi - a_t], y[:, lo - a_m : hi - a_m]
        for store, values in ((target, xs), (method, ys)):
            if values.dtype.kind == "f" and not np.isfinite(values).all():
                raise MMDInputError(
                    f"{store.path}: state entry {name!r} holds NaN or infinite weights"
                )
        yield np.concatenate([xs, ys])
        if b_t == hi:
            cur_t = next(blocks_t, None)
        if b_m == hi:
            cur_m = next(blocks_m, None)


def matrices_bytes(n_rows: int, pvalue: bool) -> int:
    """Peak bytes of the (n_rows, n_rows) float64 matrices of one layer: the L1 and Gram
    accumulators and the squared distances, and with ``pvalue`` the twenty kernel matrices
    with the temporaries that build them."""
    return 8 * n_rows**2 * (4 + (40 if pvalue else 0))


def store_kind(store: Store) -> str:
    return str(store.attrs.get("kind"))


def layerwise_mmd(
    target_path: str | os.PathLike,
    method_path: str | os.PathLike,
    *,
    layers: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    target_rows: Any = None,
    method_rows: Any = None,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    device: str = "auto",
    max_bytes: int = DEFAULT_MAX_BYTES,
    config: AggTestConfig = AggTestConfig(),
    expect_canonical: bool = False,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Layer-wise MMD between the target posterior store and a method's sample store.

    ``target_rows`` / ``method_rows`` select samples (slice or indices), e.g. target
    checkpoints disjoint from those a Deep Ensemble was built from. Returns one row per layer
    (`per_layer_schema`) and the network summary (`network_summary`). With
    ``expect_canonical`` both stores must be canonical. Memory stays near a few times
    ``max_bytes`` plus a few (n + m)^2 float64 matrices, whatever the layer size.
    """
    device = resolve_device(device)  # once: "auto" logs its choice, every layer then reuses it
    target, method = open_store(target_path), open_store(method_path)
    canonical = _both_canonical(target, method, expect_canonical)
    target_rows = _as_rows(target_rows, target, "target")
    method_rows = _as_rows(method_rows, method, "method")
    n, m = len(_row_indices(target_rows, target)), len(_row_indices(method_rows, method))
    check_sample_sizes(n, m, where=f"{target.path} vs {method.path}: ")
    _check_disjoint(target, method, target_rows, method_rows)
    require_memory(
        ("target_rows", "method_rows"),
        matrices_bytes(n + m, pvalue),
        f"the distance{' and kernel' if pvalue else ''} matrices of {n + m} samples "
        f"({target.path}: {n}, {method.path}: {m})",
    )
    if pvalue:
        require_permutation_memory(n + m, config)
    chosen = _as_layers(layers, target)
    _check_layers(chosen, target, method)

    rows = [
        _layer_row(
            layer,
            entries,
            (target, method),
            (target_rows, method_rows),
            device=device,
            max_bytes=max_bytes,
            pvalue=pvalue,
            seed=seed,
            config=config,
        )
        for layer, entries in chosen.items()
    ]
    per_layer = pl.DataFrame(rows, schema=per_layer_schema())
    summary = network_summary(per_layer, canonical=canonical)
    summary.update({"target": str(target.path), "method": str(method.path), "seed": seed})
    if pvalue:
        summary.update({"alpha": config.alpha, "b1": config.b1, "b2": config.b2, "b3": config.b3})
    return per_layer, summary


def _both_canonical(target: Store, method: Store, expect_canonical: bool) -> bool:
    """Whether the stores are canonical: both or neither (and both when expected)."""
    canonical = [store_kind(s) == CANONICAL_KIND for s in (target, method)]
    if canonical[0] != canonical[1]:
        raise MMDInputError(
            f"one store is canonical and the other is not: {target.path} has kind "
            f"{store_kind(target)!r}, {method.path} has kind {store_kind(method)!r}"
        )
    if expect_canonical and not canonical[0]:
        raise MMDInputError(
            f"canonical stores expected (attrs kind == {CANONICAL_KIND!r}); {target.path} has "
            f"kind {store_kind(target)!r}"
        )
    return canonical[0]


def _layer_row(
    layer: str,
    entries: list[str],
    stores: tuple[Store, Store],
    rows: tuple[Any, Any],
    *,
    device: str,
    max_bytes: int,
    pvalue: bool,
    seed: int,
    config: AggTestConfig,
) -> dict[str, Any]:
    """One layer's row of the per-layer table (`per_layer_schema`): its entries' pooled
    distances streamed block by block, then the MMD of the twenty kernels."""
    (target, method), (target_rows, method_rows) = stores, rows
    n, m = len(_row_indices(target_rows, target)), len(_row_indices(method_rows, method))
    start = time.perf_counter()
    acc = PooledDistances(n + m, device)
    for name in entries:
        for block in pooled_blocks(target, method, name, target_rows, method_rows, max_bytes):
            acc.add(block)
    l1, l2sq = acc.result()
    result = mmd_from_distances(
        l1,
        l2sq,
        n,
        n_params=acc.n_columns,
        pvalue=pvalue,
        seed=seed,
        config=config,
        where=f"layer {layer!r} of {target.path} vs {method.path}: ",
    )
    log.info(
        "layer %s: %d params, median MMD^2 %.3g, %.2f s",
        layer,
        result.n_params,
        result.median,
        time.perf_counter() - start,
    )
    return {
        "layer": layer,
        "entries": entries,
        "n_params": result.n_params,
        "n_target": n,
        "n_method": m,
        "mmd_median": result.median,
        "mmd_mean": result.mean,
        "mmd_max": result.max,
        "mmd_values": result.values.tolist(),
        "bandwidths": result.bandwidths.tolist(),
        "p_value": result.test.p_value if result.test else None,
        "reject": result.test.reject if result.test else None,
    }


def per_layer_schema() -> dict[str, pl.DataType]:
    """Columns of the per-layer table; mmd_values and bandwidths hold the twenty kernels in
    the order of `symbnn.mmd.KERNEL_NAMES`; p_value and reject are null without a test."""
    return {
        "layer": pl.String,
        "entries": pl.List(pl.String),
        "n_params": pl.Int64,
        "n_target": pl.Int64,
        "n_method": pl.Int64,
        "mmd_median": pl.Float64,
        "mmd_mean": pl.Float64,
        "mmd_max": pl.Float64,
        "mmd_values": pl.List(pl.Float64),
        "bandwidths": pl.List(pl.Float64),
        "p_value": pl.Float64,
        "reject": pl.Boolean,
    }


def network_summary(per_layer: pl.DataFrame, *, canonical: bool = False) -> dict[str, Any]:
    """Parameter-weighted means over layers of the per-layer median, mean and max.

    ``mmd`` (the headline figure) is the weighted mean of the per-layer medians; ``metric``
    says whether it is "MMD" (stored weights) or "NS MMD" (canonical weights).
    """
    weights = per_layer["n_params"].cast(pl.Float64)
    total = float(weights.sum())

    def weighted(column: str) -> float:
        return float((per_layer[column] * weights).sum() / total)

    summary: dict[str, Any] = {
        "metric": "NS MMD" if canonical else "MMD",
        "canonical": canonical,
        "mmd": weighted("mmd_median"),
        "mmd_median": weighted("mmd_median"),
        "mmd_mean": weighted("mmd_mean"),
        "mmd_max": weighted("mmd_max"),
        "n_layers": per_layer.height,
        "n_params": int(total),
        "n_target": int(per_layer["n_target"][0]),
        "n_method": int(per_layer["n_method"][0]),
    }
    if per_layer["reject"].null_count() < per_layer.height:
        summary["n_layers_rejected"] = int(per_layer["reject"].sum())
    return summary

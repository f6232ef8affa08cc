"""How wide a method's canonical samples are, layer by layer, against the target's.

For a layer, the width of a set of networks is the mean over the layer's parameters of their
standard deviation across the networks. A unit's (one mode's or one replicate's) canonical
samples against the kept canonical target networks give a ratio: 1 when the unit spreads as
much as the whole target, near 0 when it stays at its mode. A one-mode posterior as wide as
the target is a warning sign when its MMD is read: it may match the target by spreading over
several of the target's modes, not by describing its own (the report notes it beside Laplace,
whose one-mode samples are the widest of the default's methods)."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.mmd.layerwise import default_layers
from symbnn.store import open_store


def layer_width(store, name: str, rows) -> float:
    """Mean over the parameters of layer `name` of their standard deviation across `rows`,
    streamed over column blocks (float64 sums)."""
    total, count = 0.0, 0
    for _, _, block in store.iter_param_blocks(name, rows=rows):
        values = block.astype(np.float64)
        total += float(values.std(axis=0, ddof=1).sum())
        count += values.shape[1]
    return total / max(1, count)


def canonical_spread(
    target_canonical: str | os.PathLike,
    samples_canonical: str | os.PathLike,
    target_rows: list[int],
) -> pl.DataFrame:
    """Per (unit, layer): the width of the unit's canonical samples, the width of the target's
    kept canonical networks, and their ratio."""
    target, samples = open_store(target_canonical), open_store(samples_canonical)
    units = samples.info("unit")
    rows = []
    for name in default_layers(target):
        reference = layer_width(target, name, list(target_rows))
        for unit in np.unique(units):
            width = layer_width(samples, name, np.flatnonzero(units == unit).tolist())
            rows.append(
                {
                    "method": samples.attrs.get("method", "?"),
                    "variant": samples.attrs.get("variant", "?"),
                    "unit": int(unit),
                    "layer": name,
                    "width": width,
                    "target_width": reference,
                    "ratio": width / reference if reference > 0 else float("nan"),
                }
            )
    return pl.DataFrame(rows)


# up to this many layers a note lists each one; beyond, their range and the widest
LISTED_LAYERS = 8


def width_notes(spread: pl.DataFrame) -> pl.DataFrame:
    """Per (method, variant): the canonical width against the target's, layer by layer (the
    mean over the row's units), as one short note, e.g. "width x target: conv1.weight 0.97,
    fc2.weight 2.10"."""
    per_layer = spread.group_by("method", "variant", "layer", maintain_order=True).agg(
        pl.col("ratio").mean()
    )
    notes = []
    for (method, variant), part in per_layer.group_by("method", "variant", maintain_order=True):
        ratios = dict(zip(part["layer"], part["ratio"]))
        if len(ratios) <= LISTED_LAYERS:
            text = ", ".join(f"{layer} {ratio:.2f}" for layer, ratio in ratios.items())
        else:
            widest = max(ratios, key=ratios.get)
            low, high = min(ratios.values()), max(ratios.values())
            text = f"{low:.2f} to {high:.2f} over {len(ratios)} layers (widest {widest})"
        notes.append({"method": method, "variant": variant, "width": f"width x target: {text}"})
    return pl.DataFrame(notes)

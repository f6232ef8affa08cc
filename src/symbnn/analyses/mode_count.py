"""How many modes the permutations give a posterior (the estimate of paper appendix D.1).

If the symmetry-free posterior were a Dirac at one network theta, the full posterior would be
the uniform mixture of the Diracs at the permuted copies of theta: one mode per distinct
copy, i.e. |G| / |Stab(theta)|, where the stabiliser holds the permutations that leave theta
unchanged. A permutation leaves theta unchanged exactly when it only exchanges units that
carry the same parameters (incoming weights, bias, outgoing weights), so if the units of one
block of a unit group fall into classes of identical units of sizes k_1, k_2, ..., the
stabiliser has prod k_c! elements and the copies number |G| / prod k_c!
(docs/maths.md, section 2.7). Units of different blocks of a grouped convolution can only
move with their whole block, so only units of one block are compared; identical whole blocks
are not looked for.

Measured on canonical networks (unit-norm scaling makes units that differ only by a scale
compare equal), two units count as nearly identical when the distance between their
parameter vectors is at most ``tolerance`` times their root-mean-square norm; classes are
the connected components of that relation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from symbnn.symmetry.counting import total_symmetries
from symbnn.symmetry.operators import log10_factorial
from symbnn.symmetry.structure import Symmetry, UnitGroup

# relative distance under which two units count as nearly identical
TOLERANCE = 0.01


def unit_vectors(state: dict[str, torch.Tensor], group: UnitGroup) -> torch.Tensor:
    """(networks, width, d): every parameter of each unit of ``group`` (all its axes), units in
    the group's order. A grouped conv's block-local `out` axis gives unit u of block b the
    entries [rows of block b, u mod block width]."""
    parts = []
    for a in group.axes:
        if not a.is_plain:
            raise ValueError(f"{a.tensor}: sliced axes are not supported (use the plain view)")
        t = state[a.tensor]
        n = t.shape[0]
        if a.blocks > 1:
            rows, local = t.shape[1], t.shape[2]
            t = t.reshape(n, a.blocks, rows // a.blocks, local, -1).permute(0, 1, 3, 2, 4)
            parts.append(t.reshape(n, group.width, -1))
        else:
            parts.append(t.movedim(a.axis + 1, 1).reshape(n, group.width, -1))
    return torch.cat(parts, dim=2)


def relative_distances(vectors: torch.Tensor, blocks: int) -> torch.Tensor:
    """(networks, blocks, bw, bw): distance between every two units of a block over their
    root-mean-square norm (0 for two all-zero units)."""
    n, width, d = vectors.shape
    v = vectors.reshape(n, blocks, width // blocks, d).to(torch.float64)
    distance = torch.cdist(v, v)
    sq = v.pow(2).sum(-1)
    scale = ((sq[..., :, None] + sq[..., None, :]) / 2).sqrt()
    return torch.where(scale > 0, distance / scale.clamp_min(1e-300), distance)


def class_sizes(close: np.ndarray) -> list[int]:
    """Sizes of the connected components of a symmetric boolean matrix, largest first."""
    from scipy.sparse.csgraph import connected_components

    _, labels = connected_components(close, directed=False)
    return sorted(np.bincount(labels).tolist(), reverse=True)


def identical_units(
    state: dict[str, torch.Tensor], sym: Symmetry, tolerance: float = TOLERANCE
) -> dict[str, list]:
    """One row per (network, unit group): the closest pair's relative distance, the number of
    nearly identical pairs, the sizes of the classes of more than one unit, and
    log10 |Stab| = sum of log10 k! over the classes."""
    columns = {
        k: []
        for k in ("network", "group", "closest_pair", "identical_pairs", "classes", "log10_stab")
    }
    for g in sym.groups:
        if g.block_width < 2:
            continue
        rel = relative_distances(unit_vectors(state, g), g.blocks).numpy()
        upper = np.triu(np.ones(rel.shape[-2:], bool), 1)
        for network, blocks in enumerate(rel):
            close = blocks <= tolerance
            sizes = [k for b in close if (b & upper).any() for k in class_sizes(b) if k > 1]
            columns["network"].append(network)
            columns["group"].append(g.name)
            columns["closest_pair"].append(float(blocks[:, upper].min()))
            columns["identical_pairs"].append(int((close & upper).sum()))
            columns["classes"].append(sizes)
            columns["log10_stab"].append(sum(log10_factorial(k) for k in sizes))
    return columns


def mode_counts(
    state: dict[str, torch.Tensor], sym: Symmetry, tolerance: float = TOLERANCE
) -> dict[str, list]:
    """Per network: log10 of the D.1 mode count, log10 |G| - log10 |Stab(theta)|, with the
    closest pair of units of any group and the number of nearly identical pairs."""
    rows = identical_units(state, sym, tolerance)
    n = next(iter(state.values())).shape[0]
    log10_g = total_symmetries(sym)["log10_permutations"]
    stab, closest, pairs = np.zeros(n), np.full(n, math.inf), np.zeros(n, int)
    for network, s, c, p in zip(
        rows["network"],
        rows["log10_stab"],
        rows["closest_pair"],
        rows["identical_pairs"],
        strict=True,
    ):
        stab[network] += s
        closest[network] = min(closest[network], c)
        pairs[network] += p
    return {
        "network": list(range(n)),
        "identical_pairs": pairs.tolist(),
        "closest_pair": closest.tolist(),
        "log10_modes": (log10_g - stab).tolist(),
    }


def mode_count_summary(counts: dict[str, list], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The D.1 columns of the symmetry-counts table from `mode_counts`: networks, the
    tolerance, the closest pair of units over all networks, how many networks have nearly
    identical units, and the range of log10 mode counts ("a" or "a to b")."""
    modes = counts["log10_modes"]
    low, high = min(modes), max(modes)
    return {
        "networks measured": len(modes),
        "identity tolerance": tolerance,
        "closest unit pair": min(counts["closest_pair"]),
        "networks with nearly identical units": sum(p > 0 for p in counts["identical_pairs"]),
        "log10 modes, measured (D.1)": f"{low:.2f}"
        if high - low < 0.005
        else f"{low:.2f} to {high:.2f}",
    }

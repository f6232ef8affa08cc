"""Canonicalise a whole weight store, block by block, into a store of kind "canonical".

The output keeps every state array (in the input's dtype) and every info array, and adds
what was applied, so that the original weights can be recovered:

    info/perm.<unit group>      (n, width) int64   canonical unit i = scaled unit perm[i]
    info/scale.<scale group>    (n, width)         scales applied before permuting
    info/softmax_shift          (n,)               constant added to the output bias
    info/softmax_weight_shift   (n, *row)          vector added to every output-weight row

Attribute ``canonical`` records the options (``softmax_shift``: the softmax step ran;
``softmax_weight_centred``: it centred the output weight's columns, docs/maths.md 2.5) and
the source store. Any structure works,
including those that slice tensors (the canonical form takes their plain view itself).
"""

from __future__ import annotations

import os

import numpy as np

from symbnn.settings import SymmetryRemoval
from symbnn.store import StoreWriter, open_store
from symbnn.symmetry.architectures import unit_groups
from symbnn.symmetry.canonical import canonicalize
from symbnn.symmetry.store_blocks import DEFAULT_BLOCK_BYTES, iter_state_blocks
from symbnn.symmetry.structure import Symmetry

# library defaults are the settings layer's
SYMMETRY = SymmetryRemoval()


def canonicalize_store(
    in_path: str | os.PathLike,
    out_path: str | os.PathLike,
    scale: str = SYMMETRY.scale,
    key: str = SYMMETRY.key,
    softmax_shift: bool = True,
    *,
    on_dead: str = "raise",
    overwrite: bool = False,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    sym: Symmetry | None = None,
) -> None:
    """Canonicalise every network of the store at ``in_path`` into a new store at
    ``out_path``. ``sym``: the networks' symmetry structure (default: the one of the store's
    ``architecture`` attribute, `symbnn.symmetry.unit_groups`)."""
    store = open_store(in_path)
    if sym is None:
        # its architecture checked against its arrays first: a spec the store cannot hold
        # (a bad model, options that are not plain values) is an error naming the store
        store.check_architecture()
        sym = unit_groups(store.architecture)
    options = {
        "scale": scale,
        "key": key,
        "softmax_shift": bool(softmax_shift and sym.softmax_dof),
        # the output weight's columns centred too (stores written before lack the key)
        "softmax_weight_centred": bool(softmax_shift and sym.output_weight is not None),
        "on_dead": on_dead,
        "source": os.fspath(in_path),
    }
    attrs = {**store.attrs, "canonical": options}
    with StoreWriter(
        out_path, attrs, kind="canonical", expected_samples=store.n_samples, overwrite=overwrite
    ) as writer:
        for rows, state in iter_state_blocks(store, block_bytes):
            result = canonicalize(
                state,
                sym,
                scale=scale,
                key=key,
                softmax_shift=softmax_shift,
                on_dead=on_dead,
                sample_offset=rows.start,
            )
            info = {name: store.info(name, rows) for name in store.info_names}
            info.update({f"perm.{k}": v.numpy().astype(np.int64) for k, v in result.perms.items()})
            info.update({f"scale.{k}": v.numpy() for k, v in result.scales.items()})
            if result.softmax_shift is not None:
                info["softmax_shift"] = result.softmax_shift.numpy()
            if result.softmax_weight_shift is not None:
                info["softmax_weight_shift"] = result.softmax_weight_shift.numpy()
            out = {
                name: result.state[name].numpy().astype(state[name].numpy().dtype, copy=False)
                for name in store.state_names
            }
            writer.append(out, info)

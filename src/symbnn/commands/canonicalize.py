"""`symbnn canonicalize IN OUT`: write the canonical form of every network of a store."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

import numpy as np

from symbnn.commands import setting_option
from symbnn.settings import SymmetryRemoval


def explain_failure(path: str | os.PathLike, exc: ValueError) -> ValueError:
    """A clearer error for a canonicalisation that failed on weights too large for it: the
    unit norms are float32 sums of squares, which overflow (and then read as non-positive
    scales) once |w| exceeds about sqrt(float32 max / fan-in). Names the array, the sample and
    the largest weight; returns ``exc`` itself when no weight is that large."""
    # local: keeps zarr out of the command line's start
    from symbnn.store import open_store

    store = open_store(path)
    for name in store.state_names:
        if np.dtype(store.state_array(name).dtype).kind != "f":
            continue
        size = max(1, math.prod(store.shape(name)))
        limit = math.sqrt(float(np.finfo(np.float32).max) / size)
        for start, block in store.iter_sample_blocks(name):
            peaks = np.abs(block.reshape(block.shape[0], -1)).max(axis=1)
            if peaks.size and peaks.max() > limit:
                row = int(peaks.argmax())
                return ValueError(
                    f"{path}: state/{name} holds weights up to {peaks[row]:.3g} (sample "
                    f"{start + row}): too large to canonicalise (unit norms overflow above "
                    f"about {limit:.2g} for this array); such weights usually mean a damaged "
                    f"or diverged store: `symbnn store validate {path}` ({exc})"
                )
    return exc


@contextlib.contextmanager
def explained_failures(path: str | os.PathLike) -> Iterator[None]:
    """Canonicalising the store ``path`` in the block: a ValueError is re-raised as
    `explain_failure` words it."""
    try:
        yield
    except ValueError as exc:
        better = explain_failure(path, exc)
        if better is exc:
            raise
        raise better from exc


def _run(args) -> int:
    # local: keeps numba, torch, zarr out of the command line's start
    from symbnn.symmetry.canonical_store import canonicalize_store

    with explained_failures(args.input):
        canonicalize_store(
            args.input,
            args.output,
            scale=args.scale,
            key=args.key,
            softmax_shift=not args.no_softmax_shift,
            on_dead=args.on_dead,
            overwrite=args.overwrite,
        )
    print(f"canonical store written: {args.output}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "canonicalize",
        help="remove scaling, permutation and softmax symmetries from a store (docs/maths.md, section 2)",
    )
    parser.add_argument("input", metavar="IN", help="weight store to read")
    parser.add_argument("output", metavar="OUT", help="canonical store to write")
    parser.add_argument(
        "--scale",
        **setting_option(SymmetryRemoval, "scale"),
        help="scale normalisation of each unit's incoming weights (default: %(default)s)",
    )
    parser.add_argument(
        "--key",
        **setting_option(SymmetryRemoval, "key"),
        help="sorting key: first incoming weight, or largest (default: %(default)s)",
    )
    parser.add_argument(
        "--no-softmax-shift",
        action="store_true",
        help="leave the output bias as it is (use for regression networks)",
    )
    parser.add_argument(
        "--on-dead",
        choices=("raise", "keep"),
        default="raise",
        help="units with all-zero incoming weights: fail (default) or leave unscaled",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=_run)

"""Pickled dataset files (the CIFAR python batches) read without running code.

A pickle names the callables that rebuild its objects, and `pickle.load` calls whatever it
names: a crafted dataset file could run any code. `load_data_pickle` unpickles with a
restricted `find_class` that resolves only what these files contain besides plain dicts,
lists, strings, bytes and numbers: numpy's array and scalar reconstruction functions,
`numpy.ndarray` and `numpy.dtype` (under numpy 1's `numpy.core` and numpy 2's `numpy._core`
module names), and `_codecs.encode` restricted to latin-1 (how protocol 2 writes bytes).
Any other global is refused before it is imported or called, with an error naming the file
and the refused ``module.name``; a truncated, empty or otherwise unreadable file is one clear
error naming the file. Python 2 pickles (the real CIFAR files) are read with
encoding='latin1', as numpy requires for its arrays.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from symbnn.data.core import DatasetError
from symbnn.data.validate import require_file

try:  # numpy 2
    from numpy._core import multiarray as _multiarray
    from numpy._core import numeric as _numeric
except ImportError:  # numpy 1
    from numpy.core import multiarray as _multiarray
    from numpy.core import numeric as _numeric

LATIN1 = ("latin1", "latin-1", "iso-8859-1", "iso8859-1")


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """`_codecs.encode` as protocol 2 uses it for bytes: latin-1 only (no other codec)."""
    if not isinstance(text, str) or str(encoding).lower() not in LATIN1:
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r} is refused")
    return text.encode("latin1", errors)


def _allowed() -> dict[tuple[str, str], Any]:
    allowed: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,
    }
    for core in ("numpy.core", "numpy._core"):  # both names, whichever numpy wrote the file
        allowed[(f"{core}.multiarray", "_reconstruct")] = _multiarray._reconstruct
        allowed[(f"{core}.multiarray", "scalar")] = _multiarray.scalar
        allowed[(f"{core}.numeric", "_frombuffer")] = _numeric._frombuffer
    return allowed


ALLOWED_GLOBALS = _allowed()


class _RefusedGlobal(Exception):
    """Raised inside the unpickler, turned into a DatasetError naming the file."""


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise _RefusedGlobal(f"{module}.{name}") from None


def load_data_pickle(path: Path, dataset: str, hint: str = "") -> Any:
    """The plain data (dicts, lists, strings, numbers, numpy arrays) pickled in ``path``; no
    code named by the file runs. Any other content, or a damaged file, is a DatasetError
    naming the file."""
    path = require_file(path, dataset, hint)
    content = path.read_bytes()
    if not content:
        raise DatasetError(f"{path}: empty file, expected a pickled {dataset} batch")
    unpickler = _DataUnpickler(io.BytesIO(content), encoding="latin1")
    try:
        value = unpickler.load()
    except _RefusedGlobal as exc:
        raise DatasetError(
            f"{path}: refused to unpickle {exc}: a dataset file may hold only dicts, lists, "
            "strings, numbers and numpy arrays (data is never code)"
        ) from None
    except Exception as exc:  # any defect of an untrusted file is one error
        reason = str(exc) or type(exc).__name__
        raise DatasetError(
            f"{path}: not a readable pickle (truncated or damaged?): {type(exc).__name__}: {reason}"
        ) from None
    return value

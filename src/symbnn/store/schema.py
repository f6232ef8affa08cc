"""The data types a store's arrays may hold, checked when it is opened.

The digest proves a store is as it was written, not that it was written sensibly: a store
whose ``data_type`` was edited (float32 to int32 has the same item size, so every chunk still
matches its checksum) and sealed again reads as other numbers. Weights and predicted
probabilities are floating point, labels and the recorded integers (seeds, mode indices,
permutations) integers; an array of another kind is an error naming the store, the array,
the data type found and the one expected.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from symbnn.store.format import StoreError
from symbnn.store.layout import ArrayLayout

FLOAT, INTEGER, FLAG = "f", "iu", "biu"
NUMBER = "biuf"
NAMES = {FLOAT: "floating point", INTEGER: "integer", FLAG: "boolean or integer", NUMBER: "numeric"}

# BatchNorm's counter is the one integer entry of a state_dict symbnn's models have.
INTEGER_STATE = ("num_batches_tracked",)
# info/ columns the writers record, by name or by prefix; other columns: any number.
INFO = {
    "seed": INTEGER,
    "mode_seed": INTEGER,
    "mode_index": INTEGER,
    "unit": INTEGER,
    "align_reference": INTEGER,
    "source_file": INTEGER,
    "converged": FLAG,
    "test_accuracy": FLOAT,
    "train_loss": FLOAT,
    "softmax_shift": FLOAT,
    "softmax_weight_shift": FLOAT,
    "align_objective_before": FLOAT,
    "align_objective_after": FLOAT,
}
INFO_PREFIXES = {"perm.": INTEGER, "scale.": FLOAT}
PREDICTIONS = {"test": FLOAT, "ood": FLOAT, "labels": INTEGER, "test_accuracy": FLOAT}


def weight_kind(label: str) -> str:
    """The kinds (NumPy's ``dtype.kind`` letters) an array of a weight store may have."""
    section, _, name = label.partition("/")
    if section == "state":
        return INTEGER if name.rpartition(".")[2] in INTEGER_STATE else FLOAT
    if name in INFO:
        return INFO[name]
    for prefix, kind in INFO_PREFIXES.items():
        if name.startswith(prefix):
            return kind
    return NUMBER


def predictions_kind(label: str) -> str:
    return PREDICTIONS.get(label, NUMBER)


def check_dtypes(path: Path, layouts: Iterable[ArrayLayout], predictions: bool = False) -> None:
    """StoreError naming the first array whose data type is not of its expected kind."""
    kind_of = predictions_kind if predictions else weight_kind
    for layout in layouts:
        kinds = kind_of(layout.label)
        if layout.dtype.kind not in kinds:
            raise StoreError(
                f"{path}: {layout.label} holds {layout.dtype} values, expected "
                f"{NAMES[kinds]} ({layout.label}/zarr.json, data_type): the store was changed "
                "or was not written by symbnn"
            )

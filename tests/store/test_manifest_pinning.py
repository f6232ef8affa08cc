"""The manifest pins every chunk for every reader, array data types follow the store's
schema, `symbnn mmd` refuses two stores of the same networks, and every JSON shape of a
``zarr.json`` or ``manifest.json`` is a clear error (docs/stores.md).

A chunk copied in from another store of the same layout passes its own crc32c; only the
manifest can tell. A data_type edited and sealed again passes the digest; only the schema
can tell. Each case: the library raises StoreError naming the store, the array and the chunk
or data type; the CLI exits 1 with one line and no traceback.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, fails, random_images
from optunet_stores import optunet

from symbnn.predictions import is_predictions, open_predictions, write_predictions
from symbnn.store import StoreError, open_store, seal, write_store
from symbnn.store.digest import DIGEST, MANIFEST, digest_of

FC1 = "state/fc1.weight"


def store_pair(tmp_path, n=8):
    """Two sealed OptuNet stores of the same layout and other values."""
    optunet(tmp_path, "a.zarr", n=n, seed=0)
    optunet(tmp_path, "b.zarr", n=n, seed=40)
    return tmp_path / "a.zarr", tmp_path / "b.zarr"


def chunk_file(store, label, which=min):
    return which(p for p in (Path(store) / label / "c").rglob("*") if p.is_file())


def swap_chunk(into, source, label):
    """Copy ``label``'s first chunk file of ``source`` over that of ``into``: intact, with
    its valid crc32c, and not the chunk ``into`` was written with."""
    target = chunk_file(into, label)
    shutil.copy(chunk_file(source, label), target)
    return target.relative_to(into).as_posix()


def labels_of(path):
    attrs = json.loads((Path(path) / "zarr.json").read_text())["attributes"]
    return [f"state/{n}" for n in attrs["state_names"]] + [f"info/{n}" for n in attrs["info_names"]]


def edit_json(file, edit):
    meta = json.loads(Path(file).read_text())
    Path(file).write_text(json.dumps(edit(meta) or meta))


def reseal_raw(store, label, content):
    """Write ``content`` (any JSON value) as ``label``'s zarr.json ("" for the group's) and
    record it in the manifest with a digest to match: a store edited and sealed again, which
    the digest cannot tell from one written so."""
    store = Path(store)
    (store / label / "zarr.json").write_text(json.dumps(content))
    manifest = json.loads((store / MANIFEST).read_text())
    if label:
        manifest["arrays"][label]["metadata"] = content
    write_manifest(store, manifest)


def write_manifest(store, content):
    """``content`` (any JSON value) as the manifest, with the group's digest to match."""
    data = (json.dumps(content) + "\n").encode()
    (store / MANIFEST).write_bytes(data)
    edit_json(store / "zarr.json", lambda m: m["attributes"].update({DIGEST: digest_of(data)}))


# --- 1. a chunk swapped in from another store ------------------------------------------------


@pytest.mark.parametrize("label", [FC1, "info/seed"])
def test_a_swapped_chunk_is_refused_by_every_read(tmp_path, label):
    a, b = store_pair(tmp_path)
    key = swap_chunk(a, b, label)
    store = open_store(a)  # opening reads no chunk data
    section, name = label.split("/")
    expect = ("a.zarr", label, key, "not the chunk this store was written with")
    if section == "info":
        reads = [lambda: store.info(name)]
    else:
        reads = [
            lambda: store.read(name),
            lambda: store.read(name, 3),
            lambda: list(store.iter_param_blocks(name, rows=np.arange(4))),
            lambda: store.state_dict(0),
        ]
    reads.append(store.validate)
    for read in reads:
        with pytest.raises(StoreError) as error:
            read()
        assert all(part in str(error.value) for part in expect), error.value
    # the other arrays still read: only the swapped chunk is refused
    assert open_store(a).read("fc2.bias").shape[0] == 8


def test_a_chunk_swapped_within_a_store_is_refused(tmp_path):
    """A chunk moved to another position of its own array is in the manifest, but not there."""
    big = write_store(
        tmp_path / "big.zarr",
        {"w": np.random.default_rng(0).standard_normal((4, 300, 2048), dtype=np.float32)},
    )
    assert len(list(big.layout("state", "w").indices())) > 1
    first, last = chunk_file(big.path, "state/w"), chunk_file(big.path, "state/w", max)
    shutil.copy(last, first)
    with pytest.raises(StoreError, match=r"state/w: chunk \(0, 0, 0\) .*manifest records"):
        open_store(big.path).read("w", 0)


def test_commands_refuse_a_swapped_chunk(tmp_path):
    a, b = store_pair(tmp_path)
    key = swap_chunk(a, b, FC1)
    expect = ("a.zarr", FC1, "chunk (0, 0, 0)", key, "not the chunk this store was written with")
    fails("canonicalize", a, tmp_path / "c.zarr", expect=expect)
    fails("minmass", a, tmp_path / "m.parquet", expect=expect)
    fails("mmd", a, b, tmp_path / "o.parquet", "--device", "cpu", expect=expect)
    fails("mmd", b, a, tmp_path / "o.parquet", "--device", "cpu", "--canonical", expect=expect)
    fails("store", "validate", a, expect=expect)
    for output in ("c.zarr", "m.parquet", "o.parquet"):
        assert not (tmp_path / output).exists()
    assert not list(tmp_path.glob(".o.parquet*"))  # no canonical scratch copies left


def predictions_pair(tmp_path):
    """Predictions of one sample store on two test sets: stores of the same layout."""
    samples = optunet(tmp_path, "samples.zarr", n=2).path
    ood = random_images(3, 9)
    return [
        write_predictions(samples, tmp_path / f"{name}.zarr", random_images(6, seed), ood)
        for name, seed in (("p", 0), ("q", 1))
    ]


def test_predictions_and_metrics_refuse_a_swapped_chunk(tmp_path):
    from symbnn.report.method_tables import metrics_row

    p, q = predictions_pair(tmp_path)
    key = swap_chunk(p, q, "test")
    expect = ("p.zarr", "cannot read test", key, "not the chunk this store was written with")
    for read in (
        lambda: open_predictions(p).read("test"),
        lambda: open_predictions(p).group["test"][0],
        lambda: metrics_row(p),
        lambda: open_predictions(p).validate(),
    ):
        with pytest.raises(StoreError) as error:
            read()
        assert all(part in str(error.value) for part in expect), error.value
    assert open_predictions(p).read("labels").tolist() == [0, 1, 2, 3, 4, 5]
    fails("store", "validate", p, expect=expect)


# --- 2. data types against the schema --------------------------------------------------------


def reseal_dtype(store, label, dtype):
    """Edit ``label``'s data_type (same item size: every chunk's crc32c still passes) and
    seal the store again: the digest then matches the edit."""
    store = Path(store)
    edit_json(store / label / "zarr.json", lambda m: m.update(data_type=dtype))
    weights = (store / "state").exists()
    seal(store, labels_of(store) if weights else ["test", "ood", "labels", "test_accuracy"])


def test_a_resealed_int32_store_is_refused_by_validate_and_every_reader(tmp_path):
    a, b = store_pair(tmp_path)
    reseal_dtype(a, FC1, "int32")
    expect = ("a.zarr", FC1, "int32", "expected floating point")
    with pytest.raises(StoreError) as error:
        open_store(a)
    assert all(part in str(error.value) for part in expect), error.value
    fails("store", "validate", a, expect=expect)
    fails("store", "info", a, expect=expect)
    fails("canonicalize", a, tmp_path / "c.zarr", expect=expect)
    fails("minmass", a, tmp_path / "m.parquet", expect=expect)
    fails("mmd", a, b, tmp_path / "o.parquet", "--device", "cpu", expect=expect)
    fails("mmd", b, a, tmp_path / "o.parquet", "--device", "cpu", expect=expect)


@pytest.mark.parametrize(
    "label, dtype, expected",
    [("info/seed", "float64", "integer"), ("info/test_accuracy", "int32", "floating point")],
)
def test_info_columns_keep_their_kind(tmp_path, label, dtype, expected):
    store = optunet(tmp_path, "s.zarr").path
    reseal_dtype(store, label, dtype)
    with pytest.raises(StoreError, match=f"{label} holds {dtype} values, expected {expected}"):
        open_store(store)


@pytest.mark.parametrize(
    "label, dtype, expected",
    [("test", "int16", "floating point"), ("labels", "float64", "integer")],
)
def test_predictions_keep_their_kind(tmp_path, label, dtype, expected):
    p, _ = predictions_pair(tmp_path)
    reseal_dtype(p, label, dtype)
    with pytest.raises(StoreError, match=f"{label} holds {dtype} values, expected {expected}"):
        open_predictions(p)
    fails("store", "validate", p, expect=("p.zarr", label, dtype))


def test_integer_batchnorm_counters_and_other_info_columns_open(tmp_path):
    state = {"bn.weight": np.ones((3, 4), np.float32), "bn.num_batches_tracked": np.zeros(3, int)}
    info = {"seed": np.arange(3), "perm.fc1": np.zeros((3, 4), np.int64), "flag": np.ones(3, bool)}
    store = write_store(tmp_path / "s.zarr", state, info)
    assert store.read("bn.num_batches_tracked").dtype.kind == "i"
    assert store.validate() == []


# --- 3. mmd of the same networks under other attributes --------------------------------------


def renamed_copy(store, path):
    """A copy of `store` under another experiment name: other digest, the same networks."""
    shutil.copytree(store, path)
    edit_json(path / "zarr.json", lambda m: m["attributes"].update(experiment="renamed"))
    seal(path, labels_of(path))
    return path


def test_mmd_refuses_the_same_networks_under_other_attributes(tmp_path):
    a, b = store_pair(tmp_path)
    a2 = renamed_copy(a, tmp_path / "a2.zarr")
    assert open_store(a).digest != open_store(a2).digest
    out = tmp_path / "o.parquet"
    expect = ("a.zarr", "a2.zarr", "same networks")
    fails("mmd", a, a2, out, "--device", "cpu", expect=expect)
    fails("mmd", a, a2, out, "--device", "cpu", "--canonical", expect=expect)
    rows = ("--target-rows=2:6", "--method-rows=2:6")
    fails("mmd", a, a2, out, "--device", "cpu", *rows, expect=(*expect, "a.zarr rows 2:6"))
    assert not out.exists()
    # disjoint rows of the same networks, and another store, are compared
    code, text = cli("mmd", a, a2, out, "--device", "cpu", "--target-rows=0:4", "--method-rows=4:8")
    assert code == 0 and out.exists(), text
    assert cli("mmd", a, b, out, "--device", "cpu")[0] == 0


def test_mmd_refuses_a_rewritten_copy_of_the_weights(tmp_path):
    """Another layout, dtype and attributes; the same networks at the rows compared."""
    a = optunet(tmp_path, "a.zarr", n=8)
    state = {name: a.read(name, slice(2, 8)).astype(np.float64) for name in a.state_names}
    w = tmp_path / "w.zarr"
    write_store(w, state, {"seed": np.arange(6)}, {"architecture": a.architecture})
    out = tmp_path / "o.parquet"
    rows = "--target-rows=2:8"
    fails("mmd", a.path, w, out, "--device", "cpu", rows, expect=("same networks", "rows 2:8"))
    assert cli("mmd", a.path, w, out, "--device", "cpu", "--target-rows=0:6")[0] == 0


def test_the_library_mmd_refuses_the_same_networks_too(tmp_path):
    """symbnn.mmd.layerwise_mmd itself, not only the command, refuses a renamed copy."""
    from symbnn.mmd import layerwise_mmd
    from symbnn.mmd.engine import MMDInputError

    a, _ = store_pair(tmp_path)
    a2 = renamed_copy(a, tmp_path / "a2.zarr")
    with pytest.raises(MMDInputError, match="same networks.*a.zarr rows 2:6"):
        layerwise_mmd(a, a2, target_rows=slice(2, 6), method_rows=slice(2, 6), device="cpu")
    scattered = np.array([0, 3, 5])
    with pytest.raises(MMDInputError, match="3 chosen rows"):
        layerwise_mmd(a, a2, target_rows=scattered, method_rows=scattered, device="cpu")
    per_layer, _ = layerwise_mmd(
        a, a2, target_rows=np.array([0, 2, 4, 6]), method_rows=np.array([1, 3, 5, 7]), device="cpu"
    )
    assert len(per_layer)


def test_same_networks_reads_one_row_of_a_different_store(tmp_path, monkeypatch):
    from symbnn.store import reader, sameness

    a, b = store_pair(tmp_path)
    reads = []
    original = reader.Store.read
    monkeypatch.setattr(
        reader.Store, "read", lambda s, n, r=slice(None): reads.append(r) or original(s, n, r)
    )
    assert not sameness.same_networks(open_store(a), open_store(b), None, None)
    assert reads == [0, 0]  # one row of the smallest entry, of each store
    assert sameness.same_networks(open_store(a), open_store(a), slice(1, 3), slice(1, 3))
    assert not sameness.same_networks(open_store(a), open_store(a), slice(0, 4), slice(4, 8))


# --- 4. every JSON shape of a zarr.json and of the manifest ---------------------------------

SHAPES = {
    "string": "x",
    "list": [1, 2],
    "number": 3,
    "null": None,
    "empty": {},
}
GROUP_EDITS = {
    **SHAPES,
    "no-attributes": {"zarr_format": 3, "node_type": "group"},
    "attributes-list": {"zarr_format": 3, "node_type": "group", "attributes": []},
    "attributes-string": {"zarr_format": 3, "node_type": "group", "attributes": "x"},
    "format-string": {"zarr_format": "3", "node_type": "group", "attributes": {}},
    "node-array": {"zarr_format": 3, "node_type": "array", "attributes": {}},
}


@pytest.mark.parametrize("content", GROUP_EDITS.values(), ids=GROUP_EDITS.keys())
def test_every_shape_of_a_group_zarr_json_is_named(tmp_path, content):
    store = optunet(tmp_path, "s.zarr").path
    p, _ = predictions_pair(tmp_path)
    for path in (store, p):
        (path / "zarr.json").write_text(json.dumps(content))
        expect = (path.name, "zarr.json")
        for opener in (open_store, open_predictions):
            with pytest.raises(StoreError) as error:
                opener(path)
            assert all(part in str(error.value) for part in expect), error.value
        assert not is_predictions(path)
        fails("store", "validate", path, expect=expect)
        fails("store", "info", path, expect=expect)
        fails("store", "upgrade", path, expect=expect)
    fails("minmass", store, tmp_path / "m.parquet", expect=("s.zarr", "zarr.json"))


def replaced_by(value):
    """An edit that replaces the whole JSON content by ``value``."""
    return lambda _: value


def array_edit(**fields):
    def edit(meta):
        meta.update(fields)
        return meta

    return edit


ARRAY_EDITS = {
    **{name: replaced_by(value) for name, value in SHAPES.items()},
    "no-shape": lambda m: {k: v for k, v in m.items() if k != "shape"},
    "shape-string": array_edit(shape="x"),
    "shape-floats": array_edit(shape=[8.5, 3, 10]),
    "shape-bools": array_edit(shape=[True, 3, 10]),
    "grid-list": array_edit(chunk_grid=[1]),
    "grid-no-configuration": array_edit(chunk_grid={"name": "regular"}),
    "chunks-string": array_edit(
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": "x"}}
    ),
    "encoding-string": array_edit(chunk_key_encoding="default"),
    "separator": array_edit(
        chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}
    ),
    "codecs-string": array_edit(codecs="bytes"),
    "codecs-numbers": array_edit(codecs=[1, 2]),
    "dtype-number": array_edit(data_type=5),
    "dtype-object": array_edit(data_type={"name": "float32"}),
    "dtype-unknown": array_edit(data_type="float33"),
    "fill-null": array_edit(fill_value=None),
    "fill-list": array_edit(fill_value=[0]),
    "attributes-list": array_edit(attributes=[]),
    "node-group": array_edit(node_type="group"),
    "format-2": array_edit(zarr_format=2),
}


@pytest.mark.parametrize("edit", ARRAY_EDITS.values(), ids=ARRAY_EDITS.keys())
@pytest.mark.parametrize("resealed", [False, True], ids=["edited", "resealed"])
def test_every_shape_of_an_array_zarr_json_is_named(tmp_path, edit, resealed):
    store = optunet(tmp_path, "s.zarr").path
    meta = json.loads((store / FC1 / "zarr.json").read_text())
    content = edit(meta)
    if resealed:
        reseal_raw(store, FC1, content)
    else:
        (store / FC1 / "zarr.json").write_text(json.dumps(content))
    expect = ("s.zarr", f"{FC1}/zarr.json")
    with pytest.raises(StoreError) as error:
        open_store(store).read("fc1.weight")
    assert all(part in str(error.value) for part in expect), error.value
    fails("store", "validate", store, expect=expect)
    fails("canonicalize", store, tmp_path / "c.zarr", expect=expect)


def test_a_fill_value_zarr_cannot_read_is_named(tmp_path):
    """A field symbnn does not parse itself, sealed again: Zarr's refusal, named."""
    store = optunet(tmp_path, "s.zarr").path
    meta = json.loads((store / FC1 / "zarr.json").read_text())
    reseal_raw(store, FC1, {**meta, "fill_value": "lots"})
    fails("store", "validate", store, expect=("s.zarr", f"{FC1}/zarr.json", "lots"))
    p, _ = predictions_pair(tmp_path)
    meta = json.loads((p / "test" / "zarr.json").read_text())
    reseal_raw(p, "test", {**meta, "fill_value": "lots"})
    fails("store", "validate", p, expect=("p.zarr", "test/zarr.json", "lots"))


def manifest_edits():
    def entry(value):
        return lambda m: m["arrays"].update({FC1: value}) or m

    def crcs(value):
        return lambda m: m["arrays"][FC1].update(crc32c=value) or m

    return {
        **{name: replaced_by(value) for name, value in SHAPES.items()},
        "no-format": lambda m: {k: v for k, v in m.items() if k != "format"},
        "group-list": lambda m: {**m, "group": []},
        "arrays-string": lambda m: {**m, "arrays": "x"},
        "attributes-list": lambda m: m["group"].update(attributes=[]) or m,
        "entry-string": entry("x"),
        "entry-no-metadata": entry({"crc32c": [1]}),
        "crc-string": crcs("x"),
        "crc-negative": crcs([-1]),
        "crc-bool": crcs([True]),
        "crc-float": crcs([1.5]),
        "crc-too-large": crcs([2**32]),
        "crc-too-few": crcs([]),
        "metadata-list": entry({"metadata": [], "crc32c": [1]}),
    }


@pytest.mark.parametrize("edit", manifest_edits().values(), ids=manifest_edits().keys())
def test_every_shape_of_the_manifest_is_named(tmp_path, edit):
    store = optunet(tmp_path, "s.zarr").path
    write_manifest(store, edit(json.loads((store / MANIFEST).read_text())))
    with pytest.raises(StoreError) as error:
        open_store(store)
    assert "s.zarr" in str(error.value) and MANIFEST in str(error.value), error.value
    fails("store", "validate", store, expect=("s.zarr", MANIFEST))
    fails("store", "upgrade", store, expect=("s.zarr",))


def test_a_manifest_that_is_not_json_is_named(tmp_path):
    store = optunet(tmp_path, "s.zarr").path
    data = b"\xff\xfe not json"
    (store / MANIFEST).write_bytes(data)
    edit_json(store / "zarr.json", lambda m: m["attributes"].update({DIGEST: digest_of(data)}))
    fails("store", "validate", store, expect=("s.zarr", f"malformed {MANIFEST}"))


# --- 5. the real command line: exit status, one line, no traceback --------------------------


@pytest.mark.slow
def test_the_command_line_refuses_swapped_and_retyped_stores_without_a_traceback(tmp_path):
    a, b = store_pair(tmp_path)
    c = tmp_path / "c.zarr"
    shutil.copytree(a, c)
    swap_chunk(a, b, FC1)
    reseal_dtype(c, FC1, "int32")
    (tmp_path / "g.zarr").mkdir()
    (tmp_path / "g.zarr" / "zarr.json").write_text('"x"')
    symbnn = [sys.executable, "-m", "symbnn.cli"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    m, x = tmp_path / "m.parquet", tmp_path / "x.zarr"
    runs = {
        "chunk (0, 0, 0)": [["minmass", a, m], ["canonicalize", a, x]],
        "int32": [["minmass", c, m], ["canonicalize", c, x], ["mmd", c, b, m, "--device", "cpu"]],
        "zarr.json": [["store", "validate", tmp_path / "g.zarr"]],
    }
    for expect, commands in runs.items():
        for args in commands:
            done = subprocess.run(
                [*symbnn, *map(str, args)], capture_output=True, text=True, env=env, cwd=tmp_path
            )
            text = done.stdout + done.stderr
            assert done.returncode == 1 and "Traceback" not in text, text
            assert expect in text, text
    assert open_store(b).validate() == []  # the source of the swap is untouched


# --- 6. units: where a chunk key sits in the manifest, the schema's kinds -------------------


@pytest.mark.parametrize("separator", ["/", "."])
def test_a_chunk_key_maps_to_its_manifest_position(separator):
    from symbnn.store.layout import ArrayLayout
    from symbnn.store.pinned import ChunkNotRecorded, PinnedStore, _Pins

    layout = ArrayLayout(
        store=Path("s.zarr"),
        label="state/w",
        shape=(5, 7),
        chunks=(2, 3),
        dtype=np.dtype("float32"),
        itemsize=4,
        separator=separator,
        checksum=True,
        plain=True,
    )  # a 3 x 3 grid of chunks
    pins = _Pins(layout, list(range(100, 109)))
    assert [pins.position(layout.key(i).split("/")[2:]) for i in [(0, 0), (1, 2), (2, 1)]] == [
        ((0, 0), 0),
        ((1, 2), 5),
        ((2, 1), 7),
    ]
    for other in (["zarr.json"], ["c"], ["c.3.0"], ["c", "3", "0"], ["c", "x", "0"], ["c.0"]):
        assert pins.position(other) is None, other
    store = PinnedStore(".", pins={"state/w": pins})
    tail = np.array([1, 2, 3, 4, *(105).to_bytes(4, "little")], np.uint8)

    class Buffer:
        def as_numpy_array(self):
            return tail

    store._check(layout.key((1, 2)), Buffer())  # position 5 records 105
    store._check("state/w/zarr.json", Buffer())  # not a chunk: not checked
    with pytest.raises(ChunkNotRecorded) as error:
        store._check(layout.key((2, 1)), Buffer())
    assert (error.value.index, error.value.found, error.value.expected) == ((2, 1), 105, 107)


def test_the_schema_kinds():
    from symbnn.store.schema import FLAG, FLOAT, INTEGER, NUMBER, predictions_kind, weight_kind

    assert weight_kind("state/fc1.weight") == FLOAT
    assert weight_kind("state/layer1.0.bn1.num_batches_tracked") == INTEGER
    assert weight_kind("info/seed") == INTEGER and weight_kind("info/perm.fc1") == INTEGER
    assert weight_kind("info/scale.fc1") == FLOAT and weight_kind("info/converged") == FLAG
    assert weight_kind("info/anything_else") == NUMBER
    assert predictions_kind("labels") == INTEGER and predictions_kind("ood") == FLOAT

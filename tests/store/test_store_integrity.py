"""Store integrity and trust: a store never runs code, every edit of its metadata or swap of
a chunk is found, no edit turns a checked store into an unchecked one, older stores are
refused with the upgrade command and `symbnn store upgrade` makes them current.

Each case: the library raises StoreError (or UntrustedImport) naming the store and what
changed; the CLI exits 1 with one line and no traceback (docs/stores.md).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import cli, fails, legacy_store, stacked_state

from symbnn import trust
from symbnn.models import build_model
from symbnn.predictions import open_predictions, write_predictions
from symbnn.store import StoreError, StoreWriter, allow_unverified, open_store, seal
from symbnn.store.upgrade import refuse_old_stores, stores_to_upgrade, upgrade

ARCH = {"name": "optunet"}
PWNED = {"name": "os:system", "options": {"command": "touch PWNED"}}
USER_MODEL = {
    "name": "user_models:SmallCNN",
    "options": {"channels": 2},
    "input_shape": [1, 28, 28],
}


@pytest.fixture(autouse=True)
def nothing_trusted(monkeypatch):
    """Each test starts with no trusted import path (none registered, none in the
    environment) and ends with stores without a digest refused again (as the CLI's
    --allow-unverified leaves them)."""
    monkeypatch.delenv(trust.ENVIRONMENT, raising=False)
    trust.forget()
    yield
    trust.forget()
    allow_unverified(False)


def write(path, spec=ARCH, n=6, seed=0, model=None):
    """A store of networks of ``model`` (default: ``spec``) whose attributes say ``spec``,
    written by StoreWriter (sealed), not opened afterwards."""
    state = {k: v.numpy() for k, v in stacked_state(model or spec, n, seed=seed).items()}
    info = {"seed": np.arange(seed, seed + n), "mode_seed": np.arange(n) + 100}
    with StoreWriter(path, {"architecture": spec, "experiment": "t"}, expected_samples=n) as w:
        w.append(state, info)
    return Path(path)


def edit_json(path, edit):
    meta = json.loads(Path(path).read_text())
    edit(meta)
    Path(path).write_text(json.dumps(meta))


def chunk_file(store, label):
    return min(p for p in (Path(store) / label / "c").rglob("*") if p.is_file())


# --- 1. no code from data -----------------------------------------------------------------


def test_a_store_naming_os_system_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where `touch PWNED` would leave its file; no config.yaml
    bad = write(
        tmp_path / "bad.zarr", PWNED, model=ARCH
    )  # sealed: a valid digest does not make it trusted
    good = write(tmp_path / "good.zarr", seed=10)
    expect = ("bad.zarr", "'os:system'", "--trust-model os:system", "config.yaml")
    for command in (
        ["store", "validate", bad],
        ["store", "info", bad],
        ["store", "upgrade", bad],
        ["canonicalize", bad, tmp_path / "c.zarr"],
        ["minmass", bad, tmp_path / "m.parquet"],
        ["mmd", good, bad, tmp_path / "o.parquet", "--device", "cpu"],
        ["mmd", bad, good, tmp_path / "o.parquet", "--device", "cpu", "--canonical"],
    ):
        text = fails(*command, expect=expect)
        assert len(text.strip().splitlines()) <= 2, text  # one line (and upgrade's summary)
    with pytest.raises(StoreError, match="not trusted|symbnn imports code only"):
        open_store(bad)
    with pytest.raises(trust.UntrustedImport, match="os:system"):
        build_model(PWNED)  # the defence behind the store's own check
    assert not (tmp_path / "PWNED").exists()
    assert not any(tmp_path.glob("[cmo].*"))  # no output written either


def test_an_untrusted_module_is_never_imported(tmp_path, monkeypatch):
    (tmp_path / "side_effect.py").write_text("open(__file__ + '.imported', 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(trust.UntrustedImport, match="side_effect:Net"):
        build_model({"name": "side_effect:Net"})
    assert not (tmp_path / "side_effect.py.imported").exists()
    trust.trust_model("side_effect:Net")
    with pytest.raises(ValueError, match="has no attribute 'Net'"):  # imported once trusted
        build_model({"name": "side_effect:Net"})
    assert (tmp_path / "side_effect.py.imported").exists()


def test_a_user_model_is_trusted_when_named_by_config_option_or_environment(tmp_path, monkeypatch):
    import yaml

    from symbnn.jobenv import workflow_settings
    from symbnn.settings import load_config

    monkeypatch.chdir(tmp_path)
    trust.trust_model(USER_MODEL["name"])  # to write it (named here, in code)
    path = write(tmp_path / "user.zarr", USER_MODEL, n=3)
    trust.forget()
    fails("store", "info", path, expect=("user_models:SmallCNN", "--trust-model"))
    # on the command line
    assert cli("--trust-model", USER_MODEL["name"], "store", "validate", path)[0] == 0
    trust.forget()
    # in the environment (what workflow jobs inherit)
    monkeypatch.setenv(trust.ENVIRONMENT, f"other:Net,model={USER_MODEL['name']}")
    assert open_store(path).architecture == USER_MODEL
    monkeypatch.delenv(trust.ENVIRONMENT)
    # in the current folder's config.yaml, read only when needed
    config = yaml.safe_load((Path(__file__).parents[2] / "config.yaml").read_text())
    config["experiments"]["default"]["model"] = USER_MODEL
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert cli("store", "validate", path)[0] == 0
    fails("--trust-model", "os system", "store", "info", path, expect=("not an import path",))
    # the settings layer trusts it, and the Snakefile passes it on to the jobs
    trust.forget()
    workflow_settings(load_config(tmp_path / "config.yaml").to_dict(), object())
    assert ("model", USER_MODEL["name"]) in trust.from_environment()
    assert open_store(path).n_samples == 3


# --- 2. metadata under the digest ---------------------------------------------------------


def set_dtype(meta):
    meta["data_type"] = "int32"  # same item size: the chunk checksums still pass


def add_transpose(meta):
    meta["codecs"].insert(0, {"name": "transpose", "configuration": {"order": [0, 2, 1]}})


@pytest.mark.parametrize(
    "target, edit, expect",
    [
        ("state/fc1.weight/zarr.json", set_dtype, ["state/fc1.weight", "data_type", "int32"]),
        ("state/fc1.weight/zarr.json", add_transpose, ["state/fc1.weight", "codecs"]),
        (
            "zarr.json",
            lambda m: m["attributes"]["state_names"].remove("fc2.bias"),
            ["attribute 'state_names' lost", "fc2.bias"],
        ),
        (
            "zarr.json",
            lambda m: m["attributes"].pop("checksum"),
            ["attribute 'checksum' was removed"],
        ),
        (
            "zarr.json",
            lambda m: m["attributes"].update(architecture={"name": "mlp"}),
            ["attribute 'architecture' is"],
        ),
        ("zarr.json", lambda m: m["attributes"].update(digest="sha256:00"), ["does not match"]),
        ("zarr.json", lambda m: m["attributes"].pop("digest"), ["'digest' is missing"]),
        ("zarr.json", lambda m: m["attributes"].update(format_version=1), ["format_version is 1"]),
    ],
    ids=[
        "dtype",
        "codec",
        "state_names",
        "checksum",
        "architecture",
        "digest",
        "no-digest",
        "version",
    ],  # fmt: skip
)
def test_every_metadata_edit_is_an_error(tmp_path, target, edit, expect):
    store = write(tmp_path / "s.zarr")
    other = write(tmp_path / "o.zarr", seed=20)
    edit_json(store / target, edit)
    with pytest.raises(StoreError) as error:
        open_store(store)
    assert all(part in str(error.value) for part in expect), error.value
    fails("store", "validate", store, expect=("s.zarr", *expect))
    fails("mmd", store, other, tmp_path / "o.parquet", "--device", "cpu", expect=expect)
    # no edit makes it an unverified store that --allow-unverified would read
    fails("--allow-unverified", "store", "info", store, expect=expect)
    assert not (tmp_path / "o.parquet").exists()


def test_a_changed_or_missing_manifest_is_an_error(tmp_path):
    store = write(tmp_path / "s.zarr")
    manifest = store / "manifest.json"
    edit_json(manifest, lambda m: m["arrays"]["info/seed"]["crc32c"].reverse())
    with pytest.raises(StoreError, match="manifest.json does not match the store's digest"):
        open_store(store)
    manifest.unlink()
    fails("store", "validate", store, expect=("cannot read manifest.json",))


# --- 3. chunks the checksums cannot tell apart ----------------------------------------------


def test_a_chunk_swapped_in_from_another_store_is_found_by_validate(tmp_path):
    a, b = write(tmp_path / "a.zarr"), write(tmp_path / "b.zarr", seed=30)
    shutil.copy(chunk_file(b, "state/fc1.weight"), chunk_file(a, "state/fc1.weight"))
    open_store(a)  # opening reads no chunk: the swap is for validate to find
    fails(
        "store",
        "validate",
        a,
        expect=("a.zarr", "state/fc1.weight", "chunk (0, 0, 0)", "not the chunk this store"),
    )


def test_a_rewritten_info_chunk_with_a_valid_checksum_is_found(tmp_path):
    store = write(tmp_path / "s.zarr")
    array = zarr.open_group(store, mode="r+")["info/mode_seed"]
    array[2] = 7  # zarr recomputes the chunk's crc32c
    with pytest.raises(StoreError, match=r"info/mode_seed: chunk \(0,\).*replaced or rewritten"):
        open_store(store).validate()


def test_predictions_permuted_across_classes_are_found(tmp_path):
    from conftest import random_images

    trust.forget()
    samples = write(tmp_path / "samples.zarr", n=2)
    path = write_predictions(
        samples, tmp_path / "p.zarr", random_images(10, 0), random_images(4, 1)
    )
    array = zarr.open_group(path, mode="r+")["test"]
    array[...] = array[...][..., ::-1]  # still probabilities: only the manifest can tell
    fails("store", "validate", path, expect=("p.zarr", "cannot read test", "not the chunk"))
    # and a predictions store is under the digest too
    edit_json(path / "zarr.json", lambda m: m["attributes"].update(num_classes=10, method="x"))
    with pytest.raises(StoreError, match="attribute 'method' was added"):
        open_predictions(path)


# --- 4. a copy is the same store ------------------------------------------------------------


def test_mmd_of_a_store_and_its_byte_copy_is_refused(tmp_path):
    a = write(tmp_path / "a.zarr", n=8)
    copy = tmp_path / "elsewhere" / "copy.zarr"
    shutil.copytree(a, copy)
    out = tmp_path / "o.parquet"
    fails("mmd", a, copy, out, "--device", "cpu", expect=("a.zarr", "copy.zarr", "same store"))
    assert not out.exists()
    assert cli("mmd", a, copy, out, "--device", "cpu", "--target-rows=0:4",
               "--method-rows=4:8")[0] == 0  # fmt: skip


# --- 5. the older format: refused, upgraded, or read on request -----------------------------


def format_1(path):
    """Turn a store into one as symbnn wrote them before the digest (format_version 1)."""
    (path / "manifest.json").unlink()
    edit_json(path / "zarr.json", lambda m: m["attributes"].update(format_version=1))
    edit_json(path / "zarr.json", lambda m: m["attributes"].pop("digest"))
    return path


def test_an_older_store_is_refused_with_the_remedy_and_read_on_request(tmp_path):
    store = format_1(write(tmp_path / "old.zarr"))
    remedy = (
        "old.zarr",
        "older store format",
        f"symbnn store upgrade {store}",
        "--allow-unverified",
    )
    with pytest.raises(StoreError, match="symbnn store upgrade"):
        open_store(store)
    fails("store", "validate", store, expect=remedy)
    fails("store", "info", store, expect=remedy)
    code, text = cli("--allow-unverified", "store", "validate", store)
    assert code == 0 and "warning" in text and "not fully verified" in text
    assert "no digest of its metadata" in text


def test_upgrade_verifies_and_seals_a_store_with_checksums(tmp_path):
    store = format_1(write(tmp_path / "old.zarr"))
    before = open_store(store, allow_unverified=True).read("fc1.weight")
    code, text = cli("store", "upgrade", store)
    assert code == 0 and "each matching its crc32c checksum" in text, text
    upgraded = open_store(store)
    assert upgraded.attrs["format_version"] == 2 and upgraded.attrs["upgraded"]["values_verified"]
    assert upgraded.attrs["upgraded"]["from_format_version"] == 1
    assert upgraded.validate() == [] and np.array_equal(upgraded.read("fc1.weight"), before)
    assert "already format_version 2" in cli("store", "upgrade", store)[1]
    # a store written from it (attributes copied, as canonical forms do) is not "upgraded"
    state = {name: upgraded.read(name) for name in upgraded.state_names}
    with StoreWriter(tmp_path / "derived.zarr", upgraded.attrs) as writer:
        writer.append(state)
    derived = open_store(tmp_path / "derived.zarr")
    assert "upgraded" not in derived.attrs and derived.digest != upgraded.digest


def test_upgrade_refuses_a_damaged_store(tmp_path):
    store = format_1(write(tmp_path / "old.zarr"))
    data = bytearray(chunk_file(store, "state/conv1.weight").read_bytes())
    data[5] ^= 0x10
    chunk_file(store, "state/conv1.weight").write_bytes(bytes(data))
    fails("store", "upgrade", store, expect=("state/conv1.weight", "crc32c"))
    with pytest.raises(StoreError, match="older store format"):
        open_store(store)  # still refused: not sealed over the damage


def test_upgrade_rewrites_a_store_without_checksums_and_says_it_is_unverified(tmp_path):
    state = {k: v.numpy() for k, v in stacked_state(ARCH, 4).items()}
    info = {"seed": np.arange(4), "mode_index": np.zeros(4, np.int64)}  # all zero: omitted
    store = legacy_store(tmp_path / "old.zarr", state, info, {"architecture": ARCH})
    (store / ".snakemake_timestamp").write_text("")
    code, text = cli("store", "upgrade", store)
    assert code == 0 and "NOT verified" in text and "could not be verified" in text, text
    assert "info/mode_index" in text  # the absent chunk, read as zeros, named
    upgraded = open_store(store)
    assert upgraded.checksummed and not upgraded.attrs["upgraded"]["values_verified"]
    assert upgraded.validate() == [] and (store / ".snakemake_timestamp").exists()
    assert all(np.array_equal(upgraded.read(name), state[name]) for name in state)


def test_upgrade_never_seals_over_an_edit_of_a_store_that_had_a_digest(tmp_path):
    store = write(tmp_path / "s.zarr")
    edit_json(store / "zarr.json", lambda m: m["attributes"].update(format_version=1))
    edit_json(store / "zarr.json", lambda m: m["attributes"].pop("digest"))
    edit_json(store / "state/fc1.weight/zarr.json", set_dtype)
    fails("store", "upgrade", store, expect=("changed since", "data_type"))
    # only the version and digest edited (or an upgrade interrupted half-way): resealed
    edit_json(store / "state/fc1.weight/zarr.json", lambda m: m.update(data_type="float32"))
    assert cli("store", "upgrade", store)[0] == 0
    assert open_store(store).validate() == []


def test_predictions_of_the_older_format_are_refused_and_upgraded(tmp_path):
    from conftest import random_images

    samples = write(tmp_path / "samples.zarr", n=2)
    path = write_predictions(
        samples, tmp_path / "p.zarr", random_images(10, 0), random_images(4, 1)
    )
    (path / "manifest.json").unlink()
    edit_json(path / "zarr.json", lambda m: m["attributes"].pop("format_version"))
    edit_json(path / "zarr.json", lambda m: m["attributes"].pop("digest"))
    fails("store", "validate", path, expect=("p.zarr", "symbnn store upgrade"))
    assert "each matching its crc32c" in upgrade(path)[0]
    assert open_predictions(path).validate() == []


def test_the_workflow_start_finds_older_stores_and_names_the_command(tmp_path):
    results = tmp_path / "results" / "e"
    current = write(results / "posterior" / "target.zarr")
    old = format_1(write(results / "methods" / "de" / "multi" / "samples.zarr"))
    (results / "posterior" / ".target.zarr.tmp-1-ab").mkdir()  # a store being built: skipped
    assert stores_to_upgrade([results, tmp_path / "absent"]) == [old]
    with pytest.raises(StoreError, match="make upgrade-stores") as error:
        refuse_old_stores([results])
    assert str(old) in str(error.value) and str(current) not in str(error.value)
    code, text = cli("store", "upgrade", tmp_path / "results")
    assert code == 0 and "1 store(s) to upgrade" in text
    refuse_old_stores([results])  # nothing left
    open_store(old)


def test_seal_records_what_the_writer_wrote(tmp_path):
    """The manifest covers every array's metadata and each chunk's checksum, in C order."""
    store = write(tmp_path / "s.zarr")
    manifest = json.loads((store / "manifest.json").read_text())
    assert set(manifest["arrays"]) == {f"state/{n}" for n in open_store(store).state_names} | {
        "info/seed",
        "info/mode_seed",
    }
    meta = json.loads((store / "state/fc1.weight/zarr.json").read_text())
    assert manifest["arrays"]["state/fc1.weight"]["metadata"] == meta
    tail = int.from_bytes(chunk_file(store, "state/fc1.weight").read_bytes()[-4:], "little")
    assert manifest["arrays"]["state/fc1.weight"]["crc32c"] == [tail]
    digest = open_store(store).digest
    assert seal(store, list(manifest["arrays"])) == digest  # the same store, the same digest

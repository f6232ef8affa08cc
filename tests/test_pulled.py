"""Results restored by DVC get one timestamp per folder, once per recorded hash, and only when
DVC finds them exactly as dvc.lock records them (src/symbnn/pulled.py)."""

import json
import os
from types import SimpleNamespace

import pytest
import yaml

import symbnn.pulled as pulled

WORKFLOW = SimpleNamespace(is_main_process=True)


def lock(root, md5):
    stage = {"outs": [{"path": "results/a", "md5": md5}]}
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"e@a": stage}}))


@pytest.fixture
def restored(tmp_path, monkeypatch):
    """A checkout whose results/a came back from DVC with timestamps in a random order."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc").mkdir()
    lock(tmp_path, "abc.dir")
    files = [tmp_path / "results/a/table.csv", tmp_path / "results/a/store.zarr/0"]
    for age, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        os.utime(path, (1000 + age, 1000 + age))
    monkeypatch.setattr(pulled, "changed_outputs", lambda stages: {})
    return files


def mtimes(root):
    return {p.stat().st_mtime for p in [root, *root.rglob("*")]}


def test_restored_folder_gets_one_timestamp_once(restored, tmp_path, capsys):
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a", "results/b"]) == ["results/a"]
    assert len(mtimes(tmp_path / "results/a")) == 1
    assert "results/a as dvc.lock records them" in capsys.readouterr().err
    assert json.loads(pulled.STAMP.read_text()) == {"results/a": "abc.dir"}
    # adopted at this hash: nothing more to do; a new pull (new hash) is adopted again
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    lock(tmp_path, "def.dir")
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == ["results/a"]


def test_folder_not_as_recorded_is_left_alone(restored, tmp_path, monkeypatch):
    monkeypatch.setattr(pulled, "changed_outputs", lambda stages: {"results/a": "modified"})
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    assert len(mtimes(tmp_path / "results/a" / "store.zarr")) == 2  # untouched
    assert not pulled.STAMP.exists()


def test_switched_off_pushed_here_or_in_a_job(restored, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBNN_ADOPT", "0")
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    monkeypatch.delenv("SYMBNN_ADOPT")
    job = SimpleNamespace(is_main_process=False)  # a Slurm job's own Snakemake
    assert pulled.adopt_pulled_results(job, ["results/a"]) == []
    pulled.mark_adopted()  # what make push does on the machine that computed them
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    assert len(mtimes(tmp_path / "results/a" / "store.zarr")) == 2


def test_folder_not_as_recorded_is_checked_again_only_once_it_changes(restored, monkeypatch):
    """`dvc status` hashes the folder: not rerun at every Snakemake start while nothing changed
    (unless what was missing is the DVC cache, which a `dvc fetch` fills without a change)."""
    calls = []

    def status(state):
        monkeypatch.setattr(pulled, "changed_outputs", lambda stages: calls.append(1) or state)

    status({"results/a": "not in cache"})
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    status({"results/a": "modified"})
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == []
    assert len(calls) == 2
    restored[0].write_text("pulled again")
    status({})
    assert pulled.adopt_pulled_results(WORKFLOW, ["results/a"]) == ["results/a"]
    assert len(calls) == 3


def test_a_partial_pull_is_remembered_until_a_whole_pull(tmp_path, monkeypatch):
    """What `make pull-experiment` pulled (make verify EXP=NAME lets the rest be absent)."""
    monkeypatch.chdir(tmp_path)
    assert pulled.pulled_parts("results/a") is None
    pulled.record_partial_pull("results/a/", ["results/a/posterior", "results/a/logs/"])
    pulled.record_partial_pull("results/b", ["results/b/modes"])
    assert pulled.pulled_parts("results/a") == ["results/a/logs", "results/a/posterior"]
    assert sorted(pulled.partially_pulled()) == ["results/a", "results/b"]
    pulled.forget_partial_pulls()
    assert pulled.partially_pulled() == {} and pulled.pulled_parts("results/b") is None

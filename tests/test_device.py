"""Device handling: every GPU-capable step uses CUDA when torch sees a GPU and otherwise falls
back to the CPU, saying so in its log (no GPU is needed: torch.cuda.is_available is patched)."""

import logging

import pytest
import torch

from symbnn.device import resolve_device


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)


def test_auto_falls_back_to_the_cpu_with_a_warning(no_gpu, caplog):
    with caplog.at_level(logging.INFO, logger="symbnn.device"):
        assert resolve_device("auto") == "cpu"
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "running on the CPU" in record.getMessage()


def test_auto_picks_cuda_when_a_gpu_is_visible(monkeypatch, caplog):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Fake GPU 80GB")
    with caplog.at_level(logging.INFO, logger="symbnn.device"):
        assert resolve_device("auto") == "cuda"
    assert "Fake GPU 80GB" in caplog.text


@pytest.mark.parametrize("asked", ["cuda", "cuda:1"])
def test_an_explicit_cuda_request_without_a_gpu_is_an_error(no_gpu, asked):
    with pytest.raises(ValueError, match=f"'{asked}' was asked for but no CUDA device is visible"):
        resolve_device(asked)


def test_explicit_cpu_is_kept_silently(no_gpu, caplog):
    with caplog.at_level(logging.INFO, logger="symbnn.device"):
        assert resolve_device("cpu") == "cpu"
    assert not caplog.records


def test_a_slurm_gpu_that_torch_cannot_use_is_named(no_gpu, monkeypatch, caplog):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with caplog.at_level(logging.INFO, logger="symbnn.device"):
        assert resolve_device("auto") == "cpu"
    assert "CUDA_VISIBLE_DEVICES=0" in caplog.text and "CUDA build" in caplog.text


def test_training_job_logs_the_fallback_and_still_trains(no_gpu, tmp_path, one_torch_thread):
    """The train_shard step end to end (as its workflow script runs it, inside log_to)."""
    from conftest import tiny_experiment

    from symbnn.posterior import train_shard
    from symbnn.runlog import log_to
    from symbnn.settings import Data, Recipe
    from symbnn.store import open_store

    experiment = tiny_experiment(n_samples=2)
    experiment["data"].update(train_limit=64, test_limit=32)
    log = tmp_path / "train.log"
    with log_to(log):
        train_shard(
            tmp_path / "shard.zarr",
            "tiny",
            Data.parse(experiment["data"], "data"),
            experiment["model"],
            Recipe.parse(experiment["recipe"], "recipe"),
            [0, 1],
            device="auto",
        )
    assert "no CUDA device is visible, running on the CPU" in log.read_text()
    assert open_store(tmp_path / "shard.zarr").n_samples == 2


def test_mmd_command_logs_the_fallback(no_gpu, optunet_store, tmp_path, caplog, one_torch_thread):
    from symbnn.cli import main

    target, _ = optunet_store("target.zarr", n=6)
    method, _ = optunet_store("method.zarr", n=4, first_seed=100)
    out = tmp_path / "mmd.parquet"
    with caplog.at_level(logging.INFO, logger="symbnn.device"):
        assert main(["mmd", str(target.path), str(method.path), str(out), "--device", "auto"]) == 0
    assert "running on the CPU" in caplog.text
    assert out.exists()

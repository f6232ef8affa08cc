"""What each job asks for (symbnn.plan.resources): resources, never params."""

import pytest
from plan_configs import repository, tiny

from symbnn.plan import resources


@pytest.fixture
def counted(monkeypatch):
    """Parameter counts set by the test (no child process)."""
    counts = {}
    monkeypatch.setattr(resources, "n_parameters", lambda config, name: counts[name])
    return counts


def test_cpu_jobs_leave_threads_to_the_task_gpu_jobs_share_them():
    config = repository()
    assert resources.cpus_per_gpu(config, "default") == 0
    gpu = config.experiments["cifar100-resnet18"].compute
    assert resources.cpus_per_gpu(config, "cifar100-resnet18") == max(1, gpu.threads // gpu.gpus)
    assert resources.train_partition(config, "default") == config.slurm.cpu_partition
    assert resources.train_partition(config, "cifar100-resnet18") == config.slurm.gpu_partition


def test_only_large_models_get_a_gpu_for_their_mmd(counted):
    config = repository()
    counted.update({"cifar100-resnet18": 11_000_000, "mnist-optunet": 20_000})
    gpus = config.experiments["cifar100-resnet18"].compute.gpus
    assert resources.mmd_gpus(config, "cifar100-resnet18") == gpus > 0
    assert resources.mmd_mem_mb(config, "cifar100-resnet18") == 16000
    assert resources.mmd_partition(config, "cifar100-resnet18") == config.slurm.gpu_partition
    # a small model on an experiment with GPUs stays on CPUs
    assert config.experiments["mnist-optunet"].compute.gpus > 0
    assert resources.mmd_gpus(config, "mnist-optunet") == 0
    assert resources.mmd_mem_mb(config, "mnist-optunet") == 4000


def test_store_jobs_get_two_minutes_per_gigabyte(counted):
    config = tiny()
    n = config.experiments["tiny"].posterior.n_samples
    counted["tiny"] = 250_000_000 // n  # 1 GB of float32 in all
    assert resources.store_runtime(config, "tiny", 30) == 32
    counted["tiny"] = 10
    assert resources.store_runtime(config, "tiny", 30) == 30


def test_compute_reads_the_experiment_section():
    config = tiny(lambda e: e["compute"].update(threads=3, mem_mb=1234))
    assert resources.compute(config, "tiny", "threads") == 3
    assert resources.compute(config, "tiny", "mem_mb") == 1234


def test_the_permutation_frequency_job_of_a_small_model_takes_one_core():
    config = tiny()
    assert resources.permutation_frequency_resource(config, "tiny", "threads") == 1

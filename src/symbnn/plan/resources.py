"""What each job asks for: threads, memory, time, GPUs and the Slurm partition, from an
experiment's `compute` section (resources never change a result: they are not params)."""

from __future__ import annotations

from symbnn.analyses import plan as analyses_plan
from symbnn.plan.measured import n_parameters
from symbnn.settings import Config

# Models from this many parameters up (ResNet-18: 11M) get a GPU for their layer-wise MMD:
# the L1 distances of 1100 samples cost minutes per million weights on a CPU.
LARGE_MMD_PARAMETERS = 1_000_000


def compute(config: Config, experiment: str, key: str) -> int:
    """The experiment's `compute` setting `key`."""
    return getattr(config.experiments[experiment].compute, key)


def partition_for(config: Config, gpus: int) -> str:
    """config.yaml's Slurm partition for a job with this many GPUs."""
    return config.slurm.gpu_partition if gpus > 0 else config.slurm.cpu_partition


def train_partition(config: Config, experiment: str) -> str:
    return partition_for(config, config.experiments[experiment].compute.gpus)


def cpus_per_gpu(config: Config, experiment: str) -> int:
    """The job's threads per GPU (the Slurm plugin's --cpus-per-gpu); 0 leaves CPU jobs to
    --cpus-per-task."""
    resources = config.experiments[experiment].compute
    return max(1, resources.threads // resources.gpus) if resources.gpus else 0


def mmd_gpus(config: Config, experiment: str) -> int:
    """The experiment's GPUs for the MMD of a large model; small models stay on CPUs."""
    large = n_parameters(config, experiment) >= LARGE_MMD_PARAMETERS
    return config.experiments[experiment].compute.gpus if large else 0


def mmd_partition(config: Config, experiment: str) -> str:
    return partition_for(config, mmd_gpus(config, experiment))


def mmd_mem_mb(config: Config, experiment: str) -> int:
    return 16000 if mmd_gpus(config, experiment) else 4000


def store_runtime(config: Config, experiment: str, base: int) -> int:
    """Minutes for a job that reads or writes every weight of the target posterior: `base`
    plus 2 min per GB (1000 ResNet-18s are 45 GB of float32)."""
    n_samples = config.experiments[experiment].posterior.n_samples
    gigabytes = n_samples * n_parameters(config, experiment) * 4 / 1e9
    return base + int(2 * gigabytes)


def permutation_frequency_resource(config: Config, experiment: str, key: str) -> int:
    """`key` of an experiment's permutation-frequency job (one core for a small model, the
    experiment's `compute` section for a ResNet-18)."""
    return analyses_plan.permutation_frequency_resources(config, experiment)[key]

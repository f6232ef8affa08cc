"""Where a GPU-capable step runs: CUDA when a GPU is visible, else the CPU with a logged notice.

Training, sampling, prediction and the layer-wise MMD all take a `device` setting ("auto",
"cpu", "cuda", "cuda:N"); they resolve it here, so the same workflow runs unchanged on a GPU
node, a CPU node or a laptop, and the job's log says which one it used.
"""

from __future__ import annotations

import logging
import os

LOG = logging.getLogger("symbnn.device")


def resolve_device(device: str = "auto") -> str:
    """ "auto" -> "cuda" when torch sees a GPU, else "cpu" (logged as a warning); "cuda" or
    "cuda:N" without a visible GPU is an error; anything else is returned as given."""
    import torch

    device = str(device)
    if device == "auto":
        if torch.cuda.is_available():
            LOG.info("device auto: using CUDA (%s)", torch.cuda.get_device_name(0))
            return "cuda"
        LOG.warning(
            "device auto: no CUDA device is visible, running on the CPU%s", _allocation_hint()
        )
        return "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device: {device!r} was asked for but no CUDA device is visible{_allocation_hint()}"
        )
    return device


def _allocation_hint() -> str:
    """Slurm gave this job GPUs that torch cannot use: say so, it is a setup error, not a choice."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if os.environ.get("SLURM_JOB_ID") and visible not in ("", "-1"):
        return (
            f" (Slurm allocated CUDA_VISIBLE_DEVICES={visible}, but torch cannot use it: "
            "check the NVIDIA driver and that torch is a CUDA build)"
        )
    return ""

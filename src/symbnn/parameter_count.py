"""The parameter count of an experiment's model, computed in a child process
(``python -m symbnn.parameter_count``): the workflow sizes a job's resources by it (a GPU for
a large model's MMD, minutes per GB of weights) while the process that plans, the Snakefile's,
never imports torch. The model is built on the meta device, so no weight memory is used.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from symbnn.child_process import ask_child


def in_child(spec: Mapping[str, Any]) -> int:
    """The number of trainable parameters of the model ``spec`` (a model section's dict);
    ValueError with the child's last line when the model cannot be built."""
    failure = f"counting the parameters of model {spec.get('name')!r}"
    return int(ask_child("symbnn.parameter_count", dict(spec), failure))


def main() -> None:
    """The child: a model spec as JSON on stdin, its parameter count on stdout."""
    import torch

    from symbnn.models import build_model, count_parameters
    from symbnn.runlog import log_to

    with log_to(None), torch.device("meta"):  # an expected failure: one line, exit status 1
        print(count_parameters(build_model(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()

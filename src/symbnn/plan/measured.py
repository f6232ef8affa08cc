"""What planning measures in a child process, once per run: a model's parameter count (which
sizes the jobs that read every weight) and the content hash of datasets of the user's own
(which reruns the trainings when a loader returns other images). The planning process imports
no torch and no user loader."""

from __future__ import annotations

import functools
import json

from symbnn import fingerprint, parameter_count
from symbnn.settings import Config


@functools.cache
def _count(model: str) -> int:
    return parameter_count.in_child(json.loads(model))


def n_parameters(config: Config, experiment: str) -> int:
    """Parameter count of an experiment's model."""
    return _count(json.dumps(config.experiments[experiment].model.to_dict()))


_fingerprints: dict[tuple[str, str], dict[str, str]] = {}


def data_fingerprint(config: Config, experiment: str) -> dict[str, str]:
    """{"fingerprint": hash of what the experiment's dataset loaders of the user's own
    return}; {} for shipped datasets."""
    data = config.experiments[experiment].data
    key = (json.dumps(data.to_dict()), str(config.data_root))
    if key not in _fingerprints:
        found = fingerprint.of_data(data, config.data_root)
        _fingerprints[key] = {} if found is None else {"fingerprint": found}
    return _fingerprints[key]

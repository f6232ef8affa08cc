"""The dataset loaders of the user's own that a workflow run names, checked when it plans, in
a child process (``python -m symbnn.settings.loader_check``).

A loader's module usually imports torch, which the Snakefile's process never imports; yet a
loader that does not import, or is no function taking (split, root, **options), must stop the
run as a ConfigError naming the key before any job is planned, not inside an input function
that fingerprints the data (`symbnn.fingerprint`). The child imports each loader and checks
its signature (`symbnn.settings.load.check_loaders`; nothing is called) and answers with the
messages, which the parent locates in the configuration file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

from symbnn.child_process import ask_child
from symbnn.settings.base import ConfigError
from symbnn.settings.load import check_loaders, loaders, located
from symbnn.settings.workflow import Config


def check_in_child(config: Config, names: Iterable[str], source: str | Path) -> None:
    """ConfigError naming the file, line and key of every dataset loader of the experiments
    ``names`` that fails `check_loaders`; no child is started when they name none. The child
    trusts what SYMBNN_TRUSTED_IMPORTS names (`symbnn.trust.export_to_environment` first)."""
    request = {
        name: config.experiments[name].data.to_dict()
        for name in names
        if loaders(config.experiments[name].data)
    }
    if not request:
        return
    errors = json.loads(ask_child(__name__, request, "checking the dataset loaders"))
    if errors:
        raise located(ConfigError("\n".join(errors), errors), source)


def problems(request: dict[str, dict]) -> list[str]:
    """The messages of `check_loaders` for each experiment's data section in ``request``."""
    from symbnn.settings import Data

    found = []
    for name, data in request.items():
        key = f"experiments.{name}"
        for error in check_loaders(key, Data.parse(data, f"{key}.data")):
            found.extend(error.errors)
    return found


def main() -> None:
    """The child: {experiment: data section} as JSON on stdin, the messages as a JSON list on
    stdout."""
    from symbnn.runlog import log_to

    with log_to(None):  # a failure of the check itself: one line, exit status 1
        print(json.dumps(problems(json.loads(sys.stdin.read()))))


if __name__ == "__main__":
    main()

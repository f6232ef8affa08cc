"""Work the workflow's planning process hands to a child Python (``python -m MODULE``), so
that the process that plans, the Snakefile's, never imports torch or the user's code: the
request goes in as JSON on stdin, the answer comes back as the child's last line on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def ask_child(module: str, request: Any, failure: str) -> str:
    """The last stdout line of ``python -m module`` given ``request`` as JSON on stdin;
    ValueError "``failure``: the child's last line" when it exits non-zero. The child gets
    this environment (the trusted import paths travel in SYMBNN_TRUSTED_IMPORTS)."""
    result = subprocess.run(
        [sys.executable, "-m", module],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=os.environ,
    )
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no message"]
        raise ValueError(f"{failure}: {lines[-1]}")
    return result.stdout.strip().splitlines()[-1]

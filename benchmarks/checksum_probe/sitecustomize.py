"""Times symbnn's integrity work in every Python process of a benchmarked workflow run.

`benchmarks/workflow_checksums.py` puts this folder on PYTHONPATH, so every Python process
(Snakemake and each job's script or `symbnn` command) imports it at start-up. When
SYMBNN_CHECKSUM_PROBE names a file, the checksum and chunk-listing functions of symbnn are
wrapped as their modules load, and at exit the process appends one JSON line with the seconds
and bytes they took. Without the variable it does nothing.
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time

LOG = os.environ.get("SYMBNN_CHECKSUM_PROBE")
STARTED = time.perf_counter()
totals: dict[str, float] = {}
_depth = threading.local()


def timed(category: str, function, count_bytes: bool = False):
    """``function``, adding its wall time to ``category`` unless it runs inside another timed
    call of the same thread (so nested calls are counted once, by the outermost)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if count_bytes:
            totals["bytes"] = totals.get("bytes", 0) + memoryview(args[0]).nbytes
        if getattr(_depth, "value", 0):
            return function(*args, **kwargs)
        _depth.value = 1
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[category] = totals.get(category, 0.0) + time.perf_counter() - start
            _depth.value = 0

    return wrapper


def patch_checksums(module) -> None:
    # direct CRC calls (the banded writer, validation); the codec's own calls nest below
    module.checksum = timed("crc_direct_s", module.checksum, count_bytes=True)
    # verification on the worker thread, or inline outside checks_in_background()
    module._verify = timed("verify_s", module._verify)
    codec = module.BackgroundCrc32c
    codec._encode_sync = timed("encode_s", codec._encode_sync)
    codec._decode_sync = timed("decode_s", codec._decode_sync)


# Each function is patched in the module that defines it, right after that module has run:
# the modules that import it later get the timed one.
def patch_checks(module) -> None:
    module.check_chunks_present = timed("listing_s", module.check_chunks_present)
    # the digest: its check on open, the manifest and digest written at the end of a write
    module.check_digest = timed("digest_s", module.check_digest)


def patch_staging(module) -> None:
    module.seal = timed("seal_s", module.seal)


PATCHES = {
    "symbnn.store.chunk_checksums": patch_checksums,
    "symbnn.store.checks": patch_checks,
    "symbnn.store.staging": patch_staging,
}


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the modules of PATCHES as usual and patches each right after it has run."""

    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_module
        return spec


def report() -> None:
    if not totals:
        return
    line = {
        "pid": os.getpid(),
        "argv": " ".join(sys.argv)[:200],
        "process_s": time.perf_counter() - STARTED,
        **totals,
    }
    with open(LOG, "a") as log:
        log.write(json.dumps(line) + "\n")


if LOG:
    sys.meta_path.insert(0, PatchOnImport())
    atexit.register(report)

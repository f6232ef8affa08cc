"""The probe of benchmarks/workflow_checksums.py times symbnn's checksum work in any process."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from workflow_checksums import probe_environment, totals  # noqa: E402

WRITE_AND_READ = """
import numpy as np
from symbnn.store import open_store, write_store
write_store({path!r}, {{"w": np.ones((8, 1000), np.float32)}}, {{"seed": np.arange(8)}},
            {{"experiment": "probe"}})
assert open_store({path!r}).read("w").sum() == 8000
"""


def run_with_probe(tmp_path, log):
    code = WRITE_AND_READ.format(path=str(tmp_path / "s.zarr"))
    subprocess.run([sys.executable, "-c", code], env=probe_environment(log), check=True)


def test_probe_records_the_checksum_work_of_a_process(tmp_path):
    log = tmp_path / "probe.jsonl"
    run_with_probe(tmp_path, log)
    processes, summed = totals(log)
    assert processes == 1
    # every byte of the weights was checksummed at least twice: written, then read
    assert summed["bytes"] >= 2 * 8 * 1000 * 4
    for key in ("encode_s", "decode_s", "verify_s", "listing_s", "digest_s", "seal_s"):
        assert summed[key] > 0, key
    line = json.loads(log.read_text())
    assert line["pid"] > 0 and line["process_s"] > 0


def test_probe_does_nothing_without_its_variable(tmp_path):
    run_with_probe(tmp_path, None)
    assert [p.name for p in tmp_path.iterdir()] == ["s.zarr"]

"""benchmarks/peers.py cannot break unseen: every job runs at its tiny size, symbnn's side of
every case measured and each peer's row measured where the peer is installed and a row saying
why where it is not."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import peers  # noqa: E402

# the module each peer's rows import, by the library name its rows start with
PEERS = {
    "rebasin": "rebasin",
    "torch-uncertainty": "torch_uncertainty",
    "blitz-bayesian-pytorch": "blitz",
    "bayesian-torch": "bayesian_torch",
    "posteriors": "posteriors",
}
# the peers of each job
JOB_PEERS = {
    "alignment": ["rebasin"],
    "uncertainty metrics": ["torch-uncertainty"],
    "SWAG": ["torch-uncertainty"],
    "MC Dropout": ["torch-uncertainty"],
    "variational BNN": ["blitz-bayesian-pytorch", "bayesian-torch", "posteriors"],
    "SGHMC": ["posteriors"],
    "Laplace": ["posteriors"],
}


def _installed(library: str) -> bool:
    return importlib.util.find_spec(PEERS[library]) is not None


@pytest.mark.slow
def test_every_job_runs_at_the_tiny_size(tmp_path, capsys):
    out = tmp_path / "rows.json"
    threads = torch.get_num_threads()
    args = ["--tiny", "--settle", "0", "--repeats", "1", "--threads", "1", "--json", str(out)]
    assert peers.main(args) == 0
    assert torch.get_num_threads() == threads  # at_threads restored the count
    printed = capsys.readouterr().out
    assert printed.startswith("| job | case | library | threads | wall s | CPU s |")
    rows = json.loads(out.read_text())
    for job, libraries in JOB_PEERS.items():
        found = [r for r in rows if r["job"].startswith(job)]
        ours = [r for r in found if r["library"].startswith("symbnn")]
        assert ours, job
        for r in ours:
            assert r["threads"] == 1 and r["wall"] > 0 and r["cpu"] >= 0, r
            assert r["quality"] and "nan" not in r["quality"], r
        for library in libraries:
            theirs = [r for r in found if r["library"].startswith(library)]
            assert theirs, (job, library)
            for r in theirs:
                if _installed(library):
                    assert r["wall"] > 0 and math.isfinite(r["ratio"]), r
                    assert r["same"] != "-" and r["verdict"] != "-", r
                else:
                    assert r["wall"] is None and r["quality"].startswith("not usable here"), r
    streaming = [r for r in rows if r["library"].startswith("streaming pass")]
    assert streaming and all("goal at most" in r["verdict"] for r in streaming)


def test_the_peers_extra_is_what_requirements_prints(capsys):
    assert peers.main(["--requirements"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == peers.peer_requirements()
    names = " ".join(printed)
    for library in PEERS:
        assert library in names, library


def test_a_symbnn_row_says_when_symbnn_chose_fewer_threads():
    from peer_measure import at_threads, own_threads, symbnn_threads

    from symbnn.metrics import uncertainty_metrics

    probs = torch.softmax(torch.randn(4, 50, 10), -1)
    labels = torch.randint(0, 10, (50,))
    seen: list[tuple[int, str]] = []
    with at_threads(2), symbnn_threads(seen):
        uncertainty_metrics(probs, labels, probs)  # 2,000 values: numba runs it serially
    assert seen and all(n == 1 for n, _ in seen)
    assert own_threads(seen, 2) == " (ran on 1 thread: numba_threads_for, serial below 4e6 values)"
    assert own_threads(seen, 1) == ""
    import symbnn.metrics

    assert symbnn.metrics.numba_threads_for.__module__ == "symbnn.threads"  # put back

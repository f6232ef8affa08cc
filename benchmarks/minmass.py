"""Min-mass: the fast solver (block coordinate descent, batched) against the cvxpy reference,
on the same random networks.

    python benchmarks/minmass.py                 # full run (cvxpy may take up to 10 min a case)
    python benchmarks/minmass.py --quick         # CI-sized: fewer networks, short cvxpy timeout
    python benchmarks/minmass.py --cvxpy-timeout 60 --out benchmarks/results/minmass.csv

cvxpy runs in a child process with a wall-clock timeout and a resident-memory limit (the
machine is shared); a case it does not finish is reported as skipped with the reason.
Both solvers get the same networks in the same run, timed end to end through
`symbnn.symmetry.minmass.min_mass` (problem set-up included); the table also gives the time per network.
Fast-solver times are the best of a few repeats (see --repeats); cvxpy runs once (a compiled
problem re-solved per network). Wall-clock and CPU times are both reported: on a shared,
oversubscribed CPU the wall clock includes time spent waiting for a core. Targets: fast
>= 1000x faster than cvxpy wherever cvxpy finishes, a ResNet-18 under 2 s, a store of 1000 OptuNets under 5 s.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time

import numpy as np
import torch

from symbnn.store import write_store
from symbnn.symmetry import apply_scales, random_scales, unit_groups
from symbnn.symmetry.minmass import min_mass, minmass_table
from symbnn.symmetry.minmass_fast import DEFAULT_RELAXATION
from symbnn.symmetry.testing import random_state

CASES = [
    # (label, spec, networks in the full run, networks in --quick)
    ("MLP 2-2-1", {"name": "mlp", "widths": [2, 2, 1]}, 1000, 100),
    ("OptuNet", {"name": "optunet"}, 1000, 100),
    ("MLP 784-256-256-10", {"name": "mlp", "widths": [784, 256, 256, 10]}, 1, 1),
    ("ResNet-18 (CIFAR-100)", {"name": "resnet18", "num_classes": 100}, 1, 1),
]


def _cvxpy_child(state, spec, conn):
    try:
        import cvxpy  # noqa: F401  (imported before the clock starts)

        sym = unit_groups(spec)
        start, cpu = time.perf_counter(), time.process_time()
        result = min_mass(state, sym, solver="cvxpy", return_state=False)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        checks = (int(result.solver_converged.sum()), float(result.residual.max()))
        conn.send(
            ("ok", (elapsed, cpu), result.mass_after.numpy(), sorted(set(result.status)), checks)
        )
    except Exception as exc:  # reported in the table, not hidden
        conn.send(("error", f"{type(exc).__name__}: {exc}"[:120], None, None, None))
    finally:
        conn.close()


def _rss_gib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def run_cvxpy(state, spec, timeout: float, mem_gib: float):
    ctx = mp.get_context("spawn")  # fork after torch threads started can deadlock
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_cvxpy_child, args=(state, spec, child))
    start = time.perf_counter()
    proc.start()
    child.close()
    reply, why, peak = None, None, 0.0
    while reply is None and why is None:
        if parent.poll(0.5):
            try:
                reply = parent.recv()
            except EOFError:
                why = f"skipped: child exited with code {proc.exitcode}"
        elif time.perf_counter() - start > timeout:
            why = f"skipped: not finished after {timeout:.0f} s (timeout)"
        else:
            peak = max(peak, _rss_gib(proc.pid))
            if peak > mem_gib:
                why = f"skipped: memory above {mem_gib:.0f} GiB after {time.perf_counter() - start:.0f} s"
    if reply is None:
        proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
        proc.join()
        return (None, None), why, None, None
    proc.join()
    status, elapsed, mass, statuses, checks = reply
    if status != "ok":
        return (None, None), f"skipped: {elapsed}", None, None
    return elapsed, ",".join(statuses), torch.from_numpy(mass), checks


def time_fast(state, sym, repeats: int, relaxation: float | None):
    """Best wall-clock and best CPU time over the repeats."""
    best, best_cpu, result = float("inf"), float("inf"), None
    options = {} if relaxation is None else {"relaxation": relaxation}
    min_mass(state, sym, solver="fast", return_state=False, solver_options=options)  # compile
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        result = min_mass(state, sym, solver="fast", return_state=False, solver_options=options)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best, best_cpu, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="CI-sized run: fewer networks, cvxpy timeout 30 s"
    )
    parser.add_argument(
        "--cvxpy-timeout",
        type=float,
        default=None,
        help="seconds before a cvxpy case is skipped (default 600, 30 with --quick)",
    )
    parser.add_argument(
        "--cvxpy-mem-gib",
        type=float,
        default=6.0,
        help="resident-memory limit of the cvxpy child (the machine is shared)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="fast-solver repeats (best is reported)"
    )
    parser.add_argument(
        "--relaxation",
        type=float,
        default=None,
        help="fast solver's over-relaxation (1 = exact block coordinate descent; "
        f"default {DEFAULT_RELAXATION})",
    )
    parser.add_argument(
        "--only", default=None, help="run only the cases whose label contains this text"
    )
    parser.add_argument(
        "--rescale",
        type=float,
        default=0.0,
        help="move every network by random scales exp(N(0, RESCALE^2)) first (a symmetry: "
        "same optimum, squared weights spread over more orders of magnitude; default 0: none)",
    )
    parser.add_argument("--out", default=None, help="also write the table as CSV here")
    args = parser.parse_args(argv)
    timeout = (
        args.cvxpy_timeout if args.cvxpy_timeout is not None else (30.0 if args.quick else 600.0)
    )

    print(
        f"# min-mass benchmark: torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.2f} at start, "
        f"cvxpy timeout {timeout:.0f} s, fast-solver relaxation "
        f"{args.relaxation if args.relaxation is not None else DEFAULT_RELAXATION}, "
        f"random rescaling spread {args.rescale}"
    )
    rows = []
    for label, spec, n_full, n_quick in CASES:
        if args.only and args.only not in label:
            continue
        n = n_quick if args.quick else n_full
        sym = unit_groups(spec)
        state = random_state(spec, n, seed=0, dtype=torch.float32)
        if args.rescale:
            g = torch.Generator().manual_seed(1)
            state = apply_scales(state, sym, random_scales(sym, n, g, spread=args.rescale))
        fast_s, fast_cpu, fast = time_fast(state, sym, args.repeats, args.relaxation)
        (cvx_s, cvx_cpu), cvx_status, cvx_mass, cvx_checks = run_cvxpy(
            state, spec, timeout, args.cvxpy_mem_gib
        )
        agree = (
            float(((fast.mass_after - cvx_mass).abs() / cvx_mass).max())
            if cvx_mass is not None
            else float("nan")
        )
        rows.append(
            {
                "case": label,
                "networks": n,
                "weights_per_network": int(sum(np.prod(sym.shapes[t]) for t in sym.mass_tensors)),
                "fast_s": fast_s,
                "fast_sweeps_max": int(fast.iterations.max()),
                "fast_converged": f"{int(fast.solver_converged.sum())}/{n}",
                "fast_residual_max": float(fast.residual.max()),
                "cvxpy_s": cvx_s if cvx_s is not None else float("nan"),
                "cvxpy_status": cvx_status,
                "cvxpy_converged": f"{cvx_checks[0]}/{n}" if cvx_checks else "-",
                "cvxpy_residual_max": cvx_checks[1] if cvx_checks else float("nan"),
                "speedup": cvx_s / fast_s if cvx_s is not None else float("nan"),
                "mass_rel_diff": agree,
                "fast_us_per_net": 1e6 * fast_s / n,
                "cvxpy_ms_per_net": 1e3 * cvx_s / n if cvx_s is not None else float("nan"),
                "fast_cpu_s": fast_cpu,
                "cvxpy_cpu_s": cvx_cpu if cvx_cpu is not None else float("nan"),
                "cpu_speedup": cvx_cpu / fast_cpu if cvx_cpu is not None else float("nan"),
            }
        )
        print(_row(rows[-1]), flush=True)

    if args.only and args.only not in "OptuNet store":
        print(_markdown(rows))
        return 0
    # Store-level: a whole store of OptuNets through minmass_table (read, solve, statistics).
    n_store = 100 if args.quick else 1000
    state = random_state({"name": "optunet"}, n_store, seed=1, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(
            os.path.join(tmp, "optunets.zarr"),
            state,
            {"seed": np.arange(n_store)},
            {"architecture": {"name": "optunet"}},
        )
        best, best_cpu = float("inf"), float("inf")
        for _ in range(args.repeats):
            start, cpu = time.perf_counter(), time.process_time()
            table = minmass_table(store.path)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - cpu)
    rows.append(
        {
            "case": "OptuNet store -> minmass_table (exact)",
            "networks": n_store,
            "weights_per_network": 0,
            "fast_s": best,
            "fast_us_per_net": 1e6 * best / n_store,
            "cvxpy_ms_per_net": float("nan"),
            "fast_sweeps_max": int(table["iterations"].max()),
            "fast_converged": f"{int(table['solver_converged'].sum())}/{n_store}",
            "fast_residual_max": float(table["residual"].max()),
            "cvxpy_s": float("nan"),
            "cvxpy_status": "not run",
            "cvxpy_converged": "-",
            "cvxpy_residual_max": float("nan"),
            "speedup": float("nan"),
            "mass_rel_diff": float("nan"),
            "fast_cpu_s": best_cpu,
            "cvxpy_cpu_s": float("nan"),
            "cpu_speedup": float("nan"),
        }
    )
    print(_row(rows[-1]), flush=True)
    print()
    print(_markdown(rows))
    if args.out:
        import polars as pl

        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        pl.DataFrame(rows).write_csv(args.out)
    return 0


def _row(r) -> str:
    return (
        f"{r['case']:<40} n={r['networks']:<5} fast {r['fast_s']:.4f} s (cpu {r['fast_cpu_s']:.4f}, "
        f"{r['fast_us_per_net']:.1f} us/net)  cvxpy {r['cvxpy_s']:.2f} s ({r['cvxpy_ms_per_net']:.2f} ms/net, "
        f"cpu {r['cvxpy_cpu_s']:.2f}, {r['cvxpy_status']}, converged {r['cvxpy_converged']}, "
        f"residual {r['cvxpy_residual_max']:.1e})  "
        f"speedup {r['speedup']:.0f}x (cpu {r['cpu_speedup']:.0f}x)  mass rel diff {r['mass_rel_diff']:.1e}"
    )


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value != value else f"{value:{spec}}{suffix}"  # NaN: not measured


def _markdown(rows) -> str:
    lines = [
        "| case | networks | fast wall (s) | fast CPU (s) | fast us/network | sweeps | converged | "
        "fast residual | cvxpy wall (s) | cvxpy ms/network | cvxpy CPU (s) | cvxpy status | "
        "cvxpy converged | cvxpy residual | speedup wall | speedup CPU | mass rel. diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['networks']} | {r['fast_s']:.4f} | {r['fast_cpu_s']:.4f} | "
            f"{r['fast_us_per_net']:.1f} | {r['fast_sweeps_max']} | {r['fast_converged']} | "
            f"{_fmt(r['fast_residual_max'], '.1e')} | "
            f"{_fmt(r['cvxpy_s'], '.2f')} | {_fmt(r['cvxpy_ms_per_net'], '.2f')} | "
            f"{_fmt(r['cvxpy_cpu_s'], '.2f')} | {r['cvxpy_status']} | {r['cvxpy_converged']} | "
            f"{_fmt(r['cvxpy_residual_max'], '.1e')} | {_fmt(r['speedup'], '.0f', 'x')} | "
            f"{_fmt(r['cpu_speedup'], '.0f', 'x')} | {_fmt(r['mass_rel_diff'], '.1e')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

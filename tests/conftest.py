import copy
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
import zarr

from symbnn.methods.registry import METHOD_NAMES
from symbnn.models import build_model
from symbnn.store import write_store

# What symbnn caches (parameter counts) goes to a folder of this test session, not the user's
# ~/.cache: no test depends on what an earlier run left there. Set before any subprocess's
# environment is copied from os.environ.
os.environ["SYMBNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="symbnn-test-cache-")


def stacked_state(spec, n, seed=0):
    """n freshly initialised networks of ``spec`` as name -> tensor (n, *shape)."""
    torch.manual_seed(seed)
    dicts = [build_model(spec).state_dict() for _ in range(n)]
    return {name: torch.stack([d[name] for d in dicts]) for name in dicts[0]}


def cli(*args):
    """(exit status, stdout + stderr) of `symbnn ARGS` run in-process; argparse's usage errors
    leave through SystemExit, like on the command line."""
    import contextlib
    import io

    from symbnn.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text, text
    return code, text


def fails(*args, expect=()):
    """Run the command, assert it fails cleanly (status 1, one `error:`, INVALID or FAILED
    line naming each of ``expect``), and return its output."""
    from symbnn.runlog import EXIT_FAILURE

    code, text = cli(*args)
    assert code == EXIT_FAILURE, text
    assert "error:" in text or "INVALID:" in text or "FAILED:" in text, text
    for part in expect:
        assert str(part) in text, f"{part!r} not in:\n{text}"
    return text


def legacy_store(path, state, info, attrs):
    """A store as symbnn wrote them before checksums: `bytes` codec only, all-zero chunks
    omitted by Zarr, no `checksum` attribute."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    for section, arrays in (("state", state), ("info", info)):
        for name, values in arrays.items():
            group.create_array(
                f"{section}/{name}",
                shape=values.shape,
                dtype=values.dtype,
                compressors=None,
                fill_value=0,
                chunks=values.shape,
            )[...] = values
    group.attrs.update(
        {
            **attrs,
            "format": "symbnn-store",
            "format_version": 1,
            "kind": "posterior",
            "state_names": list(state),
            "info_names": list(info),
            "n_samples": len(next(iter(state.values()))),
        }
    )
    return path


@pytest.fixture
def optunet_store(tmp_path):
    def make(name="store.zarr", n=6, first_seed=0, attrs=None):
        state = stacked_state({"name": "optunet"}, n, seed=first_seed)
        info = {
            "seed": np.arange(first_seed, first_seed + n),
            "converged": np.ones(n, bool),
            "test_accuracy": np.linspace(0.5, 0.9, n).astype(np.float32),
            "train_loss": np.linspace(1.0, 0.2, n).astype(np.float32),
        }
        base = {
            "experiment": "t",
            "architecture": {"name": "optunet"},
            "recipe": {"epochs": 1},
            "data": {"train": "digits"},
            "min_accuracy": 0.5,
        }
        return write_store(tmp_path / name, state, info, {**base, **(attrs or {})}), state

    return make


@pytest.fixture
def one_torch_thread():
    """Small tensors: one torch thread is as fast and immune to a busy CI machine's other
    processes (the setting is restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


REPO = Path(__file__).resolve().parents[1]


def user_shell_env():
    """The environment a user's shell gives the make/dvc/git commands a test runs."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    env.pop("DVC_REMOTE", None)
    # a top-level make, not a sub-make of `make test` (which would print "make[1]: ...")
    for inherited in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS"):
        env.pop(inherited, None)
    return env


SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


def repo_config():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def smoke_experiment():
    """config.yaml's `smoke` experiment (`make smoke`): the default cut down to seconds per job,
    every network kept (4 target networks of 2 epochs over the 4,000 training digits with
    momentum, test accuracies about 0.7, chance 0.1: tests/workflow/test_workflow.py checks
    the median; 200 test images, 50 OOD patches), with its plateau check, MMD, every method and
    alignment, each cut to seconds. The tests' tiny variants derive from it."""
    return copy.deepcopy(repo_config()["experiments"]["smoke"])


def tiny_experiment(n_samples, shard_size=2):
    """The smoke experiment with ``n_samples`` target networks in shards of ``shard_size``,
    and only the target posterior: callers that want the plateau check, the MMD check, the
    methods, the alignment analyses or the HMC reference set their own, tiny, sections."""
    tiny = smoke_experiment()
    tiny["posterior"].update(n_samples=n_samples, shard_size=shard_size)
    tiny["posterior"].pop("plateau_seeds", None)
    for section in ("mmd", "methods", "alignment", "reference"):
        tiny.pop(section, None)
    return tiny


# The experiment-independent analyses (rules/analyses.smk) cut down to seconds, and switched off.
TINY_ANALYSES = {
    "toy": {"n_networks": 200, "epochs": 2, "n_per_class": 50, "max_loss": 0.3, "check_inputs": 64},
    # the tiny experiment's recipe has a cosine schedule: no milestones
    "permutation_frequency": {"runs": 2, "every_k_steps": 25, "epochs": 2},
    "marginals": {"n_networks": 24, "hidden": [4, 4], "epochs": 2},
    "symmetrised_vi": {
        "hidden": 3,
        "steps": 40,
        "seeds": [0],
        "target_runs": 4,
        "target_epochs": 2,
        "mmd_samples": 4,
        "eval_samples": 16,
        "n_test": 100,
        "alignment_points": 3,
        "alignment_samples": 4,
    },
    "symmetrised_vi_widths": {
        "widths": [3, 6],
        "seeds": [0, 1],
        "steps": 5,
        "eval_samples": 4,
        "mmd_samples": 4,
        "reference_runs": 3,
        "reference_epochs": 1,
    },
    "barrier_statistics": {"pairs": 2, "hidden": [8], "epochs": 1, "samples": 2, "points": 3},
}
NO_ANALYSES = {name: False for name in TINY_ANALYSES}


def workflow_config(experiments, analyses=None, **top):
    """The repository's config running `experiments` (name -> settings), with the analyses
    given (default: none)."""
    return {
        **repo_config(),
        "run": list(experiments),
        "experiments": experiments,
        "analyses": analyses or NO_ANALYSES,
        **top,
    }


# Each method's settings cut down to seconds (the smoke experiment's); a method not listed
# there (a new one) runs with its defaults in the tests that iterate over the registered methods.
SMOKE_METHODS = smoke_experiment()["methods"]
TINY_SETTINGS = {name: SMOKE_METHODS[name] for name in METHOD_NAMES if name in SMOKE_METHODS}
# The sampling cut down to seconds (the smoke experiment's): 2 samples per unit, 2 modes, 2
# multi-mode replicates of one mode each, a pool of 4 networks (2 Deep Ensemble replicates of 2
# members).
TINY_SAMPLING = {key: value for key, value in SMOKE_METHODS.items() if key not in METHOD_NAMES}
# Every registered method, cut down to seconds
TINY_METHODS = {**TINY_SAMPLING, **{name: TINY_SETTINGS.get(name, {}) for name in METHOD_NAMES}}
# The rules a setting read only when drawing reruns (its method's samples and what follows)
REDRAWN = {"sample", "canonicalize_samples", "predict", "metrics", "mmd_method", "method_tables"}


def tiny_workflow_config(methods=True):
    """Every rule of the workflow at toy size: the smoke experiment (named tiny) with every
    registered method, and the tiny analyses; with methods=False only the target posterior
    (its plateau check and MMD check), no analysis."""
    tiny = smoke_experiment()
    if not methods:
        for section in ("methods", "alignment"):
            tiny.pop(section)
        return workflow_config({"tiny": tiny})
    tiny["methods"] = TINY_METHODS
    return workflow_config({"tiny": tiny}, TINY_ANALYSES)


def smoke_workflow_config():
    """config.yaml as `make smoke` runs it (`run: [smoke]`), with the tiny analyses, which
    `make smoke` leaves out (they are experiment-independent: config.yaml's are full-size)."""
    return {**repo_config(), "run": ["smoke"], "analyses": TINY_ANALYSES}


def snakemake_argv(workdir, args, snakefile=None):
    """Snakemake's arguments for a run in `workdir` on 2 cores (the repository's Snakefile
    unless another is given)."""
    snakefile = snakefile or REPO / "Snakefile"
    return ["--snakefile", str(snakefile), "--directory", str(workdir), "--cores", "2", *args]


def checked(result, check):
    """`result`; with check, a failure raises with everything Snakemake printed."""
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(map(str, result.args))} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result


def run_snakemake(workdir, *args, check=True, env=None):
    """`snakemake ARGS` on the repository's Snakefile in `workdir`, 2 cores; with check, a
    failure raises with everything Snakemake printed."""
    argv = [sys.executable, "-m", "snakemake", *snakemake_argv(workdir, args)]
    return checked(subprocess.run(argv, capture_output=True, text=True, env=env), check)


def plan_in_process(workdir, *args, snakefile=None, check=True, env=None):
    """`snakemake ARGS` that only plans (a dry run, a summary) in `workdir`, run inside this
    test's process: no Python start and imports, about 1.5 CPU-seconds a call on a 2-core
    machine whose test suite is CPU-bound. The jobs' own processes are what a real run tests;
    planning is the same code either way. Returns a CompletedProcess like `run_snakemake`'s.
    What the Snakefile changes in this process (working folder, environment, sys.path, the
    trusted import paths) is put back; `env` replaces the environment for the call."""
    import contextlib
    import io

    from snakemake.cli import main

    from symbnn import trust

    argv = snakemake_argv(workdir, [str(a) for a in args], snakefile)
    saved = (os.getcwd(), dict(os.environ), list(sys.path), set(trust._trusted))
    saved_sources = list(trust._lazy_sources)
    out, err = io.StringIO(), io.StringIO()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        cwd, environ, path, trusted = saved
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        trust._trusted.clear()
        trust._trusted.update(trusted)
        trust._lazy_sources[:] = saved_sources
    return checked(subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue()), check)


def random_images(n, seed):
    """`n` random 28 x 28 grey images, labels cycling over 10 classes, fixed statistics."""
    from symbnn.data.core import ImageData

    g = torch.Generator().manual_seed(seed)
    return ImageData(
        torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8),
        torch.arange(n) % 10,
        10,
        (0.5,),
        (0.25,),
        f"set{seed}",
    )


def assert_sample_contract(samples, reference, count):
    """A sampler's output: the model's state-dict names in order, `count` finite CPU samples of
    each tensor's shape and dtype."""
    assert list(samples) == list(reference)
    for name, tensor in reference.items():
        assert samples[name].shape == (count, *tensor.shape) and samples[name].dtype == tensor.dtype
        assert samples[name].device.type == "cpu" and torch.isfinite(samples[name]).all()


@pytest.fixture(scope="module")
def tiny_problem():
    """OptuNet on 256 packaged digits with a 2-epoch recipe: seconds per sampler call."""
    from symbnn.data import load_dataset
    from symbnn.methods.base import Problem
    from symbnn.settings import Recipe

    train = load_dataset("digits", "train", "data").limited(256)
    recipe = Recipe(
        epochs=2,
        batch_size=64,
        lr=0.04,
        momentum=0.9,
        weight_decay=2e-4,
        milestones=(1,),
        gamma=0.5,
    )
    return Problem({"name": "optunet"}, recipe, train)


@pytest.fixture(scope="module")
def tiny_mode():
    """A mode to start from: seed 3's initial OptuNet weights."""
    from symbnn.methods.base import Mode
    from symbnn.train.seeding import build_seeded_model

    return Mode(
        3,
        {k: v.clone() for k, v in build_seeded_model({"name": "optunet"}, 3).state_dict().items()},
    )


def stop_process(process: subprocess.Popen, timeout: float) -> None:
    """Terminate a process this test started; kill it if it has not ended after `timeout` s."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def sample_with(method, problem, mode, count, settings=None, seed=0):
    """A method's `count` samples at `mode`: its fit, then its draw, with `settings` (a
    mapping of the method's settings, checked by its settings section). `method`: a shipped
    method's name or a descriptor."""
    from symbnn.methods import registry

    described = registry.descriptor(method) if isinstance(method, str) else method
    section = described.settings.parse(settings or {}, described.name)
    implementation = registry.implementation(described)
    fitted = implementation.fit(problem, mode, section, seed, count)
    return implementation.sample(problem, fitted, count, section, seed)


def check_method_contract(described, problem, mode, settings, folder):
    """What every method, shipped or added, must do (`described` its descriptor, `settings`
    a mapping of its settings): its fit is deterministic for a seed and survives its tree file
    (`symbnn.treefile`); its draw returns the model's state names and shapes, finite, the
    same for the same seed; its samples round-trip through a sample store."""
    from symbnn.methods import registry
    from symbnn.methods.sampling import BlockFits, load_fits, save_fits, write_sample_store
    from symbnn.store import open_store

    section = described.settings.parse(settings, described.name)
    method = registry.implementation(described)
    count = 1 if described.members else 3
    # the fit is asked for samples only when it draws them (`fit_counts`)
    asked = count if described.samples_at_fit else None
    fitted = method.fit(problem, mode, section, 11, asked)
    again = method.fit(problem, mode, section, 11, asked)
    assert_same_tree(fitted, again)
    save_fits(BlockFits([0], [mode.seed], [fitted]), folder / "fits.safetensors")
    stored = load_fits(folder / "fits.safetensors").fits[0]
    assert_same_tree(fitted, stored)
    reference = problem.build().state_dict()
    samples = method.sample(problem, stored, count, section, 5)
    assert_sample_contract(samples, reference, count)
    assert_same_tree(samples, method.sample(problem, fitted, count, section, 5))
    info = {"mode_index": np.zeros(count, np.int64), "unit": np.zeros(count, np.int64)}
    attrs = {"method": described.name, "architecture": problem.model_spec}
    store = write_sample_store(folder / "samples.zarr", attrs, samples, info)
    assert store.validate() == [] and store.state_names == list(reference)
    for name, tensor in samples.items():
        assert np.array_equal(open_store(store.path).read(name), tensor.numpy()), name


def assert_same_tree(a, b):
    """Two fits (or sample dicts) hold the same values: tensors equal, plain values equal."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (list(a), list(b))
        for key in a:
            assert_same_tree(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_tree(x, y)
    elif isinstance(a, float) and a != a:  # NaN (no test set: accuracy not measured)
        assert b != b
    else:
        assert a == b, (a, b)


# The slowest files (whole workflow runs) first: `make test` hands its two workers a file at a
# time, and a long file started last would leave one worker idle at the end.
# (the order of their total time in a `--durations=0` run)
SLOWEST_FIRST = (
    "test_workflow.py",
    "test_dvc.py",
    "test_workflow_extensions.py",
    "test_docs_commands.py",
    "test_alignment_pairs.py",
    "test_reliability.py",
    "test_cli_errors.py",
    "test_checkpoints_workflow.py",
    "test_console.py",
    "test_slurm.py",
    "test_workflow_runs.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))

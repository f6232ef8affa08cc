"""Code of the user's own, named by import path, is checked before it is called, gets only
plain values from a store, and is named when it fails (docs/extending.md, docs/stores.md).

- A store naming ``os:system`` as its architecture, re-sealed with a valid digest, runs
  nothing even where the working folder's config.yaml names ``os:system`` too: a model is an
  ``nn.Module`` subclass, and the configuration that names anything else fails its check.
- A bad import path stops the workflow's planning as a ConfigError naming the key, not as
  a traceback inside an input function.
- A method of the user's own that raises, or draws bad samples, is named with its class, the
  step and the mode; nothing is written; ``symbnn --debug`` and a job's log show the user's
  traceback. A dataset loader that raises is named with its path.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from conftest import (
    NO_ANALYSES,
    REPO,
    fails,
    run_snakemake,
    stacked_state,
    tiny_experiment,
    workflow_config,
)

from symbnn import trust
from symbnn.cli import main
from symbnn.data import load_dataset
from symbnn.runlog import log_to
from symbnn.settings import load_config
from symbnn.store import seal, write_store
from symbnn.user_code import UserCodeError

PWNED = {"name": "os:system", "options": {"command": "touch PWNED"}}
SYMBNN = [sys.executable, "-m", "symbnn.cli"]

USERMODS = """
import dataclasses
import pathlib

from symbnn.methods.interface import Method
from symbnn.settings import Section


def not_a_class():
    pathlib.Path("called").touch()
    return 3


def raising_loader(split, root):
    raise ValueError(f"no {split} images under {root}")


@dataclasses.dataclass(frozen=True)
class Nothing(Section):
    DOC = "nothing to set"


class Raising(Method):
    settings = Nothing

    def fit(self, problem, mode, settings, seed, count):
        raise RuntimeError(f"the fit diverged at seed {seed}")

    def sample(self, problem, fitted, count, settings, seed):
        return {}


class NaNs(Method):
    settings = Nothing

    def fit(self, problem, mode, settings, seed, count):
        return {"state": mode.state}

    def sample(self, problem, fitted, count, settings, seed):
        import torch

        return {
            name: torch.full((count, *t.shape), float("nan"), dtype=t.dtype)
            for name, t in fitted["state"].items()
        }


class Short(NaNs):
    def sample(self, problem, fitted, count, settings, seed):
        return {name: t.unsqueeze(0).repeat(count + 2, *[1] * t.ndim)
                for name, t in fitted["state"].items()}
"""


@pytest.fixture(autouse=True)
def nothing_trusted(monkeypatch):
    monkeypatch.delenv(trust.ENVIRONMENT, raising=False)
    trust.forget()
    yield
    trust.forget()


@pytest.fixture
def usermods(tmp_path, monkeypatch):
    """tmp_path holds usermods.py, importable here and in the processes started from here;
    it is the working folder."""
    (tmp_path / "usermods.py").write_text(USERMODS)
    monkeypatch.syspath_prepend(str(tmp_path))
    paths = [str(tmp_path), str(REPO / "src"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("usermods", None)


def shipped_config_with(**model_or_methods):
    """The shipped config.yaml, its `default` experiment's model (and methods) changed."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    experiment = config["experiments"]["default"]
    if "model" in model_or_methods:
        experiment["model"] = model_or_methods["model"]
    experiment["methods"].update(model_or_methods.get("methods", {}))
    return config


def resealed_store(path, architecture):
    """A store of 4 OptuNets whose `architecture` attribute is edited to ``architecture`` and
    sealed again: its digest is valid, so only the trust checks stand in the way."""
    state = {k: v.numpy() for k, v in stacked_state({"name": "optunet"}, 4).items()}
    write_store(path, state, {"seed": np.arange(4)}, {"architecture": {"name": "optunet"}})
    meta = json.loads((path / "zarr.json").read_text())
    meta["attributes"]["architecture"] = architecture
    (path / "zarr.json").write_text(json.dumps(meta))
    seal(path, list(json.loads((path / "manifest.json").read_text())["arrays"]))
    return path


def symbnn(*args):
    """(exit status, stdout + stderr) of `symbnn ARGS` in a process of its own."""
    result = subprocess.run([*SYMBNN, *map(str, args)], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


# --- 1. a store's arguments never reach code ----------------------------------------------


@pytest.mark.slow
def test_a_store_naming_os_system_runs_nothing_where_the_config_names_it_too(usermods):
    (usermods / "config.yaml").write_text(yaml.safe_dump(shipped_config_with(model=PWNED)))
    bad = resealed_store(usermods / "bad.zarr", PWNED)
    fails("config", "check", expect=("line", "experiments.default.model.name: model 'os:system'",
                                      "not a subclass of torch.nn.Module"))  # fmt: skip
    for trusting in ([], ["--trust-model", "os:system"]):
        # without --trust-model, config.yaml (which fails its check) trusts nothing; with it,
        # the model is no class
        reason = "not a subclass of torch.nn" if trusting else "symbnn imports code only"
        for command in (["store", "validate", bad], ["canonicalize", bad, usermods / "c.zarr"]):
            trust.forget()  # each command as in a process of its own
            fails(*trusting, *command, expect=("bad.zarr", "'os:system'", reason))
    # and in a process of its own, as a user runs it
    code, text = symbnn("store", "validate", bad)
    assert code == 1 and "Traceback" not in text and "symbnn imports code only" in text, text
    assert not (usermods / "PWNED").exists()
    assert not (usermods / "c.zarr").exists()


def test_a_function_as_the_model_is_refused_by_config_check(usermods, capsys):
    model = {"name": "usermods:not_a_class"}
    (usermods / "config.yaml").write_text(yaml.safe_dump(shipped_config_with(model=model)))
    text = fails("config", "check", expect=("experiments.default.model.name", "not_a_class"))
    assert "is a function, not a subclass of torch.nn.Module" in text
    assert not (usermods / "called").exists()


def test_a_stores_options_naming_code_are_refused_naming_the_store_and_key(usermods):
    user_model = {"name": "usermods:Net", "options": {"blocks": [2, "os:system"]}}
    bad = resealed_store(usermods / "opts.zarr", user_model)
    trust.trust_model("usermods:Net")  # the class would be trusted: its options are not
    expect = ("opts.zarr", "options.blocks[1]: 'os:system' names code", "never code")
    fails("store", "validate", bad, expect=expect)
    fails("canonicalize", bad, usermods / "c.zarr", expect=expect)
    assert "usermods" not in sys.modules  # refused before the module was imported
    assert not (usermods / "c.zarr").exists()


# --- 2. a bad import path stops the planning cleanly --------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, key, reason",
    [
        ({"model": {"name": "usermods:not_a_class"}}, "model.name", "is a function, not a"),
        ({"data": {"train": "nosuchpkg:load"}}, "data.train", "cannot import module 'nosuchpkg'"),
        ({"data": {"ood": "nosuchpkg:load"}}, "data.ood", "cannot import module 'nosuchpkg'"),
    ],
    ids=["model", "train", "ood"],
)
def test_a_bad_import_path_is_a_config_error_when_the_workflow_plans(usermods, change, key, reason):
    tiny = tiny_experiment(n_samples=4)
    for section, values in change.items():  # a model replaced, a data section changed
        tiny[section] = values if section == "model" else {**tiny[section], **values}
    config = workflow_config({"tiny": tiny}, NO_ANALYSES)
    (usermods / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_snakemake(usermods, "-n", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "ConfigError" in output and f"experiments.tiny.{key}: " in output and reason in output
    assert "InputFunctionException" not in output, output[-3000:]
    assert not (usermods / "called").exists()


# --- 3. the user's code, named when it fails ----------------------------------------------


@pytest.fixture
def sampling_setup(usermods):
    """config.yaml whose `default` experiment has the user's methods, and a pool store of
    its model (8 networks): `symbnn sample` arguments up to the method's name."""
    methods = {name.lower(): {"class": f"usermods:{name}"} for name in ("Raising", "NaNs", "Short")}
    (usermods / "config.yaml").write_text(yaml.safe_dump(shipped_config_with(methods=methods)))
    model = load_config(usermods / "config.yaml").experiments["default"].model.to_dict()
    state = {k: v.numpy() for k, v in stacked_state(model, 8).items()}
    write_store(usermods / "pool.zarr", state, {"seed": np.arange(8)}, {"architecture": model})
    trust.forget()

    def args(method):
        return ["sample", method, usermods / "s.zarr", "--experiment", "default",
                "--pool", usermods / "pool.zarr", "--variant", "single"]  # fmt: skip

    return args


def test_a_user_method_that_raises_is_named_with_its_step_and_mode(sampling_setup, usermods):
    expect = (
        "method 'raising' (usermods:Raising) failed in fit on mode 0: RuntimeError: the fit "
        "diverged at seed",
        "`symbnn --debug ...` prints its traceback",
    )
    text = fails(*sampling_setup("raising"), expect=expect)
    assert len([line for line in text.splitlines() if "error:" in line]) == 1, text
    assert not (usermods / "s.zarr").exists()


def test_debug_prints_the_users_traceback(sampling_setup, capsys):
    assert main(["--debug", *map(str, sampling_setup("raising"))]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and 'usermods.py", line' in err and "in fit" in err, err
    assert err.strip().splitlines()[-1].startswith("symbnn sample: error: method 'raising'")


@pytest.mark.parametrize(
    "method, problem",
    [
        ("NaNs", "sample on mode 0 returned 1024 of 1024 values of conv1.weight that are NaN"),
        ("Short", "sample on mode 0 returned conv1.weight of shape (18, 4, 1, 4, 4)"),
    ],
)
def test_bad_samples_are_refused_naming_the_method(sampling_setup, usermods, method, problem):
    expect = (f"method '{method.lower()}' (usermods:{method}): ", problem)
    fails(*sampling_setup(method.lower()), expect=expect)
    assert not (usermods / "s.zarr").exists()


def test_a_loader_that_raises_is_named(usermods):
    trust.trust("dataset", "usermods:raising_loader")
    with pytest.raises(UserCodeError) as error:
        load_dataset("usermods:raising_loader", "train", usermods)
    assert str(error.value) == (
        f"dataset loader 'usermods:raising_loader' failed on split 'train': ValueError: no "
        f"train images under {usermods}"
    )


def test_a_jobs_log_keeps_the_users_traceback_and_stderr_one_line(usermods, capsys):
    """What a workflow script (`symbnn.runlog.log_to`) does with a failure of the user's
    code: its traceback in the job's log, one line on stderr."""
    trust.trust("dataset", "usermods:raising_loader")
    log = usermods / "job.log"
    with pytest.raises(SystemExit) as stopped, log_to(log):
        load_dataset("usermods:raising_loader", "test", usermods)
    assert stopped.value.code == 1
    text = log.read_text()
    assert "Traceback" in text and 'usermods.py", line' in text and "in raising_loader" in text
    assert text.strip().splitlines()[-1] == (
        f"error: dataset loader 'usermods:raising_loader' failed on split 'test': ValueError: "
        f"no test images under {usermods}"
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err

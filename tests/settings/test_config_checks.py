"""Configurations that parse but cannot be right are refused at `symbnn config check` (and at
the workflow's start), naming the file, the line and the key: milestones past the last epoch,
duplicated YAML keys, a results folder at the filesystem root, a model import path that does
not import, and counts beyond finite bounds. Every problem of a file is reported at once."""

import dataclasses
import re
import sys
import typing
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from symbnn import settings as S
from symbnn.cli import main
from symbnn.config_code import load_checked_config
from symbnn.jobenv import workflow_settings
from symbnn.settings import ConfigError, config_from_mapping, load_config
from symbnn.settings.base import Section, type_hints

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (REPO / "config.yaml").read_text()


def written(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def edited(old, new, count=1):
    """The shipped config.yaml with ``old`` replaced (the text must be there)."""
    assert SHIPPED.count(old) >= count, old
    return SHIPPED.replace(old, new, count)


def line_of(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def check_fails(path, *expected, capsys):
    """`symbnn config check PATH` fails with exit status 1, no traceback, and each of
    ``expected`` in its message; returns the message."""
    assert main(["config", "check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("symbnn config: error: "), err
    for part in expected:
        assert part in err, f"{part!r} not in {err!r}"
    return err


# --- milestones within the epochs ---------------------------------------------------------


def test_a_milestone_past_the_last_epoch_is_refused(tmp_path, capsys):
    path = written(tmp_path, edited("milestones: [15, 30]", "milestones: [15, 70]"))
    line = line_of(path, "milestones: [15, 70]")
    check_fails(
        path,
        f"{path}, line {line}: experiments.mnist-optunet.recipe.milestones[1]",
        "milestone 70 is not below epochs (60)",
        capsys=capsys,
    )
    # the last epoch is epochs - 1: a milestone equal to epochs never takes effect either
    with pytest.raises(ConfigError, match=r"milestones\[0\]: milestone 12 is not below"):
        S.Recipe(epochs=12, batch_size=8, lr=0.1, milestones=(12,))
    assert S.Recipe(epochs=12, batch_size=8, lr=0.1, milestones=(11,)).lr_at(11) < 0.1


def test_changed_recipes_are_checked_against_the_experiments_recipe(tmp_path, capsys):
    """A method's recipe changes (here: fewer epochs) must leave a valid recipe with the
    experiment's milestones; the key named is the changes' own."""
    text = edited(
        "bnn: {elbo_samples: 3, recipe: {weight_decay: 0.0}}",
        "bnn: {elbo_samples: 3, recipe: {weight_decay: 0.0, epochs: 20}}",
    )
    path = written(tmp_path, text)
    check_fails(
        path,
        f"line {line_of(path, 'epochs: 20}}')}: ",
        "experiments.mnist-optunet.methods.bnn.recipe.milestones[1]: milestone 30 is not below "
        "epochs (20)",
        capsys=capsys,
    )
    fixed = text.replace("epochs: 20}", "epochs: 20, milestones: [10]}")
    assert load_config(written(tmp_path, fixed)).experiments["mnist-optunet"].methods.bnn


def test_the_permutation_frequency_milestones_fit_each_experiment_it_runs_on(tmp_path, capsys):
    text = edited(
        "permutation_frequency: {runs: 4, every_k_steps: 4}",
        "permutation_frequency: {runs: 4, every_k_steps: 4, milestones: [70]}",
    )
    path = written(tmp_path, text.replace("run: [default]", "run: [mnist-optunet]"))
    check_fails(
        path,
        "analyses.permutation_frequency.milestones[0]: milestone 70 is not below epochs (60)",
        "experiment mnist-optunet's recipe",
        capsys=capsys,
    )
    # the default's cosine schedule takes no milestones at all
    check_fails(
        written(tmp_path, text, "cosine.yaml"),
        "analyses.permutation_frequency.milestones: only schedule multistep uses them",
        capsys=capsys,
    )


# --- duplicated keys ----------------------------------------------------------------------


def test_a_duplicated_key_is_refused_with_its_line(tmp_path, capsys):
    path = written(tmp_path, edited("      lr: 0.05\n", "      lr: 0.05\n      lr: 5.0\n"))
    first, second = line_of(path, "lr: 0.05"), line_of(path, "lr: 5.0")
    check_fails(
        path,
        f"{path}, line {second}: experiments.default.recipe.lr: duplicated key "
        f"(first at line {first})",
        capsys=capsys,
    )


def test_the_workflow_reads_its_config_files_again_for_duplicates(tmp_path):
    """Snakemake loads config.yaml with a plain loader (the later `lr` wins silently): the
    Snakefile's check reads the files it was given again."""
    path = written(tmp_path, edited("  toy: {", "  toy: {epochs: 3, "))  # epochs twice
    config = yaml.safe_load(path.read_text())  # what Snakemake hands over: no error
    workflow = SimpleNamespace(configfiles=[str(path)])
    with pytest.raises(ConfigError, match=r"line \d+: analyses\.toy\.epochs: duplicated key"):
        workflow_settings(config, workflow)
    good = written(tmp_path, SHIPPED, "good.yaml")
    settings = workflow_settings(yaml.safe_load(SHIPPED), SimpleNamespace(configfiles=[good]))
    assert settings.run == ("default",)


# --- the results folder -------------------------------------------------------------------


@pytest.mark.parametrize(
    "results, message",
    [("''", "results: empty"), ("'  '", "results: empty"), ("/", "is the filesystem root"),
     ("/..", "is the filesystem root"), ("//", "is the filesystem root")],
)  # fmt: skip
def test_results_must_not_be_empty_or_a_filesystem_root(tmp_path, capsys, results, message):
    path = written(tmp_path, edited("results: results", f"results: {results}"))
    check_fails(path, f"line {line_of(path, 'results:')}: results: ", message, capsys=capsys)


def test_a_results_folder_of_its_own_is_accepted(tmp_path):
    for results in ("results", "out/run-1", str(tmp_path / "results")):
        assert load_config(written(tmp_path, edited("results: results", f"results: {results}")))


# --- model import paths -------------------------------------------------------------------


def with_model(tmp_path, name):
    return written(
        tmp_path,
        edited(
            "model: {name: optunet, conv1_channels: 4, conv2_channels: 12, hidden: 10}",
            f"model: {{name: '{name}'}}",
        ),
    )


@pytest.mark.parametrize(
    "name, reason",
    [
        ("pkg.mod:Cls", "cannot import module 'pkg.mod' (No module named 'pkg')"),
        ("user_models:NoSuchClass", "has no attribute 'NoSuchClass'"),
        ("broken_user_module:Net", "importing 'broken_user_module:Net' failed: RuntimeError"),
    ],
)
def test_a_model_import_path_must_import(tmp_path, capsys, monkeypatch, name, reason):
    (tmp_path / "broken_user_module.py").write_text("raise RuntimeError('half-edited')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = with_model(tmp_path, name)
    check_fails(
        path,
        f"{path}, line {line_of(path, name)}: experiments.default.model.name: ",
        reason,
        capsys=capsys,
    )
    sys.modules.pop("broken_user_module", None)


def test_an_importable_model_passes_and_only_the_run_is_imported_by_the_workflow(tmp_path):
    assert load_checked_config(with_model(tmp_path, "user_models:SmallCNN"))
    path = with_model(tmp_path, "pkg.mod:Cls")
    config = yaml.safe_load(path.read_text())
    with pytest.raises(ConfigError, match="experiments.default.model.name: .*'pkg.mod'"):
        workflow_settings(config, SimpleNamespace(configfiles=[str(path)]))
    # an experiment the run does not build is not imported at the workflow's start
    config["experiments"]["other"] = config["experiments"]["default"]
    config["experiments"]["default"] = yaml.safe_load(SHIPPED)["experiments"]["default"]
    assert workflow_settings(config, SimpleNamespace(configfiles=[])).run == ("default",)


# --- named code is what it claims to be -----------------------------------------------------

USERMODS = """
import inspect
import pathlib


def not_a_class():
    pathlib.Path('called').touch()
    return 3


class NotAMethod:
    pass


class Loader:
    def __init__(self, split, root):
        pathlib.Path('called').touch()


def no_root(split):
    pathlib.Path('called').touch()
"""


@pytest.mark.parametrize(
    "old, new, key, reason",
    [
        (
            "model: {name: optunet, conv1_channels: 4, conv2_channels: 12, hidden: 10}",
            "model: {name: 'usermods:not_a_class'}",
            "model.name",
            "'not_a_class' is a function, not a subclass of torch.nn.Module",
        ),
        (
            "      de: {stride: 4}\n",
            "      de: {stride: 4}\n      mine: {class: 'usermods:NotAMethod'}\n",
            "methods.mine.class",
            "'usermods:NotAMethod' is not a subclass of symbnn.methods.interface.Method",
        ),
        (
            "      train: digits\n",
            "      train: 'usermods:Loader'\n",
            "data.train",
            "'usermods:Loader' is a type, not a function Loader(split, root, **options)",
        ),
        (
            "      ood: natural_patches\n",
            "      ood: 'usermods:no_root'\n",
            "data.ood",
            "cannot be called as no_root(split, root, n=..., size=..., channels=...)",
        ),
    ],
    ids=["model", "method", "train-loader", "ood-loader"],
)
def test_named_code_must_be_what_it_claims_to_be(
    tmp_path, capsys, monkeypatch, old, new, key, reason
):
    """A function as a model, a class that is no Method, a class or a function of another
    signature as a dataset loader: refused by `symbnn config check`, nothing called."""
    (tmp_path / "usermods.py").write_text(USERMODS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    path = written(tmp_path, edited(old, new))
    check_fails(path, f"experiments.default.{key}: ", reason, capsys=capsys)
    assert not (tmp_path / "called").exists()
    sys.modules.pop("usermods", None)


def test_a_configuration_that_fails_its_checks_trusts_nothing(tmp_path, monkeypatch):
    from symbnn import trust

    monkeypatch.delenv(trust.ENVIRONMENT, raising=False)
    trust.forget()
    path = with_model(tmp_path, "os:system")
    with pytest.raises(ConfigError, match="model.name: model 'os:system': 'system' is a "):
        load_checked_config(path)
    assert not trust.is_trusted("model", "os:system")
    trust.forget()


def test_the_settings_layer_trusts_named_code_without_importing_it(tmp_path, monkeypatch):
    """`symbnn.settings.load_config` parses and trusts; only `symbnn.config_code` imports."""
    from symbnn import trust

    (tmp_path / "usermods.py").write_text(USERMODS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(trust.ENVIRONMENT, raising=False)
    trust.forget()
    path = written(
        tmp_path,
        edited(
            "model: {name: optunet, conv1_channels: 4, conv2_channels: 12, hidden: 10}",
            "model: {name: 'usermods:not_a_class'}",
        ),
    )
    sys.modules.pop("usermods", None)
    assert load_config(path).experiments["default"].model.name == "usermods:not_a_class"
    assert "usermods" not in sys.modules and trust.is_trusted("model", "usermods:not_a_class")
    trust.forget()
    with pytest.raises(ConfigError, match="model.name: .*'not_a_class' is a function"):
        load_checked_config(path)
    assert not trust.is_trusted("model", "usermods:not_a_class")
    sys.modules.pop("usermods", None)
    trust.forget()


# --- every error at once ------------------------------------------------------------------


def test_every_error_of_a_file_is_reported_with_its_line(tmp_path, capsys):
    text = edited("      lr: 0.05\n", "      lr: -1\n      lrr: 0.1\n")
    text = text.replace("results: results", "results: /")
    text = text.replace("      n_samples: 64\n", "      n_samples: 0\n      n_samples: 64\n", 1)
    path = written(tmp_path, text)
    err = check_fails(
        path,
        f"line {line_of(path, 'lrr: 0.1')}: experiments.default.recipe.lrr: unknown key",
        f"line {line_of(path, 'lr: -1')}: experiments.default.recipe.lr: must be > 0, got -1",
        f"line {line_of(path, 'n_samples: 64')}: experiments.default.posterior.n_samples: "
        "duplicated key",
        capsys=capsys,
    )
    assert len(err.strip().splitlines()) == 3, err
    # the cross-key rules (results) run once the keys themselves are right
    fixed = text.replace("      lr: -1\n      lrr: 0.1\n", "      lr: 0.05\n")
    fixed = fixed.replace("      n_samples: 0\n", "")
    check_fails(written(tmp_path, fixed), "results: '/' is the filesystem root", capsys=capsys)


def test_errors_of_several_sections_are_collected():
    raw = yaml.safe_load(SHIPPED)
    raw["experiments"]["default"]["recipe"]["lr"] = -1
    raw["experiments"]["mnist-optunet"]["methods"]["swag"]["rank"] = 0
    raw["device"] = "tpu"
    with pytest.raises(ConfigError) as error:
        config_from_mapping(raw, "config")
    assert len(error.value.errors) == 3
    assert sorted(e.split(": ", 2)[1] for e in error.value.errors) == [
        "device",
        "experiments.default.recipe.lr",
        "experiments.mnist-optunet.methods.swag.rank",
    ]


# --- bounds -------------------------------------------------------------------------------


def _count_fields():
    """(section, field, metadata) of every integer setting (and list of integers)."""
    from test_settings import _sections

    for cls in _sections(S.MmdTest):
        hints = type_hints(cls)
        for f in dataclasses.fields(cls):
            arms = typing.get_args(hints[f.name]) or (hints[f.name],)
            items = [a for arm in arms for a in (typing.get_args(arm) or (arm,))]
            if int in arms or (int in items and any(typing.get_origin(a) is tuple for a in arms)):
                yield cls, f.name, f.metadata


def test_every_count_has_a_finite_upper_bound():
    unbounded = [
        f"{cls.__name__}.{name}" for cls, name, meta in _count_fields() if meta["le"] is None
    ]
    assert not unbounded, f"counts without an upper bound (le=): {unbounded}"


def test_the_bounds_allow_the_largest_studies():
    config = load_config(REPO / "config.yaml")
    released = config.experiments["mnist-optunet-released"].posterior
    assert released.n_samples == 8192 and released.source == "checkpoints"
    paper = config.experiments["mnist-optunet"]
    assert (paper.posterior.n_samples, paper.methods.n_samples) == (1000, 100)
    S.Methods(n_samples=100, modes=10, pool=500, de=S.DeepEnsembles())  # 100 members of 500
    assert S.Toy(n_networks=10_000).n_networks == 10_000
    S.Posterior(n_samples=8192, shard_size=8192)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("posterior", {"n_samples": 1_000_000_000}, "posterior.n_samples: must be <= 100000"),
        ("methods", {"n_samples": 10**9}, "methods.n_samples: must be <= 10000"),
        ("methods", {"seed": 2**40}, "methods.seed: must be <= 4294967295"),
        ("alignment", {"points": 10**9}, "alignment.points: must be <= 10001"),
    ],
)
def test_a_typo_sized_count_is_refused(key, value, message):
    raw = yaml.safe_load(SHIPPED)
    raw["experiments"]["default"].setdefault(key, {}).update(value)
    with pytest.raises(ConfigError, match=re.escape(f"experiments.default.{message}")):
        config_from_mapping(raw, "config")


def test_sections_built_directly_report_every_bad_field():
    with pytest.raises(ConfigError) as error:
        S.Alignment(points=1, max_sweeps=0)
    assert error.value.errors == [
        "Alignment.points: must be >= 2, got 1",
        "Alignment.max_sweeps: must be >= 1, got 0",
    ]
    assert isinstance(S.Alignment(), Section)

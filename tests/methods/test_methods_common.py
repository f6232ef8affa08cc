"""What every method shares: sample splitting, the registry, the contract every registered
method keeps, mode selection, sample stores, predictions, the methods config section and
`symbnn sample`."""

import numpy as np
import pytest
import torch
from conftest import TINY_SETTINGS, check_method_contract, repo_config, tiny_experiment

from symbnn.cli import main
from symbnn.data.core import ImageData
from symbnn.methods import registry
from symbnn.methods.base import Mode, Problem
from symbnn.methods.de import DeepEnsembleMembers
from symbnn.methods.interface import Descriptor, Method
from symbnn.methods.pool import select_mode
from symbnn.methods.registry import Draw, mode_blocks, split_counts
from symbnn.methods.sampling import (
    REPLICATE_SEED_STRIDE,
    fit_block,
    load_fits,
    problem_for,
    sample_store,
    sample_variant,
    save_fits,
)
from symbnn.predictions import open_predictions, write_predictions
from symbnn.settings import DeepEnsembles, Experiment, Methods, Recipe, Swag
from symbnn.settings.base import ConfigError
from symbnn.store import StoreError, open_store


def test_split_counts_are_balanced_and_complete():
    assert split_counts(10, 3) == [4, 3, 3]
    assert split_counts(4, 4) == [1, 1, 1, 1]
    assert split_counts(7, 1) == [7]
    with pytest.raises(ValueError, match="at least one sample per mode"):
        split_counts(2, 3)


def test_registry_variants_and_sample_plans():
    methods = Methods.parse(
        {"n_samples": 10, "modes": 4, "pool": 20, "dropout": {"rate": 0.1}, "de": {}}, "methods"
    )
    assert registry.configured_methods(methods) == ["dropout", "de"]
    assert registry.variants("de") == ("multi",)

    def plan(method, variant):
        return [
            (d.mode, d.count, d.unit, d.skip)
            for d in registry.sample_plan(method, variant, methods)
        ]

    # single-mode: all 10 samples at each of the 4 modes (one posterior per mode)
    assert plan("dropout", "single") == [(k, 10, k, 0) for k in range(4)]
    # one multi-mode replicate over every mode by default, the samples split among them
    assert plan("dropout", "multi") == [(0, 3, 0, 0), (1, 3, 0, 0), (2, 2, 0, 0), (3, 2, 0, 0)]
    assert plan("de", "multi") == [(k, 1, 0, 0) for k in range(10)]
    # one fit per mode serves both variants; a method sampling while fitting draws the most
    assert registry.fit_counts("dropout", methods) == [10] * 4
    assert registry.fit_counts("de", methods) == [1] * 10
    assert mode_blocks("de", methods) == [list(range(10))]
    assert mode_blocks("dropout", methods) == [[0], [1], [2], [3]]


def test_multi_mode_replicates_draw_from_cyclic_windows_of_modes():
    methods = Methods.parse(
        {
            "n_samples": 4,
            "modes": 4,
            "replicates": 4,
            "modes_per_replicate": 2,
            "pool": 12,
            "sghmc": {},
            "de": {"stride": 2},
        },
        "methods",
    )
    draws = registry.sample_plan("sghmc", "multi", methods)
    assert [(d.unit, d.mode, d.count) for d in draws] == [
        (0, 0, 2),
        (0, 1, 2),
        (1, 1, 2),
        (1, 2, 2),
        (2, 2, 2),
        (2, 3, 2),
        (3, 3, 2),
        (3, 0, 2),
    ]
    # each mode serves two replicates: the second takes the fit's next samples, never the same
    assert [d.skip for d in draws] == [0, 0, 2, 0, 2, 0, 2, 2]
    assert registry.fit_counts("sghmc", methods) == [4] * 4  # = the one-mode count: no extra fit
    # Deep Ensemble replicates: 4 members each, starting 2 pool networks apart
    de = registry.sample_plan("de", "multi", methods)
    assert [[d.mode for d in de if d.unit == r] for r in range(4)] == [
        [0, 1, 2, 3],
        [2, 3, 4, 5],
        [4, 5, 6, 7],
        [6, 7, 8, 9],
    ]
    assert registry.descriptor("de").members_needed(methods, methods.de) == 10
    with pytest.raises(ConfigError, match="pool: 8 is below the 10 networks"):
        Methods.parse({**methods.to_dict(), "pool": 8}, "methods")
    with pytest.raises(ConfigError, match="modes_per_replicate: 5 exceeds modes"):
        Methods.parse({**methods.to_dict(), "modes_per_replicate": 5}, "methods")


def test_registry_lookups():
    methods = Methods.parse(
        {"n_samples": 10, "modes": 4, "pool": 20, "dropout": {"rate": 0.1}, "de": {}}, "methods"
    )
    assert registry.settings_class("swag") is Swag
    assert registry.fit_settings("dropout", methods) == {"rate": 0.1, "layers": 1}
    with pytest.raises(ValueError, match="unknown method 'mcmc'"):
        registry.check_method("mcmc")
    with pytest.raises(ValueError, match="no variant 'single'"):
        registry.sample_plan("de", "single", methods)
    with pytest.raises(ValueError, match="methods.swag is not configured"):
        registry.settings_of("swag", methods)


def test_sampling_only_settings_are_not_fit_settings():
    methods = Methods.parse({"n_samples": 4, "modes": 2, "pool": 4, "swag": {"scale": 0.5}}, "m")
    fit = registry.fit_settings("swag", methods)
    assert "scale" not in fit and "bn_update" not in fit and fit["snapshots"] == 20


@pytest.mark.parametrize("method", registry.METHOD_NAMES)
def test_every_registered_method_keeps_the_contract(
    method, tiny_problem, tiny_mode, tmp_path, one_torch_thread
):
    """Deterministic fit for a seed, its tree file, the model's state names and shapes,
    finite samples, a sample store round trip: for every method the registry lists."""
    described = registry.descriptor(method)
    check_method_contract(
        described, tiny_problem, tiny_mode, TINY_SETTINGS.get(method, {}), tmp_path
    )


def _problem():
    images = torch.randint(0, 256, (8, 1, 28, 28), dtype=torch.uint8)
    data = ImageData(images, torch.arange(8) % 10, 10, (0.5,), (0.25,), "random")
    return Problem({"name": "optunet"}, Recipe(epochs=1, batch_size=4, lr=0.1), data)


def test_fits_and_draws_split_samples_and_record_modes(tmp_path, monkeypatch):
    problem = _problem()
    pool_state = {
        k: v.unsqueeze(0).repeat(3, *[1] * v.ndim) for k, v in problem.build().state_dict().items()
    }
    from symbnn.store import write_store

    write_store(tmp_path / "pool.zarr", pool_state, {"seed": np.array([100, 101, 102])}, {})
    seen = []

    class Fake(Method):
        def fit(self, problem, mode, settings, seed, count):
            seen.append(("fit", mode.seed, seed, count))
            return {"state": mode.state}

        def sample(self, problem, fitted, count, settings, seed):
            seen.append(("sample", seed, count))
            return {
                n: t.unsqueeze(0).repeat(count, *[1] * t.ndim) for n, t in fitted["state"].items()
            }

    import symbnn.methods.sampling as sampling

    monkeypatch.setattr(sampling, "implementation", lambda described: Fake())
    fake = Descriptor("fake", "Fake", Swag, "test_methods_common:Fake")
    plan = [Draw(0, 3, 0), Draw(1, 2, 1), Draw(2, 2, 2)]
    blocks = [
        fit_block(problem, fake, Swag(), [k], 5, None, tmp_path / "pool.zarr", [0, 1, 2])
        for k in range(3)
    ]
    save_fits(blocks[1], tmp_path / "fits.safetensors")
    assert load_fits(tmp_path / "fits.safetensors").mode_seeds == [101]
    state, info = sample_variant(problem, fake, Swag(), blocks, plan, 5, multi=False)
    assert list(info["mode_index"]) == [0, 0, 0, 1, 1, 2, 2]
    assert list(info["mode_seed"]) == [100, 100, 100, 101, 101, 102, 102]
    assert list(info["unit"]) == [0, 0, 0, 1, 1, 2, 2]
    assert ("fit", 101, 6, None) in seen and ("sample", 7, 2) in seen
    assert torch.equal(state["fc2.weight"][3], pool_state["fc2.weight"][1])
    # a multi-mode replicate draws with a seed of its own
    sample_variant(problem, fake, Swag(), blocks, [Draw(1, 2, 3)], 5, multi=True)
    assert ("sample", 5 + 1 + REPLICATE_SEED_STRIDE * 4, 2) in seen
    with pytest.raises(ValueError, match=r"no fit for mode\(s\) \[2\]"):
        sample_variant(problem, fake, Swag(), blocks[:2], plan, 5, multi=False)


def test_deep_ensemble_member_is_the_mode_itself():
    problem = _problem()
    state = problem.build().state_dict()
    member = DeepEnsembleMembers()
    fitted = member.fit(problem, Mode(1, state), DeepEnsembles(), 0, 1)
    out = member.sample(problem, fitted, 1, DeepEnsembles(), 0)
    assert all(torch.equal(out[name][0], state[name]) for name in state)
    with pytest.raises(ValueError, match="one network"):
        member.fit(problem, Mode(1, state), DeepEnsembles(), 0, 2)
    with pytest.raises(ValueError, match="the fit drew"):
        member.sample(problem, fitted, 2, DeepEnsembles(), 0)


@pytest.fixture
def pool(optunet_store):
    store, state = optunet_store("pool.zarr", n=6, first_seed=50)
    return store, state


def test_select_mode_skips_non_converged_networks(tmp_path, optunet_store):
    from symbnn.store import write_store

    _, state = optunet_store("base.zarr", n=4)
    info = {"seed": np.array([7, 8, 9, 10]), "converged": np.array([False, True, False, True])}
    path = tmp_path / "pool2.zarr"
    write_store(path, state, info, {"architecture": {"name": "optunet"}})
    converged = [1, 3]  # as the convergence table flags them
    mode = select_mode(path, converged, 1)
    assert mode.seed == 10
    assert torch.equal(mode.state["fc1.weight"], state["fc1.weight"][3])
    with pytest.raises(StoreError, match="only 2 pool networks converged; raise methods.pool"):
        select_mode(path, converged, 2)


def _experiment():
    experiment = tiny_experiment(n_samples=4)
    experiment["model"] = {"name": "optunet"}  # the pool fixture holds OptuNets
    experiment["methods"] = {"n_samples": 4, "modes": 2, "pool": 6, "first_seed": 50, "de": {}}
    return Experiment.parse(experiment, "tiny")


def test_sample_store_and_predictions_of_deep_ensembles(tmp_path, pool):
    pool_store, state = pool
    experiment = _experiment()
    problem = problem_for(
        experiment.data, experiment.model.to_dict(), experiment.recipe, "data", False, "cpu"
    )
    out = sample_store(
        tmp_path / "de.zarr",
        "tiny",
        experiment,
        "de",
        "multi",
        pool_store.path,
        list(range(6)),
        problem,
    )
    assert out.n_samples == 4 and out.attrs["kind"] == "samples"
    assert (
        out.attrs["method"] == "de"
        and out.attrs["variant"] == "multi"
        and out.attrs["settings"] == {"stride": None}
    )
    assert list(out.info("mode_seed")) == [50, 51, 52, 53]
    assert np.array_equal(out.read("conv1.weight"), state["conv1.weight"][:4].numpy())
    assert out.state_names == pool_store.state_names

    test = ImageData(
        torch.randint(0, 256, (30, 1, 28, 28), dtype=torch.uint8),
        torch.arange(30) % 10,
        10,
        (0.5,),
        (0.25,),
        "test",
    )
    ood = ImageData(
        torch.randint(0, 256, (12, 1, 28, 28), dtype=torch.uint8),
        torch.zeros(12, dtype=torch.int64),
        10,
        (0.5,),
        (0.25,),
        "ood",
    )
    write_predictions(out.path, tmp_path / "pred.zarr", test, ood, batch=7)
    pred = open_predictions(tmp_path / "pred.zarr")
    probs = pred.read("test")
    assert probs.shape == (4, 30, 10) and probs.dtype == np.float16
    assert pred.read("ood").shape == (4, 12, 10)
    assert np.allclose(probs.astype(np.float64).sum(-1), 1, atol=1e-2)
    # row 2 is pool network 2: its predictions are that network's own softmax outputs
    model = _problem().build(out.state_dict(2)).eval()
    with torch.no_grad():
        direct = torch.softmax(model(test.normalize(test.images)), 1).numpy()
    assert np.allclose(probs[2], direct, atol=1e-3)
    assert np.isclose(
        pred.read("test_accuracy")[2], (direct.argmax(1) == test.labels.numpy()).mean()
    )
    assert list(pred.read("labels")) == list(range(10)) * 3
    assert pred.attrs["method"] == "de"


def test_predictions_refuse_nan_weights_and_leave_nothing(tmp_path, optunet_store):
    from symbnn.store import write_store

    _, state = optunet_store("base.zarr", n=2)
    state = {name: t.clone() for name, t in state.items()}
    state["fc2.bias"][1, 0] = float("nan")
    write_store(tmp_path / "bad.zarr", state, attrs={"architecture": {"name": "optunet"}})
    data = ImageData(
        torch.zeros(5, 1, 28, 28, dtype=torch.uint8),
        torch.zeros(5, dtype=torch.int64),
        10,
        (0.5,),
        (0.25,),
    )
    with pytest.raises(StoreError, match="sample 1 predicts NaN"):
        write_predictions(tmp_path / "bad.zarr", tmp_path / "pred.zarr", data, data)
    assert not (tmp_path / "pred.zarr").exists()
    assert not list(tmp_path.glob(".pred.zarr.tmp-*"))


PAPER_METHODS = ["dropout", "bnn", "sghmc", "swag", "laplace", "de"]


def test_repository_config_turns_on_the_papers_methods():
    """The paper's six methods run by default; a method added later need not (its test
    iterates over the registry)."""
    methods = Methods.parse(repo_config()["experiments"]["default"]["methods"], "methods")
    assert registry.configured_methods(methods)[: len(PAPER_METHODS)] == PAPER_METHODS


def test_cli_sample_trains_a_missing_pool_and_predicts(tmp_path, capsys, monkeypatch):
    import yaml

    experiment = tiny_experiment(n_samples=2)
    experiment["data"]["train_limit"] = 64
    experiment["methods"] = {"n_samples": 3, "modes": 2, "pool": 3, "de": {}}
    config = {
        **repo_config(),
        "run": ["tiny"],
        "experiments": {"tiny": experiment},
        "results": str(tmp_path / "r"),
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    code = main(
        [
            "sample",
            "de",
            str(tmp_path / "de.zarr"),
            "--experiment",
            "tiny",
            "--config",
            str(tmp_path / "config.yaml"),
            "--predictions",
            str(tmp_path / "pred.zarr"),
            "--device",
            "cpu",
        ]
    )
    assert code == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "training its 3 networks first" in out and "predictions written" in out
    assert open_store(tmp_path / "r" / "tiny" / "modes" / "pool.zarr").n_samples == 3
    assert not (tmp_path / "r" / "tiny" / "modes" / "pool.zarr.shard").exists()
    assert open_store(tmp_path / "de.zarr").n_samples == 3
    assert open_predictions(tmp_path / "pred.zarr").read("test").shape[0] == 3
    code = main(
        [
            "sample",
            "de",
            str(tmp_path / "x.zarr"),
            "--experiment",
            "nope",
            "--config",
            str(tmp_path / "config.yaml"),
        ]
    )
    assert code == 1 and "no experiment 'nope'" in capsys.readouterr().err

"""What every method shares: sample splitting, the registry, mode selection, sample stores,
predictions, the methods config section and `symbnn sample`."""

import copy

import numpy as np
import pytest
import torch
from conftest import repo_config, tiny_experiment

from symbnn.cli import main
from symbnn.config import ConfigError, validate_config
from symbnn.data.core import ImageData
from symbnn.methods import registry
from symbnn.methods.base import Mode, Problem, run_method, split_counts
from symbnn.methods.ensembles import sample_mode as de_sample
from symbnn.methods.pool import select_mode
from symbnn.methods.sampling import mode_blocks, sample_mode_store
from symbnn.predictions import open_predictions, write_predictions
from symbnn.store import StoreError, open_store
from symbnn.train.recipe import Recipe


def test_split_counts_are_balanced_and_complete():
    assert split_counts(10, 3) == [4, 3, 3]
    assert split_counts(4, 4) == [1, 1, 1, 1]
    assert split_counts(7, 1) == [7]
    with pytest.raises(ValueError, match="at least one sample per mode"):
        split_counts(2, 3)


def test_registry_variants_and_shares():
    cfg = {"n_samples": 10, "modes": 4, "pool": 20, "dropout": {"rate": 0.1}, "de": {}}
    assert registry.configured_methods(cfg) == ["dropout", "de"]
    assert registry.variants("de") == ("multi",)
    assert registry.mode_shares("dropout", "single", cfg) == [10]
    assert registry.mode_shares("dropout", "multi", cfg) == [3, 3, 2, 2]
    assert registry.mode_shares("de", "multi", cfg) == [1] * 10
    assert mode_blocks("de", "multi", cfg) == [list(range(10))]
    assert mode_blocks("swag", "multi", cfg) == [[0], [1], [2], [3]]
    with pytest.raises(ValueError, match="unknown method 'mcmc'"):
        registry.check_method("mcmc")
    with pytest.raises(ValueError, match="no variant 'single'"):
        registry.mode_shares("de", "single", cfg)


def _problem():
    images = torch.randint(0, 256, (8, 1, 28, 28), dtype=torch.uint8)
    data = ImageData(images, torch.arange(8) % 10, 10, (0.5,), (0.25,), "random")
    return Problem({"name": "optunet"}, Recipe(epochs=1, batch_size=4, lr=0.1), data)


def test_run_method_splits_samples_and_records_modes():
    problem = _problem()
    modes = [Mode(seed=100 + k, state=problem.build().state_dict()) for k in range(3)]
    seeds_seen = []

    def fake(problem, mode, count, settings, seed):
        seeds_seen.append(seed)
        return {name: t.unsqueeze(0).repeat(count, *[1] * t.ndim) for name, t in mode.state.items()}

    samples = run_method(fake, problem, modes, 7, {}, seed=5)
    assert len(samples) == 7
    assert list(samples.mode_index) == [0, 0, 0, 1, 1, 2, 2]
    assert list(samples.mode_seed) == [100, 100, 100, 101, 101, 102, 102]
    assert seeds_seen == [5, 6, 7]
    assert torch.equal(samples.state["fc2.weight"][3], modes[1].state["fc2.weight"])


def test_deep_ensemble_member_is_the_mode_itself():
    problem = _problem()
    state = problem.build().state_dict()
    out = de_sample(problem, Mode(1, state), 1, {}, 0)
    assert all(torch.equal(out[name][0], state[name]) for name in state)
    with pytest.raises(ValueError, match="one network"):
        de_sample(problem, Mode(1, state), 2, {}, 0)
    with pytest.raises(ValueError, match="no settings"):
        de_sample(problem, Mode(1, state), 1, {"rate": 1}, 0)


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
    mode = select_mode(path, 1)
    assert mode.seed == 10
    assert torch.equal(mode.state["fc1.weight"], state["fc1.weight"][3])
    with pytest.raises(StoreError, match="only 2 pool networks converged; raise methods.pool"):
        select_mode(path, 2)


def _experiment():
    experiment = tiny_experiment(n_samples=4)
    experiment["methods"] = {"n_samples": 4, "modes": 2, "pool": 6, "first_seed": 50, "de": {}}
    return experiment


def test_sample_store_and_predictions_of_deep_ensembles(tmp_path, pool):
    pool_store, state = pool
    experiment = _experiment()
    out = sample_mode_store(
        tmp_path / "de.zarr", "tiny", experiment, "de", "multi", 0, pool_store.path, device="cpu"
    )
    assert out.n_samples == 4 and out.attrs["kind"] == "samples"
    assert (
        out.attrs["method"] == "de"
        and out.attrs["variant"] == "multi"
        and out.attrs["settings"] == {}
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


def _config_with(methods):
    config = repo_config()
    config = copy.deepcopy(config)
    config["experiments"]["default"]["methods"] = methods
    return config


@pytest.mark.parametrize(
    "methods, message",
    [
        ({"n_samples": 0, "modes": 2, "pool": 4}, "methods.n_samples"),
        (
            {"n_samples": 4, "modes": 2, "pool": 4, "dropout": {"rate": -0.1}},
            "methods.dropout.rate",
        ),
        ({"n_samples": 4, "modes": 2, "pool": 4, "swag": {"scale": 0}}, "methods.swag.scale"),
        ({"n_samples": 4, "modes": 2, "pool": 4, "mcmc": {}}, "'mcmc' was unexpected"),
        (
            {"n_samples": 4, "modes": 2, "pool": 4, "laplace": {"hessian": "lowrank"}},
            "methods.laplace.hessian",
        ),
        (
            {"n_samples": 4, "modes": 2, "pool": 4, "first_seed": 10},
            "methods.first_seed: the pool's seeds 10..13 overlap",
        ),
        ({"n_samples": 4, "modes": 5, "pool": 4}, "methods.modes \\(5\\) exceeds methods.pool"),
        (
            {"n_samples": 8, "modes": 2, "pool": 4, "de": {}},
            "Deep Ensembles take one pool network per sample",
        ),
    ],
)
def test_bad_method_settings_fail_validation_naming_the_key(methods, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_config_with(methods), "config.yaml")


def test_repository_config_turns_on_every_method():
    methods = repo_config()["experiments"]["default"]["methods"]
    assert registry.configured_methods(methods) == list(registry.METHOD_NAMES)


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
    assert code == 2 and "no experiment 'nope'" in capsys.readouterr().err

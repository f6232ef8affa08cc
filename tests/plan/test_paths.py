"""Where the workflow's files are (symbnn.plan.paths)."""

from plan_configs import repository, tiny

from symbnn.plan import paths
from symbnn.settings import config_from_mapping


def test_a_linearised_predictive_reads_the_pool():
    config = tiny()
    assert paths.predict_inputs(config, "tiny", "laplace", "single") == {
        "store": "results/tiny/methods/laplace/single/samples.zarr",
        "pool": "results/tiny/modes/pool.zarr",
    }
    assert paths.predict_inputs(config, "tiny", "swag", "multi") == {
        "store": "results/tiny/methods/swag/multi/samples.zarr"
    }


def test_the_results_folder_is_the_configs():
    config = tiny(methods=False)
    mapping = config.to_dict()
    mapping["results"] = "elsewhere"
    moved = config_from_mapping(mapping)
    assert paths.fit_file(moved, "tiny", "swag", "000") == (
        "elsewhere/tiny/methods/swag/fits/000.safetensors"
    )


def test_one_variational_fit_per_seed():
    config = repository()
    variational = config.experiments["cifar10-resnet20"].alignment.variational
    files = paths.variational_fit_files(config, "cifar10-resnet20")
    assert files == [
        f"results/cifar10-resnet20/alignment/variational/{seed}.safetensors"
        for seed in variational.seeds()
    ]
    assert len(files) == len(set(files)) >= 2


def test_the_mode_count_reads_small_models_only():
    config = repository()
    assert paths.mode_count_inputs(config, "cifar100-resnet18") == {}
    assert paths.mode_count_inputs(config, "default") == {
        "canonical": "results/default/canonical/target.zarr",
        "converged": "results/default/posterior/converged.parquet",
    }


def test_the_reference_reads_the_pool_where_its_chains_start_there():
    config = repository()
    assert config.experiments["default"].reference.start == "pool"
    assert paths.reference_inputs(config, "default") == {"pool": "results/default/modes/pool.zarr"}


def test_a_downloaded_release_is_no_input():
    name = "mnist-optunet-released"
    config = repository()
    checkpoints = config.experiments[name].posterior.checkpoints
    assert not checkpoints.download
    assert paths.checkpoint_source(config, name) == [checkpoints.path]

    def downloaded(mapping):
        mapping["experiments"][name]["posterior"]["checkpoints"]["download"] = True

    assert paths.checkpoint_source(repository(downloaded), name) == []

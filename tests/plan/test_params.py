"""Each rule's params (symbnn.plan.params): a job's params change when a setting it depends
on changes, and only then (the guarantees of the rerun table in
tests/workflow/test_workflow.py, here without running Snakemake)."""

import json

import numpy as np
import polars as pl
import pytest
from plan_configs import repository, tiny

from symbnn.plan import jobs, params


@pytest.fixture
def pool_accuracies(tmp_path):
    """A pool accuracies table keeping every network."""
    path = tmp_path / "pool_accuracies.parquet"
    n = 4
    pl.DataFrame(
        {
            "row": np.arange(n),
            "seed": np.arange(1000, 1000 + n),
            "test_accuracy": np.full(n, 0.9),
            "flagged": np.ones(n, bool),
            "measured": np.ones(n, bool),
        }
    ).write_parquet(path)
    return lambda: str(path)


def fit(config, method, accuracies, block="000"):
    return params.fit_params(config, "tiny", method, block, accuracies)


def sample(config, method, variant="single"):
    return params.sample_params(config, "tiny", method, variant)


def edit_methods(**sections):
    """An edit of the tiny experiment updating the method sections given."""

    def edit(experiment):
        for name, values in sections.items():
            experiment["methods"].setdefault(name, {}).update(values)

    return edit


def test_training_params_are_data_model_and_recipe():
    config = tiny()
    found = params.training_params(config, "tiny")
    experiment = config.experiments["tiny"]
    assert found == {
        "data": experiment.data.to_dict(),
        "model": experiment.model.to_dict(),
        "recipe": experiment.recipe.to_dict(),
    }


def test_training_params_follow_the_recipe_and_nothing_else():
    base = params.training_params(tiny(), "tiny")
    changed = params.training_params(tiny(lambda e: e["recipe"].update(lr=0.02)), "tiny")
    assert changed["recipe"]["lr"] == 0.02 and changed != base
    for edit in (
        lambda e: e["compute"].update(threads=2),  # resources
        lambda e: e.setdefault("metrics", {}).update(bins=7),  # a later stage
        lambda e: e["methods"]["swag"].update(rank=2),  # a method
    ):
        assert params.training_params(tiny(edit), "tiny") == base


def test_reordered_settings_give_the_same_params():
    def reordered(experiment):
        experiment["recipe"] = dict(reversed(list(experiment["recipe"].items())))
        experiment["data"] = dict(reversed(list(experiment["data"].items())))

    base = json.dumps(params.training_params(tiny(), "tiny"))
    assert json.dumps(params.training_params(tiny(reordered), "tiny")) == base


def test_the_plateau_check_trains_twice_the_epochs():
    config = tiny()
    stretched = params.plateau_training_params(config, "tiny")
    plain = params.training_params(config, "tiny")
    assert stretched["recipe"]["epochs"] == 2 * plain["recipe"]["epochs"]
    assert {k: v for k, v in stretched.items() if k != "recipe"} == {
        k: v for k, v in plain.items() if k != "recipe"
    }


def test_a_method_fit_setting_refits_that_method_only(pool_accuracies):
    base = tiny()
    edited = tiny(edit_methods(swag={"epochs": 2}))
    assert fit(edited, "swag", pool_accuracies) != fit(base, "swag", pool_accuracies)
    for method, variant in (("laplace", "single"), ("bnn", "single"), ("de", "multi")):
        assert fit(edited, method, pool_accuracies) == fit(base, method, pool_accuracies)
        assert sample(edited, method, variant) == sample(base, method, variant)


def test_a_sampling_setting_redraws_without_refitting(pool_accuracies):
    base, edited = tiny(), tiny(edit_methods(swag={"scale": 0.5}))
    assert fit(edited, "swag", pool_accuracies) == fit(base, "swag", pool_accuracies)
    assert sample(edited, "swag") != sample(base, "swag")


def test_the_methods_seed_refits_and_redraws_every_method(pool_accuracies):
    base, edited = tiny(), tiny(lambda e: e["methods"].update(seed=1))
    for method in ("swag", "laplace"):
        assert fit(edited, method, pool_accuracies)["seed"] == 1
        assert sample(edited, method) != sample(base, method)


def test_fit_params_hold_the_block_modes_and_their_pool_rows(pool_accuracies):
    config = tiny()
    first, second = (
        fit(config, "laplace", pool_accuracies),
        fit(config, "laplace", pool_accuracies, "001"),
    )
    assert (first["modes"], second["modes"]) == ([0], [1])
    assert (first["rows"], second["rows"]) == ([0], [1])
    # a method training its own network holds the retries and the pool's threshold
    dropout = fit(config, "dropout", pool_accuracies)
    assert dropout["retries"] == config.experiments["tiny"].methods.retries
    assert dropout["threshold"] == 0.0  # the tiny experiment keeps every network
    assert "threshold" not in first


def test_section_params_give_a_section_or_one_key():
    config = tiny()
    assert params.section_params(config, "tiny", "mmd") == config.experiments["tiny"].mmd.to_dict()
    assert params.section_params(config, "tiny", "mmd", "seed") == 0


def test_acceptance_params_are_the_posterior_rule():
    config = tiny(lambda e: e["posterior"].update(min_accuracy=0.3, max_below_median=0.1))
    assert params.acceptance_params(config, "tiny") == {
        "min_accuracy": 0.3,
        "max_below_median": 0.1,
    }


def test_alignment_params_leave_out_the_variational_section():
    config = repository()
    found = params.alignment_params(config, "cifar10-resnet20")
    assert "variational" not in found and "points" in found
    variational = params.variational_fit_params(config, "cifar10-resnet20")
    assert set(variational) == {"bnn", "min_accuracy", "retries"}


def test_an_analysis_figure_setting_redraws_without_recomputing():
    config = tiny()
    settings = params.analysis_params(config, "marginals")
    figure = params.analysis_params(config, "marginals", figure=True)
    assert "plot_units" in figure and "plot_units" not in settings
    assert set(settings) | set(figure) == set(config.analyses.marginals.to_dict())
    # an analysis switched off has no params (its rule does not run)
    off = tiny(methods=False)
    assert params.analysis_params(off, "marginals") == {}


def test_imported_stores_take_the_release_range():
    config = repository(
        lambda m: m["experiments"]["mnist-optunet-released"].update(
            methods={"n_samples": 2, "modes": 2, "pool": 4, "first_seed": 0}
        )
    )
    name = "mnist-optunet-released"
    n = config.experiments[name].posterior.n_samples
    target = params.import_params(config, name, pool=False)
    pool = params.import_params(config, name, pool=True)
    assert (target["offset"], target["count"]) == (0, n)
    assert (pool["offset"], pool["count"]) == (n, 4)
    assert target["checkpoints"] == config.experiments[name].posterior.checkpoints.to_dict()


def test_the_predictive_is_the_methods():
    config = tiny()
    assert params.predictive(config, "tiny", "laplace") == "linearised"
    assert params.predictive(config, "tiny", "swag") == "sampled"


def test_shards_train_their_block_of_seeds():
    config = tiny()
    posterior = config.experiments["tiny"].posterior
    assert params.target_shard_seeds(config, "tiny", "000") == posterior.shard_seeds("000")
    pool = params.pool_shard_seeds(config, "tiny", "000")
    assert pool[0] == config.experiments["tiny"].methods.first_seed
    assert params.plateau_seeds(config, "tiny") == list(
        range(posterior.first_seed, posterior.first_seed + posterior.plateau_seeds)
    )


def test_the_reference_compares_every_variant():
    config = tiny()
    pairs = params.reference_variants(config, "tiny")
    assert ["de", "multi"] in pairs
    assert pairs == [list(p) for p in jobs.method_variants(config, "tiny")]

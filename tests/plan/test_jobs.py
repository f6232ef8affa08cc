"""Which jobs a run has (symbnn.plan.jobs), without Snakemake."""

import re

from plan_configs import repository, tiny

from symbnn.methods import registry
from symbnn.plan import jobs
from symbnn.settings.workflow import EXPERIMENT_NAME


def test_rule_all_asks_for_the_method_tables_only_with_methods():
    with_methods, without = jobs.all_targets(tiny()), jobs.all_targets(tiny(methods=False))
    assert "results/tiny/report/table1.md" in with_methods
    assert "results/tiny/modes/pool_accuracies.parquet" in with_methods
    assert not any("table1" in t or "modes/" in t for t in without)
    # what both ask for: the target posterior's chain
    for target in ("canonical/target.zarr", "posterior/target_accuracies.parquet"):
        assert f"results/tiny/{target}" in without


def test_the_plateau_and_deep_ensemble_checks_follow_their_settings():
    def without_checks(experiment):
        experiment["posterior"].pop("plateau_seeds")
        experiment["mmd"]["de_members"] = None

    assert "results/tiny/report/plateau.md" in jobs.all_targets(tiny())
    assert "results/tiny/report/mmd_deep_ensembles.md" in jobs.all_targets(tiny())
    targets = jobs.all_targets(tiny(without_checks))
    assert not any("plateau" in t or "mmd_deep_ensembles" in t for t in targets)


def test_only_experiments_of_run_get_targets():
    config = repository(lambda mapping: mapping.update(run=["mnist-optunet"]))
    for target in jobs.all_targets(config) + jobs.alignment_targets(config):
        assert target.startswith("results/mnist-optunet/"), target


def test_method_variants_are_the_configured_methods_and_their_variants():
    config = tiny()
    methods = config.experiments["tiny"].methods
    pairs = jobs.method_variants(config, "tiny")
    assert pairs == [
        (m, v) for m in registry.configured_methods(methods) for v in registry.variants(m, methods)
    ]
    assert ("de", "multi") in pairs and ("de", "single") not in pairs
    assert jobs.method_variants(tiny(methods=False), "tiny") == []


def test_fit_blocks_number_the_mode_blocks():
    config = tiny()
    for method, _ in jobs.method_variants(config, "tiny"):
        blocks = jobs.mode_blocks(config, "tiny", method)
        assert jobs.fit_blocks(config, "tiny", method) == [f"{b:03d}" for b in range(len(blocks))]
    # Laplace fits one mode per job, the batched methods every mode in one
    assert jobs.fit_blocks(config, "tiny", "laplace") == ["000", "001"]
    assert jobs.fit_blocks(config, "tiny", "swag") == ["000"]


def test_the_method_wildcard_matches_the_configured_methods_only():
    pattern = re.compile(f"^(?:{jobs.method_pattern(tiny())})$")
    for method, _ in jobs.method_variants(tiny(), "tiny"):
        assert pattern.match(method)
    assert not pattern.match("swag/single")


def test_the_pool_shards_like_the_target_posterior():
    config = tiny()
    pool, methods = jobs.pool_posterior(config, "tiny"), config.experiments["tiny"].methods
    target = config.experiments["tiny"].posterior
    assert pool.n_samples == methods.pool and pool.first_seed == methods.first_seed
    assert pool.shard_size == min(methods.pool, target.shard_size)
    assert jobs.shard_ids(config, "tiny") == target.shard_ids()


def test_variational_barriers_only_where_the_alignment_section_asks():
    config = repository()
    for name in config.run:
        targets = [t for t in jobs.alignment_targets(config) if t.startswith(f"results/{name}/")]
        variational = config.experiments[name].alignment.variational is not None
        assert (f"results/{name}/report/variational_barriers.md" in targets) == variational
        assert f"results/{name}/report/alignment_barrier.md" in targets  # two networks or more


def test_imported_experiments_are_matched_by_the_import_rules_only():
    config = repository()
    imported = jobs.imported_experiments(config)
    assert imported == [
        name for name, e in config.experiments.items() if e.posterior.checkpoints is not None
    ]
    assert imported, "config.yaml imports a released posterior"
    trained = re.compile(jobs.trained_pattern(config))
    only_imported = re.compile(f"^(?:{jobs.imported_pattern(config)})$")
    for name in config.experiments:
        # the training rules' pattern is matched against paths: '<experiment>/...'
        assert bool(trained.match(f"{name}/posterior")) == (name not in imported), name
        assert bool(only_imported.match(name)) == (name in imported), name


def test_no_imported_experiment_leaves_every_name_to_training():
    config = tiny()
    assert jobs.imported_experiments(config) == []
    assert jobs.trained_pattern(config) == EXPERIMENT_NAME
    assert not re.match(f"^(?:{jobs.names_pattern([])})$", "tiny")


def test_variant_files_cover_every_variant():
    files = jobs.variant_files(tiny(), "tiny", "mmd/{method}/{variant}/summary.parquet")
    assert files == [
        f"results/tiny/mmd/{m}/{v}/summary.parquet" for m, v in jobs.method_variants(tiny(), "tiny")
    ]


def test_the_gathered_shards_are_the_posteriors_and_the_pools():
    config = tiny()
    target = jobs.target_shards(config, "tiny")
    pool = jobs.pool_shards(config, "tiny")
    assert target == [
        f"results/tiny/posterior/shards/{s}.zarr" for s in jobs.shard_ids(config, "tiny")
    ]
    assert len(pool) == len(jobs.pool_posterior(config, "tiny").shard_ids())
    assert all(p.startswith("results/tiny/modes/shards/") for p in pool)


def test_a_variant_draws_from_every_fit_block():
    config = tiny()
    assert jobs.fit_files(config, "tiny", "laplace") == [
        "results/tiny/methods/laplace/fits/000.safetensors",
        "results/tiny/methods/laplace/fits/001.safetensors",
    ]


def test_the_reference_mmd_table_reads_the_target_and_every_variant():
    config = repository()
    summaries = jobs.reference_mmd_summaries(config, "default")
    variants = jobs.method_variants(config, "default")
    assert summaries[0] == "results/default/reference/mmd/target/summary.parquet"
    assert summaries[1:] == [
        f"results/default/reference/mmd/{m}/{v}/summary.parquet" for m, v in variants
    ]

"""Which networks the acceptance rule keeps, decided while planning (symbnn.plan.kept)."""

import numpy as np
import polars as pl
import pytest
from plan_configs import repository, tiny

from symbnn.plan import kept


def accuracies_table(path, accuracies):
    n = len(accuracies)
    pl.DataFrame(
        {
            "row": np.arange(n),
            "seed": np.arange(n),
            "test_accuracy": np.asarray(accuracies, dtype=float),
            "flagged": np.ones(n, bool),
            "measured": np.ones(n, bool),
        }
    ).write_parquet(path)
    return lambda: str(path)


def never():
    """An accuracies table that must not be asked for (the checkpoint would be planned)."""
    raise AssertionError("the accuracies table was asked for")


@pytest.fixture
def strict():
    """The tiny experiment keeping networks of test accuracy 0.5 or more."""
    return tiny(lambda e: e["posterior"].update(min_accuracy=0.5))


def test_the_kept_rows_skip_the_networks_below_the_rule(tmp_path, strict):
    table = accuracies_table(tmp_path / "a.parquet", [0.9, 0.2, 0.8, 0.6])
    assert kept.kept_target_rows(strict, "tiny", table) == [0, 2, 3]
    assert kept.kept_target_rows(tiny(), "tiny", table) == [0, 1, 2, 3]


def test_mode_k_is_the_kth_kept_pool_network(tmp_path, strict):
    table = accuracies_table(tmp_path / "a.parquet", [0.1, 0.9, 0.2, 0.8])
    assert kept.kept_mode_rows(strict, "tiny", table, [0, 1]) == [1, 3]
    # too few kept: the job reports it
    assert kept.kept_mode_rows(strict, "tiny", table, [1, 2]) == [3, None]


def test_a_method_holds_the_rows_of_every_mode_it_uses(tmp_path, strict):
    table = accuracies_table(tmp_path / "a.parquet", [0.1, 0.9, 0.2, 0.8, 0.7])
    assert kept.method_mode_rows(strict, "tiny", "laplace", table) == [1, 3]
    assert kept.method_mode_rows(strict, "tiny", "de", table) == [1, 3, 4, None]


def test_a_rewritten_table_is_read_again(tmp_path, strict):
    path = tmp_path / "a.parquet"
    table = accuracies_table(path, [0.9, 0.9])
    assert kept.kept_target_rows(strict, "tiny", table) == [0, 1]
    accuracies_table(path, [0.9, 0.1, 0.9])
    assert kept.kept_target_rows(strict, "tiny", table) == [0, 2]


def test_the_accuracies_are_asked_for_only_where_needed(tmp_path):
    config = repository()
    # a ResNet-18's mode count is not measured
    assert kept.mode_count_params(config, "cifar100-resnet18", never) == []
    table = accuracies_table(tmp_path / "a.parquet", [0.9] * 8)
    assert kept.mode_count_params(config, "default", table) == list(range(8))
    modes = config.experiments["default"].reference.modes
    assert kept.reference_start_rows(config, "default", table) == list(range(modes))

    def from_prior(mapping):
        mapping["experiments"]["default"]["reference"]["start"] = "prior"

    assert kept.reference_start_rows(repository(from_prior), "default", never) == []
    assert config.experiments["cifar100-resnet18"].reference is None
    assert kept.reference_start_rows(config, "cifar100-resnet18", never) == []


def test_a_fit_not_yet_run_holds_the_pool_threshold(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tiny(lambda e: e["posterior"].update(min_accuracy=0.5))
    table = accuracies_table(tmp_path / "a.parquet", [0.9, 0.8])
    assert kept.retry_threshold(config, "tiny", "dropout", "000", table) == 0.5

import copy
from pathlib import Path

import pytest
import yaml

from symbnn.config import ConfigError, load_config, shard_ids, shard_seeds, validate_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def config():
    return load_config(REPO / "config.yaml")


def test_shipped_config_is_valid_and_has_the_paper_settings(config):
    assert config["run"] == ["default"]
    for name in ("default", "mnist-optunet", "cifar100-resnet18", "tinyimagenet-resnet18"):
        assert name in config["experiments"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda c: c["experiments"]["default"]["recipe"].update(lrr=0.1),
            r"experiments\.default\.recipe.*'lrr'",
        ),
        (
            lambda c: c["experiments"]["default"]["recipe"].update(lr=-1),
            r"experiments\.default\.recipe\.lr",
        ),
        (
            lambda c: c["experiments"]["default"]["posterior"].update(n_samples=0),
            r"posterior\.n_samples",
        ),
        (lambda c: c["experiments"]["default"]["model"].update(name="vgg"), r"model\.name.*'vgg'"),
        (lambda c: c["experiments"]["default"]["model"].update(widths=[3]), r"model.*'widths'"),
        (lambda c: c["experiments"]["default"]["data"].update(train="imagenet"), r"data\.train"),
        (lambda c: c.update(device="tpu"), r"device"),
        (lambda c: c.update(colour="blue"), r"'colour'"),
        (lambda c: c.update(run=["nope"]), r"run: experiment 'nope'"),
        (lambda c: c["experiments"]["default"]["posterior"].update(shard_size=1000), r"shard_size"),
        (lambda c: c["experiments"]["default"]["recipe"].update(milestones=[6, 4]), r"milestones"),
    ],
)
def test_bad_config_names_the_key(config, edit, message):
    bad = copy.deepcopy(config)
    edit(bad)
    with pytest.raises(ConfigError, match=message):
        validate_config(bad)


def test_load_config_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"run": ["x"], "experiments": {}}))
    with pytest.raises(ConfigError, match=str(path)):
        load_config(path)


def test_shards_partition_the_seeds():
    posterior = {"n_samples": 10, "shard_size": 4, "first_seed": 100}
    ids = shard_ids(posterior)
    assert ids == ["000", "001", "002"]
    seeds = [s for shard in ids for s in shard_seeds(posterior, shard)]
    assert seeds == list(range(100, 110))
    with pytest.raises(ConfigError):
        shard_seeds(posterior, "003")

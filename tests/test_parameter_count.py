"""The parameter count the workflow's planning asks a child for, and its cache."""

import json

import pytest

from symbnn import parameter_count
from symbnn.models import build_model, count_parameters

OPTUNET = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}


@pytest.fixture
def children(monkeypatch, tmp_path):
    """The calls that reached the child (counted here, answered in-process), with an empty
    cache in tmp_path."""
    monkeypatch.setenv("SYMBNN_CACHE_DIR", str(tmp_path))
    asked = []

    def answer(module, request, failure):
        asked.append(request)
        return str(count_parameters(build_model(request)))

    monkeypatch.setattr(parameter_count, "ask_child", answer)
    return asked


def test_a_shipped_model_is_counted_once_then_read_from_the_cache(children, tmp_path):
    assert parameter_count.in_child(OPTUNET) == count_parameters(build_model(OPTUNET))
    assert parameter_count.in_child(dict(reversed(OPTUNET.items()))) == 904
    assert len(children) == 1
    assert list(json.loads((tmp_path / parameter_count.CACHE_FILE).read_text()).values()) == [904]
    assert parameter_count.in_child({**OPTUNET, "hidden": 20}) != 904 and len(children) == 2


def test_an_edited_model_definition_is_counted_anew(children, monkeypatch):
    parameter_count.in_child(OPTUNET)
    monkeypatch.setattr(parameter_count, "_models_source_digest", lambda: "edited")
    parameter_count.in_child(OPTUNET)
    assert len(children) == 2


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"k": "904"}', ""])
def test_a_damaged_cache_is_recounted_and_rewritten(children, tmp_path, content):
    (tmp_path / parameter_count.CACHE_FILE).write_text(content)
    assert parameter_count.in_child(OPTUNET) == 904 and len(children) == 1
    assert parameter_count.in_child(OPTUNET) == 904 and len(children) == 1


def test_a_model_of_the_users_own_is_never_cached(children, monkeypatch, tmp_path):
    monkeypatch.setattr(parameter_count, "ask_child", lambda *a: (children.append(a), "7")[1])
    for _ in range(2):
        assert parameter_count.in_child({"name": "user_models:SmallCNN"}) == 7
    assert len(children) == 2 and not (tmp_path / parameter_count.CACHE_FILE).exists()


def test_an_unwritable_cache_only_costs_the_child(children, monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("SYMBNN_CACHE_DIR", str(blocked / "below"))
    assert parameter_count.in_child(OPTUNET) == 904
    assert parameter_count.in_child(OPTUNET) == 904 and len(children) == 2


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SYMBNN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert parameter_count.cache_dir() == tmp_path / "symbnn"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert parameter_count.cache_dir().parts[-2:] == (".cache", "symbnn")

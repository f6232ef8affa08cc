"""A model named by import path: settings, building, derived structure and its properties."""

import pytest
import torch
import yaml
from symmetry_checks import random_module_state, relative_difference

from symbnn import api, trust
from symbnn.models import build_model
from symbnn.settings import ConfigError, ImportedModel, config_from_mapping
from symbnn.symmetry import unit_groups

USER_MODEL = {
    "name": "user_models:SmallCNN",
    "options": {"channels": 3},
    "input_shape": [1, 28, 28],
}


@pytest.fixture(autouse=True)
def trusted():
    """The import paths these tests name are named in code: trusted (`symbnn.trust`)."""
    for path in (
        "no_such_module_here:Net",
        "user_models:Missing",
        "user_models:not_a_model",
        "user_models:small_cnn",
        "user_models:NotAModule",
        "user_models:Raising",
    ):
        trust.trust_model(path)
    trust.trust_model(USER_MODEL["name"])
    yield
    trust.forget()


def with_model(model):
    from pathlib import Path

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "config.yaml").read_text())
    config["experiments"]["default"]["model"] = model
    return config


def test_the_settings_take_an_import_path_and_hand_its_options_on():
    section = config_from_mapping(with_model(USER_MODEL)).experiments["default"].model
    assert isinstance(section, ImportedModel)
    assert section.to_dict() == USER_MODEL


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"name": "smallcnn"},
            "must be one of optunet, mlp, resnet18, resnet20_frn_silu or an import path",
        ),
        ({"name": "user_models:Small CNN"}, "expected an import path"),
        ({"name": "user_models:SmallCNN", "channels": 3}, "model.channels: unknown key"),
        ({"name": "user_models:SmallCNN", "input_shape": [1, 0]}, "input_shape[1]: must be >= 1"),
    ],
)
def test_bad_model_settings_name_the_key(model, message):
    with pytest.raises(ConfigError, match="experiments.default.model") as error:
        config_from_mapping(with_model(model))
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "no_such_module_here:Net"}, "cannot import module 'no_such_module_here'"),
        ({"name": "user_models:Missing"}, "has no attribute 'Missing'"),
        ({"name": "user_models:not_a_model"}, "is a function, not a subclass of torch.nn"),
        ({"name": "user_models:small_cnn"}, "is a function, not a subclass of torch.nn"),
        ({"name": "user_models:NotAModule"}, "the class NotAModule, not a subclass of torch.nn"),
        ({"name": "user_models:SmallCNN", "options": {"depth": 3}}, "bad options"),
        (
            {"name": "user_models:SmallCNN", "options": {"channels": {"act": "os:system"}}},
            "options.channels.act: 'os:system' names code",
        ),
        (
            {"name": "user_models:Raising", "options": {"width": 5}},
            "failed in __init__ with options {'width': 5}: RuntimeError: cannot build a net",
        ),
        ({"name": "user_models:SmallCNN", "width": 3}, "unknown spec keys ['width']"),
    ],
)
def test_a_model_that_cannot_be_built_says_why(spec, message):
    with pytest.raises(ValueError) as error:
        build_model(spec)
    assert message in str(error.value) and spec["name"] in str(error.value)


def test_a_model_is_checked_before_anything_is_called(tmp_path, monkeypatch):
    """Options that are not plain values are refused before the module is even imported; a
    class whose signature does not take the options is refused before it is called."""
    (tmp_path / "counted_model.py").write_text(
        "import pathlib\n"
        "from torch import nn\n"
        "pathlib.Path(__file__).with_suffix('.imported').touch()\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, width=2):\n"
        "        super().__init__()\n"
        "        pathlib.Path(__file__).with_suffix('.called').touch()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    trust.trust_model("counted_model:Net")
    with pytest.raises(ValueError, match=r"options\.width\[1\]: 'os:system' names code"):
        build_model({"name": "counted_model:Net", "options": {"width": [1, "os:system"]}})
    assert not (tmp_path / "counted_model.imported").exists()
    with pytest.raises(ValueError, match="bad options for model 'counted_model:Net'"):
        build_model({"name": "counted_model:Net", "options": {"depth": 2}})
    assert (tmp_path / "counted_model.imported").exists()
    assert not (tmp_path / "counted_model.called").exists()
    assert isinstance(build_model({"name": "counted_model:Net"}), torch.nn.Module)
    assert (tmp_path / "counted_model.called").exists()


def test_a_constructor_that_raises_is_told_as_the_users_code():
    from symbnn.user_code import UserCodeError

    with pytest.raises(UserCodeError) as error:
        build_model({"name": "user_models:Raising"})
    assert str(error.value) == (
        "model 'user_models:Raising' failed in __init__ with options {}: RuntimeError: "
        "cannot build a net of width 3"
    )
    assert isinstance(error.value.__cause__, RuntimeError)  # the user's traceback is kept


def test_the_settings_refuse_options_that_name_code():
    model = {**USER_MODEL, "options": {"channels": 3, "block": "mylib.blocks:Residual"}}
    with pytest.raises(ConfigError, match="experiments.default.model.options.block: 'mylib"):
        config_from_mapping(with_model(model))


def test_the_structure_is_derived_from_the_traced_model():
    sym = unit_groups(USER_MODEL)
    assert sym.architecture == USER_MODEL
    assert [(g.name, g.width) for g in sym.groups] == [
        ("features.0", 3),
        ("features.3", 6),
        ("classifier.1", 12),
    ]
    assert (sym.output_bias, sym.output_weight) == ("classifier.3.bias", "classifier.3.weight")
    assert sym.limits == ()


def test_a_random_symmetry_keeps_the_function_and_the_canonical_form():
    model = build_model(USER_MODEL).double().eval()
    state = random_module_state(model, seed=3)
    moved = api.random_symmetry(state, USER_MODEL, seed=4)
    # the weights did move
    assert relative_difference(state["features.0.weight"], moved["features.0.weight"]) > 0.1
    x = torch.randn(16, 1, 28, 28, dtype=torch.float64)

    def probabilities(s):  # the softmax's shift freedom moves the logits, not these
        model.load_state_dict(s)
        return model(x).softmax(-1)

    assert torch.allclose(probabilities(state), probabilities(moved), rtol=1e-9, atol=1e-12)
    a, b = api.canonicalize(state, USER_MODEL).state, api.canonicalize(moved, USER_MODEL).state
    assert all(torch.allclose(a[k], b[k], rtol=1e-9, atol=1e-10) for k in a)

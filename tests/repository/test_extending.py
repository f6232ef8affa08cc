"""docs/extending.md's examples run, and a method or a dataset of the user's own, named by
import path, is checked like a shipped one: its settings by its own section (errors name the
key), its import through `symbnn.trust`, its samples by the contract every method keeps, its
images by the checks every loader passes. The whole workflow with both runs in
tests/workflow/test_workflow_extensions.py."""

import ast
import filecmp
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import check_method_contract, repo_config
from extending_docs import DOC, EXAMPLE_MODULES, METHOD, doc_blocks, doc_files

from symbnn import trust
from symbnn.data import load_dataset
from symbnn.data.core import DatasetError
from symbnn.methods import registry
from symbnn.settings import ConfigError, Methods, config_from_mapping, load_config
from symbnn.settings.schema import config_schema

REPO = Path(__file__).resolve().parents[2]


def shipped_descriptor_block():
    """The descriptor docs/extending.md adds to SHIPPED (indented as in the tuple)."""
    marker = "# in SHIPPED of src/symbnn/settings/methods.py\n"
    return next(b.removeprefix(marker) for b in doc_blocks("python") if b.startswith(marker))


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """docs/extending.md's files written to a folder on sys.path (the working directory)."""
    for name, text in doc_files().items():
        (tmp_path / name).write_text(text)
    shutil.copy(REPO / "tests" / "user_datasets.py", tmp_path / "user_datasets.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(trust.ENVIRONMENT, raising=False)
    trust.forget()
    yield tmp_path
    trust.forget()
    for name in (*EXAMPLE_MODULES, "user_datasets"):
        sys.modules.pop(name, None)


def test_the_docs_examples_run(examples, one_torch_thread):
    """Every Python block that is not a file runs, in order, in one session (each asserts
    what it shows); the YAML blocks are valid YAML."""
    assert set(doc_files()) == {f"{name}.py" for name in EXAMPLE_MODULES}
    session = {"__name__": "docs_extending"}
    ran = 0
    for block in doc_blocks("python"):
        if block.startswith(("# file: ", "# in SHIPPED")):
            continue
        exec(compile(block, str(DOC), "exec"), session)
        ran += 1
    assert ran >= 6 and (examples / "weight_norms.html").is_file()
    for block in doc_blocks("yaml"):
        assert isinstance(yaml.safe_load(block), dict)


def test_the_docs_method_keeps_the_contract(examples, tiny_problem, tiny_mode, tmp_path):
    methods = with_method({"class": METHOD, "scale": 0.05})
    trust.trust("method", METHOD)
    described = registry.descriptor("last_layer", methods)
    assert (described.label, described.sampling_keys) == ("Last-layer Gaussian", ("scale",))
    check_method_contract(described, tiny_problem, tiny_mode, {"scale": 0.05}, tmp_path)


def with_method(entry, name="last_layer"):
    return Methods.parse({"n_samples": 4, "modes": 2, "pool": 4, name: entry}, "methods")


def test_the_docs_method_added_inside_the_package_touches_two_files(tmp_path):
    """The two changes docs/extending.md names, made in a copy of src/: the method is
    registered, configured by its key, planned and keeps the contract."""
    source = doc_files()["last_layer_gaussian.py"]
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    settings_class = next(
        node for node in tree.body if getattr(node, "name", "") == "LastLayerGaussianSettings"
    )
    start = settings_class.decorator_list[0].lineno - 1
    settings_text = "".join(lines[start : settings_class.end_lineno])
    module_text = "".join(lines[:start] + lines[settings_class.end_lineno :]).replace(
        "from symbnn.settings import Section\nfrom symbnn.settings.base import setting\n",
        "from symbnn.settings.methods import LastLayerGaussianSettings\n",
    )
    copy = tmp_path / "src"
    shutil.copytree(REPO / "src", copy, ignore=shutil.ignore_patterns("__pycache__"))
    settings_file = copy / "symbnn" / "settings" / "methods.py"
    text = settings_file.read_text()
    head, tail = text.split("\nSHIPPED = (\n")
    entries, rest = tail.split("\n)\n", 1)
    text = (
        f"{head}\n{settings_text}\n\nSHIPPED = (\n{entries}\n"
        f"{shipped_descriptor_block().rstrip()}\n)\n{rest}"
    )
    settings_file.write_text(text)
    (copy / "symbnn" / "methods" / "last_layer.py").write_text(module_text)
    assert changed_files(REPO / "src", copy) == [
        "symbnn/methods/last_layer.py",
        "symbnn/settings/methods.py",
    ]
    script = textwrap.dedent(
        f"""
        import sys, tempfile
        from pathlib import Path
        sys.path.insert(0, {str(REPO / "tests")!r})
        import conftest
        from symbnn.methods import registry
        from symbnn.methods.base import Mode, Problem
        from symbnn.settings import Methods, Recipe
        from symbnn.settings.schema import config_schema
        from symbnn.data import load_dataset
        from symbnn.train.seeding import build_seeded_model

        assert registry.METHOD_NAMES[-1] == "last_layer", registry.METHOD_NAMES
        methods = Methods.parse(
            {{"n_samples": 4, "modes": 2, "pool": 4, "last_layer": {{"scale": 0.05}}}}, "m"
        )
        assert registry.configured_methods(methods) == ["last_layer"]
        assert registry.fit_settings("last_layer", methods) == {{}}
        assert registry.sample_settings("last_layer", methods) == {{"scale": 0.05}}
        assert "last_layer" in config_schema()["$defs"]["Methods"]["properties"]
        train = load_dataset("digits", "train", "data").limited(64)
        problem = Problem({{"name": "optunet"}}, Recipe(epochs=1, batch_size=32, lr=0.1), train)
        mode = Mode(3, build_seeded_model({{"name": "optunet"}}, 3).state_dict())
        described = registry.descriptor("last_layer")
        conftest.check_method_contract(
            described, problem, mode, {{"scale": 0.05}}, Path(tempfile.mkdtemp())
        )
        print("in-package method ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(copy)}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "in-package method ok" in result.stdout


def changed_files(before: Path, after: Path) -> list[str]:
    """The files (relative paths) that differ between two trees, or exist in one only."""
    found = []

    def walk(compared: filecmp.dircmp, prefix: str) -> None:
        for name in compared.diff_files + compared.left_only + compared.right_only:
            found.append(f"{prefix}{name}")
        for name, sub in compared.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(before, after, ignore=["__pycache__"]), "")
    return sorted(found)


# --- a method of the user's own in the configuration -------------------------------------


def config_with(methods_entries, data=None):
    config = repo_config()
    default = config["experiments"]["default"]
    default["methods"].update(methods_entries)
    if data:
        default["data"].update(data)
    return config


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"mine": {"scale": 1}}, "methods.mine: unknown key; known keys: n_samples"),
        ({"mine": {"scale": 1}}, "laplace, de; a method of your own is a mapping with `class"),
        ({"mine": {"class": "not a path"}}, "methods.mine.class: expected an import path"),
        ({"Mine": {"class": METHOD}}, "methods.Mine: a method's name is lower-case"),
        ({"imported": {"class": METHOD}}, "methods.imported: a method's name is lower-case"),
        ({"swag": {"class": METHOD}}, "methods.swag.class: unknown key"),
    ],
)
def test_a_user_method_entry_is_checked_before_anything_is_imported(entries, message):
    with pytest.raises(ConfigError) as error:
        config_from_mapping(config_with(entries))
    assert message in str(error.value) and "config: experiments.default.methods." in str(
        error.value
    )
    assert "last_layer_gaussian" not in sys.modules


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"class": METHOD, "scale": -1}, "methods.last_layer.scale: must be > 0, got -1"),
        ({"class": METHOD, "sclae": 1}, "methods.last_layer.sclae: unknown key (did you mean"),
        (
            {"class": "last_layer_gaussian:Nope"},
            "methods.last_layer.class: method 'last_layer_gaussian:Nope': "
            "'last_layer_gaussian' has no attribute 'Nope'",
        ),
        (
            {"class": "last_layer_gaussian:LastLayerGaussianSettings"},
            "is not a subclass of symbnn.methods.interface.Method",
        ),
        ({"class": "no_such_module_here:M"}, "cannot import module 'no_such_module_here'"),
    ],
)
def test_a_user_methods_settings_are_checked_by_its_class(examples, entry, message):
    path = examples / "config.yaml"
    path.write_text(yaml.safe_dump(config_with({"last_layer": entry}), sort_keys=False))
    line = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if "last_layer:" in text
    )
    with pytest.raises(ConfigError) as error:
        load_config(path)
    text = str(error.value)
    assert message in text and "experiments.default.methods.last_layer" in text
    assert f"{path}, line " in text and int(re.search(r"line (\d+)", text)[1]) >= line


def test_a_user_method_round_trips_and_the_schema_takes_it(examples):
    config = config_with({"last_layer": {"class": METHOD, "scale": 0.02}})
    path = examples / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    loaded = load_config(path)
    methods = loaded.experiments["default"].methods
    assert registry.configured_methods(methods)[-1] == "last_layer"
    assert registry.labels(methods)["last_layer"] == "Last-layer Gaussian"
    assert methods.to_dict()["last_layer"] == {"class": METHOD, "scale": 0.02}
    assert config_from_mapping(loaded.to_dict()) == loaded  # `config check --resolved`
    assert trust.is_trusted("method", METHOD)
    validator = jsonschema.Draft202012Validator(config_schema())
    assert not list(validator.iter_errors(config))
    for bad in ({"mine": {"scale": 1}}, {"Mine": {"class": METHOD}}, {"mine": {"class": "x"}}):
        assert list(validator.iter_errors(config_with(bad))), bad


def test_the_planning_functions_read_a_user_methods_descriptor(examples):
    trust.trust("method", METHOD)
    methods = Methods.parse(
        {
            "n_samples": 4,
            "modes": 2,
            "pool": 8,
            "replicates": 2,
            "de": {},
            "last_layer": {"class": METHOD, "scale": 0.5},
        },
        "methods",
    )
    assert registry.configured_methods(methods) == ["de", "last_layer"]
    assert registry.variants("last_layer", methods) == ("single", "multi")
    assert registry.mode_blocks("last_layer", methods) == [[0], [1]]
    assert [d.count for d in registry.sample_plan("last_layer", "multi", methods)] == [2, 2] * 2
    assert registry.fit_settings("last_layer", methods) == {}
    assert registry.sample_settings("last_layer", methods) == {"scale": 0.5}
    assert registry.code_params("last_layer", methods) == {"class": METHOD}
    assert registry.code_params("de", methods) == {}
    assert registry.predictive("last_layer", methods) == "sampled"
    assert registry.method_names([methods])[-1] == "last_layer"
    with pytest.raises(ValueError, match="unknown method 'mine' .*last_layer"):
        registry.descriptor("mine", methods)


def test_an_untrusted_method_path_is_refused_before_importing(examples, monkeypatch):
    methods = with_method({"class": METHOD})  # parsed in code: nothing trusted by parsing
    with pytest.raises(trust.UntrustedImport, match="name it as a method's class"):
        registry.descriptor("last_layer", methods)
    assert "last_layer_gaussian" not in sys.modules


# --- a dataset of the user's own ---------------------------------------------------------


def test_a_user_dataset_passes_the_shipped_checks(examples):
    for name in ("stripes", "noise", "labels_out_of_range", "not_image_data", "no_split"):
        trust.trust("dataset", f"user_datasets:{name}")
    train = load_dataset("user_datasets:stripes", "train", examples)
    assert train.images.shape == (400, 1, 28, 28) and train.num_classes == 10
    ood = load_dataset("user_datasets:noise", "test", examples, n=7, size=28, channels=1)
    assert len(ood) == 7 and ood.num_classes == 1  # a set without classes is fine as OOD
    bad = {
        "labels_out_of_range": "label 12 at index 3 is outside 0..9",
        "not_image_data": "the loader returned list, not ImageData",
        "no_split": "cannot be called as no_split(split, root)",
    }
    for name, message in bad.items():
        with pytest.raises(DatasetError, match=re.escape(message)):
            load_dataset(f"user_datasets:{name}", "train", examples)


def test_a_user_dataset_is_checked_against_the_model(examples):
    from symbnn.data.experiment import load_in_distribution
    from symbnn.settings import Data

    config = config_from_mapping(config_with({}, {"train": "user_datasets:stripes"}))
    data = config.experiments["default"].data
    assert trust.is_trusted("dataset", "user_datasets:stripes")  # the configuration named it
    train, test = load_in_distribution(data, examples, model={"name": "optunet"})
    assert (len(train), len(test)) == (400, 100)
    with pytest.raises(DatasetError, match="dataset 'stripes' has images of shape"):
        load_in_distribution(data, examples, model={"name": "mlp", "widths": [100, 10]})
    assert Data.parse(data.to_dict(), "data") == data


def test_a_store_naming_a_loader_is_not_imported(examples, optunet_store):
    """A store's `data` attribute naming code (os:system) is refused, nothing imported."""
    from symbnn.alignment.stores import data_sets

    store, _ = optunet_store(attrs={"data": {"train": "os:system", "ood": "svhn"}})
    with pytest.raises(trust.UntrustedImport, match="'os:system'"):
        data_sets(store, examples, ("test",))


@pytest.mark.slow
def test_the_fingerprint_follows_what_the_loader_returns(examples):
    from symbnn.fingerprint import of_data
    from symbnn.settings import Data

    data = Data.parse({"train": "user_datasets:stripes", "ood": "natural_patches"}, "data")
    env_paths = os.pathsep.join([str(examples), os.environ.get("PYTHONPATH", "")])
    trusted = "dataset=user_datasets:stripes,dataset=user_datasets:labels_out_of_range"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", env_paths)
        patch.setenv(trust.ENVIRONMENT, trusted)
        first = of_data(data, examples)
        assert re.fullmatch(r"[0-9a-f]{64}", first) and of_data(data, examples) == first
        (examples / "stripes_seed.txt").write_text("1")
        assert of_data(data, examples) != first
        assert of_data(Data.parse({"train": "digits", "ood": "svhn"}, "data"), examples) is None
        broken = data.replace(train="user_datasets:labels_out_of_range")
        with pytest.raises(ValueError, match="label 12 at index 3 is outside 0..9"):
            of_data(broken, examples)

"""docs/extending.md's examples run, and a method or a dataset of the user's own, named by
import path, is checked like a shipped one: its settings by its own section (errors name the
key), its import through `symbnn.trust`, its samples by the contract every method keeps, its
images by the checks every loader passes. The whole workflow with both runs in
tests/workflow/test_workflow_extensions.py."""

import ast
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
from symbnn.config_code import load_checked_config
from symbnn.data import load_dataset
from symbnn.data.core import DatasetError
from symbnn.methods import registry
from symbnn.settings import ConfigError, Methods, config_from_mapping, load_config
from symbnn.settings.schema import config_schema

REPO = Path(__file__).resolve().parents[2]


def package_blocks():
    """The lines docs/extending.md adds inside the package: {marker line: block text}."""
    markers = ("# in SECTIONS of ", "# at the end of ")
    return {
        block.partition("\n")[0]: block.partition("\n")[2]
        for block in doc_blocks("python")
        if block.startswith(markers)
    }


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
        if block.startswith(("# file: ", "# in SECTIONS", "# at the end of")):
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


def tracked_copy(destination: Path) -> Path:
    """The repository's tracked files as they are in the working tree, committed in a fresh
    git repository at ``destination`` (so that `git status` there shows what changed)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run([*git, *command], cwd=destination, check=True, capture_output=True)
    return destination


def add_the_docs_method(copy: Path) -> None:
    """The changes docs/extending.md names for a method inside the package: its settings
    section and its `SECTIONS` entry in settings/methods.py, its folder's `__init__.py`."""
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
    blocks = package_blocks()
    entry = blocks["# in SECTIONS of src/symbnn/settings/methods.py"].rstrip()
    settings_file = copy / "src" / "symbnn" / "settings" / "methods.py"
    opening = "\nSECTIONS: dict[str, type[Section]] = {\n"
    head, tail = settings_file.read_text().split(opening)
    entries, rest = tail.split("\n}\n", 1)
    settings_file.write_text(f"{head}\n{settings_text}\n{opening}{entries}\n{entry}\n}}\n{rest}")
    folder = copy / "src" / "symbnn" / "methods" / "last_layer"
    folder.mkdir()
    end = blocks["# at the end of src/symbnn/methods/last_layer/__init__.py"]
    (folder / "__init__.py").write_text(f"{module_text.rstrip()}\n\n\n{end}")


def test_the_docs_method_added_inside_the_package(tmp_path):
    """The changes docs/extending.md names, made in a copy of the whole repository: `make
    docs` there changes only the files the docs name, the method is registered, and
    tests/settings and tests/methods pass on the copy (the tests that loop over the
    registered methods run it: its contract, its samples' store, its settings)."""
    copy = tracked_copy(tmp_path / "repo")
    add_the_docs_method(copy)
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    make = ["make", "--no-print-directory", "docs", f"BIN={Path(sys.executable).parent}"]
    result = subprocess.run([*make, "STAMP="], cwd=copy, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    changed = sorted(line[3:] for line in status.splitlines() if "__pycache__" not in line)
    assert changed == [
        "docs/configuration.md",
        "src/symbnn/methods/last_layer/__init__.py",
        "src/symbnn/settings/methods.py",
    ], status
    page = (copy / "docs" / "configuration.md").read_text()
    assert "| `last_layer` | LastLayerGaussianSettings \\| none |" in page
    script = textwrap.dedent(
        """
        from symbnn.methods import registry
        from symbnn.settings import Methods

        assert registry.METHOD_NAMES[-1] == "last_layer", registry.METHOD_NAMES
        described = registry.descriptor("last_layer")
        assert described.implementation == "symbnn.methods.last_layer:LastLayerGaussian"
        assert registry.is_shipped(described) and described.label == "Last-layer Gaussian"
        methods = Methods.parse(
            {"n_samples": 4, "modes": 2, "pool": 4, "last_layer": {"scale": 0.05}}, "m"
        )
        assert registry.configured_methods(methods) == ["last_layer"]
        assert registry.sample_settings("last_layer", methods) == {"scale": 0.05}
        print("in-package method ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=copy
    )
    assert result.returncode == 0 and "in-package method ok" in result.stdout, result.stderr
    pytest_in_copy = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    listed = subprocess.run(
        [*pytest_in_copy, "--collect-only", "tests/methods"],
        capture_output=True,
        text=True,
        env=env,
        cwd=copy,
    ).stdout
    assert "[last_layer]" in listed, listed[-3000:]  # the registry's loops include it
    result = subprocess.run(
        [*pytest_in_copy, "-x", "tests/settings", "tests/methods"],
        capture_output=True,
        text=True,
        env=env,
        cwd=copy,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]


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
        load_checked_config(path)
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

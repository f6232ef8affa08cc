"""The settings layer: the shipped config parses, every bad value is named by its key (and the
file's line), the generated JSON schema agrees with the parser, and each default lives in
exactly one place."""

import copy
import dataclasses
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from symbnn import settings as S
from symbnn.settings import ConfigError, config_from_mapping, load_config
from symbnn.settings.base import Section
from symbnn.settings.schema import config_schema

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def raw():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_shipped_config_parses_with_the_paper_settings(raw):
    config = config_from_mapping(raw, "config.yaml")
    assert config.run == ("default",)
    for name in ("default", "mnist-optunet", "cifar100-resnet18", "tinyimagenet-resnet18"):
        assert name in config.experiments
    default = config.experiments["default"]
    assert default.model.to_dict() == {
        "name": "optunet",
        "conv1_channels": 4,
        "conv2_channels": 12,
        "hidden": 10,
    }
    assert default.methods.swag.scale == 0.1 and default.methods.sghmc == S.Sghmc()
    # a method absent from the section is off; `{}` turns it on with every default
    assert S.Methods.parse({"n_samples": 4, "modes": 2, "pool": 4}, "m").swag is None


# Each case: an edit of the shipped config and the start of the message it must give.
BAD = [
    (
        lambda c: c["experiments"]["default"]["recipe"].update(lrr=0.1),
        "experiments.default.recipe.lrr: unknown key (did you mean 'lr'?)",
    ),
    (
        lambda c: c["experiments"]["default"]["recipe"].update(lr=-1),
        "experiments.default.recipe.lr: must be > 0, got -1",
    ),
    (
        lambda c: c["experiments"]["default"]["posterior"].update(n_samples=0),
        "experiments.default.posterior.n_samples: must be >= 2, got 0",
    ),
    (
        lambda c: c["experiments"]["default"]["model"].update(name="vgg"),
        "experiments.default.model.name: must be one of optunet, mlp, resnet18",
    ),
    (
        lambda c: c["experiments"]["default"].update(model={"name": "mlp"}),
        "experiments.default.model.widths: missing",
    ),
    (
        lambda c: c["experiments"]["default"]["data"].update(train="imagenet"),
        "experiments.default.data.train: must be one of",
    ),
    (lambda c: c.update(device="tpu"), "device: expected auto, cpu, cuda or cuda:N"),
    (lambda c: c.update(colour="blue"), "colour: unknown key"),
    (lambda c: c.update(run=["nope"]), "run[0]: experiment 'nope' is not defined"),
    (
        lambda c: c["experiments"]["default"]["posterior"].update(shard_size=1000),
        "experiments.default.posterior.shard_size: 1000 exceeds",
    ),
    (
        lambda c: c["experiments"]["default"]["recipe"].update(milestones=[6, 4]),
        "experiments.default.recipe.milestones: must be strictly increasing",
    ),
    (
        lambda c: c["experiments"]["default"]["methods"].update(modes=50),
        "experiments.default.methods.modes: 50 exceeds pool",
    ),
    (
        lambda c: c["experiments"]["default"]["methods"].update(first_seed=10),
        "experiments.default.methods.first_seed: the pool's seeds 10..57 overlap",
    ),
    (
        lambda c: c["experiments"]["default"]["methods"]["swag"].update(scale=0),
        "experiments.default.methods.swag.scale: must be > 0",
    ),
    (
        lambda c: c["experiments"]["default"]["methods"]["laplace"].update(prior_precision="big"),
        "experiments.default.methods.laplace.prior_precision: expected",
    ),
    (
        lambda c: c["experiments"]["default"]["methods"].update(mcmc={}),
        "experiments.default.methods.mcmc: unknown key",
    ),
    (
        lambda c: c["experiments"]["default"]["mmd"].update(de_members=63),
        "experiments.default.mmd.de_members: 63 must leave at least 2",
    ),
    (
        lambda c: c["analyses"]["toy"].update(n_networks="many"),
        "analyses.toy.n_networks: expected an integer",
    ),
    (lambda c: c["analyses"].update(marginals=True), "analyses.marginals: expected"),
    (
        lambda c: c["experiments"].update(analyses=c["experiments"]["default"]),
        "experiments.analyses: the name is taken",
    ),
]


@pytest.mark.parametrize("edit, message", BAD)
def test_bad_settings_are_named_by_their_key(raw, edit, message):
    bad = copy.deepcopy(raw)
    edit(bad)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_mapping(bad, "config")


@pytest.mark.parametrize("edit, message", BAD)
def test_the_generated_schema_rejects_what_the_parser_rejects(raw, edit, message):
    """The JSON schema comes from the same sections; it cannot express cross-key rules, which
    the parser alone checks (those cases are allowed to pass the schema)."""
    validator = jsonschema.Draft202012Validator(config_schema())
    assert not list(validator.iter_errors(raw))  # the shipped config passes both
    bad = copy.deepcopy(raw)
    edit(bad)
    cross_key = any(
        word in message
        for word in (
            "exceeds",
            "overlap",
            "not defined",
            "must leave",
            "is taken",
            "strictly increasing",
        )
    )
    assert cross_key or list(validator.iter_errors(bad)), message


def test_errors_name_the_file_and_line(tmp_path, raw):
    raw["experiments"]["default"]["recipe"]["lr"] = -1
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "lr: -1" in text)
    with pytest.raises(
        ConfigError, match=rf"{re.escape(str(path))}, line {line}: experiments\.default\.recipe\.lr"
    ):
        load_config(path)
    path.write_text("run: [default\nexperiments: {}\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}, line \d+: not valid YAML"):
        load_config(path)


def test_snakemake_text_booleans_are_understood(raw):
    # `snakemake --config download=true` passes the text "true"
    raw["download"] = "true"
    assert config_from_mapping(raw).download is True
    raw["download"] = "yes please"
    with pytest.raises(ConfigError, match="download: expected true or false"):
        config_from_mapping(raw)


def test_key_order_does_not_change_the_settings(raw):
    shuffled = copy.deepcopy(raw)
    shuffled["experiments"]["default"]["recipe"] = dict(
        reversed(list(raw["experiments"]["default"]["recipe"].items()))
    )
    shuffled["experiments"]["default"]["mmd"] = dict(
        reversed(list(raw["experiments"]["default"]["mmd"].items()))
    )
    a, b = config_from_mapping(raw), config_from_mapping(shuffled)
    assert a == b and repr(a.to_dict()) == repr(b.to_dict())


def test_sections_round_trip_and_check_direct_construction():
    swag = S.Swag(scale=0.5)
    assert S.Swag.parse(swag.to_dict(), "swag") == swag
    with pytest.raises(ConfigError, match=r"Swag\.rank: must be >= 1"):
        S.Swag(rank=0)
    bnn = S.Bnn.parse({"recipe": {"epochs": 3}}, "bnn")
    assert bnn.recipe.weight_decay == 0.0  # the method's own change survives a partial override
    recipe = bnn.recipe.apply(S.Recipe(epochs=9, batch_size=8, lr=0.1, weight_decay=0.1))
    assert (recipe.epochs, recipe.weight_decay, recipe.lr) == (3, 0.0, 0.1)


def _sections(*roots):
    """Every section class reachable from Config (and from ``roots``)."""
    seen, todo = set(), [S.Config, *roots]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for hint in S.base.type_hints(cls).values():
            for arm in _arms(hint):
                if isinstance(arm, type) and issubclass(arm, Section):
                    todo.append(arm)
    return seen


def _arms(hint):
    import typing

    args = typing.get_args(hint)
    return [hint, *(a for arg in args for a in _arms(arg))] if args else [hint]


def test_every_setting_has_a_description_and_a_schema_entry():
    schema = config_schema()
    for cls in _sections():
        defined = schema["$defs"].get(cls.__name__) if cls is not S.Config else schema
        assert defined is not None, cls
        for f in dataclasses.fields(cls):
            assert f.metadata.get("doc"), f"{cls.__name__}.{f.name} has no description"
            if S.base.is_internal(f):  # no config key: filled by the section's own parse
                assert f.name not in defined["properties"], f"{cls.__name__}.{f.name}"
                continue
            assert f.name in defined["properties"], f"{cls.__name__}.{f.name}"
            if f.default is not dataclasses.MISSING:
                assert defined["properties"][f.name]["default"] == S.base.plain(f.default)


def test_library_and_command_line_defaults_are_the_settings_defaults():
    """Functions and flags that take a setting read its default from the settings layer."""
    import inspect

    from symbnn.alignment.matching import weight_matching
    from symbnn.alignment.stores import store_barriers
    from symbnn.cli import build_parser
    from symbnn.symmetry.canonical import canonicalize
    from symbnn.symmetry.minmass import min_mass

    def default(function, name):
        return inspect.signature(function).parameters[name].default

    assert default(canonicalize, "key") == S.SymmetryRemoval().key
    assert default(canonicalize, "scale") == S.SymmetryRemoval().scale
    assert default(min_mass, "solver") == S.SymmetryRemoval().solver
    assert default(weight_matching, "max_sweeps") == S.Alignment().max_sweeps
    assert default(store_barriers, "points") == S.Alignment().points
    assert default(store_barriers, "splits") == S.Alignment().splits
    parser = build_parser()
    args = parser.parse_args(["barrier", "a", "b"])
    assert (args.points, tuple(args.split), args.max_sweeps) == (11, ("train", "test"), 100)
    assert (args.points, tuple(args.split)) == (S.Alignment().points, S.Alignment().splits)
    args = parser.parse_args(["canonicalize", "a", "b"])
    assert (args.scale, args.key) == (S.SymmetryRemoval().scale, S.SymmetryRemoval().key)


# Same name, another quantity: (folder or file, setting name) -> why the literal is not a copy.
UNRELATED = {
    ("aggtest.py", "alpha"): "the module's account of MMDAgg's reference level",
    ("rules", "mem_mb"): "fixed memory of light rules, not compute.mem_mb",
    ("rules", "pool"): "whether a rule builds the pool or the target, not checkpoints.pool",
    # seeds of helpers' own random draws (a test's networks, a path's common noise, a
    # packaged dataset's split), not the seeds of mmd, collapse or methods
    ("interpolation.py", "seed"): "the common-noise draws of a variational path",
    ("symmetrized_vi.py", "seed"): "the evaluation draws of the symmetrised-VI analysis",
    ("testing.py", "seed"): "random networks of the symmetry tests",
    ("packaged.py", "seed"): "the packaged datasets' own split and patch draws",
    ("compare.py", "pvalue"): "HMC comparisons are distances only, whatever mmd.pvalue says",
}


def test_no_default_is_written_twice_in_the_source():
    """A setting's default literal appears in the settings layer only: no library module,
    rule or script spells `<setting>=<its default>` or `"<setting>", <its default>` again."""
    patterns = []
    for cls in _sections(S.MmdTest):
        for f in dataclasses.fields(cls):
            # by identity and type: `0 in (False,)` and `1 in (True,)` are true in Python,
            # which once skipped every default of 0 or 1
            if f.default is dataclasses.MISSING or f.default is None or f.default == "":
                continue
            if isinstance(f.default, Section):
                continue
            value = re.escape(repr(S.base.plain(f.default)).replace("'", '"'))
            assignment = rf"\b{f.name}\b\s*(?::\s*[\w\[\], |.]+)?\s*=\s*{value}\b"
            lookup = rf"\"{f.name}\",\s*{value}\b"
            patterns.append((f.name, re.compile(f"{assignment}|{lookup}")))
    sources = [
        *REPO.glob("src/symbnn/**/*.py"),
        *REPO.glob("rules/*.smk"),
        *REPO.glob("workflow_scripts/*.py"),
        REPO / "Snakefile",
    ]
    # a line is searched only for the fields it names (one regex instead of hundreds a line)
    named = re.compile(r"\b(" + "|".join(sorted({field for field, _ in patterns})) + r")\b")
    found = set()
    for path in sources:
        if "settings" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            fields = set(named.findall(line))
            for field, pattern in patterns:
                if field not in fields:
                    continue
                unrelated = (path.parent.name, field) in UNRELATED or (
                    path.name,
                    field,
                ) in UNRELATED
                if pattern.search(line) and not unrelated:
                    found.add(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "defaults written again outside symbnn.settings:\n" + "\n".join(sorted(found))


def test_shards_partition_the_seeds():
    posterior = S.Posterior(n_samples=10, shard_size=4, first_seed=100)
    ids = posterior.shard_ids()
    assert ids == ["000", "001", "002"]
    assert [s for shard in ids for s in posterior.shard_seeds(shard)] == list(range(100, 110))
    with pytest.raises(ValueError, match="out of range"):
        posterior.shard_seeds("003")


def test_config_command_checks_and_prints_the_schema(capsys, tmp_path):
    from symbnn.cli import main

    assert main(["config", "check", str(REPO / "config.yaml")]) == 0
    shipped = yaml.safe_load((REPO / "config.yaml").read_text())["experiments"]
    assert f"OK ({len(shipped)} experiments, run: default)" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: [x]\nexperiments: {}\n")
    assert main(["config", "check", str(bad)]) == 1
    assert "experiments: define at least one experiment" in capsys.readouterr().err
    assert main(["config", "schema"]) == 0
    assert '"$defs"' in capsys.readouterr().out


def test_the_cluster_analyses_file_is_a_valid_full_size_override():
    """slurm/analyses.yaml, added after config.yaml, gives full-size analyses on MNIST."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    override = yaml.safe_load((REPO / "profiles" / "slurm" / "analyses.yaml").read_text())
    for name, section in override["analyses"].items():
        config["analyses"][name] = {**config["analyses"][name], **section}
    analyses = config_from_mapping(config, "config.yaml + slurm/analyses.yaml").analyses
    small = load_config(REPO / "config.yaml").analyses
    assert analyses.barrier_statistics.dataset == analyses.symmetrised_vi_widths.dataset == "mnist"
    assert analyses.barrier_statistics.pairs > small.barrier_statistics.pairs
    assert max(analyses.symmetrised_vi_widths.widths) > max(small.symmetrised_vi_widths.widths)
    assert len(analyses.symmetrised_vi_widths.seeds) > len(small.symmetrised_vi_widths.seeds)

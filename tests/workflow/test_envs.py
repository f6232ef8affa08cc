"""envs/*.yaml stay in step with pyproject.toml: same packages, same version specifiers, and
complete for what symbnn and the workflow scripts import."""

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[2]
ENV_FILES = sorted((REPO / "envs").glob("*.yaml"))
# Run by the workflow driver on the submit host, never inside a job's environment.
DRIVER_ONLY = {
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "snakemake-logger-plugin-rich",
    "dvc",
    "dvc-s3",
}


def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def project_requirements():
    return {normalized(r.name): r for r in map(Requirement, pyproject()["dependencies"])}


def env_requirements(path):
    """(python version, {name: Requirement}) of a conda environment file's pip section."""
    spec = yaml.safe_load(path.read_text())
    python, pip = None, []
    for entry in spec["dependencies"]:
        if isinstance(entry, dict):
            pip += entry["pip"]
        elif entry.startswith("python"):
            python = entry.split("=", 1)[1]
    assert python is not None, f"{path.name}: no python= entry"
    requirements = {}
    for line in pip:
        assert not line.startswith("-"), (
            f"{path.name}: pip option {line!r} (symbnn comes from the checkout)"
        )
        requirement = Requirement(line)
        assert normalized(requirement.name) not in requirements, (
            f"{path.name}: {requirement.name} listed twice"
        )
        requirements[normalized(requirement.name)] = requirement
    return python, requirements


def test_there_is_an_environment_file():
    assert ENV_FILES, "envs/ holds no *.yaml"


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_environment_matches_pyproject(path):
    python, requirements = env_requirements(path)
    project = project_requirements()
    assert SpecifierSet(pyproject()["requires-python"]).contains(python + ".0"), python
    for name, requirement in requirements.items():
        assert name in project, (
            f"{path.name}: {requirement.name} is not a dependency in pyproject.toml"
        )
        assert requirement.specifier == project[name].specifier, (
            f"{path.name}: {requirement.name}{requirement.specifier} but pyproject.toml has "
            f"{project[name].name}{project[name].specifier}"
        )


def test_the_rule_environment_holds_every_runtime_dependency():
    _, requirements = env_requirements(REPO / "envs" / "symbnn.yaml")
    missing = set(project_requirements()) - DRIVER_ONLY - set(requirements)
    assert not missing, f"envs/symbnn.yaml lacks pyproject.toml dependencies {sorted(missing)}"


def test_every_conda_directive_names_an_existing_environment():
    named = set()
    for rules in sorted((REPO / "rules").glob("*.smk")):
        for match in re.finditer(r'conda:\s*\n\s*"([^"]+)"', rules.read_text()):
            target = (rules.parent / match.group(1)).resolve()
            assert target.is_file(), f"{rules.name}: conda: {match.group(1)} does not exist"
            named.add(target)
    assert named and named <= {p.resolve() for p in ENV_FILES}


def imported_distributions():
    """Distributions (normalized) that the library and the workflow scripts import."""
    by_module = metadata.packages_distributions()
    found = {}
    for source in [
        *(REPO / "src" / "symbnn").rglob("*.py"),
        *(REPO / "workflow_scripts").glob("*.py"),
    ]:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("symbnn", "snakemake", "__future__"):
                    continue
                assert top in by_module, (
                    f"{source.relative_to(REPO)} imports {top!r}, which no installed package provides"
                )
                for dist in by_module[top]:
                    found.setdefault(normalized(dist), source.relative_to(REPO))
    return found


def test_the_environment_covers_every_import():
    """An import of a package that is neither declared nor pulled in by a declared one fails
    in a fresh environment; this catches it here instead."""
    _, requirements = env_requirements(REPO / "envs" / "symbnn.yaml")
    declared = set(requirements)
    # what the declared packages install along with them
    closure, todo = set(), list(declared)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            needs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [normalized(Requirement(r).name) for r in needs if "extra ==" not in r]
    undeclared = {
        dist: where for dist, where in imported_distributions().items() if dist not in closure
    }
    assert not undeclared, (
        f"imported but not in envs/symbnn.yaml (nor pulled in by it): {undeclared}"
    )


def test_the_virtualenv_satisfies_the_environment():
    """The versions the test suite runs with are ones the environment file allows."""
    _, requirements = env_requirements(REPO / "envs" / "symbnn.yaml")
    for requirement in requirements.values():
        version = metadata.version(requirement.name)
        assert requirement.specifier.contains(version, prereleases=True), (
            requirement.name,
            version,
        )


def test_jobs_import_symbnn_from_the_checkout(monkeypatch, tmp_path):
    """What a conda job sees: a Python without symbnn installed finds it through PYTHONPATH."""
    import subprocess

    from symbnn.jobenv import put_sources_on_pythonpath

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    put_sources_on_pythonpath(REPO)
    path = put_sources_on_pythonpath(
        REPO
    )  # a second call (the job's own Snakefile parse) adds nothing
    assert path.split(":") == [str(REPO / "src"), "/elsewhere"]
    # -S: no site-packages, so the virtualenv's editable install cannot be what is found
    found = subprocess.run(
        [sys.executable, "-S", "-c", "import symbnn.jobenv; print(symbnn.jobenv.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    assert Path(found) == REPO / "src" / "symbnn" / "jobenv.py"

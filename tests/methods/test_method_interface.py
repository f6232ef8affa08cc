"""A method class must define the interface's two steps, `fit` and `sample`: `describe` names
the one missing, and tells a class written when the second step was called `draw` so."""

import dataclasses
import importlib
import inspect
import subprocess
import sys

import pytest

from symbnn.methods import registry
from symbnn.methods.interface import STEPS, BatchedMethod, Method, describe
from symbnn.settings import Section
from symbnn.settings.methods import SECTIONS


@dataclasses.dataclass(frozen=True)
class NoSettings(Section):
    DOC = "nothing to set"


class FitOnly(Method):
    settings = NoSettings

    def fit(self, problem, mode, settings, seed, count):
        return {}


class OldDraw(FitOnly):
    def draw(self, problem, fitted, count, settings, seed):
        return {}


class Both(FitOnly):
    def sample(self, problem, fitted, count, settings, seed):
        return {}


@pytest.mark.parametrize(
    "cls, message",
    [
        (FitOnly, r"'pkg:FitOnly' does not define sample$"),
        (OldDraw, r"'pkg:OldDraw' does not define sample \(its draw is now called sample\)"),
    ],
)
def test_a_class_without_sample_is_refused_naming_it(cls, message):
    with pytest.raises(ValueError, match=message):
        describe("mine", f"pkg:{cls.__name__}", cls)


def test_a_class_with_fit_and_sample_is_described():
    described = describe("mine", "pkg:Both", Both)
    assert (described.name, described.label, described.settings) == ("mine", "mine", NoSettings)


class BatchedWithoutFitModes(BatchedMethod):
    settings = NoSettings

    def sample(self, problem, fitted, count, settings, seed):
        return {}


def test_a_batched_class_without_fit_modes_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"'pkg:B' does not define fit_modes$"):
        describe("b", "pkg:B", BatchedWithoutFitModes)


@pytest.mark.parametrize("name", registry.METHOD_NAMES)
def test_a_shipped_method_is_its_folders_class_described_like_a_users(name):
    """One registration path: a shipped method is the class `METHOD` of its folder
    symbnn.methods.<key>, a Method whose class attributes `describe` reads as it reads a
    user's class; its settings are the section `Methods` reads for its key, and its steps take
    the interface's arguments, annotated (where they are) with the interface's types."""
    module = importlib.import_module(f"symbnn.methods.{name}")
    cls = module.METHOD
    assert issubclass(cls, Method) and not inspect.isabstract(cls)
    described = registry.descriptor(name)
    assert described == describe(name, f"symbnn.methods.{name}:{cls.__name__}", cls)
    assert registry.is_shipped(described) and described.settings is SECTIONS[name]
    # the settings layer checks the pool of a method whose samples are pool members
    assert described.members == hasattr(described.settings, "stride_in")
    assert isinstance(registry.implementation(described), Method)
    for step, arguments in STEPS.items():
        mine = inspect.signature(getattr(cls, step))
        interface = inspect.signature(getattr(Method, step))
        assert tuple(mine.parameters)[1:] == arguments
        for argument in arguments:
            expected = interface.parameters[argument].annotation
            if argument == "settings" and step in vars(cls):  # its own step: its own section
                expected = described.settings.__name__
            annotation = mine.parameters[argument].annotation
            assert annotation in (expected, inspect.Parameter.empty), (step, argument)


def test_planning_the_shipped_methods_imports_no_torch():
    """Each folder's class is read without its `fit` module: no torch when planning."""
    script = (
        "import sys\n"
        "from symbnn.methods import registry\n"
        "described = [registry.descriptor(name) for name in registry.METHOD_NAMES]\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'fit' in m)\n"
        "print(len(described))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(len(registry.METHOD_NAMES))

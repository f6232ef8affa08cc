"""A method class must define the interface's two steps, `fit` and `sample`: `describe` names
the one missing, and tells a class written when the second step was called `draw` so."""

import dataclasses

import pytest

from symbnn.methods.interface import Method, describe
from symbnn.settings import Section


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

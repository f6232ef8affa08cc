"""A method's steps as the workflow runs them (`symbnn.methods.checked`): a method of the user's
own that raises is named with its class, the step and the mode, its traceback kept as the
cause; every method's samples are checked (the model's tensors, shapes and dtypes, the count
asked for, finite) before anything is written; `describe` reads the steps' signatures without
calling them."""

import dataclasses

import numpy as np
import pytest
import torch

import symbnn.methods.sampling as sampling
from symbnn.data.core import ImageData
from symbnn.methods import registry
from symbnn.methods.base import Problem
from symbnn.methods.interface import BatchedMethod, Descriptor, Draw, Method, describe
from symbnn.methods.sampling import BlockFits, fit_block, sample_variant
from symbnn.settings import Recipe, Section
from symbnn.store import write_store
from symbnn.user_code import UserCodeError


@dataclasses.dataclass(frozen=True)
class NoSettings(Section):
    DOC = "nothing to set"


def problem():
    images = torch.randint(0, 256, (8, 1, 28, 28), dtype=torch.uint8)
    data = ImageData(images, torch.arange(8) % 10, 10, (0.5,), (0.25,), "random")
    return Problem({"name": "optunet"}, Recipe(epochs=1, batch_size=4, lr=0.1), data)


def copies(state, count):
    return {n: t.unsqueeze(0).repeat(count, *[1] * t.ndim) for n, t in state.items()}


class Copies(Method):
    """Every sample is the mode: a well-behaved method to break one piece at a time."""

    settings = NoSettings

    def fit(self, problem, mode, settings, seed, count):
        return {"state": mode.state}

    def sample(self, problem, fitted, count, settings, seed):
        return copies(fitted["state"], count)


class Raising(Copies):
    def fit(self, problem, mode, settings, seed, count):
        raise RuntimeError(f"no fit at seed {seed}")


class RaisingInBatch(BatchedMethod):
    settings = NoSettings

    def fit_modes(self, problem, modes, settings, seeds, counts):
        raise KeyError("lr")

    def sample(self, problem, fitted, count, settings, seed):
        return {}


class NaNs(Copies):
    def sample(self, problem, fitted, count, settings, seed):
        return {n: torch.full_like(t, float("nan")) for n, t in super().sample(
            problem, fitted, count, settings, seed
        ).items()}  # fmt: skip


class TooMany(Copies):
    def sample(self, problem, fitted, count, settings, seed):
        return super().sample(problem, fitted, count + 2, settings, seed)


class Missing(Copies):
    def sample(self, problem, fitted, count, settings, seed):
        drawn = super().sample(problem, fitted, count, settings, seed)
        drawn.pop("fc2.bias")
        return drawn


class Doubles(Copies):
    def sample(self, problem, fitted, count, settings, seed):
        return {
            n: t.double() for n, t in super().sample(problem, fitted, count, settings, seed).items()
        }


@pytest.fixture
def pool(tmp_path):
    state = copies(problem().build().state_dict(), 2)
    write_store(tmp_path / "pool.zarr", state, {"seed": np.array([100, 101])}, {})
    return tmp_path / "pool.zarr"


PLAN = (Draw(0, 2, 0), Draw(1, 3, 1))


def run(monkeypatch, cls, pool, plan=PLAN):
    """Fit ``cls`` (a user's method, 'mine' by import path usermods:NAME) at modes 0 and 1 of
    the pool and draw ``plan`` from the fits."""
    monkeypatch.setattr(sampling, "implementation", lambda described: cls())
    described = Descriptor(
        "mine", "Mine", NoSettings, f"usermods:{cls.__name__}", batched_fit=cls.batched_fit
    )
    modes = [[0, 1]] if cls.batched_fit else [[0], [1]]
    blocks = [
        fit_block(problem(), described, NoSettings(), m, 5, None, pool, [0, 1]) for m in modes
    ]
    return sample_variant(problem(), described, NoSettings(), blocks, list(plan), 5, multi=False)


def test_a_well_behaved_method_passes_the_checks(monkeypatch, pool):
    state, info = run(monkeypatch, Copies, pool)
    assert state["fc2.weight"].shape[0] == 5 and list(info["mode_index"]) == [0, 0, 1, 1, 1]


def test_a_users_fit_that_raises_names_the_method_step_and_mode(monkeypatch, pool):
    with pytest.raises(UserCodeError) as error:
        run(monkeypatch, Raising, pool)
    assert str(error.value) == (
        "method 'mine' (usermods:Raising) failed in fit on mode 0: RuntimeError: no fit at seed 5"
    )
    assert isinstance(error.value.__cause__, RuntimeError)  # the user's traceback, kept
    with pytest.raises(UserCodeError, match=r"\(usermods:RaisingInBatch\) failed in fit on "
                       r"modes \[0, 1\]: KeyError: 'lr'"):  # fmt: skip
        run(monkeypatch, RaisingInBatch, pool)


@pytest.mark.parametrize(
    "cls, message",
    [
        (NaNs, "sample on mode 0 returned 64 of 64 values of conv1.weight that are NaN or"),
        (TooMany, "returned conv1.weight of shape (4, 2, 1, 4, 4) and dtype torch.float32; 2 "),
        (Missing, "returned other tensors than the model's state dict (missing: fc2.bias; "),
        (Doubles, "and dtype torch.float64; 2 samples of the model are (2, 2, 1, 4, 4), "),
    ],
)
def test_samples_are_checked_before_they_are_written(monkeypatch, pool, tmp_path, cls, message):
    with pytest.raises(ValueError) as error:
        run(monkeypatch, cls, pool)
    text = str(error.value)
    assert text.startswith(f"method 'mine' (usermods:{cls.__name__}): ") and message in text, text


def test_a_shipped_method_is_named_without_a_path_and_its_errors_pass_as_they_are(pool):
    described = registry.descriptor("de")
    with pytest.raises(ValueError, match=r"^method 'de': sample on mode 0 returned"):
        sampling.checked.check_samples(described, {}, 1, {"w": ((2,), torch.float32)}, 0)
    with pytest.raises(ZeroDivisionError), sampling.checked.step(described, "fit", [0]):
        raise ZeroDivisionError  # a bug of symbnn's keeps its own type and traceback


def test_samples_of_a_method_drawing_at_fit_are_checked_before_the_skip(monkeypatch, pool):
    """A method whose samples come out of its fit is asked for skip + count samples."""

    class AtFit(Copies):
        samples_at_fit = True

    monkeypatch.setattr(sampling, "implementation", lambda described: AtFit())
    described = Descriptor("mine", "Mine", NoSettings, "usermods:AtFit", samples_at_fit=True)
    blocks = [BlockFits([0], [100], [{"state": problem().build().state_dict()}])]
    state, _ = sample_variant(
        problem(), described, NoSettings(), blocks, [Draw(0, 2, 0, 1)], 5, False
    )
    assert state["fc1.weight"].shape[0] == 2


class WrongFit(Copies):
    def fit(self, problem, mode, settings, seed):
        return {}


class StaticSample(Copies):
    @staticmethod
    def sample(problem, fitted, count, settings, seed):
        return {}


class KeywordOnly(Copies):
    def sample(self, problem, fitted, *, count, settings, seed):
        return {}


@pytest.mark.parametrize(
    "cls, message",
    [
        (WrongFit, "fit cannot be called as fit(self, problem, mode, settings, seed, count)"),
        (StaticSample, "sample must be a method sample(self, problem, fitted, count, settings"),
        (KeywordOnly, "sample cannot be called as sample(self, problem, fitted, count, settings"),
    ],
)
def test_describe_reads_the_steps_signatures(cls, message):
    with pytest.raises(ValueError) as error:
        describe("mine", f"usermods:{cls.__name__}", cls)
    assert f"method 'usermods:{cls.__name__}': {message}" in str(error.value)

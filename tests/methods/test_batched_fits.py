"""Batched method fits (`Method.fit_modes`): a block of modes fitted in one batched run gives
each mode what the loop trainer's reference gives it alone (same seeds, float32 summation
order aside), what the mode's fit gets in any block (bit for bit), retries only the modes that
miss the convergence threshold, and falls back to the loop where the batched trainer has no
hand-written pass. The workflow's blocks (`mode_blocks`, `methods.fit_block`) follow."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import assert_same_tree

from symbnn.methods import registry
from symbnn.methods.base import Mode, Problem, fits_in_batch, retry_seed
from symbnn.methods.bnn import fit as bnn
from symbnn.methods.dropout import fit as dropout
from symbnn.methods.sghmc import fit as sghmc
from symbnn.methods.swag import fit as swag
from symbnn.settings import load_config
from symbnn.settings.training import Resnet18Model
from symbnn.train.seeding import build_seeded_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).resolve().parents[2]
SEEDS = [11, 12, 13]
SWAG_QUICK = {"epochs": 2, "snapshots": 4, "rank": 3}  # 8 SGD steps of the tiny recipe


@pytest.fixture(scope="module")
def modes():
    """Three modes: seeds 3, 4, 5's initial OptuNet weights."""
    return [
        Mode(
            s,
            {
                k: v.clone()
                for k, v in build_seeded_model({"name": "optunet"}, s).state_dict().items()
            },
        )
        for s in (3, 4, 5)
    ]


def section(method: str, options: dict):
    return registry.descriptor(method).settings.parse(options, method)


def counts_of(method: str, n: int, count: int = 3) -> list[int | None]:
    """What the fit job asks for: sample counts only from the methods that draw while fitting."""
    return [count] * n if registry.descriptor(method).samples_at_fit else [None] * n


def loop_reference(method: str, problem: Problem, mode: Mode, settings, seed: int, count):
    """The loop trainer's fit of one mode, in the layout `fit` returns (as far as compared)."""
    if method == "dropout":
        model = dropout.train_with_dropout(problem, mode.seed, settings.rate, settings.layers)
        return {"state": model.state_dict()}
    if method == "bnn":
        q = bnn.train_bnn(problem, mode.seed, settings)
        return {"net": q.net.state_dict(), "mu": list(q.mu), "rho": list(q.rho)}
    if method == "sghmc":
        return {"samples": sghmc.chain(problem, mode, count, settings, seed)}
    model, moments = swag.fit_swag(problem, mode, settings, seed)
    return {"state": model.state_dict(), "moments": moments.to_dict()}


def assert_close_tree(got, want, atol: float, where: str = "") -> None:
    """`got` holds `want`'s entries (and maybe more) within `atol`."""
    if isinstance(want, dict):
        for key, value in want.items():
            assert_close_tree(got[key], value, atol, f"{where}/{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            assert_close_tree(a, b, atol, f"{where}[{i}]")
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want.detach(), rtol=0, atol=atol, msg=where)
    else:
        assert got == want, where


# Tolerances: a batched step sums each model's products in another order than the loop's
# autograd, so the weights differ by float32 roundings (~1e-7 a step) that a few steps carry
# along. Scale-adapted SGHMC divides each gradient element by its running RMS: an element
# whose gradient is small moves by about lr^2 whatever its size, so rounding differences of
# 1e-7 (relative) already move its samples by ~1e-5 within a few steps (measured by
# perturbing the loop's own gradients by 1e-7), and the batched chain stays within 2e-3 of
# the loop's (samples of size ~0.6) over the tiny schedule. Its momentum variant has no such
# division and agrees to 1e-6.
CASES = [
    ("dropout", {}, 1e-5),
    ("bnn", {}, 1e-5),
    ("sghmc", {"variant": "momentum"}, 1e-6),
    ("sghmc", {}, 2e-3),
    ("swag", SWAG_QUICK, 1e-5),
]


@pytest.mark.parametrize("method, options, atol", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_block_fits_each_mode_as_the_loop_does_alone(
    tiny_problem, modes, monkeypatch, method, options, atol
):
    assert fits_in_batch(tiny_problem)
    assert registry.descriptor(method).batched_fit
    settings = section(method, options)
    impl = registry.implementation(registry.descriptor(method))
    counts = counts_of(method, len(modes))
    references = [
        loop_reference(method, tiny_problem, m, settings, s, c)
        for m, s, c in zip(modes, SEEDS, counts)
    ]
    # the block must not take the loop trainer
    for module, name in [
        (dropout, "train_with_dropout"),
        (bnn, "train_bnn"),
        (sghmc, "chain"),
        (swag, "fit_swag"),
    ]:
        monkeypatch.setattr(module, name, _forbidden(name))
    block = impl.fit_modes(tiny_problem, modes, settings, SEEDS, counts)
    assert len(block) == len(modes)
    for k, (got, want) in enumerate(zip(block, references)):
        assert_close_tree(got, want, atol, f"{method} mode {k}")
    # a mode's fit is the same in any block: alone (`fit`) and in a block of two
    alone = impl.fit(tiny_problem, modes[1], settings, SEEDS[1], counts[1])
    assert_same_tree(alone, block[1])
    pair = impl.fit_modes(tiny_problem, modes[1:], settings, SEEDS[1:], counts[1:])
    for got, want in zip(pair, block[1:]):
        assert_same_tree(got, want)


def _forbidden(name: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{name} (the loop trainer) ran in a batched fit")

    return refuse


def test_sghmc_chains_of_different_lengths_in_one_block(tiny_problem, modes):
    """Each chain stops sampling at its own count; the longer chain's first samples are the
    ones a shorter request gets."""
    settings = section("sghmc", {"variant": "momentum"})
    impl = registry.implementation(registry.descriptor("sghmc"))
    block = impl.fit_modes(tiny_problem, modes[:2], settings, SEEDS[:2], [1, 3])
    assert [len(f["samples"]["fc1.weight"]) for f in block] == [1, 3]
    longer = impl.fit(tiny_problem, modes[0], settings, SEEDS[0], 3)
    assert_same_tree(block[0]["samples"], {n: t[:1] for n, t in longer["samples"].items()})


# ---------------------------------------------------------------- retries


def checked(problem: Problem, retries: int) -> Problem:
    """`problem` with test data, a convergence threshold of 0.5 and `retries` retries."""
    test = problem.train.limited(32)
    return Problem(problem.model_spec, problem.recipe, problem.train, "cpu", test, 0.5, retries)


def test_a_mode_missing_the_threshold_retrains_alone_from_its_next_seed(
    tiny_problem, modes, monkeypatch
):
    problem = checked(tiny_problem, retries=2)
    settings = section("dropout", {})
    trained_seeds = []
    batched = dropout.train_with_dropout_batched

    def recording(problem, seeds, *args, **kwargs):
        trained_seeds.append(list(seeds))
        return batched(problem, seeds, *args, **kwargs)

    # the first round's middle mode misses the threshold, its retry passes
    scores = iter([0.9, 0.1, 0.8, 0.7])
    monkeypatch.setattr(dropout, "train_with_dropout_batched", recording)
    monkeypatch.setattr(dropout, "accuracy", lambda *args: next(scores))
    fits = registry.implementation(registry.descriptor("dropout")).fit_modes(
        problem, modes, settings, SEEDS, [None] * 3
    )

    retry = retry_seed(modes[1].seed, 1)
    assert trained_seeds == [[m.seed for m in modes], [retry]]
    assert [f["train_seed"] for f in fits] == [modes[0].seed, retry, modes[2].seed]
    assert [f["attempts"] for f in fits] == [[0.9], [0.1, 0.7], [0.8]]
    assert {f["threshold"] for f in fits} == {0.5}
    assert [f["test_accuracy"] for f in fits] == [0.9, 0.7, 0.8]
    # the retried mode holds its retry seed's network, the others their first one
    for fit, seed in zip(fits, [modes[0].seed, retry, modes[2].seed]):
        want = dropout.train_with_dropout(
            problem, seed, settings.rate, settings.layers
        ).state_dict()
        assert_close_tree(fit["state"], want, 1e-5)


def test_the_modes_that_never_converge_are_named(tiny_problem, modes, monkeypatch):
    problem = checked(tiny_problem, retries=1)
    # modes 0 and 2 miss twice; mode 1 passes at once
    scores = iter([0.1, 0.9, 0.2, 0.3, 0.4])
    monkeypatch.setattr(dropout, "accuracy", lambda *args: next(scores))
    with pytest.raises(RuntimeError, match=r"mode seed 3 \(and from 1 more mode seeds\)") as info:
        registry.implementation(registry.descriptor("dropout")).fit_modes(
            problem, modes, section("dropout", {}), SEEDS, [None] * 3
        )
    assert "in 2 attempts" in str(info.value) and "0.100" in str(info.value)


# ---------------------------------------------------------------- fallback


def test_without_a_hand_written_pass_each_mode_takes_the_loop(tiny_problem, modes, monkeypatch):
    """Augmentation (or a model such as ResNet) has no hand-written stacked pass: fit_modes
    fits mode after mode with the loop trainer, each as it does alone."""
    augmented = Problem(
        tiny_problem.model_spec, tiny_problem.recipe.replace(augment="crop"), tiny_problem.train
    )
    assert not fits_in_batch(augmented)
    settings = section("dropout", {})
    monkeypatch.setattr(dropout, "train_with_dropout_batched", _forbidden("the batched run"))
    fits = registry.implementation(registry.descriptor("dropout")).fit_modes(
        augmented, modes[:2], settings, SEEDS[:2], [None, None]
    )
    for fit, mode in zip(fits, modes[:2]):
        want = dropout.train_with_dropout(augmented, mode.seed, settings.rate, settings.layers)
        assert_same_tree(fit["state"], want.state_dict())


def test_resnet_has_no_hand_written_pass(tiny_problem):
    resnet = Problem(
        {"name": "resnet18", "num_classes": 10, "in_channels": 1}, *_rest(tiny_problem)
    )
    assert not fits_in_batch(resnet)
    assert fits_in_batch(Problem({"name": "mlp", "widths": [64, 8, 10]}, *_rest(tiny_problem)))


def _rest(problem: Problem):
    return problem.recipe, problem.train


# ---------------------------------------------------------------- the workflow's blocks


def default_experiment():
    config = load_config(REPO / "config.yaml")
    return next(iter(config.experiments.values()))


def test_mode_blocks_one_job_per_batched_method_split_by_fit_block():
    experiment = default_experiment()
    methods = experiment.methods
    assert registry.batched_fits(experiment)
    n = len(registry.fit_counts("dropout", methods))
    assert n > 1
    everything = list(range(n))
    for method in ("dropout", "bnn", "sghmc", "swag"):
        assert registry.mode_blocks(method, methods, batched=True) == [everything]
        assert registry.mode_blocks(method, methods, batched=False) == [[k] for k in everything]
        for size in (1, 3, n, n + 5):
            blocks = registry.mode_blocks(method, methods.replace(fit_block=size), batched=True)
            assert [k for b in blocks for k in b] == everything
            assert all(len(b) == min(size, n) for b in blocks[:-1])
            assert 1 <= len(blocks[-1]) <= size
            assert len(blocks) == -(-n // size)
    # Laplace fits one mode a job; Deep Ensembles copy all members in one
    assert registry.mode_blocks("laplace", methods, batched=True) == [[k] for k in everything]
    assert len(registry.mode_blocks("de", methods, batched=True)) == 1


def test_batched_fits_follow_the_model_and_the_augmentation():
    experiment = default_experiment()
    assert registry.batched_fits(experiment)
    augmented = experiment.replace(recipe=experiment.recipe.replace(augment="crop"))
    assert not registry.batched_fits(augmented)
    resnet = experiment.replace(model=Resnet18Model.parse({"name": "resnet18"}, "model"))
    assert not registry.batched_fits(resnet)

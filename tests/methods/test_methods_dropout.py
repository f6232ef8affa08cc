"""MC Dropout sampler: folding a mask into the weights reproduces the dropout network, mask
statistics follow Bernoulli(1 - rate), the sample mean is the trained network, and the
sampler honours the method contract (keys, shapes, count, determinism, validation)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import assert_sample_contract, sample_with

from symbnn.methods.base import Mode
from symbnn.methods.dropout import fit as dropout
from symbnn.models import build_model
from symbnn.train.batched import train_batched
from symbnn.train.seeding import build_seeded_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPTUNET = {"name": "optunet"}
MLP = {"name": "mlp", "widths": [12, 9, 7, 5]}


def masked_forward(model, targets, masks, rate, x):
    """The dropout network for fixed keep-masks: inputs of each target layer multiplied by
    mask / (1 - rate) in a forward pre-hook (weights untouched)."""

    def make_hook(mask):
        def hook(module, args):
            scale = torch.tensor(1.0 / (1.0 - rate), dtype=args[0].dtype)
            return (args[0] * (mask.to(args[0].dtype) * scale),)

        return hook

    handles = [m.register_forward_pre_hook(make_hook(mask)) for m, mask in zip(targets, masks)]
    try:
        with torch.no_grad():
            return model(x)
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize(
    "spec, layers, shape", [(OPTUNET, 1, (1, 28, 28)), (MLP, 2, (12,)), (MLP, 3, (12,))]
)
def test_folded_masks_equal_hooked_dropout_network(spec, layers, shape):
    # rate 1/2 makes 1/(1 - rate) = 2 a power of two, so the two orders of multiplication
    # round identically: the equality is exact, not approximate
    rate = 0.5
    model = build_seeded_model(spec, 3).double().eval()
    targets = [m for _, m in dropout.dropout_layers(model, layers)]
    samples = dropout.sample_trained(model, 6, rate, layers, seed=11)
    names = [f"{n}.weight" for n, _ in dropout.dropout_layers(model, layers)]
    x = torch.randn(32, *shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    plain = build_model(spec).double().eval()
    for k in range(6):
        # recover the masks from the sample: column j kept iff it is not all zero
        masks = [samples[name][k].ne(0).any(0) for name in names]
        plain.load_state_dict({n: t[k] for n, t in samples.items()})
        with torch.no_grad():
            folded = plain(x)
        assert torch.equal(folded, masked_forward(model, targets, masks, rate, x))
    # and at rate 0.2 the two agree to rounding
    samples = dropout.sample_trained(model, 3, 0.2, layers, seed=12)
    for k in range(3):
        masks = [samples[name][k].ne(0).any(0) for name in names]
        plain.load_state_dict({n: t[k] for n, t in samples.items()})
        with torch.no_grad():
            torch.testing.assert_close(
                plain(x), masked_forward(model, targets, masks, 0.2, x), rtol=1e-12, atol=1e-12
            )


def test_mask_statistics_and_exact_scaling():
    rate, count = 0.2, 3000
    model = build_seeded_model(MLP, 0)
    w = model.layers[-1].weight.detach()  # (5, 7)
    samples = dropout.sample_trained(model, count, rate, 1, seed=5)
    s = samples["layers.2.weight"]
    zero = s.eq(0).all(1)  # (count, 7): a dropped column is entirely zero
    kept = ~zero
    # binomial tolerance: 5 standard deviations on the dropped fraction over count * 7 draws
    n = zero.numel()
    assert abs(zero.float().mean().item() - rate) < 5 * math.sqrt(rate * (1 - rate) / n)
    # kept columns are the trained column times exactly 1/(1 - rate) (float32 constant)
    scale = torch.tensor(1.0 / (1.0 - rate), dtype=w.dtype)
    expected = (w * scale).unsqueeze(0).expand_as(s)
    assert torch.equal(s.transpose(1, 2)[kept], expected.transpose(1, 2)[kept])
    # columns are dropped independently per column (and per sample): each column's rate is right
    per_column = zero.float().mean(0)
    assert (per_column - rate).abs().max() < 5 * math.sqrt(rate * (1 - rate) / count)
    # everything else is unchanged, bias included
    for name, t in model.state_dict().items():
        if name != "layers.2.weight":
            assert torch.equal(samples[name], t.unsqueeze(0).expand_as(samples[name]))


def test_sample_mean_is_the_trained_weights():
    rate, count = 0.2, 4000
    model = build_seeded_model(OPTUNET, 1)
    w = model.fc2.weight.detach()
    samples = dropout.sample_trained(model, count, rate, 1, seed=2)
    mean = samples["fc2.weight"].mean(0)
    # per entry: W * m / (1 - r) has standard deviation |W| sqrt(r / (1 - r))
    std = w.abs() * math.sqrt(rate / (1 - rate)) / math.sqrt(count)
    assert ((mean - w).abs() <= 5 * std + 1e-7).all()


def test_rate_zero_returns_the_trained_network():
    model = build_seeded_model(MLP, 2)
    samples = dropout.sample_trained(model, 4, 0.0, 3, seed=0)
    for name, t in model.state_dict().items():
        assert torch.equal(samples[name], t.unsqueeze(0).expand_as(samples[name]))


def test_first_samples_do_not_depend_on_count():
    model = build_seeded_model(MLP, 0)
    few = dropout.sample_trained(model, 3, 0.3, 2, seed=9)
    many = dropout.sample_trained(model, 10, 0.3, 2, seed=9)
    for name in few:
        assert torch.equal(few[name], many[name][:3])


def test_sample_mode_contract_and_determinism(tiny_problem):
    mode = Mode(seed=0, state={})  # the state is ignored: dropout trains its own network
    a = sample_with("dropout", tiny_problem, mode, 5, {}, seed=3)
    reference = tiny_problem.build().state_dict()
    assert_sample_contract(a, reference, 5)
    b = sample_with("dropout", tiny_problem, mode, 5, {"rate": 0.2}, seed=3)
    assert all(torch.equal(a[n], b[n]) for n in a)
    c = sample_with("dropout", tiny_problem, mode, 5, {}, seed=4)
    assert not torch.equal(a["fc2.weight"], c["fc2.weight"])
    assert torch.equal(a["fc1.weight"], c["fc1.weight"])  # same training, only fc2 is masked
    # a sample loads into the plain model and runs in eval mode
    model = tiny_problem.build({n: t[0] for n, t in a.items()}).eval()
    assert model(tiny_problem.train.normalize(tiny_problem.train.images[:4])).shape == (4, 10)
    # training used dropout: it differs from plain training of the same seed
    from symbnn.train.loop import train_one

    plain, _ = train_one(OPTUNET, tiny_problem.recipe, tiny_problem.train, 0)
    assert not torch.equal(plain.fc1.weight.detach(), a["fc1.weight"][0])
    # hooks were removed after training; with rate 0 the training is plain training (the
    # loop's for the loop, the batched trainer's for the fit, which takes it on an OptuNet)
    trained = dropout.train_with_dropout(tiny_problem, 0, 0.2, 1)
    assert all(not m._forward_pre_hooks for m in trained.modules()) and not trained.training
    unmasked = dropout.train_with_dropout(tiny_problem, 0, 0.0, 1)
    assert all(torch.equal(unmasked.state_dict()[n], t) for n, t in plain.state_dict().items())
    zero = sample_with("dropout", tiny_problem, mode, 1, {"rate": 0.0}, seed=0)
    batched, _, _ = train_batched(OPTUNET, tiny_problem.recipe, tiny_problem.train, [0])
    assert all(torch.equal(zero[n][0], t[0]) for n, t in batched.items())


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"rate": 1.5}, "dropout.rate: must lie in [0, 1), got 1.5"),
        ({"rate": 1.0}, "dropout.rate: must lie in [0, 1)"),
        ({"rate": -0.1}, "dropout.rate: must lie in [0, 1)"),
        ({"rate": "low"}, "dropout.rate"),
        ({"rate": True}, "dropout.rate"),
        ({"rate": float("nan")}, "dropout.rate"),
        ({"layers": 0}, "dropout.layers: must be >= 1, got 0"),
        ({"layers": 1.0}, "dropout.layers"),
        ({"layers": 3}, "dropout.layers must be <= 2"),
        ({"p": 0.2}, "dropout.p"),
    ],
)
def test_bad_settings_raise(tiny_problem, settings, message):
    with pytest.raises(ValueError) as info:
        sample_with("dropout", tiny_problem, Mode(0, {}), 2, settings, seed=0)
    assert message in str(info.value)

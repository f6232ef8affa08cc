import math

import pytest
import torch
from conftest import TINY_ANALYSES

from symbnn.analyses import symmetrized_vi
from symbnn.analyses import symmetrized_vi_widths as svw
from symbnn.methods.bnn.fit import MeanFieldBNN
from symbnn.settings import ConfigError, SymmetrizedViWidths
from symbnn.symmetry import unit_groups
from symbnn.train.seeding import build_seeded_model

TINY = TINY_ANALYSES["symmetrised_vi_widths"]


def _stacked(spec, rho, spread=0.5):
    q = svw.StackedMeanField(spec, [0], rho)
    with torch.no_grad():
        for r in q.rho:
            r.add_(spread * torch.randn(r.shape, generator=torch.Generator().manual_seed(1)))
    return q


def test_overlap_bounds_sandwich_the_enumerated_symmetrized_density(one_torch_thread):
    """log q_sym = log q - log|G| + Omega with Omega between the two bounds, against the
    exact log-sum-exp over all 5! permutations of symmetrized_vi.SymmetrizedMeanField."""
    spec = {"name": "mlp", "widths": [3, 5, 2]}
    q = _stacked(spec, rho=0.5)  # wide factors: the permuted copies overlap
    base = MeanFieldBNN(build_seeded_model(spec, 0), 0.0, 1.0, 1.0, 1.0)
    with torch.no_grad():
        for name, mu, rho in zip(svw.NAMES, q.mu, q.rho):
            base.mu[base.names.index(name)].copy_(mu[0])
            base.rho[base.names.index(name)].copy_(rho[0])
    exact = symmetrized_vi.SymmetrizedMeanField(base, unit_groups(spec), 5040, 1)
    with torch.no_grad():
        w = q.draw(6, torch.Generator().manual_seed(2))
        lower, upper = q.overlap(w)
        single = {k: v[0] for k, v in w.items()}
        omega = exact.log_density(single) - exact.log_q(single) + math.log(120)
    assert (omega > 0.05).all()  # a test with overlap to bound
    assert (lower[0] <= omega + 1e-4).all() and (omega <= upper[0] + 1e-4).all()
    assert (upper[0] - lower[0]).max() > 1e-3  # the bounds are not trivially equal here


def test_overlap_of_separated_and_of_identical_units():
    h, f = 4, 3
    mu = torch.arange(h, dtype=torch.float64)[:, None] * 100 + torch.zeros(h, f)
    sigma = torch.ones(h, f, dtype=torch.float64)
    lower, upper = svw.overlap_bounds(svw.unit_log_densities(mu, mu, sigma))
    assert float(upper) < 1e-12 and float(lower) < 1e-12  # far apart: no overlap
    same = torch.zeros(h, f, dtype=torch.float64)
    lower, upper = svw.overlap_bounds(svw.unit_log_densities(same, same, sigma))
    # identical units: perm = h! exactly; transpositions give 1 + h(h-1)/2, row sums h^h
    assert float(lower) == pytest.approx(math.log(1 + h * (h - 1) / 2))
    assert float(upper) == pytest.approx(h * math.log(h))
    assert float(lower) <= math.lgamma(h + 1) <= float(upper)


def test_closed_form_kl_and_unit_densities():
    spec = {"name": "mlp", "widths": [3, 4, 2]}
    q = _stacked(spec, rho=-1.0)
    with torch.no_grad():
        expected = sum(
            torch.distributions.kl_divergence(
                torch.distributions.Normal(m[0], s[0]), torch.distributions.Normal(0.0, 0.7)
            ).sum()
            for m, s in zip(q.means().values(), q.stds().values())
        )
        assert float(q.kl(0.7)[0]) == pytest.approx(float(expected), rel=1e-5)
        w = q.draw(2, torch.Generator().manual_seed(0))
        L = svw.unit_log_densities(svw.units(w)[0], svw.units(q.means())[0], svw.units(q.stds())[0])
        # the diagonal is each unit's own mean-field log density
        normal = torch.distributions.Normal(svw.units(q.means())[0], svw.units(q.stds())[0])
        own = normal.log_prob(svw.units(w)[0]).sum(-1)
        assert torch.allclose(torch.diagonal(L, dim1=-2, dim2=-1), own.double(), atol=1e-4)


def test_settings_refuse_more_mmd_draws_than_evaluation_draws():
    with pytest.raises(ConfigError):
        SymmetrizedViWidths.parse({"eval_samples": 4, "mmd_samples": 8}, "x")


def test_tiny_comparison_table_and_summaries(one_torch_thread):
    table = svw.compare(SymmetrizedViWidths.parse(TINY, "x"))
    # per width: one reference row, then 2 families x 2 seeds
    assert table.height == 2 * (1 + 2 * 2)
    vi = table.filter(table["family"] != "reference")
    assert torch.allclose(
        torch.tensor(vi["elbo"].to_list()),
        torch.tensor((vi["log_group_order"] + vi["elbo_fit"]).to_list()),
        atol=1e-3,
    )
    sym = vi.filter(vi["family"] == "symmetrised")
    assert sorted(set(sym["log_group_order"].round(6))) == [
        round(math.log(6), 6),
        round(math.log(720), 6),
    ]
    assert (vi["overlap_hi"] >= vi["overlap_lo"]).all() and (vi["elbo_upper"] >= vi["elbo"]).all()
    assert vi["test_accuracy"].is_between(0, 1).all() and vi["ns_mmd"].is_finite().all()
    summary = svw.summary(table)
    assert summary.height == 6 and "±" in summary["elbo"][1]
    gaps = svw.gaps(table)
    assert gaps["width"].to_list() == [3, 6] and gaps["log_group_order"].to_list() == ["1.8", "6.6"]

import math

import torch

from symbnn.analyses import symmetrized_vi
from symbnn.methods.bnn.fit import MeanFieldBNN
from symbnn.settings import SymmetrizedVi
from symbnn.symmetry import apply_permutations, random_permutations, unit_groups
from symbnn.train.seeding import build_seeded_model


def _family(hidden=(4,), seed=0, rho=-1.0, max_enumerate=5040):
    spec = {"name": "mlp", "widths": [2, *hidden, 2]}
    q = MeanFieldBNN(build_seeded_model(spec, seed), rho, 1.0, 1.0, 1.0)
    with torch.no_grad():  # spread the stds so that the density is not flat
        for r in q.rho:
            r.add_(0.5 * torch.randn(r.shape, generator=torch.Generator().manual_seed(1)))
    return (
        spec,
        q,
        symmetrized_vi.SymmetrizedMeanField(
            q, unit_groups(spec), max_enumerate=max_enumerate, mc_permutations=64
        ),
    )


def test_symmetrized_density_is_invariant_to_permuting_its_argument(one_torch_thread):
    spec, q, qsym = _family(hidden=(4, 3))
    assert qsym.exact and qsym.order == math.factorial(4) * math.factorial(3)
    w = q.sample_states(5, torch.Generator().manual_seed(2))
    perms = random_permutations(qsym.sym, 5, torch.Generator().manual_seed(3))
    moved = apply_permutations(w, qsym.sym, perms)
    before, after = qsym.log_density(w), qsym.log_density(moved)
    assert torch.allclose(before, after, atol=1e-5)
    # ... while the mean-field density is not invariant
    assert (qsym.log_q(w) - qsym.log_q(moved)).abs().max() > 1.0
    # q/|G| <= q_sym pointwise (the identity term of the mixture)
    assert (before >= qsym.log_q(w) - math.log(qsym.order) - 1e-5).all()


def test_monte_carlo_estimator_agrees_with_enumeration(one_torch_thread):
    _, q, exact = _family(hidden=(5,), rho=0.0)
    mc = symmetrized_vi.SymmetrizedMeanField(
        q,
        exact.sym,
        max_enumerate=1,
        mc_permutations=4000,
        generator=torch.Generator().manual_seed(4),
    )
    assert exact.exact and not mc.exact
    w = q.sample_states(3, torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert torch.allclose(exact.log_density(w), mc.log_density(w), atol=0.1)


def test_symmetrized_kl_lies_between_its_bounds(one_torch_thread):
    """KL(q||p) - log|G| <= KL_sym <= KL(q||p), estimated with common draws."""
    _, q, qsym = _family(rho=-2.0)
    w = symmetrized_vi._draws(q, 2000, torch.Generator().manual_seed(6))
    with torch.no_grad():
        kl_mf = symmetrized_vi.kl_terms(q, qsym, "mean_field", w, 1.0).mean()
        kl_sym = symmetrized_vi.kl_terms(q, qsym, "symmetrised", w, 1.0).mean()
    assert kl_mf - math.log(qsym.order) - 1e-4 <= kl_sym <= kl_mf + 1e-4


def test_symmetrized_elbo_is_not_worse_than_mean_field_on_the_toy_task(one_torch_thread):
    table = symmetrized_vi.compare(
        SymmetrizedVi(
            seeds=(0,),
            steps=300,
            target_runs=16,
            target_epochs=10,
            mmd_samples=16,
            eval_samples=512,
            n_test=400,
        )
    )
    rows = {r["family"]: r for r in table.to_dicts()}
    mf, sym = rows["mean_field"], rows["symmetrised"]
    noise = 3 * math.hypot(mf["elbo_stderr"], sym["elbo_stderr"])
    assert sym["elbo"] >= mf["elbo"] - noise
    assert abs(sym["test_accuracy"] - mf["test_accuracy"]) < 0.05 and sym["test_accuracy"] > 0.8
    assert sym["group_order"] == 24 and sym["exact_log_q_sym"]

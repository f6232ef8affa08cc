"""The Laplace approximation (MacKay, 1992) around a trained mode, via laplace-torch.

Maths. For a network with weights theta trained to a MAP estimate theta* of
log p(D | theta) + log p(theta) under the isotropic Gaussian prior p(theta) = N(0, lambda^-1 I),
the Laplace approximation replaces the posterior by the Gaussian given by a second-order
expansion of the log posterior at theta*:

    p(theta | D)  ~  N(theta*, Sigma),    Sigma = (GGN + lambda I)^-1,

    GGN = sum_i J_i^T Lambda_i J_i,   J_i = d f(x_i; theta) / d theta at theta*,

where Lambda_i is the Hessian of the negative log-likelihood in the network outputs f
(softmax classification: diag(p_i) - p_i p_i^T with p_i = softmax(f(x_i)); Gaussian
regression with noise sigma: I / sigma^2). The generalised Gauss-Newton matrix replaces the
Hessian of the log-likelihood (it is positive semi-definite and equals the Hessian when the
network is linear in theta). `subset="last_layer"` treats only the classifier (the last
nn.Linear, `last_linear`) as random and keeps every other tensor at the mode; the GGN may be
kept full (dense P x P), Kronecker-factored per layer (K-FAC, "kron") or diagonal.

The prior precision lambda is either fixed (`prior_precision` a positive number) or tuned by
maximising the Laplace approximation of the log marginal likelihood (`"marglik"`),

    log p(D | lambda) ~ log p(D | theta*) - 1/2 lambda |theta*|^2
                        + P/2 log lambda - 1/2 log det(GGN + lambda I)    (+ const),

by gradient ascent in log lambda (a scalar lambda: laplace-torch's
`optimize_prior_precision(method="marglik", prior_structure="scalar")`, 100 Adam steps).

Setup of Laurent et al., "A Symmetry-Aware Exploration of Bayesian Neural Network
Posteriors" (ICLR 2024), appendix B.1: full-GGN Laplace over all weights for the small
networks (OptuNet), last-layer Kronecker-factored Laplace for ResNet-18, prior precision
tuned by marginal likelihood; hence the defaults of `symbnn.settings.Laplace` (the full
configs set ``{subset: last_layer, hessian: kron}`` for ResNet-18).

laplace-torch (Daxberger et al., "Laplace Redux", NeurIPS 2021; `laplace.Laplace`) computes
the curvature, the marginal likelihood and the samples. This module only chooses the backend,
feeds the library a DataLoader of normalised training images and turns its flat samples back
into state dicts: for `subset="all"` a sample is `parameters_to_vector(model.parameters())`
(parameters in `named_parameters` order, each flattened row-major); for `"last_layer"` it is
the classifier's `weight.flatten()` followed by its `bias`. Every tensor that is not sampled
(BatchNorm buffers included) is copied from the mode.

Backends: the full GGN is built by `BackPackGGN` (per-sample Jacobians from BackPack, then
J^T Lambda J: exact, and ~20x faster on OptuNet than the library's default `CurvlinopsGGN`,
which forms the dense matrix from P GGN-vector products); "kron" and "diag" use the library
default (`CurvlinopsGGN`: K-FAC type-2 factors, resp. the diagonal of J^T Lambda J through
torch.func Jacobians). A full GGN over all weights needs a dense P x P matrix and is refused
beyond MAX_FULL_PARAMS parameters.

Determinism: the samples depend only on the mode, the settings, the training data and `seed`
(the library draws its standard normals from a `torch.Generator` seeded by `seed`); all the
work runs under `torch.random.fork_rng`, so the caller's global RNG state is left as it was.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from symbnn.data.core import ImageData
from symbnn.methods.base import (
    Fitted,
    Mode,
    Problem,
    check_count,
    fitted_samples,
    generator,
    last_linear,
)
from symbnn.settings import Laplace

BATCH_SIZE = 256  # images per curvature batch: bounds the memory of Jacobians / activations
MAX_FULL_PARAMS = 20_000  # a dense GGN over more parameters than this takes > 1.6 GB (float32)
MARGLIK_STEPS = 100  # Adam steps (lr 0.1) on log lambda, laplace-torch's defaults


class _Indices(Dataset):
    """Dataset of indices into an ImageData; `_NormalizedBatches` turns a batch of them into
    normalised images, so only one batch is ever converted to floats."""

    def __init__(self, data: ImageData) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> int:
        return index


class _NormalizedBatches:
    def __init__(self, data: ImageData) -> None:
        self.data = data

    def __call__(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.int64)
        return self.data.normalize(self.data.images[idx]), self.data.labels[idx]


def image_loader(data: ImageData, batch_size: int = BATCH_SIZE) -> DataLoader:
    """(normalised images, labels) batches over `data` in order; `len(loader.dataset)` is N.
    The loader's own generator keeps its iteration off torch's global RNG."""
    return DataLoader(
        _Indices(data),
        batch_size=batch_size,
        shuffle=False,
        collate_fn=_NormalizedBatches(data),
        generator=torch.Generator().manual_seed(0),
    )


def sampled_parameters(model: nn.Module, subset: str) -> list[tuple[str, torch.Size]]:
    """(state-dict name, shape) of the tensors a Laplace sample holds, in the library's order:
    all parameters in `named_parameters` order, or the last nn.Linear's weight then bias."""
    if subset == "all":
        return [(name, p.shape) for name, p in model.named_parameters() if p.requires_grad]
    if subset == "last_layer":
        name, layer = last_linear(model)
        prefix = f"{name}." if name else ""
        # nn.Linear registers weight before bias: the order of layer.parameters()
        return [(prefix + pname, p.shape) for pname, p in layer.named_parameters()]
    raise ValueError(f"laplace.subset must be all or last_layer; got {subset!r}")


def to_states(
    flat: torch.Tensor, model: nn.Module, subset: str, state: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Stacked state dicts (name -> (S, *shape), CPU) from the library's samples `flat` (S, P):
    the sampled tensors cut out of each row, everything else repeated from `state`."""
    blocks = sampled_parameters(model, subset)
    total = sum(math.prod(shape) for _, shape in blocks)
    if flat.ndim != 2 or flat.shape[1] != total:
        raise RuntimeError(
            f"Laplace samples have shape {tuple(flat.shape)}, expected (S, {total}) "
            f"for subset {subset!r}"
        )
    count = flat.shape[0]
    flat = flat.detach().cpu()
    sampled, offset = {}, 0
    for name, shape in blocks:
        if name not in state:
            raise RuntimeError(f"sampled parameter {name!r} is not in the model's state dict")
        size = math.prod(shape)
        sampled[name] = (
            flat[:, offset : offset + size].reshape(count, *shape).to(state[name].dtype).clone()
        )
        offset += size
    # Only the tensors the samples do not hold are repeated (in the state dict's order).
    return {
        name: sampled[name]
        if name in sampled
        else t.detach().cpu().unsqueeze(0).expand(count, *t.shape).clone()
        for name, t in state.items()
    }


def fit_laplace(
    model: nn.Module,
    loader: DataLoader,
    *,
    likelihood: str = "classification",
    subset: str = "all",
    hessian: str = "full",
    prior_precision: float | str = "marglik",
    sigma_noise: float = 1.0,
):
    """A fitted laplace-torch posterior at the current weights of `model` (the MAP).

    `model` is used as is by subset "all" (put in eval mode; BackPack hooks attached for a
    full GGN), copied by subset "last_layer". Returns the library's Laplace object: `sample`,
    `prior_precision`, `posterior_precision` / `posterior_covariance` (full), ..."""
    with warnings.catch_warnings():  # its dependencies' imports warn about torch.jit.script
        warnings.filterwarnings("ignore", category=FutureWarning)
        from laplace import Laplace
        from laplace.curvature import BackPackGGN

    n_params = sum(math.prod(shape) for _, shape in sampled_parameters(model, subset))
    if hessian == "full" and n_params > MAX_FULL_PARAMS:
        raise ValueError(
            f"laplace.hessian 'full' over {n_params} parameters (subset {subset!r}) needs a "
            f"dense {n_params} x {n_params} matrix (limit {MAX_FULL_PARAMS}); use "
            "subset last_layer or hessian kron / diag"
        )
    kwargs: dict[str, Any] = {"sigma_noise": sigma_noise}
    if hessian == "full":
        kwargs["backend"] = BackPackGGN
    if subset == "last_layer":
        kwargs["last_layer_name"] = last_linear(model)[0]
    fixed = prior_precision != "marglik"
    if fixed:
        kwargs["prior_precision"] = float(prior_precision)
    la = Laplace(model, likelihood, subset_of_weights=subset, hessian_structure=hessian, **kwargs)
    if la.n_params != n_params:
        raise RuntimeError(f"laplace-torch sees {la.n_params} parameters, expected {n_params}")
    with warnings.catch_warnings():
        # the library warns about its predictive (link_approx) at marglik time: not used here
        warnings.filterwarnings("ignore", message=".*link_approx.*")
        # BackPack notes that a container module (the model itself) has no extension of its own
        warnings.filterwarnings("ignore", message="Extension saving to")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        la.fit(loader)
        if not fixed:
            la.optimize_prior_precision(
                method="marglik", pred_type="glm", prior_structure="scalar", n_steps=MARGLIK_STEPS
            )
    return la


def _fork_devices(device: str | torch.device) -> list:
    device = torch.device(device)
    return [device] if device.type == "cuda" else []


def fit_mode(problem: Problem, mode: Mode, settings: Laplace):
    """(fitted Laplace object, the model at the mode, its CPU state dict) for one mode."""
    with torch.random.fork_rng(devices=_fork_devices(problem.device)):
        model = problem.build(mode.state)
        model.eval()
        state = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
        la = fit_laplace(
            model,
            image_loader(problem.train),
            subset=settings.subset,
            hessian=settings.hessian,
            prior_precision=settings.prior_precision,
        )
    return la, model, state


def fit(problem: Problem, mode: Mode, settings: Laplace, seed: int, count: int) -> Fitted:
    """`count` draws from the Laplace approximation at `mode`, as name -> (count,
    *shape)."""
    count = check_count("laplace", count)
    la, model, state = fit_mode(problem, mode, settings)
    with torch.random.fork_rng(devices=_fork_devices(problem.device)), torch.no_grad():
        flat = la.sample(int(count), generator=generator(seed, problem.device))
    return {"samples": to_states(flat, model, settings.subset, state)}


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: Laplace, seed: int
) -> dict[str, torch.Tensor]:
    return fitted_samples("laplace", fitted, count)

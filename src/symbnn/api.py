"""symbnn's public API: the weight-space symmetries of any torch network.

Every function takes a network as an ``nn.Module`` or as a state dict (one network, or a
stack of networks with a leading sample axis, as weight stores hold them), and its symmetry
structure as one of

* a `Symmetry` (from `symmetry_of`; derive it once and pass it on, that saves the tracing),
* the ``nn.Module`` itself, or a model spec such as ``{"name": "optunet"}`` (see
  `symbnn.models`), from which it is derived,
* ``None`` when the network is an ``nn.Module``: derived from it.

States come back as plain state dicts (``name -> tensor``) in the model's own layout and in
the form they came (one network or a stack): ``model.load_state_dict(result)`` works, and
entries no symmetry moves (``num_batches_tracked``) are passed through.

These are thin wrappers: the structure is derived by `symbnn.symmetry.derive`, and the work is
done by the engine (`symbnn.symmetry.canonicalize`, `symbnn.symmetry.minmass.min_mass`,
`symbnn.alignment.matching.align_state`, the operators of `symbnn.symmetry.operators`), which
takes a structure's plain view (`Symmetry.plain`) itself where it slices tensors (DenseNet's
concatenations, a flattened feature map feeding a linear layer).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from symbnn import trust
from symbnn.models import build_model
from symbnn.settings import Alignment
from symbnn.symmetry.canonical import canonicalize as canonical_form
from symbnn.symmetry.counting import count_symmetries as rows_of
from symbnn.symmetry.counting import total_symmetries
from symbnn.symmetry.derive import symmetry_of as derive
from symbnn.symmetry.minmass import min_mass as lightest
from symbnn.symmetry.operators import (
    apply_permutations,
    apply_scales,
    random_output_shifts,
    random_permutations,
    random_scales,
    shift_output,
)
from symbnn.symmetry.structure import Symmetry

__all__ = [
    "symmetry_of",
    "canonicalize",
    "min_mass",
    "count_symmetries",
    "align",
    "random_symmetry",
]

Net = nn.Module | Mapping[str, torch.Tensor]
SymmetryLike = Symmetry | nn.Module | dict[str, Any] | None


def symmetry_of(model: nn.Module | dict[str, Any] | Symmetry, example_input=None) -> Symmetry:
    """The symmetry structure of a network, derived from its traced computation graph.

    ``model``: an ``nn.Module``, or a model spec (``{"name": "resnet18", "num_classes": 10}``:
    the model is built with `symbnn.models.build_model`; a model of your own named by import
    path in a spec given here is trusted, `symbnn.trust`); a `Symmetry` is returned as is.
    ``example_input``: a batch the model accepts (a tensor or a tuple of positional inputs;
    only its shape matters, where a feature map is flattened into a linear layer). By default
    one is guessed from the first layer (32 x 32 maps for convolutional networks).

    The result lists the unit groups that permute together (tied by residual sums, one per
    slice of a concatenation, block-wise for grouped convolutions), their positive scale
    groups, the softmax layer's bias and weight (``output_bias``, ``output_weight``: their
    additive freedom b + c 1, W + 1 v^T), and in ``limits`` every (module, reason) for which the
    derivation could not prove a symmetry and left it out (an unknown module, a SiLU that
    stops scaling, ...). See `symbnn.symmetry.derive` for the rules.
    """
    if isinstance(model, Symmetry):
        return model
    if _is_spec(model):
        if trust.is_import_path(model["name"]):  # named here, in the caller's code
            trust.trust_model(model["name"])
        return derive(build_model(model), example_input, architecture=dict(model))
    if isinstance(model, nn.Module):
        return derive(model, example_input)
    raise TypeError(
        f"expected an nn.Module, a model spec or a Symmetry, got {type(model).__name__}"
    )


def _is_spec(x: Any) -> bool:
    """A model spec ({"name": ..., options}) rather than a state dict (name -> tensor)."""
    return isinstance(x, dict) and isinstance(x.get("name"), str)


def _resolve(net: Net, symmetry: SymmetryLike, example_input) -> tuple[dict, Symmetry]:
    """(state, structure); the state keeps ``state_dict()``'s ``_metadata`` (module versions,
    which some modules' loaders need), and `_like` gives it to the states returned."""
    if isinstance(net, nn.Module):
        raw = net.state_dict()
        state = _like({k: v.detach() for k, v in raw.items()}, raw)
        sym = symmetry_of(net if symmetry is None else symmetry, example_input)
    elif isinstance(net, Mapping):
        if symmetry is None:
            raise ValueError(
                "a state dict does not say which network it is: pass symmetry= (a Symmetry, "
                "the nn.Module, or a model spec such as {'name': 'optunet'})"
            )
        state, sym = _like(dict(net), net), symmetry_of(symmetry, example_input)
    else:
        raise TypeError(f"expected an nn.Module or a state dict, got {type(net).__name__}")
    return state, sym


def _like(state: dict, template: Mapping) -> dict:
    """``state``, carrying ``template``'s state-dict metadata if it has any."""
    metadata = getattr(template, "_metadata", None)
    if metadata is None:
        return state
    out = OrderedDict(state)
    out._metadata = metadata  # type: ignore[attr-defined]
    return out


def _is_single(state: Mapping[str, torch.Tensor], sym: Symmetry) -> bool:
    name = sym.tensors[0]
    if name not in state:
        raise ValueError(f"state has no entry {name!r} required by the symmetry structure")
    return state[name].dim() == len(sym.shapes[name])


def canonicalize(net: Net, symmetry: SymmetryLike = None, *, example_input=None, **options):
    """The canonical form of a network (or of each network of a stack): every scale group
    normalised, every unit group sorted (paper C.2), then the softmax's additive freedom
    removed: each column of the output weight centred over the outputs (sums to 0) and the
    output bias shifted to sum 1. It computes the same function, and a network and any of
    its symmetric copies share it.

    ``options`` go to `symbnn.symmetry.canonicalize`: ``scale`` ("unitnorm" or "unitstd"),
    ``key`` ("max" or "first" incoming weight), ``softmax_shift`` (True: the softmax step),
    ``softmax_total`` (1.0), ``on_dead`` ("raise" or "keep" for units with all-zero incoming
    weights).

    Returns a `symbnn.symmetry.Canonical`: ``state`` (the canonical state dict), ``perms``
    (unit i of the result is unit perms[g][i] of the scaled input), ``scales`` (keyed by the
    structure's group names), ``softmax_shift`` (the constant added to the output bias) and
    ``softmax_weight_shift`` (the vector added to every row of the output weight).
    """
    state, sym = _resolve(net, symmetry, example_input)
    result = canonical_form(state, sym, **options)
    result.state = _like(result.state, state)
    return result


def min_mass(net: Net, symmetry: SymmetryLike = None, *, example_input=None, **options):
    """The network of minimum mass (squared L2 norm of the weights, BatchNorm gammas
    included, biases excluded) among those its positive scalings reach: the min-mass problem
    (paper 3.6), solved exactly by block coordinate descent.

    ``options`` go to `symbnn.symmetry.minmass.min_mass` (``solver``, ``tol``,
    ``max_sweeps``, ``device``, ``on_degenerate``, ``return_state``, ...). Returns its
    `MinMassResult`: ``mass_before``, ``mass_after`` ((n,) tensors; 0-d for one network),
    the optimal ``scales``, the balance ``residual``, ``solver_converged``, and ``state``,
    the min-mass network(s) as a state dict.
    """
    state, sym = _resolve(net, symmetry, example_input)
    result = lightest(state, sym, **options)
    if result.state is not None:
        result.state = _like(result.state, state)
    return result


def count_symmetries(
    net: Net | Symmetry, symmetry: SymmetryLike = None, *, example_input=None
) -> dict[str, Any]:
    """How many symmetries a network has (paper appendix D.4): ``log10_permutations`` (log10
    of the number of unit permutations), ``scaling_dof`` (free positive scales, one per unit
    and scale group), ``bn_scaling_dof`` (those absorbed by BatchNorm statistics),
    ``softmax_dof`` (dimensions of the softmax's additive freedom: n_{L-1} + 1 for a linear
    output layer with a bias, `Symmetry.softmax_dof`), ``softmax_shift`` (whether there is
    any) and ``groups``, one row per unit group (`symbnn.symmetry.count_symmetries`).

    ``net`` may also be a `Symmetry` (or a model spec): nothing else is needed to count.
    """
    if isinstance(net, Symmetry) or _is_spec(net):
        sym = symmetry_of(net, example_input)
    else:
        sym = _resolve(net, symmetry, example_input)[1]
    rows = rows_of(sym)
    return {
        **total_symmetries(sym),
        "bn_scaling_dof": sum(r["bn_scaling_dof"] for r in rows),
        "softmax_shift": sym.softmax_dof > 0,
        "groups": rows,
    }


def align(
    a: Net,
    b: Net,
    symmetry: SymmetryLike = None,
    *,
    example_input=None,
    max_sweeps: int = Alignment().max_sweeps,
):
    """Permute network ``b``'s units to match network ``a`` (Git Re-Basin's weight matching:
    maximise sum <A, P B> over admissible permutations P, by coordinate descent with exact
    linear assignments). Both are single networks of one architecture; ``symmetry`` defaults
    to the one derived from ``a`` (or ``b``) when it is an ``nn.Module``.

    Returns (aligned ``b`` as a state dict, `symbnn.alignment.matching.Alignment` with the
    permutations and the objective before and after). Only permutations are used: scales are
    left as they are (canonicalize or min-mass first to remove them).
    """
    # local: keeps scipy out of importing symbnn.api
    from symbnn.alignment.matching import align_state

    if symmetry is None:
        symmetry = a if isinstance(a, nn.Module) else b if isinstance(b, nn.Module) else None
    state_a, sym = _resolve(a, symmetry, example_input)
    state_b, _ = _resolve(b, sym, None)
    aligned, result = align_state(state_a, state_b, sym, max_sweeps)
    return _like(aligned, state_b), result


def random_symmetry(
    net: Net,
    symmetry: SymmetryLike = None,
    *,
    example_input=None,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    permute: bool = True,
    scale: bool = True,
    shift: bool = True,
    spread: float = 1.0,
    return_transform: bool = False,
):
    """Apply a random element of the network's symmetry group: uniformly random admissible
    permutations of every unit group, log-normal positive scales (standard deviation
    ``spread`` in log space) for every scale group, and a random element of the softmax's
    additive group (``shift``): a standard normal constant added to the output bias and a
    random vector v added to every row of the output weight (entries normal with standard
    deviation 1 / sqrt(row size)). Each network of a stack gets its own element.

    The result computes the same function (logits up to a common shift per input, so the
    same softmax) in eval mode. Returns the transformed state dict, or (state, transform)
    with ``return_transform=True``, transform = {"perms", "scales", "shift",
    "weight_shift"} (the last two None where the structure has no such tensor).
    """
    state, sym = _resolve(net, symmetry, example_input)
    template = state
    if generator is None:
        generator = torch.Generator()
        generator.manual_seed(seed if seed is not None else int(torch.randint(2**62, ())))
    single = _is_single(state, sym)
    n = 1 if single else state[sym.tensors[0]].shape[0]
    transform: dict[str, Any] = {"perms": {}, "scales": {}, "shift": None, "weight_shift": None}
    if permute:
        transform["perms"] = random_permutations(sym, n, generator)
        state = apply_permutations(state, sym, transform["perms"])
    if scale and sym.scale_groups:
        transform["scales"] = random_scales(sym, n, generator, spread=spread)
        state = apply_scales(state, sym, transform["scales"])
    if shift and sym.softmax_dof:
        transform["shift"], transform["weight_shift"] = random_output_shifts(sym, n, generator)
        state = shift_output(state, sym, transform["shift"], transform["weight_shift"])
    if single:
        transform["perms"] = {k: v[0] for k, v in transform["perms"].items()}
        transform["scales"] = {k: v[0] for k, v in transform["scales"].items()}
        for key in ("shift", "weight_shift"):
            if transform[key] is not None:
                transform[key] = transform[key][0]
    state = _like(dict(state), template)
    return (state, transform) if return_transform else state

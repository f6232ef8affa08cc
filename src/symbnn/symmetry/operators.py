"""Symmetry operators on (stacks of) state dicts: permutations, scales, softmax shift, random draws.

States are ``name -> tensor``; either one network (the model's own shapes) or a stack of
networks (a leading sample axis, as `Store.state_dicts` returns). Every operator returns a
new dict; entries no symmetry moves (e.g. ``num_batches_tracked``) are passed through.

Conventions (for a stack of n networks):

* ``perms[group]`` is an int64 tensor (n, width): unit i of the result is unit
  ``perms[group][:, i]`` of the input.
* ``scales[scale_group]`` is a positive tensor (n, width), indexed like the input's units:
  unit i's incoming side is multiplied by s_i, its outgoing side divided (docs/maths.md, section 1).

* The softmax group: ``shift_output`` adds a constant c to every output bias and a vector v to
  every row of the output weight (W_L + 1 v^T: v has the shape of one row); `centre_softmax`
  is the canonical form's step that removes both (docs/maths.md, sections 1.7 and 2.5).

Structures that are not plain (axes sliced by concatenations or flattened maps, see
`symbnn.symmetry.structure`) are applied through their plain view: the state is split into
whole-axis pieces, moved, and joined back. The softmax operators need no view: the output
weight and bias are whole tensors in the model's layout. `as_stack` itself refuses non-plain
structures: the engine steps that read whole axes (canonical form, min-mass, weight matching)
split the state into the plain view before they call it, and join the result back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from symbnn.symmetry.structure import ROLE_POWER, Axis, Symmetry, UnitGroup

State = dict[str, torch.Tensor]


def as_stack(
    state: Mapping[str, torch.Tensor], sym: Symmetry, names: Iterable[str] | None = None
) -> tuple[State, bool]:
    """(stacked state, was_single): add a sample axis to a single network's state dict.
    Checks the shapes of ``names`` (default: every tensor the structure moves); the operators
    check the tensors they move, so that a structure of thousands of tensors (a DenseNet's
    plain view) is not checked in full at every step of the canonical form."""
    if not sym.is_plain:
        raise ValueError(
            f"the {sym.architecture} symmetry structure slices tensors (concatenations or "
            f"flattened feature maps); this step reads whole axes: run it on the plain view "
            f"(sym.plain.sym with sym.plain.split(state), then sym.plain.join)"
        )
    return _stack(state, sym, names)


def _stack(
    state: Mapping[str, torch.Tensor], sym: Symmetry, names: Iterable[str] | None
) -> tuple[State, bool]:
    """`as_stack` for tensors read whole (any structure: the output layer's tensors are never
    sliced)."""
    single = None
    for name in sym.tensors if names is None else names:
        if name not in state:
            raise ValueError(
                f"state has no entry {name!r} required by the {sym.architecture} symmetry structure"
            )
        shape, expected = tuple(state[name].shape), sym.shapes[name]
        this = (
            shape == expected
            if len(shape) == len(expected)
            else (False if shape[1:] == expected else None)
        )
        if this is None:
            raise ValueError(f"{name}: shape {shape} is neither {expected} nor (n, *{expected})")
        if single is not None and this != single:
            raise ValueError("state mixes single-network and stacked entries")
        single = this
    if single:
        return {k: v.unsqueeze(0) for k, v in state.items()}, True
    return dict(state), False


def unstack(state: State, single: bool) -> State:
    return {k: v.squeeze(0) for k, v in state.items()} if single else state


def _along(t: torch.Tensor, axis: int, vector: torch.Tensor) -> torch.Tensor:
    """Reshape a (n, width) per-unit vector to broadcast along ``axis`` of a stacked tensor."""
    shape = [t.shape[0]] + [1] * (t.dim() - 1)
    shape[axis + 1] = vector.shape[1]
    return vector.reshape(shape)


def _permute_axis(t: torch.Tensor, axis: int, perm: torch.Tensor) -> torch.Tensor:
    """Gather the units of ``axis`` of a stacked tensor by a (n, width) permutation, copying
    whole slices (take_along_dim would materialise a full-size index)."""
    if t.shape[0] == 1:  # one network: the same gather, without indexing a moved (strided) view
        return t.index_select(axis + 1, perm[0])
    rows = torch.arange(t.shape[0], device=t.device)[:, None]
    return t.movedim(axis + 1, 1)[rows, perm].movedim(1, axis + 1).contiguous()


def _block_local_index(a: Axis, rows: int, width: int, device) -> torch.Tensor:
    """(rows, width/blocks) index of the full input channel seen by each row of a grouped conv."""
    local = width // a.blocks
    block_of_row = torch.arange(rows, device=device) // (rows // a.blocks)
    return block_of_row[:, None] * local + torch.arange(local, device=device)[None, :]


def check_permutations(sym: Symmetry, perms: Mapping[str, torch.Tensor]) -> None:
    """Raise ValueError unless every permutation is a bijection that maps blocks onto blocks,
    with one block permutation shared by coupled groups."""
    block_maps: dict[str, torch.Tensor] = {}
    for g in sym.groups:
        if g.name not in perms:
            continue
        p = perms[g.name]
        if p.dim() != 2 or p.shape[1] != g.width:
            raise ValueError(
                f"perms[{g.name!r}] has shape {tuple(p.shape)}, expected (n, {g.width})"
            )
        if not torch.equal(
            p.sort(dim=1).values, torch.arange(g.width, device=p.device).expand_as(p)
        ):
            raise ValueError(f"perms[{g.name!r}] is not a permutation of range({g.width})")
        if g.blocks > 1:
            blocks = (p // g.block_width).reshape(p.shape[0], g.blocks, g.block_width)
            if not (blocks == blocks[:, :, :1]).all():
                raise ValueError(
                    f"perms[{g.name!r}] splits a block of {g.block_width} units "
                    f"(a grouped convolution forbids it)"
                )
            block_maps[g.name] = blocks[:, :, 0]
    for coupling in sym.couplings:
        if not any(n in perms for n in coupling):
            continue
        maps = [block_maps[n] for n in coupling if n in block_maps]
        if len(maps) != len(coupling):
            raise ValueError(f"coupled groups {coupling} must be permuted together")
        if any(not torch.equal(m, maps[0]) for m in maps[1:]):
            raise ValueError(f"coupled groups {coupling} must move their blocks alike")


def apply_permutations(
    state: Mapping[str, torch.Tensor],
    sym: Symmetry,
    perms: Mapping[str, torch.Tensor],
    check: bool = True,
) -> State:
    """Permute the units of each group in ``perms`` (groups left out stay in place)."""
    if not sym.is_plain:
        view = sym.plain
        return view.join(apply_permutations(view.split(state), view.sym, perms, check))
    moved = list({a.tensor: None for g in sym.groups if g.name in perms for a in g.axes})
    moved = moved or list(sym.tensors[:1])
    out, single = as_stack(state, sym, moved)
    perms = {
        k: (v.unsqueeze(0) if single and v.dim() == 1 else v).to(out[moved[0]].device)
        for k, v in perms.items()
    }
    if check:
        check_permutations(sym, perms)
    return unstack(permute_tensors(out, sym, perms), single)


def permute_tensors(out: State, sym: Symmetry, perms: Mapping[str, torch.Tensor]) -> State:
    """apply_permutations on stacked tensors, without checks, on whichever of the structure's
    tensors ``out`` holds (the canonical form permutes single key tensors this way)."""
    out = dict(out)
    grouped: list[tuple[UnitGroup, Axis]] = []
    plain: dict[str, dict[int, torch.Tensor]] = {}
    for g in sym.groups:
        if g.name not in perms:
            continue
        for a in g.axes:
            if a.tensor not in out:
                continue
            if a.blocks > 1:
                grouped.append((g, a))  # needs the rows in their final order first
                continue
            plain.setdefault(a.tensor, {})[a.axis] = perms[g.name]
    for name, by_axis in plain.items():
        t = out[name]
        if t.shape[0] == 1 and set(by_axis) == {0, 1} and math.prod(t.shape[3:]) >= 8:
            # One network, rows and columns of a conv (or a flattened map's linear): one
            # gather of whole (row, column) kernels instead of two passes.
            rows, cols = t.shape[1], t.shape[2]
            index = (by_axis[0][0][:, None] * cols + by_axis[1][0][None, :]).reshape(-1)
            out[name] = t.reshape(rows * cols, -1).index_select(0, index).reshape(t.shape)
            continue
        for axis, perm in by_axis.items():
            t = _permute_axis(t, axis, perm)
        out[name] = t
    for g, a in grouped:
        # Row o (already permuted) reads the local input channels of its block; with a valid
        # block-preserving permutation the new local index is perm[block(o) * local + c] % local.
        t = out[a.tensor]
        rows, local = t.shape[1], t.shape[2]
        index = _block_local_index(a, rows, g.width, t.device)
        new_local = perms[g.name][:, index] % local  # (n, rows, local)
        new_local = new_local.reshape(*new_local.shape, *([1] * (t.dim() - 3)))
        out[a.tensor] = torch.take_along_dim(t, new_local, dim=2)
    return out


def apply_scales(
    state: Mapping[str, torch.Tensor], sym: Symmetry, scales: Mapping[str, torch.Tensor]
) -> State:
    """Scale the units of each scale group in ``scales`` (groups left out keep scale 1)."""
    if not sym.is_plain:
        view = sym.plain
        return view.join(apply_scales(view.split(state), view.sym, scales))
    known = sym.scale_index
    unknown = [name for name in scales if name not in known]
    if unknown:
        raise ValueError(f"unknown scale group {unknown[0]!r} (known: {', '.join(known)})")
    moved = {a.tensor: None for name in scales for a in known[name].axes}
    out, single = as_stack(state, sym, moved or sym.tensors[:1])
    pending: dict[str, torch.Tensor] = {}
    for name, s in scales.items():
        if single and s.dim() == 1:
            s = s.unsqueeze(0)
        if not bool((s > 0).all()) or not bool(torch.isfinite(s).all()):
            raise ValueError(
                f"scales[{name!r}] must be positive and finite (ReLU commutes only with s > 0)"
            )
        for a in known[name].axes:
            t = out[a.tensor]
            s_t = s.to(device=t.device, dtype=t.dtype)
            if a.blocks > 1:
                index = _block_local_index(a, t.shape[1], s_t.shape[1], t.device)
                factor = s_t[:, index].reshape(
                    t.shape[0], t.shape[1], t.shape[2], *([1] * (t.dim() - 3))
                )
            else:
                factor = _along(t, a.axis, s_t)
            if a.role == "bn_var":
                # BatchNorm divides by sqrt(var + eps): scale var + eps, not var, to stay exact.
                if a.tensor in pending:
                    t = t * pending.pop(a.tensor)
                out[a.tensor] = factor**2 * (t + a.eps) - a.eps
            else:
                # Several axes of one tensor (a conv's rows and columns): one pass over it.
                f = factor ** ROLE_POWER[a.role]
                pending[a.tensor] = pending[a.tensor] * f if a.tensor in pending else f
    for name, f in pending.items():
        out[name] = out[name] * f
    return unstack(out, single)


def _output_tensors(sym: Symmetry) -> list[str]:
    """The softmax layer's tensors the structure has (weight, bias)."""
    names = [n for n in (sym.output_weight, sym.output_bias) if n is not None]
    if not names:
        raise ValueError(f"{sym.architecture}: no softmax output layer (no output bias or weight)")
    return names


def _bias_shift(bias: torch.Tensor, total: float) -> torch.Tensor:
    """(n,) constants that make each stacked output bias sum to ``total``."""
    return (total - bias.sum(dim=1)) / bias.shape[1]


def shift_softmax(
    state: Mapping[str, torch.Tensor], sym: Symmetry, total: float = 1.0
) -> tuple[State, torch.Tensor]:
    """Add one constant to every output bias so that they sum to ``total`` (softmax is
    invariant to it); returns the new state and the (n,) shifts. The bias part of
    `centre_softmax`, which the canonical form uses."""
    if sym.output_bias is None:
        raise ValueError(f"{sym.architecture}: no softmax output bias to shift")
    out, single = _stack(state, sym, [sym.output_bias])
    c = _bias_shift(out[sym.output_bias], total)
    return unstack(shift_output(out, sym, c), single), (c[0] if single else c)


def shift_output(
    state: Mapping[str, torch.Tensor],
    sym: Symmetry,
    bias: torch.Tensor | float | None = None,
    weight: torch.Tensor | None = None,
) -> State:
    """An element of the softmax group: add ``bias`` (a number, or (n,) for a stack) to every
    output bias and ``weight`` (one row's shape, or (n, *row) for a stack) to every row of the
    output weight, W_L + 1 v^T. Every logit moves by c + v . h for input h: the softmax does
    not change. None leaves that tensor as it is."""
    _output_tensors(sym)
    names = []
    for what, name, x in (("weight", sym.output_weight, weight), ("bias", sym.output_bias, bias)):
        if x is not None:
            if name is None:
                raise ValueError(f"{sym.architecture}: no output {what} to shift")
            names.append(name)
    if not names:
        return dict(state)
    out, single = _stack(state, sym, names)
    if bias is not None:
        b = out[sym.output_bias]
        c = torch.as_tensor(bias, dtype=b.dtype, device=b.device).reshape(-1)
        out[sym.output_bias] = b + c[:, None]
    if weight is not None:
        w = out[sym.output_weight]
        v = torch.as_tensor(weight, dtype=w.dtype, device=w.device)
        v = v.reshape(-1, *w.shape[2:])
        out[sym.output_weight] = w + v[:, None]
    return unstack(out, single)


def centre_softmax(
    state: Mapping[str, torch.Tensor], sym: Symmetry, total: float = 1.0
) -> tuple[State, torch.Tensor | None, torch.Tensor | None]:
    """Remove the softmax's additive freedom (docs/maths.md, section 2.5): subtract from every
    row of the output weight the mean row, so that each column sums to 0 over the outputs,
    and add one constant to every output bias so that they sum to ``total``. Returns the new
    state, the (n,) bias shifts c and the (n, *row) weight shifts v (the state is
    ``shift_output(state, sym, c, v)``); None for a tensor the structure does not have."""
    out, single = _stack(state, sym, _output_tensors(sym))
    c = None if sym.output_bias is None else _bias_shift(out[sym.output_bias], total)
    v = None if sym.output_weight is None else -out[sym.output_weight].mean(dim=1)
    out = shift_output(out, sym, c, v)
    if single:
        c, v = (None if c is None else c[0]), (None if v is None else v[0])
    return unstack(out, single), c, v


def random_output_shifts(
    sym: Symmetry,
    n: int,
    generator: torch.Generator | None = None,
    dtype=torch.float64,
    device=None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """n random elements of the softmax group, (bias (n,), weight (n, *row)) for
    `shift_output`: the bias constant standard normal, the weight vector's entries normal
    with standard deviation 1 / sqrt(row size) (the scale of a default-initialised layer).
    None for a tensor the structure does not have."""
    c = v = None
    if sym.output_bias is not None:
        c = torch.randn(n, generator=generator, dtype=dtype).to(device)
    if sym.output_weight is not None:
        row = sym.shapes[sym.output_weight][1:]
        v = torch.randn(n, *row, generator=generator, dtype=dtype) / math.sqrt(math.prod(row))
        v = v.to(device)
    return c, v


def identity_permutations(sym: Symmetry, n: int, device=None) -> dict[str, torch.Tensor]:
    return {g.name: torch.arange(g.width, device=device).repeat(n, 1) for g in sym.groups}


def random_permutations(
    sym: Symmetry, n: int, generator: torch.Generator | None = None, device=None
) -> dict[str, torch.Tensor]:
    """n admissible permutation sets drawn uniformly: random within blocks, and one random
    block permutation per coupling (blocks of uncoupled grouped layers stay in place)."""
    block_perm: dict[str, torch.Tensor] = {}
    for coupling in sym.couplings:
        sigma = torch.rand(n, sym.group(coupling[0]).blocks, generator=generator).argsort(dim=1)
        for name in coupling:
            block_perm[name] = sigma
    perms = {}
    for g in sym.groups:
        within = torch.rand(n, g.blocks, g.block_width, generator=generator).argsort(dim=2)
        sigma = block_perm.get(g.name, torch.arange(g.blocks).repeat(n, 1))
        perms[g.name] = (sigma[:, :, None] * g.block_width + within).reshape(n, g.width).to(device)
    return perms


def random_scales(
    sym: Symmetry,
    n: int,
    generator: torch.Generator | None = None,
    spread: float = 1.0,
    dtype=torch.float64,
    device=None,
) -> dict[str, torch.Tensor]:
    """n scale sets, log-normal with standard deviation ``spread`` in log space."""
    return {
        s.name: torch.exp(
            spread
            * torch.randn(n, sym.unit_group_of(s.name).width, generator=generator, dtype=dtype)
        ).to(device)
        for s in sym.scale_groups
    }


def invert_permutations(perms: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.argsort(dim=-1) for k, v in perms.items()}


def log10_factorial(k: int) -> float:
    return math.lgamma(k + 1) / math.log(10)

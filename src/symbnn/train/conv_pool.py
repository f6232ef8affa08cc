"""OptuNet's first convolution, ReLU and max-pool fused into one CPU pass per model, forward and
backward, vectorised over the batch: the CPU route of `symbnn.train.optunet_stacked`.

Layout: a model's batch is stored batch-last, images (C, H, W, B), and so are its pooled maps
and the position of each window's maximum, (C1, Hp, Wp, B). For one pooling window the pass
reads the window's input patch (C x S x S pixels, S = pool + k1 - 1) of every image, takes the
k1 x k1 convolution at each of the pool x pool positions, keeps the first maximum (in window
order, as `F.max_pool2d`) and its position, and applies the ReLU to it. The batch is the
innermost loop, so each of these steps is one vector instruction for 8 or 16 images; the
backward reads the same patches and adds each image's gradient times the patch pixels under its
maximum into the kernel's gradient (conv1's input needs no gradient).

Why generated: LLVM vectorises the batch loop only when its body is straight-line code (loops
inside it, even of constant length, kept it scalar: 0.5-1 ms a model-step against 0.06-0.07
for the default OptuNet, batch 64, one core), and numba has no compile-time unrolling, so the
body is written out for the layer's geometry (input channels, kernel and pool sizes: three
integers of the model, never data) and compiled at first use, 2-4 s per pass and dtype. The
source is written to symbnn's cache folder (`symbnn.cachedir`: the user's own, trusted like
the installed package) under its hash and checked against the generator's text before it is
imported; numba keeps the machine code beside it, so later processes (a workflow's jobs) load
it in about 0.5 s.
Profiled on one core, forward and backward took 0.12-0.13 ms a model-step where the Toeplitz
matmuls, pooling passes and patch gather of the other route took about 0.45 ms (an
observation; `benchmarks/train_throughput.py` measures the whole trainer). The pass computes
the same function up to float summation order, and a model's arithmetic depends on nothing
but its own batch.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from symbnn.atomic import atomic_write
from symbnn.cachedir import cache_dir

# the straight-line body holds in_channels * k1^2 * pool^2 products: compile time grows with it
# (about 1.5 s at OptuNet's 144), so larger geometries keep the matmul route
MAX_PRODUCTS = 2048
# pool^2 positions are stored as int8
MAX_POSITIONS = 127
# the generated sources and numba's machine code for them, under symbnn's cache folder
KERNEL_DIR = "kernels"


def fits(in_channels: int, kernel: int, pool: int) -> bool:
    """Whether the fused pass is generated for this geometry."""
    return pool * pool <= MAX_POSITIONS and in_channels * kernel**2 * pool**2 <= MAX_PRODUCTS


def _patch_loads(lines: list[str], channels: int, side: int, indent: str) -> None:
    """v{c}_{y}_{x}: pixel (c, y, x) of the window's patch, for image b."""
    for c in range(channels):
        for y in range(side):
            for x in range(side):
                lines.append(f"{indent}v{c}_{y}_{x} = images[{c}, y0 + {y}, x0 + {x}, b]")


def _tap(c: int, i: int, j: int, kernel: int) -> int:
    """Index of kernel entry (c, i, j) in a flat (C, k, k) kernel."""
    return (c * kernel + i) * kernel + j


def _window_loops(
    signature: str, per_output: list[str], per_window: list[str], pool: int
) -> list[str]:
    """The loops both passes share, down to the batch loop's header: per output channel o
    (`per_output` first), per pooling window (py, px), whose patch starts at (y0, x0)
    (`per_window` first), per image b."""
    return [
        f"def {signature}:",
        "    n_out, hp, wp, nb = pooled.shape",
        "    for o in range(n_out):",
        *(f"        {line}" for line in per_output),
        "        for py in range(hp):",
        "            for px in range(wp):",
        f"                y0 = py * {pool}",
        f"                x0 = px * {pool}",
        *(f"                {line}" for line in per_window),
        "                for b in range(nb):",
    ]


def forward_source(in_channels: int, kernel: int, pool: int) -> str:
    """Python source of `forward(images, weight, pooled, first)`: images (C, H, W, B), weight
    (C1, C * k * k); writes relu(max-pool(conv1)) into pooled (C1, Hp, Wp, B) and each window's
    first maximum (position dy * pool + dx) into first (C1, Hp, Wp, B)."""
    side, taps = pool + kernel - 1, in_channels * kernel * kernel
    lines = _window_loops(
        "forward(images, weight, pooled, first)",
        [f"w{t} = weight[o, {t}]" for t in range(taps)],
        ["out = pooled[o, py, px]", "at_max = first[o, py, px]"],
        pool,
    )
    body = " " * 20
    _patch_loads(lines, in_channels, side, body)
    for dy in range(pool):
        for dx in range(pool):
            products = " + ".join(
                f"w{_tap(c, i, j, kernel)} * v{c}_{dy + i}_{dx + j}"
                for c in range(in_channels)
                for i in range(kernel)
                for j in range(kernel)
            )
            lines.append(f"{body}z = {products}")
            position = dy * pool + dx
            if position == 0:
                lines += [f"{body}best = z", f"{body}at = 0"]
            else:
                # a NaN wins once and then stays, as in torch's max
                lines += [
                    f"{body}wins = (z > best) | (z != z)",
                    f"{body}at = {position} if wins else at",
                    f"{body}best = z if wins else best",
                ]
    lines += [
        f"{body}out[b] = 0.0 if best <= 0 else best",  # the ReLU, NaN kept
        f"{body}at_max[b] = at",
    ]
    return "\n".join(lines) + "\n"


def backward_source(in_channels: int, kernel: int, pool: int) -> str:
    """Python source of `backward(images, d_pooled, pooled, first, d_weight)`: the gradient
    with respect to conv1's weight (C1, C * k * k) from the gradient with respect to the
    pooled maps (C1, Hp, Wp, B) (through the ReLU: zero where the map is not positive)."""
    side, taps = pool + kernel - 1, in_channels * kernel * kernel
    lines = _window_loops(
        "backward(images, d_pooled, pooled, first, d_weight)",
        [f"g{t} = 0.0" for t in range(taps)],
        ["grad = d_pooled[o, py, px]", "out = pooled[o, py, px]", "at_max = first[o, py, px]"],
        pool,
    )
    body = " " * 20
    _patch_loads(lines, in_channels, side, body)
    lines += [f"{body}d = grad[b] if out[b] > 0 else 0.0", f"{body}at = at_max[b]"]
    lines += [f"{body}at{p} = at == {p}" for p in range(1, pool * pool)]
    # each tap's pixel under the maximum, picked by a chain of selects (measured 1.7x faster
    # than a sum over the window's positions of the gradient masked to the maximum)
    for c in range(in_channels):
        for i in range(kernel):
            for j in range(kernel):
                lines.append(f"{body}u = v{c}_{i}_{j}")
                for p in range(1, pool * pool):
                    dy, dx = divmod(p, pool)
                    lines.append(f"{body}u = v{c}_{dy + i}_{dx + j} if at{p} else u")
                lines.append(f"{body}g{_tap(c, i, j, kernel)} += d * u")
    lines += [f"        d_weight[o, {t}] = g{t}" for t in range(taps)]
    return "\n".join(lines) + "\n"


def _kernel_file(name: str, source: str) -> Path | None:
    """The generated source as a file of the kernel cache, named by its hash and checked to
    hold exactly `source` (rewritten otherwise); None where the cache cannot be written."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = cache_dir() / KERNEL_DIR / f"conv_pool_{name}_{digest}.py"
    try:
        if not path.is_file() or path.read_text() != source:
            atomic_write(path, lambda tmp: tmp.write_text(source))
    except (OSError, UnicodeDecodeError):
        return None
    return path


def _compile(source: str, name: str, fastmath: set[str]) -> Callable:
    """`source`'s function `name`, compiled by numba. From a file of the kernel cache, so that
    numba keeps the machine code beside it and the next process skips the ~2-4 s compile;
    else from the string, compiled in every process."""
    import numba  # here: a process that never trains an OptuNet on a CPU skips its import

    options = {"nogil": True, "error_model": "numpy", "boundscheck": False, "fastmath": fastmath}
    path = _kernel_file(name, source)
    if path is None:
        namespace: dict = {}
        exec(compile(source, f"<symbnn.train.conv_pool.{name}>", "exec"), namespace)
        return numba.njit(**options)(namespace[name])
    # registered under its name: numba's cached machine code finds its module by that name
    module_name = f"symbnn_kernel_{path.stem}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[module_name] = module
    return numba.njit(cache=True, **options)(getattr(module, name))


@functools.cache
def kernels(in_channels: int, kernel: int, pool: int) -> tuple[Callable, Callable]:
    """(forward, backward) for the geometry, compiled at their first call per dtype.

    The forward keeps IEEE order within each sum ("contract": fused multiply-adds only); the
    backward's sums over the batch may be reordered into vector lanes ("reassoc"): a fixed
    order for a given batch size, the same for a model alone or beside others."""
    if not fits(in_channels, kernel, pool):
        raise ValueError(
            f"no fused conv1 pass for {in_channels} channels, kernel {kernel}, pool {pool}"
        )
    forward = _compile(forward_source(in_channels, kernel, pool), "forward", {"contract"})
    backward = _compile(
        backward_source(in_channels, kernel, pool), "backward", {"contract", "reassoc"}
    )
    return forward, backward

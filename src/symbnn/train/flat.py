"""K models' parameters in one (K, width) tensor, with a (K, *shape) view per name.

One elementwise SGD update then covers every parameter of every model (a handful of ops per
step instead of a handful per parameter tensor), gradients are written straight into their
place, and each view's model blocks start on 64-byte boundaries (offsets and width padded, see
`symbnn.train.workspace`), so views can go into batched matmuls as they are. The padding
holds zeros, whose gradient is zero: SGD keeps it at zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from symbnn.train.workspace import padded_numel


class FlatStack:
    def __init__(
        self,
        shapes: Mapping[str, Sequence[int]],
        k: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}
        self.offsets, width = {}, 0
        for name, shape in self.shapes.items():
            self.offsets[name] = width
            width += padded_numel(math.prod(shape), dtype)
        self.data = torch.zeros(k, width, dtype=dtype, device=device)
        self._index: torch.Tensor | None = None
        self.views = {
            name: self.data[:, offset : offset + math.prod(shape)].view(k, *shape)
            for (name, shape), offset in zip(self.shapes.items(), self.offsets.values())
        }

    @property
    def index(self) -> torch.Tensor:
        """The positions in a row of the parameters, name after name, padding left out."""
        if self._index is None:
            self._index = torch.cat(
                [
                    torch.arange(offset, offset + math.prod(self.shapes[name]))
                    for name, offset in self.offsets.items()
                ]
            ).to(self.data.device)
        return self._index

    def packed(self) -> torch.Tensor:
        """(K, number of parameters): each model's parameters as one vector, name after name
        (as `torch.cat` of a module's flattened parameters gives them)."""
        return self.data.index_select(1, self.index)

    def unpack_(self, packed: torch.Tensor) -> None:
        """Set the parameters from `packed` vectors (the layout `packed` returns)."""
        self.data.index_copy_(1, self.index, packed)

    @classmethod
    def of(cls, stacked: Mapping[str, torch.Tensor]) -> FlatStack:
        """A flat copy of `stacked` (name -> (K, *shape) tensors of one dtype and device)."""
        first = next(iter(stacked.values()))
        flat = cls(
            {name: t.shape[1:] for name, t in stacked.items()},
            first.shape[0],
            first.device,
            first.dtype,
        )
        for name, tensor in stacked.items():
            flat.views[name].copy_(tensor)
        return flat

    def repeat_row(self, row: int, times: int) -> FlatStack:
        """A stack of `times` copies of model `row`, in the same layout."""
        out = self.zeros_like(times)
        out.data.copy_(self.data[row].expand(times, -1))
        return out

    def zeros_like(self, k: int | None = None) -> FlatStack:
        k = self.data.shape[0] if k is None else k
        return FlatStack(self.shapes, k, self.data.device, self.data.dtype)

    def rows(self, part: slice) -> dict[str, torch.Tensor]:
        """Views of models `part` (name -> (k, *shape))."""
        return {name: view[part] for name, view in self.views.items()}

    def unflatten(self) -> dict[str, torch.Tensor]:
        """Contiguous (K, *shape) copies per name."""
        return {
            name: view.clone(memory_format=torch.contiguous_format)
            for name, view in self.views.items()
        }

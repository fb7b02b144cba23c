"""Tensors derived from a module's parameters at inference (the budgeting networks' stacked first
layers, the compiled allocation's packed weights), kept on the module while the parameters they
were made from are unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from torch import Tensor, nn

T = TypeVar("T")


def kept(owner: nn.Module, slot: str, build: Callable[[], tuple[Sequence[Tensor], T]],
         current: Sequence[Tensor] | None = None) -> T:
    """The value ``build()`` returns with the tensors it was made from, made once and kept on
    ``owner`` under ``slot`` until one of those tensors changes: new data (``module.to``, a
    parameter's ``.data`` set) has another ``data_ptr``, an in-place update (an optimiser step,
    ``load_state_dict``) another ``_version``. ``current``: the tensors as the module holds them
    now, when reading them is cheap: a parameter replaced by another tensor then counts as a
    change too."""
    cached = owner.__dict__.get(slot)
    if (cached is None or any(p.data_ptr() != ptr or p._version != v for p, ptr, v in cached[0])
            or (current is not None and any(p is not q for (p, _, _), q in zip(cached[0], current, strict=True)))):
        sources, value = build()
        cached = owner.__dict__[slot] = ([(p, p.data_ptr(), p._version) for p in sources], value)
    return cached[1]

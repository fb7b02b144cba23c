"""The allocation of one layer in one compiled call (``allocate.c``), for inference on a CPU.

At batch 1 the eager allocation — pooling, the budgeting networks, the budget's k, the ranking of
the heads — is a dozen tensor operations of a few µs each, plus the Python between them; on a
short input that is as much as half the heads save. ``allocate.c`` does the same arithmetic in
one C function called through :mod:`ctypes` (no PyTorch headers, so it builds in a second).

``make`` builds it (``python -m budgetformer_core.model.native``). Where it is not built — no C
compiler, or built from another version of the source — :func:`library` says so once in one line and
the allocators run the eager path, which gives the same heads (tested): the compiled values agree
with the eager ones to float32 rounding.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import hashlib
import os
import shlex
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("allocate.c")
LIBRARY = Path(__file__).with_name("_allocate.so")
POOLING = {"mean": 0, "mean_max": 0, "first": 1, "pooler": 1}
"""The summary the networks read, by ``ModelConfig.pooling`` (as :func:`~budgetformer_core.model.budget.summarize`)."""
NORM_NONE, NORM_RUNNING, NORM_LAYER = 0, 1, 2


def source_hash(source: Path = SOURCE) -> str:
    """The sha256 of the C source, which a library built from it carries (``bf_source``)."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def build(cc: str | None = None, source: Path = SOURCE, out: Path = LIBRARY) -> str | None:
    """Compile ``source`` into the library ``out`` with ``cc`` (default ``$CC`` or ``cc``).
    Returns None when built, else why not in one line (a library already at ``out`` is kept)."""
    compiler = shlex.split(cc or os.environ.get("CC") or "cc")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [*compiler, "-O3", "-fPIC", "-shared", "-ffp-contract=off", f'-DBF_SOURCE="{source_hash(source)}"',
           "-o", str(tmp), str(source), "-lm"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except OSError as err:
        return f"no C compiler ({compiler[0]}: {err.strerror})"
    except subprocess.TimeoutExpired:
        return f"{compiler[0]} took over 120 s"
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"{compiler[0]} failed: {lines[0] if lines else f'exit status {done.returncode}'}"
    tmp.replace(out)  # atomic: a running process never reads a half-written library
    library.cache_clear()
    return None


_P, _L = ctypes.c_void_p, ctypes.c_int64
_ARGS = [_P, _L, _L, _L, _P, _P, _P, _P, _P, _P, _P]


@functools.cache
def library(path: Path = LIBRARY, source: Path = SOURCE) -> ctypes._CFuncPtr | None:
    """``bf_allocate`` from the library at ``path``, or None, with a one-line notice, when there is
    none, it cannot be loaded, or it was built from another version of ``source``."""
    problem = None
    if not path.exists():
        problem = "not built"
    else:
        try:
            lib = ctypes.CDLL(str(path))
            lib.bf_source.restype = ctypes.c_char_p
            if lib.bf_source().decode() != source_hash(source):
                problem = f"built from another version of {source.name}"
        except (OSError, AttributeError) as err:
            problem = f"unusable ({err})"
    if problem:
        warnings.warn(f"compiled head allocation {problem} (`make setup` builds it): the eager path runs, "
                      "the same heads at a higher cost per layer", RuntimeWarning, stacklevel=2)
        return None
    fn = lib.bf_allocate
    fn.argtypes, fn.restype = _ARGS, ctypes.c_int
    return fn


_COMPILED = contextvars.ContextVar("compiled_allocation", default=True)


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Within this block (this thread or task only) the allocators run the eager path: to compare
    the two, or to time what the compiled call saves."""
    token = _COMPILED.set(False)
    try:
        yield
    finally:
        _COMPILED.reset(token)


MAX_ELEMENTS = 1 << 20
"""The largest layer input (B·T·D numbers) the compiled call takes. It pays where the eager
path's cost is per operation (a typed text: 46 against 138 µs a layer on MiniLM at 32 tokens); its
plain loops pool a large batch slower than PyTorch's vectorised mean (32 × 128 tokens on MiniLM:
605 against 562 µs a layer)."""


def usable(x: Tensor) -> bool:
    """True when ``x`` can go through the compiled allocation: float32 on the CPU, autograd off,
    at most :data:`MAX_ELEMENTS` numbers, the library built and not switched off (:func:`eager`)."""
    return (x.dtype == torch.float32 and x.device.type == "cpu" and x.numel() <= MAX_ELEMENTS
            and not torch.is_grad_enabled() and _COMPILED.get() and library() is not None)


def pack(
    firsts: list[tuple[Tensor, Tensor]], f_last: tuple[Tensor, Tensor] | None, g_last: tuple[Tensor, Tensor],
    pooling: str, norm: tuple[int, Tensor | None, Tensor | None, float], tanh_gelu: bool, tau: float | None = None,
) -> tuple[Tensor, Tensor, int, bool]:
    """The weights and sizes :func:`allocate` reads, laid out as ``allocate.c`` says, with H and
    whether f_θ runs (as numbers, so a call reads no tensor for them).

    Args:
        firsts: the first layer (weight (Mi, D), bias (Mi,)) of f_θ then g_φ, or of g_φ alone.
        f_last: f_θ's last layer (weight (1, Mf), bias (1,)), or None when f_θ does not run.
        g_last: g_φ's last layer (weight (H, Mg), bias (H,)).
        norm: (kind, running mean (D,), running variance (D,), eps) of the summary's
            standardisation: :data:`NORM_NONE`, :data:`NORM_RUNNING` or :data:`NORM_LAYER`.
        tau: rank the heads by p = softmax(z / tau), as BudgetFormer's eager path does (heads
            whose p underflows to the same value go in index order); None: by z (bba's gates).
    """
    kind, mean, var, eps = norm
    with torch.no_grad():
        w1 = torch.cat([w for w, _ in firsts])  # (M, D)
        parts = [w1.t().reshape(-1), torch.cat([b for _, b in firsts])]
        if f_last is not None:
            parts += [f_last[0].reshape(-1), f_last[1].reshape(1)]
        else:
            parts.append(w1.new_zeros(1))
        parts += [g_last[0].reshape(-1), g_last[1]]
        if kind == NORM_RUNNING:
            parts += [mean, var]
        if kind != NORM_NONE:
            parts.append(w1.new_full((1,), eps))
        if tau is not None:
            parts.append(w1.new_full((1,), tau))
        packed = torch.cat([p.float() for p in parts]).contiguous()
    M, Mf, H = w1.shape[0], 0 if f_last is None else f_last[0].shape[1], g_last[0].shape[0]
    dims = torch.tensor([M, Mf, H, POOLING[pooling], kind, int(tanh_gelu), int(tau is not None)], dtype=torch.long)
    return packed, dims, H, f_last is not None


def allocate(x: Tensor, mask: Tensor | None, packed: Tensor, dims: Tensor, H: int, with_s: bool
             ) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None]:
    """s (B,) or None, z (B, H), the heads ranked as :func:`pack` says (B, H) and k (B,) or None (None:
    without f_θ), for the layer input x (B, T, D) and ``mask`` (B, T) or None, with the weights
    of :func:`pack`."""
    B, T, D = x.shape
    x = x.contiguous()
    m = None if mask is None else mask.to(torch.uint8).contiguous()
    # separate tensors, not views of one: a view costs more than an allocation at this size
    s, k = (torch.empty(B), torch.empty(B, dtype=torch.long)) if with_s else (None, None)
    z, order = torch.empty(B, H), torch.empty(B, H, dtype=torch.long)
    if library()(x.data_ptr(), B, T, D, None if m is None else m.data_ptr(), packed.data_ptr(), dims.data_ptr(),
                 None if s is None else s.data_ptr(), z.data_ptr(), None if k is None else k.data_ptr(),
                 order.data_ptr()):
        raise MemoryError("compiled head allocation: out of memory")
    return s, z, order, k

"""A layer's allocation and its attention, each in one compiled call, for inference on a CPU.

At batch 1 the eager allocation — pooling, the budgeting networks, the budget's k, the ranking of
the heads — is a dozen tensor operations of a few µs each, plus the Python between them, and so is
running the chosen heads (gathering their weights, the projections, the attention, the output);
on a short input that is as much as half the heads save. Two C functions called through
:mod:`ctypes` do the same arithmetic (no PyTorch headers, so they build in a second):

* ``allocate.c`` (:func:`allocate`): the summary, f_θ and g_φ, k and the ranking of the heads;
* ``attend.c`` (:func:`attend`): the chosen heads' attention, their weights read where they lie;
  its matrix products are the BLAS ``sgemm_`` of PyTorch's own library (:func:`blas`);
* both in one call (:func:`allocate_attend`, ``bf_allocate_attend`` in ``attend.c``): the
  structural path at inference, each input running the first k heads of the ranking just made,
  with nothing between the two but C.

``make`` builds them (``python -m budgetformer_core.model.native``). Where the library is not
built — no C compiler, or built from another version of the sources — or PyTorch's library has no
``sgemm_``, :func:`library` / :func:`attention` say so once in one line and the eager path runs,
which gives the same heads and predictions (tested): the compiled values agree with the eager
ones to float32 rounding.
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

SOURCES = (Path(__file__).with_name("allocate.c"), Path(__file__).with_name("attend.c"))
LIBRARY = Path(__file__).with_name("_native.so")
POOLING = {"mean": 0, "mean_max": 0, "first": 1, "pooler": 1}
"""The summary the networks read, by ``ModelConfig.pooling`` (as :func:`~budgetformer_core.model.budget.summarize`)."""
NORM_NONE, NORM_RUNNING, NORM_LAYER = 0, 1, 2


def source_hash(sources: tuple[Path, ...] = SOURCES) -> str:
    """The sha256 of the C sources, which a library built from them carries (``bf_source``)."""
    return hashlib.sha256(b"".join(source.read_bytes() for source in sources)).hexdigest()


def build(cc: str | None = None, sources: tuple[Path, ...] = SOURCES, out: Path = LIBRARY) -> str | None:
    """Compile ``sources`` into the library ``out`` with ``cc`` (default ``$CC`` or ``cc``).
    Returns None when built, else why not in one line (a library already at ``out`` is kept).
    ``-fno-trapping-math`` and ``-fopenmp-simd`` let the softmax's loops be vectorised; no flag
    reorders the arithmetic."""
    compiler = shlex.split(cc or os.environ.get("CC") or "cc")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [*compiler, "-O3", "-fPIC", "-shared", "-ffp-contract=off", "-fno-trapping-math", "-fopenmp-simd",
           f'-DBF_SOURCE="{source_hash(sources)}"', "-o", str(tmp), *map(str, sources), "-lm"]
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


@functools.cache
def library(path: Path = LIBRARY, sources: tuple[Path, ...] = SOURCES) -> ctypes.CDLL | None:
    """The library at ``path`` (``bf_allocate``, ``bf_attend``), or None, with a one-line notice,
    when there is none, it cannot be loaded, or it was built from another version of ``sources``."""
    problem = None
    if not path.exists():
        problem = "not built"
    else:
        try:
            lib = ctypes.CDLL(str(path))
            lib.bf_source.restype = ctypes.c_char_p
            if lib.bf_source().decode() != source_hash(sources):
                problem = f"built from another version of {', '.join(source.name for source in sources)}"
        except (OSError, AttributeError) as err:
            problem = f"unusable ({err})"
    if problem:
        warnings.warn(f"compiled head allocation and attention {problem} (`make setup` builds it): the eager "
                      "path runs, the same heads at a higher cost per layer", RuntimeWarning, stacklevel=2)
        return None
    lib.bf_allocate.argtypes, lib.bf_allocate.restype = [_P, _L, _L, _L, _P, _P, _P, _P, _P, _P, _P, _P], ctypes.c_int
    lib.bf_attend.argtypes = [_P, _L, _L, _L, _L, _L, _P, _L, _L, _P, _P, _P, _P, _P, _P, _P]
    lib.bf_allocate_attend.argtypes = [_P, _P, _L, _L, _L, _P, _P, _P, _L, _L, ctypes.c_float, _L, _P, _P, _P, _P,
                                       _P, _P, _P, _P, _P]
    lib.bf_attend.restype = lib.bf_allocate_attend.restype = ctypes.c_int
    return lib


def blas() -> int | None:
    """The address of ``sgemm_`` (single-precision BLAS, 32-bit integers) in PyTorch's own CPU
    library, which its matrix products use; None where that library does not export it."""
    try:
        return ctypes.cast(ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).sgemm_,
                           ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


@functools.cache
def attention() -> ctypes.CDLL | None:
    """The library with its matrix products set to PyTorch's ``sgemm_`` (``bf_attend``,
    ``bf_allocate_attend``); None, with a one-line notice where the library is there but PyTorch's
    has no ``sgemm_``."""
    lib = library()
    if lib is None:
        return None
    address = blas()
    if address is None:
        warnings.warn("PyTorch's library exports no sgemm_: the chosen heads' attention runs on the eager "
                      "path (the same heads at a higher cost per layer)", RuntimeWarning, stacklevel=2)
        return None
    lib.bf_set_sgemm(ctypes.c_void_p(address))
    return lib


_ALLOCATION = contextvars.ContextVar("compiled_allocation", default=True)
_ATTENTION = contextvars.ContextVar("compiled_attention", default=True)


@contextlib.contextmanager
def eager(allocation: bool = True, attention: bool = True) -> Iterator[None]:
    """Within this block (this thread or task only) the allocators (``allocation``) and the
    attention layers (``attention``) run the eager path: to compare the two, or to time what the
    compiled calls save."""
    tokens = [(var, var.set(False)) for var, off in ((_ALLOCATION, allocation), (_ATTENTION, attention)) if off]
    try:
        yield
    finally:
        for var, token in tokens:
            var.reset(token)


MAX_ELEMENTS = 1 << 20
"""The largest layer input (B·T·D numbers) the compiled calls take. It pays where the eager
path's cost is per operation (a typed text: 46 against 138 µs a layer on MiniLM at 32 tokens); its
plain loops pool a large batch slower than PyTorch's vectorised mean (32 × 128 tokens on MiniLM:
605 against 562 µs a layer)."""


def _at_inference(x: Tensor) -> bool:
    """What both compiled calls ask of a layer input: float32 on the CPU, at most
    :data:`MAX_ELEMENTS` numbers, autograd off."""
    return (x.dtype == torch.float32 and x.device.type == "cpu" and x.numel() <= MAX_ELEMENTS
            and not torch.is_grad_enabled())


def usable(x: Tensor) -> bool:
    """True when ``x`` can go through the compiled allocation: :func:`_at_inference`, the library
    built and not switched off (:func:`eager`)."""
    return _at_inference(x) and _ALLOCATION.get() and library() is not None


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
    if library().bf_allocate(x.data_ptr(), B, T, D, None if m is None else m.data_ptr(), packed.data_ptr(),
                             dims.data_ptr(), None if s is None else s.data_ptr(), z.data_ptr(),
                             None if k is None else k.data_ptr(), order.data_ptr(), None):
        raise MemoryError("compiled head allocation: out of memory")
    return s, z, order, k


def attention_usable(x: Tensor, params: tuple[Tensor | None, ...]) -> bool:
    """True when the attention of ``x`` with the layer's ``params`` (Q/K/V weight and bias, output
    weight and bias) can go through :func:`attend`: all float32 on the CPU and contiguous, at most
    :data:`MAX_ELEMENTS` numbers in x, autograd off, the library built and not switched off
    (:func:`eager`). A larger batch runs faster on the eager path, whose kernels use every thread
    (evaluating 400 BBC test texts in batches of 64 on two threads: 3.2 against 2.7 s)."""
    return (_at_inference(x) and _ATTENTION.get() and attention() is not None
            and all(p is not None and p.dtype == torch.float32 and p.is_contiguous() for p in params))


def attend(x: Tensor, mask: Tensor | None, heads: Tensor, w: Tensor | None, params: tuple[Tensor, ...],
           d_head: int) -> Tensor:
    """The attention of the layer input x (B, T, D) over the heads ``heads``, (k,) shared by the
    batch or (B, k) one set per input, each input's head weights w (B, k) (None: 1), real tokens
    ``mask`` (B, T) (None: all), with the layer's ``params``: the fused projection's weight
    (3·H·Dh, D) and bias, the output projection's weight (D, H·Dh) and bias. Returns (B, T, D)."""
    B, T, D = x.shape
    w_qkv, b_qkv, w_out, b_out = params
    m = None if mask is None else mask.to(torch.uint8).contiguous()
    w = None if w is None else w.float().contiguous()
    x, heads, result = x.contiguous(), heads.to(torch.int64).contiguous(), torch.empty(B, T, D)
    H = w_qkv.shape[0] // (3 * d_head)
    failed = attention().bf_attend(x.data_ptr(), B, T, D, H, d_head, heads.data_ptr(), heads.shape[-1], heads.dim() - 1,
                         None if w is None else w.data_ptr(), None if m is None else m.data_ptr(), w_qkv.data_ptr(),
                         b_qkv.data_ptr(), w_out.data_ptr(), b_out.data_ptr(), result.data_ptr())
    if failed == 2:
        raise IndexError(f"head indices must be among 0..{H - 1}, got {heads.tolist()}")
    if failed:
        raise MemoryError("compiled attention: out of memory")
    return result


def allocate_attend(xa: Tensor, x: Tensor, mask: Tensor | None, packed: Tensor, dims: Tensor, H: int, with_s: bool,
                    k: int, params: tuple[Tensor, ...], d_head: int, scaled: bool = False, budget: float = 0.0
                    ) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None, Tensor]:
    """:func:`allocate` of ``xa`` and :func:`attend` of x (B, T, D) over each input's first heads of
    the ranking it gives, in one call: s (B,) or None, z (B, H), the ranking (B, H), k (B,) or
    None, and the attention (B, T, D). ``xa``: what the allocation reads (the layer input x, or
    bba's embedding output); k: heads per input, or 0 for each input's k from f_θ (``with_s``);
    ``scaled``: the heads weighted s·H·p (s: f_θ's, or ``budget`` when k is given), else 1;
    ``params`` and ``d_head`` as :func:`attend`."""
    B, T, D = x.shape
    m = None if mask is None else mask.to(torch.uint8).contiguous()
    xa, x = xa.contiguous(), x.contiguous()
    s, kk = (torch.empty(B), torch.empty(B, dtype=torch.long)) if with_s else (None, None)
    z, order, result = torch.empty(B, H), torch.empty(B, H, dtype=torch.long), torch.empty(B, T, D)
    w_qkv, b_qkv, w_out, b_out = params
    failed = attention().bf_allocate_attend(
        xa.data_ptr(), x.data_ptr(), B, T, D, None if m is None else m.data_ptr(), packed.data_ptr(), dims.data_ptr(),
        k, scaled, budget, d_head, w_qkv.data_ptr(), b_qkv.data_ptr(), w_out.data_ptr(),
        b_out.data_ptr(), None if s is None else s.data_ptr(), z.data_ptr(), None if kk is None else kk.data_ptr(),
        order.data_ptr(), result.data_ptr())
    if failed == 2:
        raise ValueError(f"compiled allocation and attention: k must be among 1..{H} (or 0 with f_θ), got {k}")
    if failed:
        raise MemoryError("compiled allocation and attention: out of memory")
    return s, z, order, kk, result

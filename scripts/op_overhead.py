"""What one small tensor operation costs at batch 1, against a dense forward pass.

    .venv/bin/python scripts/op_overhead.py [--checkpoint DIR] [--seq-len 32] [--clock cpu]

Times, on one thread with the engine's interleaved timer, the operations a BudgetFormer layer
adds between its input and its structural attention (mean-pooling, g_φ's two matmuls and GELU,
softmax, sort, the top-k mask) on the layer's real input, next to one layer's whole allocation
(compiled, and on the eager path) and a dense forward pass of ``--seq-len`` tokens, and prints
each as a share of the dense pass: the floor under the budgeting overhead at short lengths,
whatever the code around it does. Whole passes (dense; b = 0.5 with the compiled calls, the
eager path, and the allocation and attention as two compiled calls rather than one) are timed
in rounds of their own, and so is one layer's attention (dense
and at b = 0.5, each compiled and on the eager path, and the eager path's gather of the chosen
heads' weights), with one layer's allocation and attention in one compiled call against two.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.measure.timing import machine_info, time_interleaved
from budgetformer_core.model import native
from budgetformer_core.model.budget import Control, rank_heads, select_top_k
from budgetformer_core.model.trace import ForwardContext
from budgetformer_core.shipped import checkpoint_dir, relative


def eager(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the eager path (what the compiled calls replace)."""
    with native.eager():
        return fn(*args, **kwargs)


def two_calls(model, *args, **kwargs):
    """``model(*args, **kwargs)`` with each layer's allocation and attention as two compiled calls
    (``Allocator.runs_attention`` off), not one."""
    method = type(model.allocators[0])
    method.runs_attention, kept = False, method.runs_attention
    try:
        return model(*args, **kwargs)
    finally:
        method.runs_attention = kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(relative(checkpoint_dir("bbc-budgetformer"))))
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    model = load_checkpoint(args.checkpoint).model.eval()
    ids = torch.randint(3, model.cfg.vocab_size, (1, args.seq_len))
    mask = torch.ones_like(ids, dtype=torch.bool)
    layer = model.layers[0]
    first, _, last = layer.alloc.scorer.net
    with torch.inference_mode():
        x = model.embed(ids)  # (1, T, D)
        xn = layer.ln1(x)
        h = xn.mean(1)  # (1, D)
        hidden = F.linear(h, first.weight, first.bias)  # (1, M)
        z = F.linear(F.gelu(hidden), last.weight, last.bias)  # (1, H)
        order = rank_heads(z)
        ctx = ForwardContext(None, Control(budget=0.5), "structural", x)
        fns = {
            "one layer's allocation (b = 0.5)": lambda: layer.alloc(xn, ctx),
            "the same, eager path": lambda: eager(layer.alloc, xn, ctx),
            "mean-pool (1, T, D)": lambda: xn.mean(1),
            "linear (1, D) -> (1, M)": lambda: F.linear(h, first.weight, first.bias),
            "GELU of (1, M)": lambda: F.gelu(hidden),
            "erf of (1, M) (GELU's arithmetic)": lambda: torch.erf(hidden),
            "linear (1, M) -> (1, H)": lambda: F.linear(hidden, last.weight, last.bias),
            "softmax (1, H)": lambda: torch.softmax(z, -1),
            "sort (1, H)": lambda: rank_heads(z),
            "top-k mask (1, H)": lambda: select_top_k(z, 4, order),
        }
        half = Control(budget=0.5)
        trace = layer.alloc(xn, ctx)  # b = 0.5: the heads the structural path runs
        heads = trace.order[0, : trace.shared_k]
        layers = {  # one layer's attention, dense and at b = 0.5, and the eager path's gather
            "one layer's attention, dense": lambda: layer.attn.dense(xn, None),
            "one layer's attention at b = 0.5 (structural)": lambda: layer.attn(xn, None, trace, "structural"),
            "one layer's attention, dense, eager path": lambda: eager(layer.attn.dense, xn, None),
            "one layer's attention at b = 0.5, eager path": lambda: eager(layer.attn, xn, None, trace, "structural"),
            "gathering the chosen heads' weights (eager path)": lambda: layer.attn.head_slices(heads),
            "one layer's allocation and attention at b = 0.5, one call": lambda: layer.alloc.run(xn, ctx, layer.attn),
            "the same, two calls": lambda: layer.attn(xn, None, layer.alloc(xn, ctx), "structural"),
        }
        passes = {
            "dense forward pass": lambda: model(ids, mask, mode="dense"),
            "forward pass at b = 0.5": lambda: model(ids, mask, control=half),
            "the same pass, eager path": lambda: eager(model, ids, mask, control=half),
            "the same pass, allocation and attention in two calls": lambda: two_calls(model, ids, mask, control=half),
        }
        # whole passes in rounds of their own: one timed right after the small operations runs slower
        stats = time_interleaved(passes, repeats=args.repeats, min_sample_s=0.01, clock=args.clock)
        stats |= time_interleaved(layers, repeats=args.repeats, min_sample_s=0.01, clock=args.clock)
        stats |= time_interleaved(fns, repeats=args.repeats, min_sample_s=0.01, clock=args.clock)
    dense = stats["dense forward pass"].median_ms
    m = machine_info(1)
    print(f"{args.checkpoint}, batch 1 × {args.seq_len} tokens, {args.clock} clock; {m.cpu_model}, "
          f"torch {m.torch_version}, load average {m.load_average}")
    print("| operation | µs | share of a dense pass |\n|---|---|---|")
    for name, s in stats.items():
        print(f"| {name} | {s.median_ms * 1e3:.1f} | {s.median_ms / dense:.1%} |")


if __name__ == "__main__":
    main()

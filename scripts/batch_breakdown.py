"""Where a batch's structural attention spends its time when every input runs its own heads.

    .venv/bin/python scripts/batch_breakdown.py [--checkpoint DIR] [--batch-size 32] [--seq-len 64]

On one layer of the model (its own weights, one thread), times four ways of running the same
attention on a batch of random inputs: dense; k heads shared by the whole batch; k heads per
input, a different set for each; and each input its own k as well (the ``per-input`` row of
``budgetformer bench``, the same seeded mix of k). Then it breaks each one's time down by
operation with ``torch.profiler`` — projections (``addmm`` one GEMM, ``baddbmm`` one small GEMM
per input), attention (``scaled_dot_product_attention``), moving rows and weight slices
(``index``, ``index_select``, ``index_put``, ``copy``) and the rest (views, small ops, Python) —
(each part a share of the timed total, by the profiler's self CPU time) and measures the two
matmuls alone: the same FLOPs as one GEMM over the batch and as one GEMM
per input with that input's weight slice. It prints Markdown tables: the gap between the
per-input row and its FLOP ideal, by where it goes.
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.measure.bench import BUDGETS, per_input_ks
from budgetformer_core.measure.timing import machine_info, time_interleaved
from budgetformer_core.shipped import checkpoint_dir, relative

GROUPS = {  # profiler op name -> the part of the work it belongs to
    "aten::addmm": "projections (GEMM)",
    "aten::baddbmm": "projections (per-input GEMMs)",
    "aten::bmm": "projections (per-input GEMMs)",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention (SDPA)",
    "aten::index": "moving rows / weight slices",
    "aten::index_select": "moving rows / weight slices",
    "aten::_index_put_impl_": "moving rows / weight slices",
    "aten::copy_": "moving rows / weight slices",
}
PARTS = [*dict.fromkeys(GROUPS.values()), "the rest (small ops, Python)"]


def profile_shares(fns: dict[str, object], rounds: int, calls: int = 5) -> dict[str, dict[str, float]]:
    """Each callable's self CPU time by part of the work (:data:`GROUPS`), as shares of its total;
    profiled in interleaved rounds of ``calls`` calls, so that a busy moment of the machine
    falls on every callable alike."""
    parts = {name: Counter() for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(calls):
                    fn()
            for ev in prof.key_averages():
                parts[name][GROUPS.get(ev.key, PARTS[-1])] += ev.self_cpu_time_total
    return {name: {p: t / sum(c.values()) for p, t in c.items()} for name, c in parts.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(relative(checkpoint_dir("ag_news-budgetformer"))))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--k", type=int, default=4, help="heads of the shared-k rows")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = load_checkpoint(args.checkpoint).model.eval()
    attn = model.layers[0].attn
    H, B, T, D = attn.n_heads, args.batch_size, args.seq_len, attn.d_model
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(B, T, D, generator=gen)
    order = torch.stack([torch.randperm(H, generator=gen) for _ in range(B)])  # (B, H) a ranking per input
    ks = torch.tensor(per_input_ks(BUDGETS, H, B, args.seed))  # (B,) bench's per-input mix
    k = torch.full((B,), args.k)
    shared = order[:1].expand(B, H)  # one ranking for the whole batch
    rows = {
        "dense": (lambda: attn.dense(x, None), 1.0),
        f"k = {args.k} shared by the batch": (lambda: attn.run_selected(x, None, shared, k, None), args.k / H),
        f"k = {args.k}, a head set per input": (lambda: attn.run_selected(x, None, order, k, None), args.k / H),
        "per-input k (bench's mix)": (
            lambda: attn.run_selected(x, None, order, ks, None),
            ks.float().mean().item() / H,
        ),
    }
    # the projections alone: Q/K/V of k heads for every input, one GEMM vs one GEMM per input
    w_one, b_one, _ = attn.head_slices(shared[0, : args.k])  # (3·k·Dh, D), (3·k·Dh,)
    w_per, b_per, _ = attn.head_slices(order[:, : args.k])  # (B, 3·k·Dh, D), (B, 1, 3·k·Dh)
    gemms = {
        f"Q/K/V of k = {args.k}: one GEMM (B·T, D) × (D, 3·k·Dh)": (
            lambda: torch.addmm(b_one, x.view(B * T, D), w_one.t())  # (B·T, 3·k·Dh)
        ),
        f"Q/K/V of k = {args.k}: B GEMMs (T, D) × (D, 3·k·Dh)": (
            lambda: torch.baddbmm(b_per, x, w_per.transpose(1, 2))  # (B, T, 3·k·Dh)
        ),
    }
    with torch.inference_mode():
        timed = time_interleaved({n: f for n, (f, _) in rows.items()} | gemms, repeats=args.repeats, clock="cpu")
        shares = profile_shares({n: f for n, (f, _) in rows.items()}, args.repeats)
    m = machine_info(1)
    dense = timed["dense"].median_ms
    print(f"{args.checkpoint}, layer 0's attention, batch {B} × {T} tokens, one thread, cpu clock; "
          f"{m.cpu_model}, torch {m.torch_version}, load average {m.load_average}")
    print(f"per-input k: {ks.tolist()}\n")
    print("| path | heads run | ms | ideal ms | efficiency | " + " | ".join(PARTS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(PARTS))
    for name, (_, frac) in rows.items():
        ms, ideal = timed[name].median_ms, dense * frac
        cells = " | ".join(f"{shares[name].get(p, 0.0) * ms:.2f}" for p in PARTS)
        print(f"| {name} | {frac:.0%} | {ms:.2f} | {ideal:.2f} | {ideal / ms:.2f} | {cells} |")
    print("\n(the parts: the timed ms split by the shares of self CPU time under torch.profiler)\n")
    print("| the same matmul FLOPs | ms |\n|---|---|")
    for name in gemms:
        print(f"| {name} | {timed[name].median_ms:.3f} |")


if __name__ == "__main__":
    main()

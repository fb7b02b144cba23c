"""Measured speed of structural head execution against its FLOP-count ideal.

For each budget b the model runs structurally with the budget requested, ``Control(budget=b)``
(the explorer's budget slider): s = b in every layer, so k = max(1, ⌊b·H⌋) heads, chosen by
g_φ (bba: by its gates). One table row per budget gives

* the analytic FLOPs (:mod:`budgetformer_core.measure.flops`, counting the networks each row runs: a
  requested budget skips f_θ) and their ratio to the dense model's;
* the **ideal** speed-up dense FLOPs / budgeted FLOPs — what perfect structural pruning gives;
* the **measured** speed-up over the dense model (``mode="dense"``: plain multi-head attention,
  no budget networks), timed in the same run with every variant interleaved round by round
  (:func:`budgetformer_core.measure.timing.time_interleaved`), with freed memory kept in the process
  (:func:`budgetformer_core.measure.timing.keep_freed_memory`): the median of per-round ratios;
* the **efficiency** measured / ideal;
* the latency of the *masked* path (every head computed, the unselected ones zeroed) at the
  same budget, for contrast: masking saves nothing;
* the peak tensor memory of one structural forward pass.

With a batch of more than one input a ``per-input`` row gives each input its own k (the
budgets' k values dealt out over the batch in a seeded random order, ``Control(k=[...])``; f_θ
runs there), so the structural path groups inputs by k and each input has its own heads.

Inputs that run the same heads are computed together, whatever the option; with
``head_sets="batch"`` (``Control.head_sets``) the heads are ranked once for the whole batch, by
the scores averaged over its inputs, so at a requested budget every input runs one head set per
layer: the batch is computed like a pruned model. That is a different model (an input's heads
depend on its batch), offered for throughput; the default ranks each input's heads by its own
scores.

The budgeting itself is timed alone on each layer's real input: the networks (mean-pooling and
f_θ, g_φ for BudgetFormer; pooling and the gate network for bba) and the whole allocation
(networks plus top-k selection and head weights), each as a fraction of the dense latency.

Inputs are random token ids filling all ``seq_len`` positions (no padding): the cost of a
forward pass does not depend on which tokens they are.

:func:`bench_lengths` runs the same benchmark at several input lengths: the per-call overhead of
budgeting (a few dozen small tensor operations per layer) is fixed while the work it saves grows
with the length, so short inputs can be slower budgeted than dense. Its table gives, per length,
the measured and ideal speed-up and the efficiency at each budget, the masked path beside them,
and per budget the **crossover**: the shortest length from which budgeting pays (measured
speed-up ≥ 1 there and at every longer length measured).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from ..config import to_dict
from ..model import native
from ..model.budget import Control, heads_for_budget_value
from ..model.encoder import BudgetFormer
from ..model.trace import ForwardContext
from .flops import attention_share, dense_flops, forward_flops
from .timing import (
    MachineInfo,
    TimingStats,
    check_threads,
    keep_freed_memory,
    machine_info,
    paired_speedup,
    peak_memory,
    time_interleaved,
)

BUDGETS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
PER_INPUT = "per-input"
MB = 2**20


@dataclass
class BenchRow:
    """One budget's (or the per-input mix's) cost, ideal and measured speed."""

    budget: str
    """The budget b, or ``per-input`` for the row where every input has its own k."""
    k_per_layer: list[float]
    """Heads run in each layer (the batch mean for the per-input row)."""
    flops: int
    """Analytic FLOPs of one forward pass over the whole batch."""
    flops_ratio: float
    """flops / dense flops."""
    ideal_speedup: float
    """dense flops / flops."""
    measured_speedup: float
    """Dense latency / this latency, median over interleaved rounds."""
    efficiency: float
    """measured_speedup / ideal_speedup."""
    latency: TimingStats
    peak_memory_mb: float
    """Peak tensor memory of one structural forward pass."""
    masked_latency: TimingStats | None = None
    """The same budget run as a mask (all heads computed); None for the per-input row."""
    masked_speedup: float | None = None

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("latency", "masked_latency")}
        d["latency"] = self.latency.to_dict()
        d["masked_latency"] = self.masked_latency.to_dict() if self.masked_latency else None
        return d


@dataclass
class BenchResult:
    """A whole benchmark run: the setting, the dense baseline and one row per budget."""

    machine: MachineInfo
    model: dict
    """The model's config (its shape)."""
    source: str
    """The checkpoint directory, or a note that the model is randomly initialised."""
    batch_size: int
    seq_len: int
    repeats: int
    clock: str
    """``wall`` (latency) or ``cpu`` (the timing thread's CPU time)."""
    head_sets: str
    """``input`` (each input ranks heads by its own scores) or ``batch`` (one ranking per batch)."""
    dense_flops: int
    dense_latency: TimingStats
    dense_peak_memory_mb: float
    attention_share: float
    """Share of a dense layer's FLOPs in attention scores and mixing (QKᵀ and AV)."""
    nets_ms: float
    """Median latency of mean-pooling + f_θ + g_φ in every layer, for the whole batch."""
    allocation_ms: float
    """Median latency of the whole allocation (the networks, top-k selection, head weights)."""
    rows: list[BenchRow] = field(default_factory=list)
    allocation_eager_ms: float | None = None
    """The allocation's median latency on the eager path (``native.eager()``); the same path as
    ``allocation_ms`` where the compiled allocation is not built."""
    compiled: bool = False
    """Whether the compiled allocation ran (``allocation_ms``, the rows)."""

    @property
    def nets_frac(self) -> float:
        """nets_ms / dense latency."""
        return self.nets_ms / self.dense_latency.median_ms

    @property
    def allocation_frac(self) -> float:
        """allocation_ms / dense latency."""
        return self.allocation_ms / self.dense_latency.median_ms

    def _eager_note(self) -> str:
        if self.allocation_eager_ms is None:
            return ""
        if not self.compiled:
            return " (eager: the compiled allocation is not built)"
        return f" (eager path: {self.allocation_eager_ms * 1e3 / self.model['n_layers']:.1f} µs)"

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("machine", "dense_latency", "rows")}
        d.update(machine=self.machine.to_dict(), dense_latency=self.dense_latency.to_dict(),
                 nets_frac=self.nets_frac, allocation_frac=self.allocation_frac,
                 rows=[r.to_dict() for r in self.rows])
        return d

    def table(self) -> str:
        """The result as a few header lines and a Markdown table."""
        m, c, dense = self.machine, self.model, self.dense_latency
        lines = [
            f"model: {self.source}; d_model={c['d_model']}, n_heads={c['n_heads']}, "
            f"n_layers={c['n_layers']}, d_ff={c['d_ff']}; batch {self.batch_size} × "
            f"{self.seq_len} tokens; QKᵀ and AV are {self.attention_share:.0%} of a layer's FLOPs",
            f"machine: {m.cpu_model}, {m.n_cpus} CPUs, {m.threads} thread(s), "
            f"torch {m.torch_version}, load average {m.load_average} at start; "
            f"{self.repeats} interleaved rounds, {self.clock} clock; head sets per {self.head_sets}",
            f"dense: {dense.median_ms:.3f} ms (IQR {dense.iqr_ms:.3f}), "
            f"{self.dense_flops / 1e6:.1f} MFLOPs, peak {self.dense_peak_memory_mb:.1f} MB",
            f"budget + scoring nets (pool, f_θ, g_φ, eager): {self.nets_ms:.3f} ms = "
            f"{self.nets_frac:.1%} of dense; the whole allocation{' in one compiled call' * self.compiled}, "
            f"top-k selection included: {self.allocation_ms:.3f} ms = {self.allocation_frac:.1%}",
            f"allocation per layer: {self.allocation_ms * 1e3 / c['n_layers']:.1f} µs = "
            f"{self.allocation_frac:.1%} of a dense layer" + self._eager_note(),
            "",
            "| budget | k per layer | FLOPs ratio | ideal × | measured × | efficiency "
            "| latency ms (IQR) | masked ms | masked × | peak MB |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            ks = "/".join(f"{k:g}" for k in r.k_per_layer)
            masked = "— | —"
            if r.masked_latency:
                masked = f"{r.masked_latency.median_ms:.3f} | {r.masked_speedup:.2f}"
            lines.append(
                f"| {r.budget} | {ks} | {r.flops_ratio:.3f} | {r.ideal_speedup:.2f} "
                f"| {r.measured_speedup:.2f} | {r.efficiency:.2f} "
                f"| {r.latency.median_ms:.3f} ({r.latency.iqr_ms:.3f}) | {masked} "
                f"| {r.peak_memory_mb:.1f} |"
            )
        return "\n".join(lines)


@dataclass
class LengthSweep:
    """:func:`bench` at several input lengths, shortest first."""

    results: list[BenchResult]

    @property
    def seq_lens(self) -> list[int]:
        return [r.seq_len for r in self.results]

    def crossover(self) -> dict[str, int | None]:
        """Row name → the shortest length from which its measured speed-up is ≥ 1 at this and
        every longer length measured; None where budgeting is slower at the longest one."""
        out = {}
        for i, row in enumerate(self.results[0].rows):
            speedups = [r.rows[i].measured_speedup for r in self.results]
            start = None
            for length, x in zip(self.seq_lens, speedups, strict=True):
                start = None if x < 1.0 else (start or length)
            out[row.budget] = start
        return out

    def to_dict(self) -> dict:
        return {"seq_lens": self.seq_lens, "crossover": self.crossover(),
                "results": [r.to_dict() for r in self.results]}

    def table(self) -> str:
        """Header lines, a table of measured × / ideal × (efficiency) per length and budget, the
        masked path's measured × per length, and the crossover of each budget."""
        first, m = self.results[0], self.results[0].machine
        names = [r.budget for r in first.rows]
        c = first.model
        lines = [
            f"model: {first.source}; d_model={c['d_model']}, n_heads={c['n_heads']}, "
            f"n_layers={c['n_layers']}, d_ff={c['d_ff']}; batch {first.batch_size}; "
            f"{first.repeats} interleaved rounds per length, {first.clock} clock; head sets per {first.head_sets}",
            f"machine: {m.cpu_model}, {m.n_cpus} CPUs, {m.threads} thread(s), torch {m.torch_version}, "
            f"load average {m.load_average} at start, {self.results[-1].machine.load_average} at the last length",
            "",
            "measured × / ideal × (efficiency) by budget:",
            "",
            "| tokens | dense ms | budgeting % | " + " | ".join(names) + " |",
            "|---" * (3 + len(names)) + "|",
        ]
        for r in self.results:
            cells = [f"{x.measured_speedup:.2f} / {x.ideal_speedup:.2f} ({x.efficiency:.2f})" for x in r.rows]
            lines.append(f"| {r.seq_len} | {r.dense_latency.median_ms:.3f} | {r.allocation_frac:.1%} | "
                         + " | ".join(cells) + " |")
        masked = [n for n, x in zip(names, first.rows, strict=True) if x.masked_latency]
        lines += ["", "masked path, measured × by budget:", "",
                  "| tokens | " + " | ".join(masked) + " |", "|---" * (1 + len(masked)) + "|"]
        for r in self.results:
            cells = [f"{x.masked_speedup:.2f}" for x in r.rows if x.masked_latency]
            lines.append(f"| {r.seq_len} | " + " | ".join(cells) + " |")
        longest = self.seq_lens[-1]
        pays = [f"{n}: from {L} tokens" if L is not None else f"{n}: not by {longest} tokens"
                for n, L in self.crossover().items()]
        lines += ["", "crossover (budgeting pays from): " + "; ".join(pays)]
        return "\n".join(lines)


def bench_lengths(model: BudgetFormer, seq_lens: list[int], **kwargs) -> LengthSweep:
    """:func:`bench` at each of ``seq_lens`` (sorted, duplicates dropped); same options.

    Raises:
        ValueError: for no lengths, or any that :func:`bench` refuses.
    """
    lengths = sorted(set(seq_lens))
    if not lengths:
        raise ValueError("give at least one sequence length")
    for length in lengths:  # refuse a bad length or size before timing anything
        _check_seq_len(model.cfg.max_len, length)
        _check_batch(model.cfg, kwargs.get("batch_size", 1), length)
    return LengthSweep([bench(model, seq_len=length, **kwargs) for length in lengths])


def read_length_sweep(path) -> dict:
    """A saved ``budgetformer bench --seq-lens … --json`` (:meth:`LengthSweep.to_dict`).

    Raises:
        FileNotFoundError: nothing saved at ``path``.
        ValueError: the file is not such a sweep (unreadable, not JSON, fields missing).
    """
    import json
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = [[row["budget"] for row in r["rows"]] for r in data["results"]]
        ok = data["seq_lens"] == [r["seq_len"] for r in data["results"]] and rows and rows.count(rows[0]) == len(rows)
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a saved length sweep ({type(e).__name__})") from None
    if not ok:
        raise ValueError(f"{path} is not a saved length sweep (lengths or budgets do not match)")
    return data


def length_curve(sweep: dict, budget: float) -> list[dict]:
    """Per length of a saved sweep (:func:`read_length_sweep`), the latency of dense and of the
    saved budget nearest to ``budget``, and that budget's FLOP ideal: dense latency × FLOPs
    ratio, what perfect structural pruning would take. One dict per length."""
    rows = sweep["results"][0]["rows"]
    saved = [r["budget"] for r in rows if r["budget"] != PER_INPUT]
    name = min(saved, key=lambda b: abs(float(b) - budget))
    out = []
    for r in sweep["results"]:
        row = next(x for x in r["rows"] if x["budget"] == name)
        dense = r["dense_latency"]["median_ms"]
        out.append({"tokens": r["seq_len"], "budget": name, "dense_ms": dense,
                    "budgeted_ms": row["latency"]["median_ms"], "ideal_ms": dense * row["flops_ratio"],
                    "measured_speedup": row["measured_speedup"], "ideal_speedup": row["ideal_speedup"]})
    return out


MAX_BENCH_BYTES = 2 << 30
"""The most memory one benchmarked forward pass may need (:func:`_check_batch`)."""


def _check_batch(cfg, batch_size: int, seq_len: int) -> None:
    """Raise ValueError unless ``batch_size`` is >= 1 and a forward pass fits in
    :data:`MAX_BENCH_BYTES`: its largest activation, float32 (B, T, max(d_ff, H·T)), kept a
    few times over (inputs, outputs, the masked path's copies)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    needed = 4 * 4 * batch_size * seq_len * max(cfg.d_ff, cfg.n_heads * seq_len, cfg.d_model)
    if needed > MAX_BENCH_BYTES:
        largest = batch_size * MAX_BENCH_BYTES // needed
        raise ValueError(f"batch_size {batch_size:,} × {seq_len} tokens needs about {needed / 2**30:,.1f} GiB; "
                         f"the limit is {MAX_BENCH_BYTES / 2**30:.0f} GiB (at most batch {largest:,} at this length)")


def _check_seq_len(max_len: int, seq_len: int) -> None:
    if not 1 <= seq_len <= max_len:
        raise ValueError(f"seq_len must be in [1, {max_len}] (max_len), got {seq_len}")


def per_input_ks(budgets: tuple[float, ...], n_heads: int, batch_size: int, seed: int) -> list[int]:
    """Deal the budgets' k values out over a batch, in a seeded random order."""
    ks = [heads_for_budget_value(b, n_heads) for b in budgets]
    dealt = [ks[i % len(ks)] for i in range(batch_size)]
    random.Random(seed).shuffle(dealt)
    return dealt


@torch.inference_mode()
def bench(
    model: BudgetFormer,
    batch_size: int = 1,
    seq_len: int | None = None,
    threads: int = 1,
    budgets: tuple[float, ...] = BUDGETS,
    repeats: int = 30,
    warmup: int = 3,
    min_sample_s: float = 0.02,
    seed: int = 0,
    source: str = "random initialisation",
    clock: str = "wall",
    head_sets: str = "input",
) -> BenchResult:
    """Time dense, structural and masked execution of ``model`` and compare with the FLOP ideal.

    Args:
        model: a ``budgetformer`` model (a dense model has no heads to skip).
        batch_size: inputs per forward pass; above 1 a per-input-k row is added.
        seq_len: tokens per input (default: the model's ``max_len``).
        threads: torch intra-op threads (1: single-thread CPU latency).
        budgets: the budgets b of the rows, each in (0, 1].
        repeats: interleaved timing rounds.
        warmup: untimed calls of each variant first.
        min_sample_s: length of one timed block of calls.
        seed: seed of the token ids and of the per-input k order.
        source: where the model came from, for the report.
        clock: ``wall`` (latency) or ``cpu`` (the thread's CPU time, for a busy machine; see
            :func:`budgetformer_core.measure.timing.time_interleaved`).
        head_sets: ``input`` (each input's heads ranked by its own scores) or ``batch`` (one
            ranking for the batch, from its mean scores; see ``Control.head_sets``).

    Raises:
        ValueError: for a dense model, a bad batch size or sequence length, a bad budget or
            head-set option.
    """
    cfg = model.cfg
    if not model.method.budgeted:
        raise ValueError("bench needs a budgetformer model: a dense model has no heads to skip")
    seq_len = seq_len or cfg.max_len
    _check_seq_len(cfg.max_len, seq_len)
    check_threads(threads)
    _check_batch(cfg, batch_size, seq_len)
    if not budgets or any(not 0.0 < b <= 1.0 for b in budgets):
        raise ValueError(f"budgets must be in (0, 1], got {budgets}")
    model.eval()
    keep_freed_memory()  # time the computation, not page faults (budgetformer_core.measure.timing)
    machine = machine_info(threads)  # the load average as the timing starts
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, cfg.vocab_size, (batch_size, seq_len), generator=g)
    mask = torch.ones(batch_size, seq_len, dtype=torch.bool)

    def run(mode: str, control: Control | None = None) -> Callable[[], object]:
        return lambda: model(ids, mask, mode=mode, control=control)

    fns = {"dense": run("dense")}
    heads: dict[str, list[int]] = {}  # structural variant → k of each input
    controls: dict[str, Control] = {}
    for b in budgets:
        k = heads_for_budget_value(b, cfg.n_heads)
        heads[f"{b:g}"] = [k] * batch_size
        controls[f"{b:g}"] = Control(budget=b, head_sets=head_sets)
        fns[f"{b:g}"] = run("structural", controls[f"{b:g}"])
        fns[f"masked {b:g}"] = run("masked", controls[f"{b:g}"])
    if batch_size > 1:
        heads[PER_INPUT] = per_input_ks(budgets, cfg.n_heads, batch_size, seed)
        controls[PER_INPUT] = Control(k=heads[PER_INPUT], head_sets=head_sets)
        fns[PER_INPUT] = run("structural", controls[PER_INPUT])
    stats = time_interleaved(fns, repeats, warmup, threads, min_sample_s, clock=clock)
    # the budgeting alone in rounds of its own: a forward pass timed right after calls that touch
    # only a few small tensors runs slower (on MiniLM at 32 tokens dense measured up to 10 % slower
    # than b = 1, the same kernels), so the passes compared are timed only among themselves
    stats |= time_interleaved(_budgeting(model, ids, mask), repeats, warmup, threads, min_sample_s, clock=clock)

    dense = stats["dense"]
    dense_total = dense_flops(cfg, seq_len) * batch_size
    rows = []
    for name, ks in heads.items():
        flops = sum(forward_flops(cfg, seq_len, [k] * cfg.n_layers, controls[name]) for k in ks)
        speedup = paired_speedup(dense, stats[name])
        masked = stats.get(f"masked {name}")
        rows.append(
            BenchRow(
                budget=name,
                k_per_layer=[sum(ks) / len(ks)] * cfg.n_layers,
                flops=flops,
                flops_ratio=flops / dense_total,
                ideal_speedup=dense_total / flops,
                measured_speedup=speedup,
                efficiency=speedup * flops / dense_total,
                latency=stats[name],
                peak_memory_mb=peak_memory(fns[name]) / MB,
                masked_latency=masked,
                masked_speedup=paired_speedup(dense, masked) if masked else None,
            )
        )
    return BenchResult(
        machine=machine,
        model=to_dict(cfg),
        source=source,
        batch_size=batch_size,
        seq_len=seq_len,
        repeats=repeats,
        clock=clock,
        head_sets=head_sets,
        dense_flops=dense_total,
        dense_latency=dense,
        dense_peak_memory_mb=peak_memory(fns["dense"]) / MB,
        attention_share=attention_share(cfg, seq_len),
        nets_ms=stats["nets"].median_ms,
        allocation_ms=stats["allocation"].median_ms,
        rows=rows,
        allocation_eager_ms=stats["allocation, eager"].median_ms,
        compiled=native.library() is not None,
    )


def _budgeting(
    model: BudgetFormer, ids: torch.Tensor, mask: torch.Tensor
) -> dict[str, Callable[[], object]]:
    """Callables running only the budgeting of every layer, on each layer's real input.

    ``nets``: mean-pooling and the allocator's networks (f_θ and g_φ, or bba's gates);
    ``allocation``: each layer's allocator, i.e. the networks plus top-k selection and head weights;
    ``allocation, eager``: the same without the compiled call (:mod:`budgetformer_core.model.native`).
    """
    inputs: list[torch.Tensor] = []  # what each layer's allocator reads, from one dense pass
    allocators = {id(a): a for a in model.allocators}.values()  # a shared one hooked once
    hooks = [alloc.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for alloc in allocators]
    try:
        model(ids, mask, mode="dense")
    finally:
        for hook in hooks:
            hook.remove()
    embeddings = model.embed(ids)  # (B, T, D)

    def context() -> ForwardContext:  # a fresh one per call: nothing computed is reused
        return ForwardContext(None, Control(), "structural", embeddings, pooling=model.cfg.pooling)

    layers = list(zip(model.allocators, inputs, strict=True))

    def all_networks() -> list[object]:
        ctx = context()
        return [alloc.networks(xn, ctx) for alloc, xn in layers]

    def all_allocations() -> list[object]:
        ctx = context()
        return [alloc(xn, ctx) for alloc, xn in layers]

    def all_allocations_eager() -> list[object]:
        with native.eager():
            return all_allocations()

    return {"nets": all_networks, "allocation": all_allocations, "allocation, eager": all_allocations_eager}

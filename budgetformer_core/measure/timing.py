"""CPU timing and peak tensor memory, measured the same way for every variant compared.

:func:`time_interleaved` times several callables in one run: each is warmed up, then the
callables take turns — round r times a block of calls of every callable, in an order that
rotates from round to round — so a burst of load from other processes hits all of them alike.
Each sample is the mean time of one block of calls (Python's ``timeit.Timer``, under the pinned
thread count; ``torch.utils.benchmark.Timer.timeit`` would run two more untimed calls before
every block, tripling the cost of a one-call block); the summary is the median and the
inter-quartile range over rounds.
The clock is the wall clock (latency, what a user waits), or with ``clock="cpu"`` the CPU time
of the calling thread — with one intra-op thread all of torch's work runs there, and time the
thread spends waiting while other processes hold the cores is not counted, so on a shared,
busy machine it measures the work itself.
Because samples are paired by round, :func:`paired_speedup` compares two callables round by
round instead of dividing two medians taken at different moments.

:func:`peak_memory` runs a callable once under a dispatch mode that adds up the bytes of every
tensor storage created and not yet freed, and reports the largest total: the peak memory of the
tensors the call allocates (activations, gathered weight slices, outputs), not counting what
existed before the call nor scratch space private to a kernel.

:func:`machine_info` records what a reader needs to judge a timing: CPU model, core count,
threads used, torch version and the load average at the time.

:func:`keep_freed_memory` is for ``budgetformer bench``, which compares a budgeted pass with
its FLOP ideal: torch's CPU tensors come from ``malloc``, and glibc hands a freed block above its
mmap threshold (and a heap top above its trim threshold) back to the system, so the next tensor
of that size faults all its pages in again. At batch 32 × 128 tokens on MiniLM that kernel work
is 5–9 % of a dense pass and more of a budgeted one, whose gathered weight slices are such
tensors, and it varies from call to call. Keeping blocks up to :data:`KEEP_BLOCK_BYTES` in the
process — what jemalloc or tcmalloc, the allocators PyTorch's CPU tuning guide recommends, do —
times the computation instead. The latencies of ``sweeps.csv``, ``latency-check`` and the app
are taken with the allocator as a server process has it (glibc's defaults).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import platform
import threading
import time
import timeit
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


@dataclass
class MachineInfo:
    """Where and how a timing was taken."""

    cpu_model: str
    n_cpus: int
    threads: int
    """Intra-op threads torch used for the timing."""
    torch_version: str
    python_version: str
    load_average: list[float]
    """1-, 5- and 15-minute load averages when the timing started (empty where unknown)."""

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_info(threads: int) -> MachineInfo:
    """Describe this machine for a timing taken with ``threads`` intra-op threads."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        load = []
    return MachineInfo(
        cpu_model=cpu_model(),
        n_cpus=os.cpu_count() or 0,
        threads=threads,
        torch_version=torch.__version__,
        python_version=platform.python_version(),
        load_average=load,
    )


_THREADS_LOCK = threading.RLock()


@contextmanager
def torch_threads(threads: int = 1) -> Iterator[None]:
    """Run the body with ``threads`` torch intra-op threads, then restore the previous count.

    ``torch.set_num_threads`` is process-wide and a server runs one thread per browser session,
    so a lock makes the bodies take turns: no thread can restore the count while another is in
    the middle of a run (re-entrant, so the body may use it again).
    """
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)


KEEP_BLOCK_BYTES = 64 << 20
"""Freed blocks up to this size stay in the process (glibc's mmap threshold)."""
TRIM_BYTES = 256 << 20
"""Free memory at the top of the heap beyond this goes back to the system (glibc's trim threshold)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_kept = False


def keep_freed_memory() -> bool:
    """Set glibc's allocator to keep freed blocks up to :data:`KEEP_BLOCK_BYTES` (once per
    process; see the module docstring). Returns whether the setting is in effect: False where
    the C library is not glibc (then timings include what its allocator does)."""
    global _kept
    with _THREADS_LOCK:
        if not _kept and platform.libc_ver()[0] == "glibc":
            libc = ctypes.CDLL(ctypes.util.find_library("c"))
            _kept = bool(libc.mallopt(_M_MMAP_THRESHOLD, KEEP_BLOCK_BYTES)) and bool(
                libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))
        return _kept


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
"""The clocks :func:`time_interleaved` can time with."""

MIN_ROUNDS = 3
"""The fewest rounds a time budget buys: a median and quartiles need a few samples."""


@dataclass
class TimingStats:
    """Latency of one callable: one sample per round, each the mean over a block of calls."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    calls_per_sample: int
    samples_ms: list[float] = field(repr=False)

    @property
    def iqr_ms(self) -> float:
        """Inter-quartile range q3 − q1."""
        return self.q3_ms - self.q1_ms

    @classmethod
    def from_samples(cls, samples_ms: list[float], calls_per_sample: int) -> TimingStats:
        q1, med, q3 = np.percentile(samples_ms, [25, 50, 75])
        return cls(float(med), float(q1), float(q3), calls_per_sample, list(samples_ms))

    def to_dict(self) -> dict:
        return {"median_ms": self.median_ms, "iqr_ms": self.iqr_ms, "q1_ms": self.q1_ms,
                "q3_ms": self.q3_ms, "samples": len(self.samples_ms),
                "calls_per_sample": self.calls_per_sample}


def check_threads(threads: int) -> None:
    """Raise ValueError unless ``threads`` is from 1 to this machine's CPU count (more threads
    than CPUs measure nothing, and tens of thousands exhaust OpenMP's memory)."""
    n_cpus = os.cpu_count() or 1
    if not 1 <= threads <= n_cpus:
        raise ValueError(f"threads must be from 1 to {n_cpus} (this machine's CPUs), got {threads}")


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    repeats: int = 30,
    warmup: int = 3,
    threads: int = 1,
    min_sample_s: float = 0.02,
    budget_s: float | None = None,
    clock: str = "wall",
) -> dict[str, TimingStats]:
    """Time several callables in turn, round after round.

    Args:
        fns: name → callable taking no arguments (the thing to time).
        repeats: rounds; each gives one sample per callable.
        warmup: calls of each callable before timing (allocator, caches, lazy init).
        threads: torch intra-op threads during the timing (1: single-thread latency).
        min_sample_s: each sample times enough calls to last about this long, so the clock's
            resolution and the per-block overhead do not matter (0: one call per sample).
        budget_s: when given, as many rounds as the timed calls fill in about this many seconds,
            at least :data:`MIN_ROUNDS` and at most ``repeats`` (warm-up not counted).
        clock: ``wall`` (latency) or ``cpu`` (the calling thread's CPU time; ``threads`` must
            be 1, as other threads' work would not be counted).

    Returns:
        name → :class:`TimingStats`, samples in round order (so they pair across names).
    """
    if repeats < 1 or warmup < 0:
        raise ValueError("need repeats >= 1 and warmup >= 0")
    check_threads(threads)
    if clock not in CLOCKS or (clock == "cpu" and threads != 1):
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)} ('cpu' with one thread), got {clock!r}")
    timers = {
        name: timeit.Timer(fn, timer=CLOCKS[clock]) for name, fn in fns.items()
    }  # .timeit(n): the mean over n calls is (seconds for the n calls) / n
    calls, round_s = {}, 0.0
    samples: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    with torch_threads(threads):
        for name, timer in timers.items():
            if warmup:
                timer.timeit(warmup)
            once = timer.timeit(1)
            calls[name] = max(1, round(min_sample_s / max(once, 1e-9)))
            round_s += once * calls[name]
        if budget_s is not None:
            repeats = min(repeats, max(MIN_ROUNDS, math.floor(budget_s / max(round_s, 1e-9))))
        for r in range(repeats):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:  # rotate who goes first
                samples[name].append(timers[name].timeit(calls[name]) / calls[name] * 1e3)
    return {name: TimingStats.from_samples(samples[name], calls[name]) for name in names}


def time_fn(fn: Callable[[], object], **kwargs) -> TimingStats:
    """Time one callable (same options as :func:`time_interleaved`)."""
    return time_interleaved({"fn": fn}, **kwargs)["fn"]


def paired_speedup(baseline: TimingStats, other: TimingStats) -> float:
    """Median over rounds of baseline / other latency (> 1: ``other`` is faster)."""
    ratios = np.asarray(baseline.samples_ms) / np.asarray(other.samples_ms)
    return float(np.median(ratios))


class _LiveStorage(TorchDispatchMode):
    """Adds up the bytes of storages created under the mode while they are alive."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self._alive: set[int] = set()

    def _freed(self, key: int, nbytes: int) -> None:
        self._alive.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        inputs = {t.untyped_storage().data_ptr() for t in tensors}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or key in self._alive or key in inputs:  # empty, counted, or a view
                continue
            self._alive.add(key)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._freed, key, nbytes)
        return out


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of tensor storage allocated by one call of ``fn`` and alive at once."""
    with _LiveStorage() as tracker:
        result = fn()
    del result
    return tracker.peak

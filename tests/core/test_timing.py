"""The timer returns sane statistics and machine facts; peak memory counts what a call allocates.

No assertion here depends on how fast anything runs.
"""

from __future__ import annotations

import platform
import resource
import subprocess
import sys
import threading

import pytest
import torch

from budgetformer_core.measure.timing import (
    MIN_ROUNDS,
    TimingStats,
    machine_info,
    paired_speedup,
    peak_memory,
    time_fn,
    time_interleaved,
    torch_threads,
)


def test_interleaved_timing_gives_one_sample_per_round_and_name():
    x = torch.randn(64, 64)
    fns = {"mm": lambda: x @ x, "add": lambda: x + x}
    stats = time_interleaved(fns, repeats=5, warmup=1, min_sample_s=0.001)
    assert set(stats) == {"mm", "add"}
    for s in stats.values():
        assert len(s.samples_ms) == 5 and s.calls_per_sample >= 1
        assert 0 < s.q1_ms <= s.median_ms <= s.q3_ms
        assert s.iqr_ms == pytest.approx(s.q3_ms - s.q1_ms)
        assert set(s.to_dict()) >= {"median_ms", "iqr_ms", "samples"}


@pytest.fixture
def two_threads():
    """Two threads before the test, so that a count pinned to one and not restored shows (`make
    test` runs each worker on one, tests/conftest.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_time_fn_restores_the_thread_count(two_threads):
    before = torch.get_num_threads()
    s = time_fn(lambda: torch.ones(8).sum(), repeats=3, warmup=0, threads=1, min_sample_s=0.001)
    assert s.median_ms > 0
    assert torch.get_num_threads() == before


def test_a_time_budget_bounds_the_rounds():
    x = torch.randn(64, 64)
    fns = {"mm": lambda: x @ x, "add": lambda: x + x}
    quick = time_interleaved(fns, repeats=50, warmup=1, min_sample_s=0, budget_s=0.0)
    assert [len(s.samples_ms) for s in quick.values()] == [MIN_ROUNDS] * 2  # the floor
    assert all(s.calls_per_sample == 1 for s in quick.values())  # min_sample_s=0: one call each
    roomy = time_interleaved(fns, repeats=7, warmup=1, min_sample_s=0, budget_s=60.0)
    assert [len(s.samples_ms) for s in roomy.values()] == [7, 7]  # the cap


def test_torch_threads_restores_the_count_and_is_reentrant_across_threads(two_threads):
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), torch_threads(1):
        assert torch.get_num_threads() == 1
        with torch_threads(1):  # re-entrant
            assert torch.get_num_threads() == 1
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before

    def work():
        for _ in range(20):
            with torch_threads(1):
                assert torch.get_num_threads() == 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert torch.get_num_threads() == before


def test_paired_speedup_is_the_median_of_per_round_ratios():
    slow = TimingStats.from_samples([2.0, 4.0, 9.0], 1)
    fast = TimingStats.from_samples([1.0, 1.0, 3.0], 1)
    assert paired_speedup(slow, fast) == pytest.approx(3.0)  # ratios 2, 4, 3
    assert paired_speedup(fast, fast) == 1.0


def test_machine_info_records_cpu_threads_and_torch():
    info = machine_info(threads=1)
    assert info.cpu_model and info.n_cpus >= 1 and info.threads == 1
    assert info.torch_version == torch.__version__
    assert set(info.to_dict()) >= {"cpu_model", "threads", "torch_version", "load_average"}


def test_peak_memory_counts_live_allocations_not_views_or_inputs():
    w = torch.zeros(1000)  # exists before the call: not counted

    def fn():
        a = torch.ones(1000)  # 4000 bytes
        b = a.view(10, 100)  # a view: no new memory
        c = w[:500] + 1  # 2000 bytes (the slice of w is a view of an input)
        del a, b
        d = torch.ones(250)  # 1000 bytes, after a was freed
        return c, d

    assert peak_memory(fn) == 6000


def test_bad_timer_arguments_are_refused():
    with pytest.raises(ValueError):
        time_interleaved({"x": lambda: None}, repeats=0)


def test_the_cpu_clock_does_not_count_time_spent_waiting():
    import time

    def nap():
        time.sleep(0.002)  # waits: wall time passes, almost no CPU time

    wall = time_interleaved({"nap": nap}, repeats=3, warmup=0, min_sample_s=0)["nap"]
    cpu = time_interleaved({"nap": nap}, repeats=3, warmup=0, min_sample_s=0, clock="cpu")["nap"]
    assert wall.median_ms >= 2.0 and cpu.median_ms < 0.5 * wall.median_ms
    for bad in (dict(clock="sundial"), dict(clock="cpu", threads=2)):
        with pytest.raises(ValueError, match="clock"):
            time_interleaved({"nap": nap}, repeats=1, **bad)


FAULTS = """
import ctypes, ctypes.util, resource, sys, torch
from budgetformer_core.measure.timing import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
torch.set_num_threads(1)


class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
for _ in range(3):  # 48 MB each, above glibc's largest automatic mmap threshold (32 MB)
    torch.ones(12 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):  # the same size again
    torch.ones(12 << 20)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
block = torch.ones(12 << 20)
mapped = libc.mallinfo2().hblkhd  # bytes in blocks that are mappings of their own
del block
kept = libc.mallinfo2().fordblks  # freed bytes the process keeps
print(faults, mapped, kept)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or tuple(map(int, platform.libc_ver()[1].split("."))) < (2, 33),
                    reason="the allocator setting and mallinfo2 are glibc's (2.33 on)")
def test_kept_freed_memory_serves_a_large_tensor_from_the_heap_and_keeps_it_when_freed():
    def run(policy: str) -> tuple[int, int, int]:
        done = subprocess.run([sys.executable, "-c", FAULTS, policy], capture_output=True, text=True, check=True)
        faults, mapped, kept = map(int, done.stdout.split())
        return faults, mapped, kept

    pages, size = (48 << 20) // resource.getpagesize(), 48 << 20
    faults, mapped, kept = run("default")
    assert faults > 2.5 * pages  # glibc gave each block back: its pages fault in again
    assert mapped >= size and kept < size  # the block was a mapping of its own, unmapped when freed
    # kept: the block comes from the heap and stays in the process when freed, for the next one.
    # (Whether the next block reuses it is glibc's choice: here in about one process in three the
    # next blocks came from fresh heap and faulted in, so that is not asserted.)
    _, mapped, kept = run("keep")
    assert mapped < size and kept >= size

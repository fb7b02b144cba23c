"""Load test of the app: N concurrent browser sessions on one real server (``make loadtest``).

The server is started as ``make run`` starts it (``app/serve.py``) on a free port of 127.0.0.1
only. One headless chromium (Debian's ``/usr/bin/chromium`` through the ``playwright``
package's client; never ``playwright install``) opens one page per session, each in its own
browser context. Every session, all at the same time:

1. *warm-up*: loads the "Explore an input" page on :data:`MODEL`, types its own BBC test text (each session a
   different one, of a different length in tokens) and picks "set s with the slider";
2. moves the budget slider with the keyboard, one step per interaction, to a budget it has not
   asked for before (0.55 … 1.00, then 0.05 … 0.45; so no answer comes from the cache of
   another of its own interactions).

After each interaction the page's result (prediction, confidence, heads run per layer, tokens
read) is compared with what the engine computes here for that session's text at that setting:
a result that is another session's is **cross-talk**, any other difference, a timeout or an
error box on the page is an **error**. The server time of each interaction is the one the
sidebar prints; the round trip is measured in the browser. The server's resident memory (RSS,
from /proc) is read when it is up, after the warm-up and at the end.

    .venv/bin/python scripts/loadtest.py --sessions 8 --interactions 6 [--json]

Bounded: at most :data:`MAX_SESSIONS` sessions and :data:`MAX_INTERACTIONS` slider moves each;
the whole run stops after ``--timeout`` seconds. Exit 0 when every interaction was right, 1 when
any was not, 2 for bad arguments or when the browser is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "bbc-budgetformer"
"""The model every session opens (its link, ``?model=``): BBC's BudgetFormer trained from scratch."""
MAX_SESSIONS = 24
MAX_INTERACTIONS = 19
"""Slider moves per session: the budgets 0.55 … 1.00 and 0.05 … 0.45, each new to the session."""
MAX_SECONDS = 1800
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STEP_TIMEOUT_MS = 120_000
"""Longest wait for one interaction's result (8 sessions on 2 cores take seconds, not minutes)."""
TOKENS_READ = re.compile(r"^The model read (\d+) tokens")


def budgets(n: int) -> list[float]:
    """The slider positions of ``n`` moves from 0.50: up one step at a time to 1.00, then
    ``Home`` (0.05) and up again to 0.45 — each a budget the session has not seen."""
    walk = [round(0.05 * i, 2) for i in range(11, 21)] + [round(0.05 * i, 2) for i in range(1, 10)]
    return walk[:n]


# --------------------------------------------------------------------------- expected results


@functools.cache
def checkpoint():
    """The model the page shows, loaded by the engine here (once)."""
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.shipped import checkpoint_dir

    return load_checkpoint(checkpoint_dir(MODEL))


@dataclass(frozen=True)
class Shown:
    """What the Explore page shows of one result: the values compared."""

    label: str
    confidence: str
    """As the page prints it, e.g. ``"93.1% confident"``."""
    heads: str
    """Heads run, e.g. ``"4 / 4"``."""
    n_tokens: int


def expected_results(texts: list[str], moves: int) -> dict[tuple[int, float | None], Shown]:
    """What each session's page must show: (session, slider budget or None for the model's
    own s) → :class:`Shown`, computed with the engine exactly as the page computes it."""
    from app.logic.explore import run_analysis
    from app.settings import Settings, control_for

    ckpt, out = checkpoint(), {}
    for i, text in enumerate(texts):
        for b in [None, 0.5, *budgets(moves)]:
            settings = Settings() if b is None else Settings(budget_mode="slider", budget=b)
            a = run_analysis(ckpt, text, control_for(settings.canonical(), ckpt.validation_budget))
            out[i, b] = Shown(a.label, f"{max(a.probs):.1%} confident", " / ".join(map(str, a.k)), a.n_tokens)
    return out


def session_texts(n: int) -> list[str]:
    """``n`` BBC test texts, the classes taking turns, no two read as the same number of tokens
    (so a result shows whose text it is)."""
    from app.logic.explore import tokens_read
    from budgetformer_core.io.data import load_dataset

    test, ckpt = load_dataset("bbc").split("test"), checkpoint()
    per_class = -(-n // len(ckpt.label_names))  # ceil
    picked: dict[int, str] = {}  # tokens read → text
    for text, label in zip(test.texts, test.labels, strict=True):
        if sum(test.labels[test.texts.index(t)] == label for t in picked.values()) < per_class:
            picked.setdefault(len(tokens_read(ckpt, text)), text)
        if len(picked) == n:
            return list(picked.values())
    raise ValueError(f"only {len(picked)} test texts of distinct lengths")


def judge(session: int, budget: float | None, shown: Shown, expected: dict) -> str:
    """``ok`` when ``shown`` is this session's result, ``cross-talk`` when it is another
    session's result at that setting, else ``error``."""
    if shown == expected[session, budget]:
        return "ok"
    others = (v for (i, b), v in expected.items() if i != session and b == budget)
    return "cross-talk" if shown in others else "error"


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Server:
    """``app/serve.py`` on 127.0.0.1 and a free port: started on entering, stopped on leaving
    (its output goes to ``log``; ``options``: more ``streamlit run`` options)."""

    def __init__(self, log: Path, options: tuple[str, ...] = ()):
        self.port, self.log, self.options = free_port(), log, list(options)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        cmd = [sys.executable, "app/serve.py", "--server.headless", "true", "--server.port", str(self.port),
               "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", *self.options]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        return self

    def wait_healthy(self, timeout: float = 120.0) -> None:
        """Until the health endpoint answers (the server starts while the caller does other work)."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with code {self.proc.returncode} (log: {self.log})")
            try:
                with opener.open(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"{self.url} not healthy after {timeout:.0f} s (log: {self.log})")

    def rss_mb(self) -> float:
        return rss_mb(self.proc.pid)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- one session


@dataclass
class Step:
    """One interaction of one session."""

    session: int
    kind: str
    """``text`` (typed its text), ``mode`` (picked the slider) or ``slider`` (moved it)."""
    budget: float | None
    verdict: str
    """``ok``, ``cross-talk`` or ``error``."""
    server_ms: float | None = None
    round_trip_ms: float | None = None
    detail: str = ""


class Session:
    """One browser page driving the Explore page; records a :class:`Step` per interaction."""

    def __init__(self, index: int, page, text: str, expected: dict, steps: list[Step]):
        self.index, self.page, self.text, self.expected, self.steps = index, page, text, expected, steps
        self.failed = False

    def text_box(self):
        return self.page.get_by_role("textbox", name="Text to classify")

    def metric(self, label: str):
        return self.page.locator('[data-testid="stMetric"]').filter(has_text=label)

    async def idle(self) -> None:
        """Until no script run is in progress (the app root reports its script state)."""
        await self.page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
            state="attached", timeout=STEP_TIMEOUT_MS)

    async def tokens_caption(self) -> str:
        return await self.page.get_by_text(TOKENS_READ).inner_text(timeout=STEP_TIMEOUT_MS)

    async def shown(self) -> Shown:
        async def value(label: str, part: str) -> str:
            return (await self.metric(label).locator(f'[data-testid="{part}"]').inner_text()).strip()

        return Shown(await value("Prediction", "stMetricValue"), await value("Prediction", "stMetricDelta"),
                     await value("Heads run", "stMetricValue"),
                     int(TOKENS_READ.match(await self.tokens_caption()).group(1)))

    async def server_ms(self) -> float:
        text = await self.page.locator('[data-testid="stSidebar"]').get_by_text(
            "Server time for this update").inner_text()
        return float(text.split(":")[1].strip().removesuffix(" ms"))

    async def step(self, kind: str, budget: float | None, act, done) -> None:
        """Do ``act``, wait for ``done`` and the end of the run, then judge what the page shows."""
        if self.failed:
            return
        t0 = time.perf_counter()
        try:
            await act()
            await done()
            await self.idle()
            round_trip = (time.perf_counter() - t0) * 1e3
            if await self.page.locator('[data-testid="stException"], [data-testid="stAlertContentError"]').count():
                raise RuntimeError("the page shows an error")
            shown = await self.shown()
            verdict = judge(self.index, budget, shown, self.expected)
            detail = "" if verdict == "ok" else f"shown {shown}, expected {self.expected[self.index, budget]}"
            if kind == "text" and await self.text_box().input_value() != self.text:
                verdict, detail = "cross-talk", "the text box holds another text"
            self.steps.append(Step(self.index, kind, budget, verdict, await self.server_ms(), round_trip, detail))
        except Exception as e:  # a timeout or a broken page: this session stops here
            self.failed = True
            self.steps.append(Step(self.index, kind, budget, "error", detail=f"{type(e).__name__}: {e}"[:300]))

    async def warm_up(self, url: str) -> None:
        page = self.page
        try:
            await page.goto(url, wait_until="domcontentloaded", timeout=STEP_TIMEOUT_MS)
            await self.metric("Prediction").wait_for(timeout=STEP_TIMEOUT_MS)
            await self.idle()
            before = await self.tokens_caption()
        except Exception as e:
            self.failed = True
            self.steps.append(Step(self.index, "load", None, "error", detail=f"{type(e).__name__}: {e}"[:300]))
            return
        area = self.text_box()

        async def type_text():
            await area.fill(self.text)
            await area.press("Control+Enter")  # a text area commits on Ctrl+Enter

        from playwright.async_api import expect

        changed = lambda: expect(page.get_by_text(TOKENS_READ)).not_to_have_text(  # noqa: E731
            before, timeout=STEP_TIMEOUT_MS)
        await self.step("text", None, type_text, changed)
        await self.step("mode", 0.5, lambda: page.get_by_text("set s with the slider").click(),
                        lambda: self.budget_shown(0.5))

    async def budget_shown(self, b: float) -> None:
        from playwright.async_api import expect

        await expect(self.metric("Budget s per layer").locator('[data-testid="stMetricValue"]')).to_have_text(
            re.compile(rf"^{b:.2f}( / {b:.2f})*$"), timeout=STEP_TIMEOUT_MS)

    async def move_slider(self, moves: int) -> None:
        thumb = self.page.get_by_role("slider").first
        for b in budgets(moves):
            key = "Home" if b == 0.05 else "ArrowRight"

            async def press(key=key):
                await thumb.focus()
                await thumb.press(key)

            await self.step("slider", b, press, lambda b=b: self.budget_shown(b))


# --------------------------------------------------------------------------- the run


@dataclass
class Report:
    sessions: int
    moves_per_session: int
    planned: int
    """Interactions planned: per session typing its text, picking the slider mode, each move."""
    interactions: int
    """Interactions done and judged (a session stops at its first error)."""
    errors: int
    cross_talk: int
    server_ms_p50: float | None
    server_ms_p95: float | None
    server_ms_p95_slider: float | None
    round_trip_ms_p50: float | None
    round_trip_ms_p95: float | None
    rss_mb_start: float
    rss_mb_warm: float
    rss_mb_end: float
    rss_growth_after_warm_up: float
    """(end − after warm-up) / after warm-up."""
    outside_requests: int
    """Requests the pages tried to make to anywhere but the server (blocked)."""
    wall_s: float
    load_average: list[float]
    """1, 5 and 15 minutes, at the start."""
    cpus: int
    problems: list[str] = field(default_factory=list)
    """One line per interaction that was not right, and per outside URL asked for (20 of each at most)."""

    @property
    def passed(self) -> bool:
        return self.interactions == self.planned and self.errors == self.cross_talk == 0

    def lines(self) -> list[str]:
        ms = lambda x: "n/a" if x is None else f"{x:.0f} ms"  # noqa: E731
        load = ", ".join(f"{x:.2f}" for x in self.load_average)
        return [
            f"sessions: {self.sessions} at once ({self.moves_per_session} slider moves each), "
            f"{self.cpus} CPUs, load average at start {load}",
            f"interactions: {self.interactions} of {self.planned}, errors: {self.errors}, "
            f"cross-talk: {self.cross_talk}, requests outside the server: {self.outside_requests}",
            f"server time per interaction: p50 {ms(self.server_ms_p50)}, p95 {ms(self.server_ms_p95)} "
            f"(slider moves: p95 {ms(self.server_ms_p95_slider)})",
            f"round trip in the browser: p50 {ms(self.round_trip_ms_p50)}, p95 {ms(self.round_trip_ms_p95)}",
            f"server RSS: start {self.rss_mb_start:.0f} MiB, after warm-up {self.rss_mb_warm:.0f} MiB, "
            f"end {self.rss_mb_end:.0f} MiB ({self.rss_growth_after_warm_up:+.1%} after warm-up)",
            f"wall time: {self.wall_s:.1f} s",
            *self.problems,
        ]


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (inclusive method); None for no values."""
    if not values:
        return None
    value = values[0] if len(values) == 1 else statistics.quantiles(values, n=100, method="inclusive")[q - 1]
    return round(value, 1)


@dataclass
class Observed:
    """What :func:`drive` collects."""

    steps: list[Step] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    """Server RSS at start, after the warm-up, at the end."""
    outside: list[str] = field(default_factory=list)
    """URLs the pages asked for that are not the server's (aborted)."""


def summarise(seen: Observed, sessions: int, moves: int, wall_s: float, load) -> Report:
    steps, (start, warm, end) = seen.steps, seen.rss_mb
    server = [s.server_ms for s in steps if s.server_ms is not None]
    slider = [s.server_ms for s in steps if s.server_ms is not None and s.kind == "slider"]
    trips = [s.round_trip_ms for s in steps if s.round_trip_ms is not None]
    return Report(
        sessions=sessions, moves_per_session=moves, planned=sessions * (2 + moves),
        interactions=sum(s.kind != "load" for s in steps), errors=sum(s.verdict == "error" for s in steps),
        cross_talk=sum(s.verdict == "cross-talk" for s in steps),
        server_ms_p50=percentile(server, 50), server_ms_p95=percentile(server, 95),
        server_ms_p95_slider=percentile(slider, 95),
        round_trip_ms_p50=percentile(trips, 50), round_trip_ms_p95=percentile(trips, 95),
        rss_mb_start=round(start, 1), rss_mb_warm=round(warm, 1), rss_mb_end=round(end, 1),
        rss_growth_after_warm_up=round((end - warm) / warm, 4), outside_requests=len(seen.outside),
        wall_s=round(wall_s, 1), load_average=[round(x, 2) for x in load], cpus=os.cpu_count() or 0,
        problems=([f"session {s.session} {s.kind} b={s.budget}: {s.verdict}: {s.detail}"
                   for s in steps if s.verdict != "ok"][:20]
                  + [f"blocked a request outside the server: {u}" for u in sorted(set(seen.outside))][:20]),
    )


async def drive(url: str, texts: list[str], moves: int, expected: dict, server: Server) -> Observed:
    """One browser, a context (a session) per text: all warm up at once, then all move their slider."""
    from playwright.async_api import async_playwright

    seen = Observed(rss_mb=[server.rss_mb()])

    async def block(route) -> None:  # loopback only: nothing leaves the machine
        seen.outside.append(route.request.url)
        await route.abort()

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            sessions = []
            for i, text in enumerate(texts):
                context = await browser.new_context(viewport={"width": 1400, "height": 900})
                await context.route(lambda u: not u.startswith(url + "/") and u != url, block)
                sessions.append(Session(i, await context.new_page(), text, expected, seen.steps))
            await asyncio.gather(*(s.warm_up(f"{url}/?model={MODEL}") for s in sessions))
            seen.rss_mb.append(server.rss_mb())
            await asyncio.gather(*(s.move_slider(moves) for s in sessions))
            seen.rss_mb.append(server.rss_mb())
        finally:
            await browser.close()
    return seen


def run(sessions: int, moves: int, timeout: float, log: Path) -> Report:
    """Start a server, drive ``sessions`` pages at once, stop everything; the figures.

    Raises:
        TimeoutError: the run took longer than ``timeout`` seconds.
    """
    t0, load = time.perf_counter(), os.getloadavg()
    with Server(log) as server:
        texts = session_texts(sessions)  # while the server starts
        expected = expected_results(texts, moves)
        server.wait_healthy()
        seen = asyncio.run(asyncio.wait_for(drive(server.url, texts, moves, expected, server), timeout))
    return summarise(seen, sessions, moves, time.perf_counter() - t0, load)


def bounded(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low} … {high}")
        return value

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="loadtest.py")
    p.add_argument("--sessions", type=bounded(1, MAX_SESSIONS), default=8, help="concurrent sessions")
    p.add_argument("--interactions", type=bounded(1, MAX_INTERACTIONS), default=6,
                   help="slider moves per session (after typing its text and picking the slider)")
    p.add_argument("--timeout", type=bounded(10, MAX_SECONDS), default=600, help="seconds for the whole run")
    p.add_argument("--log", type=Path, default=ROOT / "test-artifacts" / "loadtest-server.log",
                   help="where the server's output goes")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)  # exits 2 on bad arguments
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        print(f"loadtest: {CHROMIUM} is missing (apt-get install chromium; `make setup` does it)", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("loadtest: the playwright package is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    args.log.parent.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args.sessions, args.interactions, args.timeout, args.log)
    except (TimeoutError, RuntimeError, ValueError, OSError) as e:
        print(f"loadtest: {type(e).__name__}: {e}".rstrip(": "), file=sys.stderr)
        return 1
    print(json.dumps(asdict(report), indent=1) if args.json else "\n".join(report.lines()))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())

"""Load test of the app: N concurrent sessions on one real server (``make loadtest``).

The server is started as ``make run`` starts it (``app/serve.py``) on a free port of 127.0.0.1
only. The sessions are either

* **browser pages** (the default): one headless chromium (Debian's ``/usr/bin/chromium`` through
  the ``playwright`` package's client; never ``playwright install``), a browser context per
  session, on :data:`MODEL`. The browsers share the cores with the server: the times are the
  machine's;
* or, with ``--protocol``, **websockets** speaking Streamlit's own protocol as the browser's front
  end does (:mod:`loadtest_protocol`), on the app's default page and model
  (:data:`app.models.DEFAULT_MODEL`). They cost the machine little: the times are the server's.

Every session, all at the same time: *warm-up*: opens the "Explore an input" page, types its own
BBC test text (each read as a different number of tokens) and picks "set s with the slider";
then moves the budget slider one step per interaction, each time to a budget it has not asked
for before (0.55 … 1.00, then 0.05 … 0.45; so no answer comes from its own earlier ones).

After each interaction the page's result (prediction, confidence, budget and heads run per
layer, tokens read; with ``--protocol`` also the tokens listed) is compared with what the engine
computes here for that session's text at that setting: another session's result is
**cross-talk**, any other difference, a timeout or an error on the page is an **error**. The
server time of an interaction is the one the sidebar prints; the round trip is measured in the
client. The server's RSS (VmRSS of /proc/<pid>/status) is read when it is up, after the warm-up
and at the end (with ``--protocol`` also every half second), its CPU time (/proc/<pid>/stat)
after the warm-up and at the end.

    .venv/bin/python scripts/loadtest.py --sessions 8 --interactions 6 [--json]
    .venv/bin/python scripts/loadtest.py --protocol --sessions 8 --interactions 20

``--interactions``: a browser session's slider moves (after its text and the slider mode); a
``--protocol`` session's every interaction (its text, the slider mode, then the moves). Bounded:
at most :data:`MAX_SESSIONS` sessions and :data:`MAX_INTERACTIONS` slider moves each, and
``--timeout`` seconds in all. Exit 0 when every interaction was right, 1 when any was not, 2 for
bad arguments or when the browser is missing.
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
from importlib import import_module
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
def checkpoint(model: str = MODEL):
    """A model the page shows, loaded by the engine here (once)."""
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.shipped import checkpoint_dir

    return load_checkpoint(checkpoint_dir(model))


@dataclass(frozen=True)
class Shown:
    """What the Explore page shows of one result: the values compared."""

    label: str
    confidence: str
    """As the page prints it, e.g. ``"93.1% confident"``."""
    heads: str
    """Heads run, e.g. ``"4 / 4"``."""
    n_tokens: int
    budget: str = ""
    """The budget card's value, e.g. ``"0.55 / 0.55"`` (``"0.55"`` over three layers)."""


def expected_results(texts: list[str], moves: int, model: str = MODEL) -> dict[tuple[int, float | None], Shown]:
    """What each session's page must show: (session, slider budget or None for the model's
    own s) → :class:`Shown`, computed with the engine and the page's own cards
    (:func:`app.logic.explore.metric_cards`) exactly as the page computes them."""
    from app.logic.explore import metric_cards, run_analysis
    from app.method import method_of
    from app.settings import Settings, control_for

    ckpt, out = checkpoint(model), {}
    method = method_of(ckpt.config)
    for i, text in enumerate(texts):
        for b in [None, 0.5, *budgets(moves)]:
            settings = Settings() if b is None else Settings(budget_mode="slider", budget=b)
            a = run_analysis(ckpt, text, control_for(settings.canonical(), ckpt.validation_budget))
            prediction, budget, heads = metric_cards(a, None, settings, ckpt.config.n_heads, method)[:3]
            out[i, b] = Shown(prediction.value, prediction.note, heads.value, a.n_tokens, budget.value)
    return out


def session_texts(n: int, model: str = MODEL, longest: int | None = None) -> list[str]:
    """``n`` BBC test texts, the classes taking turns, no two read as the same number of tokens
    (so a result shows whose text it is): a text whose count another has (or that is read as more
    than ``longest`` tokens) is cut, a few words at a time from its end, until its count is new (on
    a model that reads 256 tokens most texts are longer)."""
    from app.logic.explore import tokens_read
    from budgetformer_core.io.data import load_dataset

    test, ckpt = load_dataset("bbc").split("test"), checkpoint(model)
    per_class = -(-n // len(ckpt.label_names))  # ceil
    picked: dict[int, tuple[str, int]] = {}  # tokens read → (text, label)
    for text, label in zip(test.texts, test.labels, strict=True):
        if sum(own == label for _, own in picked.values()) >= per_class:
            continue
        words = text.split(" ")
        for end in range(len(words), 8, -4):
            cut = text if end == len(words) else " ".join(words[:end])
            if (count := len(tokens_read(ckpt, cut))) not in picked and count <= (longest or count):
                picked[count] = cut, label
                break
        if len(picked) == n:
            return [t for t, _ in picked.values()]
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

    def cpu_s(self) -> float:
        """CPU time of the server process so far, all its threads (utime + stime of /proc/<pid>/stat)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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
    until_ms: dict[str, float] = field(default_factory=dict)
    """Protocol mode: ms from the request until a card arrived (its last update), by card."""


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
                     int(TOKENS_READ.match(await self.tokens_caption()).group(1)),
                     await value("Budget s per layer", "stMetricValue"))

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
    mode: str = "browser"  # or "protocol"
    model: str = MODEL
    rss_mb_peak: float | None = None
    """The most the server held, sampled every half second (protocol mode)."""
    server_cpu_ms_per_move: float | None = None
    """CPU time of the server process (all its threads) over the slider moves, per move."""
    client_cpu_s: float | None = None
    """CPU time of this process while it drove the sessions (protocol mode: the client's share)."""
    engine_ms: dict[str, float] = field(default_factory=dict)
    """Per slider move, the engine work the page does for one text, on one thread of this process
    while the server starts (CPU ms, median over the sessions' texts; protocol mode)."""
    until_ms: dict[str, list[float | None]] = field(default_factory=dict)
    """Protocol mode: p50 and p95 of the time from the request until a card arrived, by card, and
    of the time outside the script's timed part (round trip − server time, ``outside the script``)."""

    @property
    def passed(self) -> bool:
        return self.interactions == self.planned and self.errors == self.cross_talk == 0

    def lines(self) -> list[str]:
        ms = lambda x: "n/a" if x is None else f"{x:.0f} ms"  # noqa: E731
        load = ", ".join(f"{x:.2f}" for x in self.load_average)
        client = "in the browser" if self.mode == "browser" else "over the websocket"
        extra = [f"server CPU per slider move: {ms(self.server_cpu_ms_per_move)}"
                 + ("" if self.client_cpu_s is None else f"; this client's CPU: {self.client_cpu_s:.1f} s in all")]
        if self.until_ms:
            extra.append("; ".join(f"{k}: p50 {ms(a)}, p95 {ms(b)}" for k, (a, b) in self.until_ms.items()))
        if self.engine_ms:
            extra.append("engine per slider move, one thread's CPU, before the sessions: "
                         + ", ".join(f"{k} {ms(v)}" for k, v in self.engine_ms.items()))
        return [
            f"{self.mode} sessions: {self.sessions} at once on {self.model} ({self.moves_per_session} slider "
            f"moves each), {self.cpus} CPUs, load average at start {load}",
            f"interactions: {self.interactions} of {self.planned}, errors: {self.errors}, "
            f"cross-talk: {self.cross_talk}, requests outside the server: {self.outside_requests}",
            f"server time per interaction: p50 {ms(self.server_ms_p50)}, p95 {ms(self.server_ms_p95)} "
            f"(slider moves: p95 {ms(self.server_ms_p95_slider)})",
            f"round trip {client}: p50 {ms(self.round_trip_ms_p50)}, p95 {ms(self.round_trip_ms_p95)}",
            f"server RSS: start {self.rss_mb_start:.0f} MiB, after warm-up {self.rss_mb_warm:.0f} MiB, "
            f"end {self.rss_mb_end:.0f} MiB ({self.rss_growth_after_warm_up:+.1%} after warm-up)"
            + ("" if self.rss_mb_peak is None else f", peak {self.rss_mb_peak:.0f} MiB"),
            *extra,
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
    """Server RSS at start, after the warm-up, at the end (then, in protocol mode, the samples)."""
    cpu_s: list[float] = field(default_factory=list)
    """Server CPU time at start, after the warm-up, at the end."""
    outside: list[str] = field(default_factory=list)
    """URLs the pages asked for that are not the server's (aborted)."""
    client_cpu_s: float | None = None

    def mark(self, server: Server) -> None:
        self.rss_mb.append(server.rss_mb())
        self.cpu_s.append(server.cpu_s())


def summarise(seen: Observed, sessions: int, moves: int, wall_s: float, load, **more) -> Report:
    """The figures of a run; ``more``: :class:`Report`'s fields for the mode and the model."""
    steps, (start, warm, end), samples = seen.steps, seen.rss_mb[:3], seen.rss_mb[3:]
    server = [s.server_ms for s in steps if s.server_ms is not None]
    slider = [s.server_ms for s in steps if s.server_ms is not None and s.kind == "slider"]
    trips = [s.round_trip_ms for s in steps if s.round_trip_ms is not None]
    moved, cards = sum(s.kind == "slider" for s in steps), dict.fromkeys(k for s in steps for k in s.until_ms)
    until = {k: [s.until_ms[k] for s in steps if k in s.until_ms] for k in cards}
    if cards:
        until["outside the script"] = [s.round_trip_ms - s.server_ms for s in steps if s.server_ms is not None]
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
        rss_mb_peak=round(max(seen.rss_mb), 1) if samples else None,
        server_cpu_ms_per_move=round((seen.cpu_s[2] - seen.cpu_s[1]) * 1e3 / moved, 1) if moved else None,
        client_cpu_s=None if seen.client_cpu_s is None else round(seen.client_cpu_s, 1),
        until_ms={k: [percentile(v, 50), percentile(v, 95)] for k, v in until.items()}, **more,
    )


async def drive(url: str, texts: list[str], moves: int, expected: dict, server: Server) -> Observed:
    """One browser, a context (a session) per text: all warm up at once, then all move their slider."""
    from playwright.async_api import async_playwright

    seen = Observed()
    seen.mark(server)

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
            seen.mark(server)
            await asyncio.gather(*(s.move_slider(moves) for s in sessions))
            seen.mark(server)
        finally:
            await browser.close()
    return seen


def run(sessions: int, moves: int, timeout: float, log: Path, protocol: bool = False,
        longest: int | None = None) -> Report:
    """Start a server, drive ``sessions`` sessions at once (browser pages, or ``protocol``:
    websockets on the app's default model, :mod:`loadtest_protocol`), stop everything; the figures.
    ``longest``: the most tokens a session's text is read as (:func:`session_texts`).

    Raises:
        TimeoutError: the run took longer than ``timeout`` seconds.
    """
    from app.models import DEFAULT_MODEL

    t0, load, model = time.perf_counter(), os.getloadavg(), DEFAULT_MODEL if protocol else MODEL
    with Server(log) as server:
        texts = session_texts(sessions, model, longest)  # while the server starts
        expected, more = expected_results(texts, moves, model), {}
        if protocol:  # the engine's share, timed on this thread's clock while the server starts
            import loadtest_protocol

            more = {"mode": "protocol", "model": model, "engine_ms": loadtest_protocol.engine_ms(model, texts)}
        server.wait_healthy()
        work = loadtest_protocol.drive(server.url, texts, moves, expected, server, model) if protocol else \
            drive(server.url, texts, moves, expected, server)
        seen = asyncio.run(asyncio.wait_for(work, timeout))
    return summarise(seen, sessions, moves, time.perf_counter() - t0, load, **more)


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
    p.add_argument("--protocol", action="store_true",
                   help="drive the server over Streamlit's websocket protocol instead of browsers (the server alone)")
    p.add_argument("--sessions", type=bounded(1, MAX_SESSIONS), default=8, help="concurrent sessions")
    p.add_argument("--interactions", type=bounded(1, MAX_INTERACTIONS + 2), default=None,
                   help=f"slider moves per browser session, after typing its text and picking the slider "
                        f"(1 … {MAX_INTERACTIONS}; default 6); with --protocol every interaction of a session: "
                        f"its text, the slider mode, then the moves (2 … {MAX_INTERACTIONS + 2}; default 20)")
    p.add_argument("--timeout", type=bounded(10, MAX_SECONDS), default=600, help="seconds for the whole run")
    p.add_argument("--log", type=Path, default=ROOT / "test-artifacts" / "loadtest-server.log",
                   help="where the server's output goes")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    if args.interactions is None:
        args.interactions = 20 if args.protocol else 6
    if not args.protocol and args.interactions > MAX_INTERACTIONS:
        p.error(f"argument --interactions: {args.interactions} is not in 1 … {MAX_INTERACTIONS} (without --protocol)")
    if args.protocol and args.interactions < 2:
        p.error("argument --interactions: with --protocol at least 2 (the text and the slider mode)")
    args.moves = args.interactions - 2 if args.protocol else args.interactions
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)  # exits 2 on bad arguments
    if not args.protocol and not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        print(f"loadtest: {CHROMIUM} is missing (apt-get install chromium; `make setup` does it)", file=sys.stderr)
        return 2
    try:
        import_module("websockets" if args.protocol else "playwright")
    except ImportError as e:
        print(f"loadtest: the {e.name} package is not installed (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    args.log.parent.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args.sessions, args.moves, args.timeout, args.log, args.protocol)
    except (TimeoutError, RuntimeError, ValueError, OSError) as e:
        print(f"loadtest: {type(e).__name__}: {e}".rstrip(": "), file=sys.stderr)
        return 1
    print(json.dumps(asdict(report), indent=1) if args.json else "\n".join(report.lines()))
    return 0 if report.passed else 1


if __name__ == "__main__":
    import loadtest  # this file as the module loadtest_protocol imports, not a second copy of it

    sys.exit(loadtest.main())

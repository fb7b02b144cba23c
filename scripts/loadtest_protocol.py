"""The load test's protocol mode (``loadtest.py --protocol``): sessions that speak Streamlit's own
websocket protocol to the server, as the browser's front end does, without a browser.

How a session talks to the server (read from Streamlit 1.67's
``web/server/starlette/starlette_websocket.py`` and ``runtime/app_session.py``):

* it connects to ``/_stcore/stream`` with the subprotocol ``streamlit``. The header
  ``Sec-WebSocket-Protocol`` may also carry an XSRF token and a session id to resume, but the
  server checks the token only to read a login cookie, and it accepts a client that sends no
  ``Origin`` header: nothing comes first (no host-config request, no cookie);
* per interaction it sends a ``BackMsg`` ``rerun_script`` (a ``ClientState``: the address's query
  string, the page's script hash, widget values as ``WidgetStates``) and reads ``ForwardMsg``\\ s
  until the run's ``script_finished`` (a run that ends early for a rerun is followed by another).

A widget keeps its value on the server from run to run, so a request carries the values this
session has set (a browser sends every widget's). A run's elements are read from its deltas, one
per place on the page (a later delta at a place replaces the earlier one); widgets are found by
type and label in the first run's elements.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

from loadtest import STEP_TIMEOUT_MS, TOKENS_READ, Observed, Server, Shown, Step, budgets, checkpoint, judge

# --------------------------------------------------------------------------- the protocol


@dataclass
class Run:
    """What the server sent for one script run: its elements by place on the page, how the run
    ended (``ForwardMsg.ScriptFinishedStatus``), and the times from the request to its end and
    to each place's last delta."""

    elements: dict[tuple[int, ...], object]
    status: int
    round_trip_ms: float
    arrived_ms: dict[tuple[int, ...], float]

    @property
    def finished(self) -> bool:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        return self.status == ForwardMsg.FINISHED_SUCCESSFULLY

    def places(self, kind: str) -> list[tuple[tuple[int, ...], object]]:
        """(place, element) of the elements of one type (``metric``, ``markdown``, ``text_area``,
        …), in page order."""
        return [(place, getattr(e, kind)) for place, e in sorted(self.elements.items()) if e.WhichOneof("type") == kind]

    def all(self, kind: str) -> list:
        return [e for _, e in self.places(kind)]

    def widget_id(self, kind: str, label: str) -> str:
        """The id of the widget of type ``kind`` labelled ``label`` (LookupError: none)."""
        found = [e.id for e in self.all(kind) if e.label == label]
        if not found:
            raise LookupError(f"no {kind} labelled {label!r} on the page")
        return found[-1]

    def arrival_ms(self, kind: str, label: str) -> float | None:
        """When the element of type ``kind`` labelled ``label`` last changed (ms after the request)."""
        found = [self.arrived_ms[place] for place, e in self.places(kind) if e.label == label]
        return found[-1] if found else None

    def errors(self) -> list[str]:
        """Exceptions and error boxes (``st.error``) on the page."""
        from streamlit.proto.Alert_pb2 import Alert

        return ([f"exception {e.type}: {e.message}" for e in self.all("exception")]
                + [f"error box: {e.body}" for e in self.all("alert") if e.format == Alert.ERROR])


class Connection:
    """One session of the app at ``url`` (``http://host:port``): :meth:`open`, then :meth:`set`
    widgets and :meth:`rerun`; :meth:`close` at the end."""

    def __init__(self, url: str):
        self.url = f"ws{url.removeprefix('http')}/_stcore/stream"
        self.widgets: dict[str, object] = {}
        """Widget id → ``WidgetState``: the values this session has set."""
        self.query = self.page_hash = ""
        """The address's query string and the page's script hash, as the last run left them."""
        self.ws = None

    async def open(self, timeout: float) -> None:
        import websockets

        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], proxy=None, max_size=None,
                                           ping_interval=None, open_timeout=timeout)

    def set(self, widget_id: str, **value) -> None:
        """A widget's new value, in the ``WidgetState`` field its type reads (``string_value=``
        for a text box or a radio's option, ``double_array_value=DoubleArray(data=[x])`` for a
        slider), sent with the next :meth:`rerun`."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        self.widgets[widget_id] = WidgetState(id=widget_id, **value)

    async def rerun(self) -> Run:
        """Ask for a run with the widgets' values, and read it to its end."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string, msg.rerun_script.page_script_hash = self.query, self.page_hash
        msg.rerun_script.widget_states.widgets.extend(self.widgets.values())
        t0, elements, arrived = time.perf_counter(), {}, {}
        await self.ws.send(msg.SerializeToString())
        while True:
            fwd = ForwardMsg.FromString(await self.ws.recv())
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                elements[tuple(fwd.metadata.delta_path)] = fwd.delta.new_element
                arrived[tuple(fwd.metadata.delta_path)] = (time.perf_counter() - t0) * 1e3
            elif kind == "navigation":  # the page this run drew: the next request names it
                self.page_hash = fwd.navigation.page_script_hash
            elif kind == "page_info_changed":  # the address the page wrote (its link)
                self.query = fwd.page_info_changed.query_string
            elif kind == "script_finished" and fwd.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                return Run(elements, fwd.script_finished, (time.perf_counter() - t0) * 1e3, arrived)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


# --------------------------------------------------------------------------- one session

CARDS = {"until the prediction card": "Prediction", "until the latency card": "Latency (1 thread)"}
"""The cards whose arrival is timed, by their labels: the analysis's first result, and the live
timing that fills the latency card after everything else above the export is drawn."""


def page_labels(model: str) -> dict[str, tuple[str, str]]:
    """Where the Explore page shows what a session reads and sets, in the model's method's words
    (:mod:`app.method`): (element type, label) of the text box, the budget mode, the budget
    slider and the budget card, and ("option", …) of the slider's mode."""
    from app.method import method_of

    method = method_of(checkpoint(model).config)
    name = method.budget_name
    return {"text": ("text_area", "Text to classify"), "mode": ("radio", f"{name} per layer"),
            "slider": ("slider", f"{name} (share of heads)"), "budget": ("metric", f"{name} per layer"),
            "slider mode": ("option", method.mode_labels["slider"])}


class Client:
    """One session (a :class:`Connection`) on the Explore page; records a :class:`loadtest.Step`
    per interaction. ``tokens``: session → the tokens its text is read as, as the page lists them
    ("What the model read"); ``labels``: :func:`page_labels`."""

    def __init__(self, index: int, text: str, tokens: dict[int, str], expected: dict, labels: dict,
                 steps: list[Step]):
        self.index, self.text, self.tokens, self.expected, self.labels = index, text, tokens, expected, labels
        self.steps, self.failed, self.ids, self.ws = steps, False, {}, None

    def shown(self, run: Run) -> Shown:
        cards = {m.label: m for m in run.all("metric")}
        [read] = [int(m.group(1)) for e in run.all("markdown") if (m := TOKENS_READ.match(e.body))]
        return Shown(cards["Prediction"].body, cards["Prediction"].delta, cards["Heads run"].body, read,
                     cards[self.labels["budget"][1]].body)

    async def step(self, kind: str, budget: float | None, **value) -> None:
        """Set one widget (``kind``: ``text``, ``mode`` or ``slider``), rerun, and judge what the
        page shows: its cards and tokens read (:func:`loadtest.judge`), and the tokens it lists."""
        if self.failed:
            return
        try:
            self.ws.set(self.ids[kind], **value)
            run = await asyncio.wait_for(self.ws.rerun(), STEP_TIMEOUT_MS / 1e3)
            if not run.finished or run.errors():
                raise RuntimeError(f"the run ended with status {run.status}: {run.errors()}")
            shown = self.shown(run)
            verdict = judge(self.index, budget, shown, self.expected)
            detail = "" if verdict == "ok" else f"shown {shown}, expected {self.expected[self.index, budget]}"
            listed = [e.body for e in run.all("text")]
            if verdict == "ok" and self.tokens[self.index] not in listed:
                theirs = any(t in listed for i, t in self.tokens.items() if i != self.index)
                verdict, detail = ("cross-talk" if theirs else "error"), "the page lists other tokens"
            [line] = [e.body for e in run.all("markdown") if e.body.startswith("Server time for this update:")]
            server_ms = float(line.split(":")[1].strip().removesuffix(" ms"))
            until = {name: run.arrival_ms("metric", label) for name, label in CARDS.items()}
            self.steps.append(Step(self.index, kind, budget, verdict, server_ms, run.round_trip_ms, detail, until))
        except Exception as e:  # a timeout, a lost connection or a broken page: this session stops here
            self.failed = True
            self.steps.append(Step(self.index, kind, budget, "error", detail=f"{type(e).__name__}: {e}"[:300]))

    async def warm_up(self, url: str) -> None:
        """Open the page (its first run finds the widgets), type the text, pick the slider."""
        self.ws = Connection(url)
        try:
            await self.ws.open(STEP_TIMEOUT_MS / 1e3)
            first = await asyncio.wait_for(self.ws.rerun(), STEP_TIMEOUT_MS / 1e3)
            self.ids = {kind: first.widget_id(*self.labels[kind]) for kind in ("text", "mode", "slider")}
        except Exception as e:
            self.failed = True
            self.steps.append(Step(self.index, "load", None, "error", detail=f"{type(e).__name__}: {e}"[:300]))
            return
        await self.step("text", None, string_value=self.text)
        await self.step("mode", 0.5, string_value=self.labels["slider mode"][1])

    async def move_slider(self, moves: int) -> None:
        from streamlit.proto.Common_pb2 import DoubleArray

        for b in budgets(moves):
            await self.step("slider", b, double_array_value=DoubleArray(data=[b]))


# --------------------------------------------------------------------------- the run


async def drive(url: str, texts: list[str], moves: int, expected: dict, server: Server, model: str) -> Observed:
    """A connection (a session) per text on the app's default page: all warm up at once, then all
    move their slider; the server's RSS sampled every half second meanwhile."""
    from app.logic.explore import tokens_read

    tokens = {i: " ".join(tokens_read(checkpoint(model), text)) for i, text in enumerate(texts)}
    labels, seen, t0 = page_labels(model), Observed(), time.process_time()
    clients = [Client(i, text, tokens, expected, labels, seen.steps) for i, text in enumerate(texts)]
    seen.mark(server)
    samples: list[float] = []

    async def sample() -> None:
        while True:
            samples.append(server.rss_mb())
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    try:
        await asyncio.gather(*(c.warm_up(url) for c in clients))
        seen.mark(server)
        await asyncio.gather(*(c.move_slider(moves) for c in clients))
        seen.mark(server)
    finally:
        sampler.cancel()
        await asyncio.gather(*(c.ws.close() for c in clients if c.ws), return_exceptions=True)
    seen.rss_mb += samples
    seen.client_cpu_s = time.process_time() - t0
    return seen


def engine_ms(model: str, texts: list[str]) -> dict[str, float]:
    """What a slider move costs the engine, for each session's text at a budget it has not run
    (0.55), on this thread (CPU ms, the median over the texts): the analysis :func:`app.live.explore`
    runs, and the latency card's timing of the model and its dense reference in interleaved rounds
    (:func:`app.speed.time_input`)."""
    from app.logic.explore import run_analysis, settings_control
    from app.settings import Settings
    from app.speed import time_input
    from budgetformer_core.shipped import dense_reference

    ckpt = checkpoint(model)
    name = dense_reference(ckpt.meta["dataset"], model, full=True)
    reference, control = (name, checkpoint(name)), settings_control(ckpt, Settings("slider", 0.55))
    took: dict[str, list[float]] = {"analysis": [], "latency timing": []}
    for text in texts:
        for what, call in (("analysis", lambda t=text: run_analysis(ckpt, t, control)),
                           ("latency timing", lambda t=text: time_input(ckpt, t, control, reference))):
            t0 = time.thread_time()
            call()
            took[what].append((time.thread_time() - t0) * 1e3)
    return {what: round(statistics.median(v), 1) for what, v in took.items()}

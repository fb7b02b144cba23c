"""A real browser drives the running app: Debian's chromium through the ``playwright`` package.

The server is started the way ``make run`` starts it (``app/serve.py``) on a free
port; the test waits for its health endpoint, then types a text, moves the budget slider with
the keyboard and checks the page follows, without an error box. Every page is opened at
1280×720, a projector's size (:data:`VIEWPORT`): on "Explore an input" the prediction, the budget
control and the heatmap must be on screen at first load, without scrolling. Screenshots of every
page at that size (``page-<page>.png``, and the whole page, ``page-<page>-full.png``) go to
``test-artifacts/`` (git-ignored). Nothing is downloaded: the browser is the system's
``/usr/bin/chromium`` (``make setup`` installs it with apt), never ``playwright install``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from loadtest import CHROMIUM, CHROMIUM_ARGS, Server  # noqa: E402  (scripts/ is not a package)

ARTIFACTS = ROOT / "test-artifacts"
SPORT = (
    "The striker scored a hat-trick as the champions beat their rivals 3-1 in the league, "
    "and the coach praised the team's defence after the football match."
)
MARKUP = "<script>alert(1)</script><b>x</b>"

BUSINESS = (
    "Shares in the bank rose sharply after it reported record annual profits, and analysts "
    "said the company's sales and the wider economy would keep growing."
)
VIEWPORT = {"width": 1280, "height": 720}
"""A projector's size: what a class sees."""
REQUIRED = os.environ.get("BUDGETFORMER_REQUIRE_BROWSER") == "1"
"""Set by .ci/run: there a missing browser is a failure, not a skip."""


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (and BUDGETFORMER_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    from playwright import sync_api
except ImportError:
    unavailable("the playwright package is not installed (pip install -e '.[dev]')")
if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
    unavailable(f"{CHROMIUM} is missing (apt-get install chromium; `make setup` does it)")


@pytest.fixture(scope="module")
def server():
    """The app's server as ``make run`` starts it (``app/serve.py`` = ``streamlit run
    app/main.py`` with torch imported first) on a free port of 127.0.0.1 — the load test's
    :class:`loadtest.Server`; yields its URL, stops it afterwards."""
    ARTIFACTS.mkdir(exist_ok=True)  # the server's output, for when a test fails
    with Server(ARTIFACTS / "streamlit-server.log") as srv:
        srv.wait_healthy()
        yield srv.url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def metric_value(page, label: str) -> str:
    m = page.locator('[data-testid="stMetric"]').filter(has_text=label)
    return m.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_metric(page, label: str, value: str, timeout_ms: int = 30_000) -> None:
    """Wait until the metric ``label`` shows ``value``, then until the run has finished."""
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label)
    sync_api.expect(metric.locator('[data-testid="stMetricValue"]')).to_have_text(
        value, timeout=timeout_ms
    )
    wait_idle(page)


def wait_idle(page, timeout_ms: int = 30_000) -> None:
    """Wait until no script run is in progress (the app root reports its script state)."""
    page.wait_for_timeout(100)  # an interaction reaches the server a moment later
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=timeout_ms
    )


def server_ms(page) -> int:
    """The server time of the last completed update, as the sidebar reports it."""
    text = page.locator('[data-testid="stSidebar"]').get_by_text("Server time for this update")
    return int(text.inner_text().split(":")[1].strip().removesuffix(" ms"))


def no_error(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, "the page shows a traceback"


def screenshot(page, name: str) -> None:
    """The whole page (Streamlit scrolls inside its main block, so grow the viewport to fit)."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = page.viewport_size
    height = page.evaluate(
        "() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight ?? 0"
    )
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], height)})
    page.wait_for_timeout(500)  # let the charts re-layout
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    page.set_viewport_size(size)


def screen(page, name: str) -> None:
    """What is on screen, at the page's viewport size (no scrolling, no growing)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def text_box(page):
    return page.get_by_role("textbox", name="Text to classify")


def on_screen(locator) -> None:
    """The element is wholly inside the viewport (seen without scrolling)."""
    sync_api.expect(locator).to_be_in_viewport(ratio=1, timeout=10_000)


def commit_text(page, text: str) -> None:
    area = text_box(page)
    area.fill(text)
    area.press("Control+Enter")  # a text area commits on Ctrl+Enter (or on blur)


def test_explore_page_in_a_browser(server, browser):
    """A visitor's first session, on the default model: the teaching layout at 1280×720, typed
    texts, the budget slider to all heads, the export, an ablation, markup and an empty text."""
    from app.logic.explore import per_layer_value
    from app.models import DEFAULT_MODEL
    from budgetformer_core.shipped import CHECKPOINTS

    shape = json.loads((CHECKPOINTS / DEFAULT_MODEL / "config.json").read_text())["model"]
    n_layers, n_heads = shape["n_layers"], shape["n_heads"]
    all_heads = per_layer_value([str(n_heads)] * n_layers)[0]  # "8 / 8"; "12" for six layers of 12
    page = browser.new_page(viewport=VIEWPORT)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    t0 = time.perf_counter()
    page.goto(server, wait_until="domcontentloaded")
    text_box(page).wait_for(timeout=60_000)
    t_input = time.perf_counter() - t0
    page.locator('[data-testid="stMetric"]').filter(has_text="Prediction").wait_for(timeout=60_000)
    t_results = time.perf_counter() - t0
    wait_idle(page)
    no_error(page)
    print(
        f"\nfirst page load after the server is up: input shown {t_input:.2f} s, "
        f"results shown {t_results:.2f} s (server time {server_ms(page)} ms)"
    )
    # the teaching layout: at 1280×720 the input, the budget control, the prediction, s and k per
    # layer and the heatmap with its legend are on screen together, before any scrolling
    relevance = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Head relevance p")
    relevance.locator(".legend").wait_for(timeout=30_000)  # plotly draws after the run ends
    for label in ("Prediction", "Budget s per layer", "Heads run"):
        on_screen(page.locator('[data-testid="stMetric"]').filter(has_text=label))
    on_screen(page.locator('[data-testid="stSlider"]').filter(has_text="Budget s (share of heads)"))
    on_screen(text_box(page))
    on_screen(relevance)
    assert "not computed" in relevance.locator(".legend").text_content()
    screen(page, "explore-first-screen")
    screenshot(page, "explore-initial")

    # type texts: the prediction follows
    times = []
    commit_text(page, BUSINESS)
    wait_metric(page, "Prediction", "business")
    times.append(server_ms(page))
    commit_text(page, SPORT)
    wait_metric(page, "Prediction", "sports")
    times.append(server_ms(page))
    heads_before = metric_value(page, "Heads run")

    # pick the slider mode (a slider is live only in its own mode), then move the budget slider
    # to 1.0 with the keyboard: every layer then runs all heads
    page.get_by_text("set s with the slider").click()
    wait_idle(page)
    thumb = page.get_by_role("slider").first
    thumb.focus()
    thumb.press("End")
    wait_metric(page, "Heads run", all_heads)
    times.append(server_ms(page))
    assert heads_before != all_heads
    assert metric_value(page, "Budget s per layer") == per_layer_value(["1.00"] * n_layers)[0]
    assert metric_value(page, "FLOPs vs dense") in ("100%", "101%")
    no_error(page)
    screenshot(page, "explore-slider")

    # the latency card: the shipped figures until "Time it" times this input, never on a slider's move
    latency = page.locator('[data-testid="stMetric"]').filter(has_text="Latency (1 thread)")
    sync_api.expect(latency).to_contain_text("live not timed")
    page.get_by_role("button", name="Time it").click()
    sync_api.expect(latency).to_contain_text("× live", timeout=60_000)
    wait_idle(page)

    # "export this analysis": the JSON a user downloads describes what is on screen
    with page.expect_download() as download:
        page.get_by_role("button", name="Export this analysis (JSON)").click()
    record = json.loads(Path(download.value.path()).read_text())
    weights = ROOT / record["checkpoint"]["path"] / "model.safetensors"
    assert record["checkpoint"]["model_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert record["input"]["text"] == SPORT and record["settings"]["budget_s"] == 1.0
    assert record["analysis"]["k"] == [n_heads] * n_layers and record["timing"]["latency_ms"] > 0

    # an ablation: no g_φ, uniform heads
    page.get_by_text("No g_φ (heads not scored)").click()
    wait_idle(page)
    page.get_by_text("Compared with the full model on this input").wait_for()
    times.append(server_ms(page))
    no_error(page)
    screenshot(page, "explore-ablation")
    print(f"server time per update (typing, slider, ablation): {times} ms")

    # markup is text, never HTML: no alert, no bold element made from the input
    commit_text(page, MARKUP)
    wait_idle(page)
    page.get_by_text("What the model read").first.wait_for()
    no_error(page)
    assert dialogs == []
    assert page.locator('[data-testid="stMain"] b', has_text="x").count() == 0
    assert text_box(page).input_value() == MARKUP

    # empty text: a clear message, no results
    commit_text(page, "   ")
    page.get_by_text("The text is empty").wait_for(timeout=30_000)
    # the previous run's metrics stay drawn (stale) until this run ends: wait for them to go
    wait_idle(page)
    sync_api.expect(page.locator('[data-testid="stMetric"]')).to_have_count(0, timeout=30_000)
    no_error(page)
    page.close()

    warm = browser.new_page(viewport=VIEWPORT)
    t0 = time.perf_counter()
    warm.goto(server, wait_until="domcontentloaded")
    warm.locator('[data-testid="stMetric"]').filter(has_text="Prediction").wait_for(timeout=60_000)
    print(f"page load in a second session: {time.perf_counter() - t0:.2f} s")
    warm.close()


def section(page, first, last, name: str) -> None:
    """A screenshot of the page from the top of ``first`` to the bottom of ``last`` (locators),
    the page grown to its whole height first (Streamlit scrolls inside its main block)."""
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight ?? 0")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], height)})
    page.wait_for_timeout(500)
    top, bottom = first.bounding_box(), last.bounding_box()
    height = bottom["y"] + bottom["height"] - top["y"] + 20
    clip = {"x": 0, "y": top["y"] - 10, "width": size["width"], "height": height}
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), clip=clip)
    page.set_viewport_size(size)


def test_a_link_reopens_the_same_analysis(server, browser):
    """The address holds Explore's model, text, budget and ablation: a link opens that view in a
    new session, and the page writes each change back. The deeper views (which tokens raised or
    lowered s, one head's attention) are drawn there; screenshots of them go to test-artifacts/."""
    from urllib.parse import parse_qs, urlencode, urlsplit

    query = urlencode({"model": "bbc-budgetformer", "text": SPORT, "mode": "force_k", "k": 3,
                       "ablation": "no-head-scorer"})
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/?{query}", wait_until="domcontentloaded")
    wait_metric(page, "Heads run", "3 / 3", 60_000)
    no_error_box(page)
    # the text area can be drawn a moment after the metrics of the same run: wait for its value
    sync_api.expect(text_box(page)).to_have_value(SPORT, timeout=30_000)
    assert page.get_by_role("switch", name="No g_φ (heads not scored)").is_checked()
    assert parse_qs(urlsplit(page.url).query)["k"] == ["3"]

    # the deeper views, on demand
    page.get_by_text("Which tokens raised or lowered s (occlusion)").click()
    page.get_by_text("Red: the token raised s").wait_for(timeout=60_000)
    page.get_by_text("Show one head's attention on this input").click()
    attention = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Attention of layer 0")
    attention.locator(".main-svg").first.wait_for(timeout=60_000)
    wait_idle(page)
    no_error_box(page)
    highlighted = page.locator('[data-testid="stHtml"] span[data-a]')
    n_tokens = int(page.get_by_text("What the model read (").inner_text().split("(")[1].split()[0])
    assert highlighted.count() == 2 * n_tokens  # every token, in each of the two layers
    section(page, page.get_by_role("heading", name="Why this budget?"), page.get_by_text("Red: the token raised s"),
            "explore-why-budget")
    section(page, page.get_by_role("heading", name="What the heads that ran looked at"), attention,
            "explore-head-attention")

    # a change is written to the address; that address opens the same view in a new session
    page.get_by_role("slider").nth(1).focus()  # the k slider (the budget slider comes first)
    page.keyboard.press("ArrowRight")
    wait_metric(page, "Heads run", "4 / 4")
    page.wait_for_function("() => new URLSearchParams(location.search).get('k') === '4'", timeout=10_000)
    link = page.url
    page.close()
    again = browser.new_page(viewport=VIEWPORT)
    again.goto(link, wait_until="domcontentloaded")
    wait_metric(again, "Heads run", "4 / 4", 60_000)
    no_error_box(again)
    sync_api.expect(text_box(again)).to_have_value(SPORT, timeout=30_000)
    assert again.get_by_role("switch", name="No g_φ (heads not scored)").is_checked()
    # a link with values that mean nothing opens the default view and says why
    again.goto(f"{server}/?model=nope&k=zero", wait_until="domcontentloaded")
    again.get_by_text("names a model that is not here").wait_for(timeout=60_000)
    again.get_by_text("The link's k").wait_for()
    wait_idle(again)
    no_error(again)
    again.close()


RESULTS = (ROOT / "precomputed" / "results" / "sweeps.csv").is_file()
"""Without ``make precompute``'s results the sweep and ablation pages only say so."""
PAGES = {
    # slug: (title, plotly charts at least, metrics to read)
    "explore": ("Explore an input", 3, ()),
    "sweep": ("Budget sweep", 5 if RESULTS else 0, ("Accuracy", "Speed-up") if RESULTS else ()),
    "compare": ("Side by side", 2, ("A · Heads run", "B · Heads run")),
    "easy_hard": ("Easy vs hard", 5, ("ρ(s, prediction entropy)", "ρ(s, loss)")),
    "ablations": ("Ablations", 4 if RESULTS else 0, ()),
    "errors": ("Errors", 1, ("Misclassified",)),
    "batch": ("Batch analysis", 0, ()),
    "atlas": ("Head atlas", 2, ()),
    "dynamics": ("Training dynamics", 5, ()),
}
"""What every page of the navigation must show (the default page is "explore")."""


TITLES_CUT = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(g => {
    const title = g.querySelector('.gtitle');
    if (!title) return [];
    const box = title.getBBox();
    return box.x + box.width > g._fullLayout.width + 1 ? [title.textContent] : [];
})"""
"""The titles of the page's charts that run past their figure's right edge."""
METRICS_CUT = """() => [...document.querySelectorAll('[data-testid="stMetric"] .stMarkdownEllipsis')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""
"""The metric labels and values of the page that Streamlit cuts short (with an ellipsis)."""


def no_error_box(page) -> None:
    no_error(page)
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, f"the page shows an error: {errors.first.inner_text()}"


def test_every_page_renders_in_a_browser(server, browser):
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server)
    page.locator('[data-testid="stMain"]').wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    links = page.locator('[data-testid="stSidebarNav"] a')
    urls = [links.nth(i).get_attribute("href") for i in range(links.count())] or [server]
    # Material icons, which ship with Streamlit (emoji need a font the machine may lack)
    assert links.locator('[data-testid="stIconMaterial"]').count() == links.count() == len(PAGES)
    seen = []
    for url in urls:  # a single page has no navigation menu: then just the main page
        page.goto(url if url.startswith("http") else server + "/" + url.lstrip("/"))
        page.locator('[data-testid="stMain"]').wait_for()
        slug = url.rstrip("/").rsplit("/", 1)[-1]
        slug = slug if slug and ":" not in slug else "explore"
        title, n_charts, metrics = PAGES[slug]
        # the errors and easy-vs-hard pages run the whole test split the first time (seconds)
        page.locator("h1", has_text=title).wait_for(timeout=60_000)
        wait_idle(page, 120_000)
        no_error_box(page)
        charts = page.locator('[data-testid="stPlotlyChart"]')
        if n_charts:
            charts.nth(n_charts - 1).wait_for(timeout=30_000)  # plotly draws after the run ends
        for label in metrics:
            value = metric_value(page, label).replace("−", "-")
            assert value and value != "—", f"{slug}: {label} is empty"
            if label.startswith("Spearman"):
                assert -1 <= float(value) <= 1
        # every chart's title fits its figure (a longer one is cut off at the figure's edge)
        settled(page)
        cut = page.evaluate(TITLES_CUT)
        assert not cut, f"{slug}: chart titles wider than their figure: {cut}"
        cut = page.evaluate(METRICS_CUT)
        assert not cut, f"{slug}: metric labels or values cut short with an ellipsis: {cut}"
        # nothing of Streamlit's own in front of a class: no Deploy button, no developer menu
        assert page.locator('[data-testid="stAppDeployButton"], [data-testid="stMainMenu"]').count() == 0
        screen(page, "page-" + slug)
        screenshot(page, f"page-{slug}-full")
        seen.append(slug)
    assert sorted(seen) == sorted(PAGES)
    page.close()


def test_batch_page_in_a_browser(server, browser, tmp_path):
    """A CSV uploaded through the real widget: a row per text, markup shown as text."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/batch")
    page.locator("h1", has_text="Batch analysis").wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    texts = [SPORT, "Shares rose after the bank reported record profits.", "<b>markup</b> stays text", "  "]
    f = tmp_path / "texts.csv"
    f.write_text("text\n" + "".join(f'"{t}"\n' for t in texts))
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(f))
    metric = page.locator('[data-testid="stMetric"]', has_text="Texts classified")
    metric.get_by_text("3 of 4").wait_for(timeout=60_000)
    wait_idle(page)
    no_error(page)
    assert page.locator("b", has_text="markup").count() == 0  # never rendered as HTML
    screenshot(page, "page-batch-file")
    page.close()


def test_batch_page_refuses_an_oversized_upload(server, browser, tmp_path):
    """A file over the page's limit (:data:`app.logic.batch.BATCH_MAX_MB`, the server's
    ``maxUploadSize`` too) is refused as it is picked: the widget says so, nothing is sent to the
    server (no upload request), and the page still asks for a file."""
    import re

    from app.logic.batch import BATCH_MAX_BYTES

    page = browser.new_page(viewport=VIEWPORT)
    uploads = []
    page.on("request", lambda r: r.method == "PUT" and "/_stcore/upload_file" in r.url and uploads.append(r.url))
    page.goto(server + "/batch")
    page.locator("h1", has_text="Batch analysis").wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    big = tmp_path / "big.txt"
    big.write_bytes(b"a text\n" * (BATCH_MAX_BYTES // 7 + 1000))
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(big))
    page.get_by_text(re.compile(r"File must be .* or smaller")).wait_for(timeout=30_000)
    wait_idle(page)
    assert uploads == []
    assert page.locator('[data-testid="stMetric"]', has_text="Texts classified").count() == 0
    page.get_by_text("Upload a file to classify its texts.").wait_for()
    no_error(page)
    page.close()


def test_errors_page_opens_a_text_in_explore(server, browser):
    """Click-through: "Open in Explore an input" carries the picked test text to that page."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server + "/errors")
    page.locator("h1", has_text="Errors").wait_for(timeout=60_000)
    wait_idle(page, 120_000)
    no_error_box(page)
    wrong = int(metric_value(page, "Misclassified"))
    assert wrong > 0
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    picked = page.get_by_label("Text to read (or select a row in the table)")
    index = int(picked.input_value().split(" ")[0].lstrip("#"))
    page.get_by_role("button", name="Open in “Explore an input” →").click()
    text_box(page).wait_for(timeout=60_000)
    page.locator('[data-testid="stMetric"]').filter(has_text="Prediction").wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    no_error_box(page)
    page.get_by_text(f"Test text #{index} of bbc").wait_for()
    page.get_by_text(f"Misclassified: test text #{index}").wait_for()
    assert len(text_box(page).input_value()) > 50
    screenshot(page, "errors-open-in-explore")
    page.close()


SHARED_AG_NEWS = ROOT.parent / "shared" / "data" / "ag_news"
AG_NEWS = "ag_news-budgetformer"


def settled(page, timeout_ms: int = 120_000) -> None:
    """The run has ended and every chart of the page is drawn (plotly draws after the run)."""
    wait_idle(page, timeout_ms)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                   .every(c => c.querySelector('.main-svg'))""",
        timeout=timeout_ms,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def cpu_seconds() -> float:
    """CPU time (user + system) used so far by the processes this test started: the server and
    the browser's processes (this process itself left out). On a machine that other work keeps
    busy, wall-clock times stretch; this is what the work itself cost."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        procs[int(d.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))  # ppid, utime + stime
    mine, total, grew = {os.getpid()}, 0, True
    while grew:  # the descendants of this process
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    for pid in mine - {os.getpid()}:
        total += procs[pid][1]
    return total / tick


def open_in_nav(page, title: str) -> tuple[float, float]:
    """Switch page through the sidebar (same session); the seconds until the page has settled,
    wall clock and CPU time (:func:`cpu_seconds`)."""
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
    page.locator("h1", has_text=title).wait_for(timeout=120_000)
    settled(page)
    return time.perf_counter() - t0, cpu_seconds() - cpu0


def pick_in_sidebar(page, label: str, option: str) -> None:
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text=label)
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page, 60_000)


@pytest.mark.skipif(
    not (SHARED_AG_NEWS.is_dir() and (ROOT / "precomputed" / "checkpoints" / AG_NEWS).is_dir()),
    reason="no local copy of ag_news or no shipped ag_news model",
)
def test_ag_news_easy_vs_hard_with_texts_in_a_browser(server, browser):
    """AG News "Easy vs hard" with its 7,600 test texts: the scatter drawn as densities, no error;
    the time from the click in the navigation until every chart is drawn is printed (the first
    visit, and the median of five more)."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server)
    page.locator('[data-testid="stMetric"]').filter(has_text="Prediction").wait_for(timeout=60_000)
    wait_idle(page, 60_000)
    pick_in_sidebar(page, "Dataset", "ag_news")
    local = page.get_by_role("textbox", name="Local copy of ag_news")
    local.fill(str(SHARED_AG_NEWS))
    local.press("Enter")
    wait_idle(page, 120_000)
    assert page.get_by_text("could be read from that path").count() == 0
    first = open_in_nav(page, "Easy vs hard")
    no_error_box(page)
    scatter = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="vs prediction entropy, loss")
    assert scatter.locator(".contour").count() == 6  # 7,600 inputs: 2 densities in each of 3 panels
    page.get_by_text("Two texts side by side").wait_for()
    again = []
    for _ in range(5):
        open_in_nav(page, "Explore an input")
        again.append(open_in_nav(page, "Easy vs hard"))
        no_error_box(page)
    wall, cpu = (statistics.median(t[i] for t in again) for i in (0, 1))
    print(f"\nAG News 'Easy vs hard' with texts, click to settled: first visit {first[0]:.2f} s "
          f"(CPU {first[1]:.2f} s), then median {wall:.2f} s of 5 (CPU {cpu:.2f} s; "
          f"{' '.join(f'{t[0]:.2f}' for t in again)}; server time {server_ms(page)} ms); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    screen(page, "page-easy_hard-ag_news")
    page.close()


def box_select(page, chart) -> None:
    """Drag a box over the whole plot area of a plotly chart, with the mouse, after choosing the
    mode bar's box-select tool."""
    chart.scroll_into_view_if_needed()
    chart.hover()  # the mode bar shows on hover
    chart.locator('[data-title="Box Select"]').click()
    area = chart.locator(".nsewdrag").first.bounding_box()
    page.mouse.move(area["x"] + 4, area["y"] + 4)
    page.mouse.down()
    page.mouse.move(area["x"] + area["width"] - 4, area["y"] + area["height"] - 4, steps=12)
    page.mouse.up()


@pytest.mark.parametrize("model", ["bbc-budgetformer", "bbc-bba"])
def test_head_atlas_in_a_browser(server, browser, model):
    """/atlas opens on the model its address names with its charts and no error; a box drawn on
    the input map lists the inputs inside it, each with a link that opens it in Explore."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/atlas?model={model}", wait_until="domcontentloaded")
    page.locator("h1", has_text="Head atlas").wait_for(timeout=60_000)
    usage = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Share of inputs that ran each head")
    usage.locator(".main-svg").first.wait_for(timeout=180_000)
    settled(page, 180_000)
    no_error_box(page)
    variant = model.removeprefix("bbc-")
    assert f"{variant} · 2 layers × 8 heads" in page.locator('[data-testid="stSidebar"]').inner_text()  # its card
    assert page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Slice A − slice B").count() == 1
    screen(page, f"atlas-usage-{model}")

    page.get_by_role("tab", name="Input map").click()
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Inputs placed by their relevance p")
    chart.locator(".main-svg").first.wait_for(timeout=180_000)
    settled(page, 180_000)
    n_points = chart.locator(".point").count()  # fewer than 2,000 inputs: SVG points
    assert n_points == 426  # BBC's test split
    box_select(page, chart)
    summary = page.get_by_text("selected input")
    summary.first.wait_for(timeout=60_000)
    wait_idle(page)
    no_error_box(page)
    assert summary.first.inner_text().startswith(f"{n_points} selected inputs")  # every point inside the box
    listing = page.locator('[data-testid="stDataFrame"]').last
    listing.wait_for(timeout=30_000)
    screen(page, f"atlas-map-{model}")
    assert errors == []
    page.close()


MAP_SECONDS = 5.0
"""The most seconds the Head atlas's input map may take to draw once the page has settled."""


@pytest.mark.skipif(not (ROOT / "precomputed" / "checkpoints" / "bbc-minilm-budgetformer").is_dir(),
                    reason="no shipped bbc-minilm-budgetformer")
def test_the_minilm_atlas_input_map_draws_within_seconds(server, browser):
    """``/atlas?model=bbc-minilm-budgetformer``: once the page has settled, "Input map" draws its
    426 points within :data:`MAP_SECONDS` (the relevance p ships beside the per-example table: no
    pass of the 6 × 12-head model over the split). Generous timeouts, so that a slow map reports
    its time instead of a timeout."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/atlas?model=bbc-minilm-budgetformer", wait_until="domcontentloaded")
    page.locator("h1", has_text="Head atlas").wait_for(timeout=120_000)
    usage = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Share of inputs that ran each head")
    usage.locator(".main-svg").first.wait_for(timeout=120_000)
    settled(page, 120_000)
    t0 = time.perf_counter()
    page.get_by_role("tab", name="Input map").click()
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Inputs placed by their relevance p")
    chart.locator(".main-svg").first.wait_for(timeout=180_000)
    settled(page, 180_000)
    seconds = time.perf_counter() - t0
    print(f"\nbbc-minilm-budgetformer's input map drawn {seconds:.2f} s after the click (page settled)")
    no_error_box(page)
    assert chart.locator(".point").count() == 426  # BBC's test split
    assert seconds <= MAP_SECONDS, f"the input map took {seconds:.1f} s to draw"
    page.close()


def test_the_offline_report_opens_without_the_network(server, browser, tmp_path):
    """Explore's "Offline report (HTML)" on a text with markup: the file opens from file:// in a
    browser with the network off, makes no request, raises no script error, draws the relevance
    map, and shows the markup as text."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server, wait_until="domcontentloaded")
    text_box(page).wait_for(timeout=180_000)
    wait_idle(page, 180_000)
    read = page.get_by_text("What the model read (").first
    before = read.inner_text()  # "What the model read (N tokens)" of the text the page opened on
    commit_text(page, MARKUP)
    sync_api.expect(read).not_to_have_text(before, timeout=120_000)  # the run on MARKUP is drawn
    wait_idle(page, 120_000)
    with page.expect_download(timeout=120_000) as download:
        page.get_by_role("button", name="Offline report (HTML)").click()
    report = tmp_path / "report.html"
    download.value.save_as(report)
    page.close()

    context = browser.new_context(offline=True, viewport=VIEWPORT)
    requests: list[str] = []

    def only_the_file(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_file)
    offline = context.new_page()
    errors: list[str] = []
    dialogs: list[str] = []
    offline.on("pageerror", lambda e: errors.append(str(e)))
    offline.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    offline.goto(report.as_uri())
    offline.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
    offline.wait_for_timeout(500)
    assert requests == [] and errors == [] and dialogs == []
    assert offline.locator("pre.text").inner_text() == MARKUP
    assert offline.locator("b", has_text="x").count() == 0 and offline.locator("script", has_text="alert").count() == 0
    for heading in ("Prediction", "Budget and heads per layer", "Relevance map", "Why this budget?", "Settings"):
        assert offline.get_by_role("heading", name=heading).count() == 1
    offline.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    context.close()


def sidebar_model(page) -> str:
    """What the sidebar's model picker shows: its text and its input's value."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Model")
    return box.evaluate("e => e.innerText + ' ' + [...e.querySelectorAll('input')].map(i => i.value).join(' ')")


def address(page) -> dict[str, list[str]]:
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(page.url).query)


@pytest.mark.skipif(not (ROOT / "precomputed" / "checkpoints" / "bbc-bba").is_dir(), reason="no shipped bbc-bba")
def test_every_page_keeps_the_model_in_its_address(server, browser):
    """Every page opened with ``?model=bbc-bba`` shows that model, and every page reached through
    the navigation shows it too and writes ``model=bbc-bba`` into its address."""
    page = browser.new_page(viewport=VIEWPORT)
    for slug, (title, _, _) in PAGES.items():
        page.goto(f"{server}/{'' if slug == 'explore' else slug}?model=bbc-bba", wait_until="domcontentloaded")
        page.locator("h1", has_text=title).wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        no_error(page)
        assert "bbc-bba" in sidebar_model(page), slug
        assert address(page).get("model") == ["bbc-bba"], (slug, page.url)
    for title, _, _ in PAGES.values():
        page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
        page.locator("h1", has_text=title).wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        no_error(page)
        assert "bbc-bba" in sidebar_model(page), title
        page.wait_for_function("() => new URLSearchParams(location.search).get('model') === 'bbc-bba'",
                               timeout=10_000)
    page.close()


@pytest.mark.skipif(
    not (SHARED_AG_NEWS.is_dir() and (ROOT / "precomputed" / "checkpoints" / AG_NEWS).is_dir()),
    reason="no local copy of ag_news or no shipped ag_news model",
)
def test_an_ag_news_test_index_link_reopens_its_text(server, browser):
    """A link to AG News test text #7 names the local copy by its name under the operator's
    folder (never a path of the machine) and reopens that text in a new session."""
    from budgetformer_core.io.data import load_dataset

    expected = load_dataset("ag_news", str(SHARED_AG_NEWS), seed=0).split("test").texts[7]
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/?model={AG_NEWS}&index=7&copy={SHARED_AG_NEWS.name}", wait_until="domcontentloaded")
    sync_api.expect(text_box(page)).to_have_value(expected, timeout=120_000)
    wait_idle(page, 120_000)
    no_error_box(page)
    page.get_by_text("Test text #7 of ag_news").wait_for()
    assert page.get_by_text("needs the test texts").count() == 0
    shared = address(page)
    assert shared["index"] == ["7"] and shared["copy"] == [SHARED_AG_NEWS.name], page.url
    page.close()


@pytest.mark.skipif(not (ROOT / "precomputed" / "checkpoints" / "synthetic_var-budgetformer").is_dir(),
                    reason="no shipped synthetic_var model")
def test_a_fresh_session_on_a_synthetic_var_model_opens_on_its_text(server, browser):
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/?model=synthetic_var-budgetformer", wait_until="domcontentloaded")
    page.get_by_text("Test text #0 of synthetic_var").wait_for(timeout=120_000)
    wait_idle(page, 120_000)
    no_error_box(page)
    assert page.get_by_text("are unknown to its vocabulary").count() == 0
    assert address(page).get("index") == ["0"]
    page.close()


def test_a_new_session_logs_no_widget_state_warning(server, browser):
    """A new session on Explore, plain or opened from a link, sets each widget one way only
    (Session State, no second default in the call): the server logs no "created with a default
    value but also had its value set via the Session State API" warning and its stack trace
    (Streamlit logs it once per server, for the first widget given both)."""
    for query in ("", "?mode=force_k&k=2&seed=3"):
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{server}/{query}", wait_until="domcontentloaded")
        page.locator("h1", has_text="Explore an input").wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        no_error_box(page)
        page.close()
    log = (ARTIFACTS / "streamlit-server.log").read_text(encoding="utf-8", errors="replace")
    assert "set via the Session State API" not in log, log[-3000:]


@pytest.mark.skipif(not (RESULTS and (ROOT / "precomputed" / "checkpoints" / "bbc-minilm-budgetformer").is_dir()),
                    reason="no shipped bbc-minilm-budgetformer or no sweeps.csv")
def test_ablations_show_the_picked_models_own_row(server, browser):
    """``/ablations?model=bbc-minilm-budgetformer``: the table holds the model's name and its test
    accuracy, 98.36 % as its percent column draws it. The grid draws on a canvas; its accessible
    copy of the cells (hidden ``gridcell``s) holds each text, and each number unformatted."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/ablations?model=bbc-minilm-budgetformer", wait_until="domcontentloaded")
    page.locator("h1", has_text="Ablations").wait_for(timeout=120_000)
    wait_idle(page, 120_000)
    no_error_box(page)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.locator('[role="gridcell"]').first.wait_for(state="attached", timeout=30_000)
    cells = grid.locator('[role="gridcell"]').all_text_contents()

    def as_percent(cell: str) -> str | None:  # a fraction as format="percent" shows it
        try:
            return f"{float(cell):.2%}"
        except ValueError:
            return None

    assert "bbc-minilm-budgetformer" in cells, cells[:24]
    assert "98.36%" in [as_percent(c) for c in cells], cells[:24]
    page.close()

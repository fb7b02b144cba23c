"""How long the Head atlas's input map takes to settle in a browser, first and repeat visits.

The server is started as ``make run`` starts it (``app/serve.py``, :class:`loadtest.Server`) on a
free port of 127.0.0.1; Debian's chromium opens ``/atlas`` on ``--model`` with the local copy of
its dataset named in the address (``copy=NAME``, a folder under ../shared/data or
``$BUDGETFORMER_DATA_DIRS``) and clicks "Input map". Timed, from the click to the moment the run
has ended and every chart is drawn:

* *first*: the first visit (the model runs over the whole test split once);
* *back*: in the same session, "Explore an input" and back to the atlas's input map, ``--repeats``
  times;
* *new session*: a new tab on the same address, ``--repeats`` times (the server's caches are shared).

    .venv/bin/python scripts/atlas_timing.py --model ag_news-budgetformer --copy ag_news [--json]

Exit 0, or 2 when the browser, the model or the copy is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from loadtest import CHROMIUM, CHROMIUM_ARGS, ROOT, Server

MAP = "Inputs placed by their relevance p"


def settled(page, timeout_ms: int) -> None:
    """The run has ended and every chart of the page is drawn."""
    page.wait_for_timeout(100)  # a click reaches the server a moment later
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=timeout_ms)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                   .every(c => c.querySelector('.main-svg'))""", timeout=timeout_ms)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def open_map(page, timeout_ms: int) -> float:
    """Click the atlas's "Input map" tab: seconds until the map has settled."""
    page.get_by_role("tab", name="Input map").wait_for(timeout=timeout_ms)
    t0 = time.perf_counter()
    page.get_by_role("tab", name="Input map").click()
    page.locator('[data-testid="stPlotlyChart"]').filter(has_text=MAP).locator(".main-svg").first.wait_for(
        timeout=timeout_ms)
    settled(page, timeout_ms)
    return time.perf_counter() - t0


def to_page(page, title: str, timeout_ms: int) -> None:
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
    page.locator("h1", has_text=title).wait_for(timeout=timeout_ms)
    settled(page, timeout_ms)


def measure(model: str, copy: str, repeats: int, timeout_s: float) -> dict:
    from playwright import sync_api

    timeout_ms = int(timeout_s * 1000)
    address = f"/atlas?model={model}&copy={copy}"
    with Server(ROOT / "test-artifacts" / "atlas-timing-server.log") as srv, sync_api.sync_playwright() as p:
        srv.wait_healthy(timeout_s)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(srv.url + address, wait_until="domcontentloaded")
        page.locator("h1", has_text="Head atlas").wait_for(timeout=timeout_ms)
        settled(page, timeout_ms)
        first = open_map(page, timeout_ms)
        points = page.locator('[data-testid="stPlotlyChart"]').filter(has_text=MAP).evaluate(
            "c => c.querySelector('.js-plotly-plot')._fullData.reduce((n, t) => n + (t.x ? t.x.length : 0), 0)")
        # _fullData: the traces as drawn (.data may hold the arrays binary-encoded)
        webgl = page.locator('[data-testid="stPlotlyChart"]').filter(has_text=MAP).locator("canvas").count() > 0
        back = []
        for _ in range(repeats):
            to_page(page, "Explore an input", timeout_ms)
            to_page(page, "Head atlas", timeout_ms)
            back.append(open_map(page, timeout_ms))
        fresh = []
        for _ in range(repeats):
            tab = browser.new_page(viewport={"width": 1280, "height": 720})
            tab.goto(srv.url + address, wait_until="domcontentloaded")
            tab.locator("h1", has_text="Head atlas").wait_for(timeout=timeout_ms)
            settled(tab, timeout_ms)
            fresh.append(open_map(tab, timeout_ms))
            tab.close()
        browser.close()
    return {"model": model, "points": points, "webgl": webgl, "first_s": round(first, 2),
            "back_s": [round(t, 2) for t in back], "new_session_s": [round(t, 2) for t in fresh],
            "load_average": round(os.getloadavg()[0], 1), "cpus": os.cpu_count()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ag_news-budgetformer", help="a shipped model (default: %(default)s)")
    parser.add_argument("--copy", default="ag_news", help="the local copy of its dataset, by its name under the "
                        "operator's folder (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="repeat visits of each kind, 1–20 (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="longest wait for one step, seconds (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.repeats <= 20 or not 1 <= args.timeout <= 3600:
        parser.error("--repeats must be 1–20 and --timeout 1–3600")
    sys.path.insert(0, str(ROOT))
    from app.local_copy import named_copy
    from app.models import available_models

    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 2
    if args.model not in available_models():
        print(f"error: no model {args.model!r} under precomputed/checkpoints", file=sys.stderr)
        return 2
    if named_copy(args.copy) is None:
        print(f"error: no local copy named {args.copy!r} under the operator's folders", file=sys.stderr)
        return 2
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    out = measure(args.model, args.copy, args.repeats, args.timeout)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['model']}: input map of {out['points']} inputs ({'WebGL' if out['webgl'] else 'SVG'}), "
              f"click to settled: first visit {out['first_s']:.2f} s; back in the same session median "
              f"{statistics.median(out['back_s']):.2f} s ({' '.join(map(str, out['back_s']))}); new session median "
              f"{statistics.median(out['new_session_s']):.2f} s ({' '.join(map(str, out['new_session_s']))}); "
              f"load average {out['load_average']} on {out['cpus']} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long a visitor waits on one model: the first page load, then the first answer to a typed text.

    .venv/bin/python scripts/first_response.py --model bbc-minilm-budgetformer [--shots docs] [--json]

The server is started as ``make run`` starts it (``app/serve.py``, :class:`loadtest.Server`) on a
free port of 127.0.0.1; Debian's ``/usr/bin/chromium`` opens "Explore an input" at 1280×720 with
``?model=`` naming the model (a fresh server: the model is loaded by this first visit). Printed:

* **first page load**: from the request of the page until the prediction is shown, and until every
  chart is drawn and the run is over (wall clock, in the browser), and the server time of that
  run (the sidebar's "Server time for this update");
* **first typed text**: for a business sentence typed into the text box (Ctrl+Enter), the time
  until "business" is shown (the answer: the page draws the analysis first and times the input
  last), the round trip until the run is over and every chart drawn, and the server time of the
  whole run (latency timing included).

``--shots DIR`` also saves ``explore_<tag>.png`` (after the typed text) and ``easy_hard_<tag>.png``
at 1280×720 into DIR (``<tag>``: the model name without its dataset, ``-`` as ``_``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from loadtest import CHROMIUM, CHROMIUM_ARGS, Server  # noqa: E402  (scripts/ is not a package)

VIEWPORT = {"width": 1280, "height": 720}
TEXT = ("Shares in the bank rose sharply after it reported record annual profits, and analysts said the "
        "company's sales and the wider economy would keep growing.")


def settled(page, timeout_ms: int = 600_000) -> None:
    """No script run in progress and every chart drawn."""
    page.wait_for_timeout(100)
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=timeout_ms)
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                   .every(c => c.querySelector('.main-svg'))""", timeout=timeout_ms)


def shown(page, label: str) -> None:
    """Wait until the Prediction card reads ``label`` (checked on every frame)."""
    page.wait_for_function(
        """label => [...document.querySelectorAll('[data-testid="stMetric"]')].some(m =>
               m.innerText.includes('Prediction') && m.innerText.includes(label))""",
        arg=label, polling="raf", timeout=600_000)


def server_ms(page) -> int:
    text = page.locator('[data-testid="stSidebar"]').get_by_text("Server time for this update")
    return int(text.inner_text().split(":")[1].strip().removesuffix(" ms"))


def measure(model: str, shots: Path | None) -> dict:
    from playwright import sync_api

    tag = model.split("-", 1)[1].replace("-", "_")
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    with Server(ROOT / "test-artifacts" / "first-response-server.log") as srv, sync_api.sync_playwright() as p:
        srv.wait_healthy()
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport=VIEWPORT)
        t0 = time.perf_counter()
        page.goto(f"{srv.url}/?model={model}", timeout=600_000)
        page.locator('[data-testid="stMetric"]').filter(has_text="Prediction").wait_for(timeout=600_000)
        load_answer_s = time.perf_counter() - t0
        settled(page)
        load_s, load_server = time.perf_counter() - t0, server_ms(page)

        area = page.get_by_role("textbox", name="Text to classify")
        area.fill(TEXT)
        t0 = time.perf_counter()
        area.press("Control+Enter")
        shown(page, "business")
        typed_answer_s = time.perf_counter() - t0
        settled(page)
        typed_s, typed_server = time.perf_counter() - t0, server_ms(page)
        if shots is not None:
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"explore_{tag}.png"))
            page.locator('[data-testid="stSidebarNav"] a', has_text="Easy vs hard").click()
            page.locator("h1", has_text="Easy vs hard").wait_for(timeout=600_000)
            settled(page)
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"easy_hard_{tag}.png"))
        browser.close()
    return {"model": model, "first_load_answer_s": round(load_answer_s, 2), "first_load_s": round(load_s, 2),
            "first_load_server_ms": load_server, "typed_answer_s": round(typed_answer_s, 2),
            "typed_round_trip_s": round(typed_s, 2), "typed_server_ms": typed_server}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bbc-minilm-budgetformer", help="a shipped model's name")
    p.add_argument("--shots", type=Path, help="save the two screenshots into this folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.shots is not None and not args.shots.is_dir():
        p.error(f"--shots: {args.shots} is not a folder")
    found = measure(args.model, args.shots)
    if args.json:
        print(json.dumps(found))
    else:
        print(f"{found['model']}: first page load: answer {found['first_load_answer_s']:.2f} s, all "
              f"{found['first_load_s']:.2f} s (server {found['first_load_server_ms']} ms); first typed text: "
              f"answer {found['typed_answer_s']:.2f} s, all {found['typed_round_trip_s']:.2f} s "
              f"(server {found['typed_server_ms']} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

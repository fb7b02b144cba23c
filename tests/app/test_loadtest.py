"""``make loadtest`` in short: two browser sessions at once on a real server, every result judged.

The full run (``make loadtest``, 8 sessions) loads both cores for a minute and is not part of
the suite; this one runs 2 sessions, each typing its own text, picking the slider and moving it
once. The judge that counts errors and cross-talk is tested on the engine's real results.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import loadtest  # noqa: E402  (scripts/ is not a package)

REQUIRED = os.environ.get("BUDGETFORMER_REQUIRE_BROWSER") == "1"
"""Set by .ci/run: there a missing browser is a failure, not a skip."""


def needs_browser() -> None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        reason = "the playwright package is not installed (pip install -e '.[dev]')"
    else:
        chromium = Path(loadtest.CHROMIUM)
        if chromium.is_file() and os.access(chromium, os.X_OK):
            return
        reason = f"{chromium} is missing (apt-get install chromium; `make setup` does it)"
    if REQUIRED:
        pytest.fail(f"{reason} (and BUDGETFORMER_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


def test_two_sessions_at_once_each_see_their_own_results(tmp_path):
    needs_browser()
    report = loadtest.run(sessions=2, moves=1, timeout=300, log=tmp_path / "server.log")
    print("\n" + "\n".join(report.lines()))
    counts = (report.planned, report.interactions, report.errors, report.cross_talk)
    assert counts == (2 * 3, 2 * 3, 0, 0) and report.passed, report.problems
    # the pages ask nothing of anyone but the server (a :material/…: page_icon would: Streamlit's
    # front end fetches that favicon from fonts.gstatic.com; an emoji one is drawn in place)
    assert report.outside_requests == 0, report.problems
    assert 0 < report.server_ms_p50 <= report.server_ms_p95 < report.round_trip_ms_p95
    assert 0 < report.rss_mb_start < report.rss_mb_warm  # the model is loaded by the first page
    assert report.rss_growth_after_warm_up == pytest.approx(
        (report.rss_mb_end - report.rss_mb_warm) / report.rss_mb_warm, abs=1e-3)


def test_the_judge_tells_own_results_from_another_sessions_and_from_wrong_ones():
    texts = loadtest.session_texts(3)
    assert len({len(t) for t in texts}) == 3
    expected = loadtest.expected_results(texts, moves=2)
    assert set(expected) == {(i, b) for i in range(3) for b in (None, 0.5, 0.55, 0.6)}
    assert len({expected[i, None].n_tokens for i in range(3)}) == 3  # a result shows whose it is
    assert [expected[0, b].heads for b in (0.5, 0.55, 0.6)] == ["4 / 4"] * 3  # ⌊b·8⌋ per layer
    for b in (None, 0.5, 0.6):
        assert loadtest.judge(0, b, expected[0, b], expected) == "ok"
        assert loadtest.judge(0, b, expected[2, b], expected) == "cross-talk"
        assert loadtest.judge(2, b, expected[1, b], expected) == "cross-talk"
    own = expected[1, 0.55]
    assert loadtest.judge(1, 0.55, replace(own, confidence="1.0% confident"), expected) == "error"
    assert loadtest.judge(1, 0.55, replace(own, heads="8 / 8"), expected) == "error"
    assert loadtest.judge(1, 0.55, expected[1, None], expected) != "ok"  # another setting's result


def test_the_walk_of_the_slider_never_repeats_a_budget():
    walk = loadtest.budgets(loadtest.MAX_INTERACTIONS)
    assert len(set(walk)) == len(walk) == loadtest.MAX_INTERACTIONS
    assert 0.5 not in walk and min(walk) == 0.05 and max(walk) == 1.0
    assert loadtest.budgets(3) == [0.55, 0.6, 0.65]


@pytest.mark.parametrize(
    "args",
    [["--sessions", "0"], ["--sessions", str(loadtest.MAX_SESSIONS + 1)], ["--sessions", "eight"],
     ["--interactions", "0"], ["--interactions", str(loadtest.MAX_INTERACTIONS + 1)],
     ["--timeout", "5"], ["--timeout", str(loadtest.MAX_SECONDS + 1)], ["--url", "http://example.com"]],
)
def test_bad_arguments_are_a_usage_error(args, capsys):
    with pytest.raises(SystemExit) as stop:
        loadtest.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("loadtest.py: error:") and "Traceback" not in "".join(err)


def test_percentiles():
    assert loadtest.percentile([], 95) is None
    assert loadtest.percentile([7.0], 50) == 7.0
    values = [float(x) for x in range(100, -1, -1)]  # 0 … 100 in any order
    assert (loadtest.percentile(values, 50), loadtest.percentile(values, 95)) == (50.0, 95.0)

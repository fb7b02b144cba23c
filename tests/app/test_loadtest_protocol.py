"""``loadtest.py --protocol`` in short: two sessions at once over Streamlit's websocket protocol on
a real server (no browser), on the app's default model, every result judged.

The full run (``make loadtest LOADTEST_ARGS="--protocol --sessions 8 --interactions 20"``) loads
both cores for minutes and is not part of the suite; this one runs 2 sessions, each typing its
own text, picking the slider and moving it once.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import loadtest  # noqa: E402  (scripts/ is not a package)
import loadtest_protocol  # noqa: E402

from app.models import DEFAULT_MODEL  # noqa: E402


def test_two_protocol_sessions_at_once_each_see_their_own_results(tmp_path):
    report = loadtest.run(sessions=2, moves=1, timeout=300, log=tmp_path / "server.log", protocol=True, longest=48)
    print("\n" + "\n".join(report.lines()))
    counts = (report.planned, report.interactions, report.errors, report.cross_talk)
    assert counts == (2 * 3, 2 * 3, 0, 0) and report.passed, report.problems
    assert (report.mode, report.model) == ("protocol", DEFAULT_MODEL)
    assert 0 < report.server_ms_p50 <= report.server_ms_p95 < report.round_trip_ms_p95
    assert 0 < report.rss_mb_start < report.rss_mb_warm <= report.rss_mb_peak  # the first page loads the model
    assert report.server_cpu_ms_per_move > 0 and report.client_cpu_s >= 0
    assert set(report.engine_ms) == {"analysis", "latency timing"} and min(report.engine_ms.values()) > 0
    # the prediction arrives first, the live timing of the latency card later, the run's end last
    (first, _), (timed, _) = report.until_ms["until the prediction card"], report.until_ms["until the latency card"]
    assert 0 < first < timed <= report.round_trip_ms_p95, report.until_ms
    assert report.until_ms["outside the script"][0] >= 0, report.until_ms  # round trip − server time


def page(shown: loadtest.Shown, tokens: str) -> loadtest_protocol.Run:
    """A run of the Explore page that shows ``shown`` and lists ``tokens``, as the server sends it."""
    from streamlit.proto.Element_pb2 import Element

    elements = [Element(), Element(), Element(), Element(), Element(), Element()]
    for e, (label, body, delta) in zip(elements, [("Prediction", shown.label, shown.confidence),
                                                  ("Budget s per layer", shown.budget, ""),
                                                  ("Heads run", shown.heads, "")], strict=False):
        e.metric.label, e.metric.body, e.metric.delta = label, body, delta
    elements[3].markdown.body = f"The model read {shown.n_tokens} tokens."
    elements[4].text.body = tokens
    elements[5].markdown.body = "Server time for this update: 12 ms"
    places = [(0, i) for i in range(len(elements))]
    return loadtest_protocol.Run(dict(zip(places, elements, strict=True)), 0, 20.0, dict.fromkeys(places, 5.0))


class Replay:
    """A connection that answers every rerun with the same run."""

    def __init__(self, run: loadtest_protocol.Run):
        self.run = run

    def set(self, widget_id: str, **value) -> None:
        pass

    async def rerun(self) -> loadtest_protocol.Run:
        return self.run


def test_a_page_showing_another_sessions_text_or_result_is_cross_talk():
    texts = loadtest.session_texts(2)
    expected = loadtest.expected_results(texts, moves=0)
    tokens = {i: " ".join(f"token{i}-{j}" for j in range(3)) for i in range(2)}
    mine, theirs = expected[0, 0.5], expected[1, 0.5]
    verdicts = []
    for shown, listed in [(mine, tokens[0]), (theirs, tokens[1]), (mine, tokens[1]), (mine, "other tokens")]:
        steps: list[loadtest.Step] = []
        client = loadtest_protocol.Client(0, texts[0], tokens, expected, loadtest_protocol.page_labels(loadtest.MODEL),
                                          steps)
        client.ws, client.ids = Replay(page(shown, listed)), {"slider": "the slider"}
        asyncio.run(client.step("slider", 0.5))
        [step] = steps
        verdicts.append(step.verdict)
        assert (step.server_ms, step.round_trip_ms, step.until_ms["until the prediction card"]) == (12.0, 20.0, 5.0)
    assert verdicts == ["ok", "cross-talk", "cross-talk", "error"]


@pytest.mark.parametrize(("args", "moves"), [(["--protocol"], 18), (["--protocol", "--interactions", "2"], 0),
                                             (["--protocol", "--interactions", "21"], 19), ([], 6)])
def test_protocol_interactions_count_the_text_and_the_mode_too(args, moves):
    assert loadtest.parse_args(args).moves == moves


@pytest.mark.parametrize("args", [["--protocol", "--interactions", "1"], ["--protocol", "--interactions", "22"]])
def test_bad_protocol_arguments_are_a_usage_error(args, capsys):
    with pytest.raises(SystemExit) as stop:
        loadtest.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("loadtest.py: error:") and "Traceback" not in "".join(err)

"""The offline report tells what the Explore page tells: the latency measured with its dense
reference and their speed-up, the attention map of the head opened, and the heads that did not
run in grey. Checked on the HTML it writes (and the figures inside it)."""

from __future__ import annotations

import json
import re

import pytest

from budgetformer_core.analysis.infer import analyze
from budgetformer_core.analysis.report import NOT_RUN, build_report, latency_record, relevance_figure
from budgetformer_core.cli import main
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.measure.latency import Latency
from budgetformer_core.model.budget import Control
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config

TEXT = "w1 m0 a m1 b w2 m0 c"


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


def figures(page: str) -> list[dict]:
    """The plotly figures of a report, as ``Plotly.newPlot`` receives them (data, layout)."""
    found = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{', page, re.S):
        found.append({"data": json.loads(m.group(1)), "layout": json.loads(m.group(2))})
    return found


def test_the_report_holds_the_latency_and_its_dense_reference(tiny):
    record = latency_record(Latency(2.0, 0.1), "bbc-dense", Latency(3.0, 0.2))
    page = build_report(tiny, TEXT, Control(budget=0.5), name="tiny", latency=record)
    assert "<h2>Latency</h2>" in page
    assert "2.00 ms" in page and "3.00 ms" in page and "dense reference: bbc-dense" in page
    assert "1.50× vs bbc-dense, batch 1" in page
    untimed = build_report(tiny, TEXT, Control(budget=0.5), name="tiny")
    assert "<h2>Latency</h2>" in untimed and "Not timed." in untimed


def test_the_relevance_map_greys_the_heads_that_did_not_run(tiny):
    [a] = analyze(tiny, [TEXT], Control(budget=0.25))
    fig = relevance_figure(a, "Head relevance p", "p")
    shown, grey = fig.data[0], fig.data[1]
    for layer, ran in enumerate(a.selected_heads):
        for head in range(len(a.relevance[layer])):
            if head in ran:
                assert shown.z[layer][head] == pytest.approx(a.relevance[layer][head]) and grey.z[layer][head] is None
                assert shown.text[layer][head].startswith("★")
            else:
                assert shown.z[layer][head] is None and grey.z[layer][head] == 0
    assert grey.colorscale[0][1] == NOT_RUN and grey.colorscale[-1][1] == NOT_RUN and not grey.showscale
    assert [t.name for t in fig.data[2:]] == ["head ran (its p)", "not computed (p in brackets)"]
    page = build_report(tiny, TEXT, Control(budget=0.25), name="tiny")
    [relevance] = [f for f in figures(page) if f["layout"]["title"]["text"].startswith("Head relevance p")]
    assert any(trace.get("colorscale") == [[0, NOT_RUN], [1, NOT_RUN]] for trace in relevance["data"])


def test_the_report_draws_the_attention_of_the_opened_head(tiny):
    [a] = analyze(tiny, [TEXT], Control(budget=0.5))
    ran, idle = a.selected_heads[0][0], next(h for h in range(tiny.config.n_heads) if h not in a.selected_heads[0])
    page = build_report(tiny, TEXT, Control(budget=0.5), name="tiny", head=(0, ran))
    [attention] = [f for f in figures(page) if f["layout"]["title"]["text"].startswith("Attention of layer 0")]
    rows = attention["data"][0]["z"]
    assert len(rows) == a.n_tokens and all(sum(row) == pytest.approx(1.0, abs=1e-4) for row in rows)
    assert "Attention of the opened head" in page
    idle_page = build_report(tiny, TEXT, Control(budget=0.5), name="tiny", head=(0, idle))
    assert f"Head {idle} of layer 0 did not run on this input" in idle_page
    with pytest.raises(ValueError, match="no head"):
        build_report(tiny, TEXT, None, head=(0, tiny.config.n_heads))
    # the app hands over the map it drew (its tokens and rows): drawn as given
    given = {"layer": 0, "head": ran, "tokens": [f"t{i}" for i in range(len(rows))], "rows": rows}
    page = build_report(tiny, TEXT, Control(budget=0.5), name="tiny", attention=given)
    [attention] = [f for f in figures(page) if f["layout"]["title"]["text"].startswith("Attention of layer 0")]
    assert attention["layout"]["xaxis"]["ticktext"][0] == "t0 ·0"


def test_budgetformer_report_times_the_run_beside_the_reference_and_opens_the_head(tiny, tiny_checkpoint,
                                                                                    tmp_path, capsys):
    shape = dict(vocab_size=tiny.config.vocab_size, n_classes=tiny.config.n_classes, max_len=64)
    dense = save_checkpoint(tmp_path / "tiny-dense", BudgetFormer(small_config(method="dense", **shape)),
                            tiny.tokenizer, tiny.label_names)
    [a] = analyze(tiny, [TEXT], Control(budget=0.5))
    out = tmp_path / "report.html"
    code = main(["report", "--checkpoint", str(tiny_checkpoint), "--budget", "0.5", "--reference", str(dense),
                 "--head", "0", str(a.selected_heads[0][0]), "--out", str(out), TEXT])
    assert code == 0, capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    assert re.search(r"<b>\d+\.\d\d× vs tiny-dense, batch 1</b>", page), "the speed-up names its reference"
    assert "dense reference: tiny-dense" in page and "Attention of layer 0, head" in page
    alone = tmp_path / "alone.html"  # a checkpoint that is not shipped has no reference of its own
    assert main(["report", "--checkpoint", str(tiny_checkpoint), "--out", str(alone), TEXT]) == 0
    assert "No dense reference was timed beside it" in alone.read_text(encoding="utf-8")
    untimed = tmp_path / "untimed.html"
    assert main(["report", "--checkpoint", str(tiny_checkpoint), "--no-timing", "--out", str(untimed), TEXT]) == 0
    assert "Not timed." in untimed.read_text(encoding="utf-8")

"""The pages' pure logic (app/logic/, settings.py, links.py) and
charts (app/charts/), without Streamlit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from app import components, speed
from app.charts.dynamics import epoch_lines, training_budget
from app.charts.easy_hard import budget_by_class, budget_histogram, budget_scatter, k_by_need, k_histograms
from app.charts.errors import confusion_heatmap
from app.charts.explore import budget_bars, probabilities_bar, selection_diff
from app.charts.heads import NOT_RUN, head_heatmap, head_heatmaps, relevance_zmax
from app.charts.style import ACCENT
from app.charts.sweep import model_bars
from app.links import explore_link
from app.logic import dynamics, examples, results
from app.logic.dynamics import bba_dynamics_story
from app.logic.examples import search_texts
from app.logic.explore import (
    comparison_rows,
    explanation,
    export_record,
    flops_fraction,
    latency_card,
    metric_cards,
    per_layer_value,
    prepare_text,
    probability_rows,
    run_analysis,
    same_run,
    tokens_read,
    unknown_share,
)
from app.method import Method, method_of
from app.settings import Settings, control_for
from budgetformer_core.analysis.infer import Evaluation, spearman
from budgetformer_core.config import ModelConfig
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.inputs import MAX_CHARS
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode, reading_prefix
from budgetformer_core.shipped import CHECKPOINTS as PRECOMPUTED

SPORT = "The striker scored twice as the champions won the cup final after extra time."


@pytest.fixture(scope="module")
def dense():
    path = PRECOMPUTED / "bbc-dense"
    if not path.is_dir():
        pytest.skip("no dense checkpoint shipped")
    return load_checkpoint(path)


def test_prepare_text_cuts_huge_inputs():
    assert prepare_text(None).text == ""
    small = prepare_text("abc")
    assert small.text == "abc" and not small.cut
    huge = prepare_text("x" * (MAX_CHARS + 5))  # the engine's limit, which the CLI refuses
    assert len(huge.text) == MAX_CHARS == huge.limit and huge.cut and huge.n_chars == MAX_CHARS + 5


def test_reading_prefix_reads_the_same_tokens(bbc_budgetformer):
    tok, max_len = bbc_budgetformer.tokenizer, bbc_budgetformer.config.max_len
    text = "Gordon Brown's budget: taxes, pensions and the élection — " * 400  # ~24,000 chars
    prefix = reading_prefix(tok, text, max_len)
    assert len(prefix) < len(text)
    [full_ids], _ = encode(tok, [text], max_len)
    [prefix_ids], _ = encode(tok, [prefix], max_len)
    assert prefix_ids == full_ids
    a = run_analysis(bbc_budgetformer, text)
    assert a.truncated and a.text == text and a.n_tokens == max_len
    short = "no need to cut this"
    assert reading_prefix(tok, short, max_len) == short
    assert tokens_read(bbc_budgetformer, text) == [tok.id_to_token(i) for i in full_ids]


def test_settings_map_to_controls(bbc_budgetformer):
    s_val = bbc_budgetformer.validation_budget
    assert s_val == bbc_budgetformer.history[-1]["val_mean_budget"]
    assert control_for(Settings(), s_val) is None
    assert control_for(Settings("slider", budget=0.3), s_val).budget == 0.3
    assert control_for(Settings("force_k", k=3), s_val).k == 3
    no_f = control_for(Settings("slider", budget=0.9, no_budget_net=True), s_val)
    assert no_f.budget == pytest.approx(s_val) and no_f.k is None  # as eval --ablation no-budget-net
    no_g = control_for(Settings(head_ablation="random"), s_val)
    assert no_g.head_choice == "random" and no_g.budget is None
    with pytest.raises(ValueError):
        Settings("nonsense")
    with pytest.raises(ValueError):
        Settings(head_ablation="learned-ish")


def test_canonical_settings_drop_unused_fields():
    assert Settings("learned", budget=0.8, k=5).canonical() == Settings()
    assert Settings("slider", budget=0.8, k=5).canonical() == Settings("slider", budget=0.8)
    assert Settings("force_k", budget=0.8, k=5, no_budget_net=True).canonical() == Settings(
        no_budget_net=True
    )
    assert Settings(head_ablation="random", seed=3).describe() == "random heads (seed 3)"
    assert Settings(head_ablation="uniform").describe() == "no g_φ (first k heads)"


def test_overrides_change_the_analysis(bbc_budgetformer):
    full = run_analysis(bbc_budgetformer, SPORT)
    all_heads = run_analysis(
        bbc_budgetformer, SPORT, control_for(Settings("slider", 1.0), full)
    )
    H = bbc_budgetformer.config.n_heads
    assert all_heads.k == [H] * len(full.k)
    assert 1.0 < flops_fraction(all_heads) < 1.01  # all heads plus the tiny f_θ and g_φ
    rows = comparison_rows(full, all_heads, "s = 1")
    changed = {r[""] for r in rows if r["changed"]}
    assert {"heads run per layer (k)", "FLOPs vs dense"} <= changed


def test_export_record_is_complete_json(bbc_budgetformer):
    settings = Settings("slider", budget=0.5)
    full = run_analysis(bbc_budgetformer, SPORT)
    control = control_for(settings, full)
    current = run_analysis(bbc_budgetformer, SPORT, control)
    path = bbc_budgetformer.path / "model.safetensors"
    record = export_record(
        prepared=prepare_text(SPORT),
        checkpoint_name="bbc-budgetformer",
        checkpoint_path="precomputed/checkpoints/bbc-budgetformer",
        checkpoint_sha256=file_sha256(path),
        label_names=bbc_budgetformer.label_names,
        settings=settings,
        control=vars(control),
        current=current,
        full=full,
        timing=speed.time_input(bbc_budgetformer, SPORT, control),
    )
    back = json.loads(json.dumps(record))
    assert back["input"]["text"] == SPORT and back["truncated"] is False
    assert len(back["checkpoint"]["model_sha256"]) == 64
    assert back["settings"]["budget_s"] == 0.5 and back["control"]["budget"] == 0.5
    assert "k" not in back["settings"] and "seed" not in back["settings"]  # greyed out: not in effect
    assert back["source"] is None and back["attention"] is None
    assert back["analysis"]["k"] == current.k and "text" not in back["analysis"]
    assert back["timing"]["latency_ms"] > 0 and back["timing"]["latency_iqr_ms"] >= 0
    assert back["machine"]["torch_version"] == torch.__version__ and back["machine"]["threads"] == 1
    rows = probability_rows(bbc_budgetformer.label_names, current.probs)
    assert [r["class"] for r in rows] == bbc_budgetformer.label_names


def test_search_texts():
    texts = ["Football final", "Election news", "football again"]
    assert search_texts(texts, "FOOTBALL") == [0, 2]
    assert search_texts(texts, "  ") == []
    assert search_texts(texts, "football", limit=1) == [0]


# ----------------------------------------------------------------------------- charts


def test_head_heatmap_marks_the_heads_that_ran():
    values = [[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]
    fig = head_heatmap(values, [[1, 2], [0]], "p", colorbar_title="p")
    heat, grey, ran_key, not_run_key = fig.data
    # the legend beside the map: what ★ and the grey cells are; those two traces draw nothing
    assert (ran_key.name, not_run_key.name) == ("head ran (its p)", "not computed")
    assert ran_key.marker.symbol == "star" and not_run_key.marker.color == NOT_RUN
    assert list(ran_key.x) == [None] and fig.layout.showlegend
    assert len(heat.z) == 2 and len(heat.z[0]) == 4
    stars = [[cell.startswith("★") for cell in row] for row in heat.text]
    assert stars == [[False, True, True, False], [True, False, False, False]]
    # the heads that did not run: no colour of the scale, grey, "—"
    assert [list(r) for r in heat.z] == [[None, 0.6, 0.2, None], [0.25, None, None, None]]
    assert [list(r) for r in grey.text] == [["—", "", "", "—"], ["", "—", "—", "—"]]
    assert not grey.showscale and {c for _, c in grey.colorscale} == {NOT_RUN}
    assert heat.zmax == pytest.approx(0.6)  # the largest value of a head that ran
    assert heat.colorbar.title.text == "p"
    assert fig.layout.xaxis.title.text == "head" and fig.layout.yaxis.title.text == "layer"
    with_values = head_heatmap(values, [[1, 2], [0]], "p", unrun_values=True, zmax=1.0)
    assert list(with_values.data[1].text[0]) == ["(0.10)", "", "", "(0.10)"]
    assert with_values.data[3].name == "not computed (value in brackets)"
    assert with_values.data[0].zmax == 1.0
    # 12 heads a layer (MiniLM): cells too narrow for numbers, ★ and "—" alone, the values on hover
    wide = [[0.05 + 0.01 * h for h in range(12)]]
    heat, grey, ran_key, not_run_key = head_heatmap(wide, [[0, 11]], "p", colorbar_title="p",
                                                           unrun_values=True).data
    assert list(heat.text[0]) == ["★"] + [""] * 10 + ["★"] and heat.z[0][11] == pytest.approx(0.16)
    assert list(grey.text[0]) == [""] + ["—"] * 10 + [""] and "p = 0.160 (ran)" in heat.customdata[0][11]
    assert (ran_key.name, not_run_key.name) == ("head ran (its p on hover)", "not computed")


def test_head_heatmaps_put_several_maps_on_one_colour_scale():
    a, b = [[0.1, 0.6, 0.2, 0.1]], [[0.3, 0.3, 0.2, 0.2]]
    fig = head_heatmaps([(a, [[1, 2]], "A: #1"), (b, [[0]], "B: #2")], "p", colorbar_title="p")
    ran_a, grey_a, ran_b, grey_b, *legend = fig.data
    assert [t.name for t in legend] == ["head ran (its p)", "not computed"]
    assert (ran_a.xaxis, ran_b.xaxis, grey_b.yaxis) == ("x", "x2", "y2")
    assert ran_a.zmax == ran_b.zmax == pytest.approx(0.6)  # the largest value that ran, of both maps
    assert ran_a.showscale and not ran_b.showscale  # one colour bar
    assert [list(r) for r in ran_b.z] == [[0.3, None, None, None]] and list(grey_b.text[0]) == ["", "—", "—", "—"]
    assert [n.text for n in fig.layout.annotations] == ["A: #1", "B: #2"]
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]  # side by side, not overlapping
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis2.title.text == "layer"
    # one map is head_heatmap's figure
    assert head_heatmap(a, [[1, 2]], "p").data[0].z == head_heatmaps([(a, [[1, 2]], "")], "p").data[0].z


def test_html_table_shows_markup_as_text_and_formats_numbers():
    import pandas as pd

    frame = pd.DataFrame({"#": [3], "<i>mean</i> s": [0.12345], "text": ['<b>bold</b> & <script>x</script> "q"']})
    html = components.html_table(frame, {"#": "{:d}", "<i>mean</i> s": "{:.3f}"}, key="t")
    assert "<b>" not in html and "<script>" not in html and "<i>" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;" in html and "&lt;i&gt;mean&lt;/i&gt; s" in html
    assert '>0.123</td>' in html and '>3</td>' in html
    assert "#T_t td.col1" in html and "#T_t th.col1" in html  # the formatted columns are right-aligned
    assert "#T_t td.col2" not in html and "width: 50%" not in html
    assert "#T_t td.col2 {\n  width: 50%;" in components.html_table(frame, {}, key="t", wide="text")


def test_relevance_colour_scale_is_shared_and_uniform_p_is_not_the_darkest():
    uniform = [[0.125] * 8]
    assert relevance_zmax([uniform], 8) == pytest.approx(0.25)  # 1/H: half the scale
    peaked = [[0.9] + [0.1 / 7] * 7]
    assert relevance_zmax([uniform, peaked], 8) == pytest.approx(0.9)  # one scale for both


def test_class_axes_are_categories():
    labels = ["00", "10", "01", "11"]  # the synthetic task's classes look like numbers
    bars = probabilities_bar(labels, [0.1, 0.2, 0.3, 0.4])
    assert bars.layout.yaxis.type == "category" and list(bars.data[0].y) == labels
    cm = confusion_heatmap([[1] * 4] * 4, labels)
    assert cm.layout.xaxis.type == cm.layout.yaxis.type == "category"
    assert list(cm.data[0].x) == list(cm.data[0].y) == labels
    assert cm.layout.xaxis.title.text == "predicted" and cm.data[0].colorbar.title.text == "texts"
    box = budget_by_class(["00", "11", "00"], [0.1, 0.2, 0.3], labels)
    assert box.layout.xaxis.type == "category" and list(box.layout.xaxis.categoryarray) == labels
    assert [t.x0 for t in box.data] == labels
    # the statistics, computed here: the browser gets five numbers per class, not its values
    stats = [[list(getattr(t, f)) for f in ("lowerfence", "q1", "median", "q3", "upperfence")] for t in box.data]
    assert stats[0] == [[0.1], [0.15], [pytest.approx(0.2)], [0.25], [0.3]] and stats[3] == [[0.2]] * 5
    assert stats[1] == stats[2] == [[]] * 5 and all(t.y is None for t in box.data)
    with pytest.raises(ValueError, match="2 classes for 3 budgets"):
        budget_by_class(["00", "11"], [0.1, 0.2, 0.3], labels)


def test_each_method_in_its_own_words():
    bba = method_of(ModelConfig(method="bba", default_budget=0.5, use_budget_net=True))
    assert bba.symbol == "b" and not bba.has_f and not bba.has_g
    words = " ".join([bba.budget_name, bba.own_budget, *bba.mode_labels.values(), bba.relevance_title(),
                      bba.weight_title, bba.weight_note, explanation(bba, 8)])
    assert "f_θ" not in words and "g_φ" not in words and "s·H·p" not in words
    assert "requested budget b" in words.lower() and "gate score z" in words
    paper = method_of(ModelConfig(method="budgetformer", head_weighting="scaled"))  # the paper's weights
    adaptive = method_of(ModelConfig(method="budgetformer", head_weighting="gated"))
    assert paper.weight_title == "Head weight w = s·H·p" and "w = s·H·p" in explanation(paper, 8)
    assert adaptive.weight_title == "Head weight w = 1 on the heads that ran"
    assert "w = 1" in explanation(adaptive, 8) and "s·H·p" not in explanation(adaptive, 8)
    no_f = method_of(ModelConfig(method="budgetformer", use_budget_net=False))
    assert no_f.mode_labels["learned"] == "fixed by its config (no f_θ)"
    assert Settings(budget_mode="slider", budget=0.3).describe("b") == "b = 0.30"


def test_bba_dynamics_story():
    frame = dynamics.history_frame([
        {"epoch": 1, "val_accuracy": 0.5, "val_mean_heads_fraction": 0.5},
        {"epoch": 2, "val_accuracy": 0.9, "val_mean_heads_fraction": 0.5},
    ])  # fmt: skip
    story = bba_dynamics_story(frame, {"budget_min": 0.1, "structural_from": 0.7}, ModelConfig(method="bba"))
    assert "drawn uniformly in [0.1, 1]" in story and "first 70%" in story
    assert "soft gate" in story and "hard-gate adaptation" in story and "50.0% to 90.0%" in story
    assert "β" not in story and "band" not in story
    fixed = bba_dynamics_story(frame, {"train_budget": 0.25}, ModelConfig(method="bba"))
    assert "fixed budget b = 0.25" in fixed


def test_selection_diff_codes():
    fig = selection_diff([[0, 1]], [[1, 2]], 4)
    assert [list(r) for r in fig.data[0].z] == [[1, 3, 2, 0]]  # full only, both, new only, neither


def test_bar_charts():
    fig = probabilities_bar(["a", "b", "c"], [0.2, 0.7, 0.1])
    assert list(fig.data[0].marker.color).count(ACCENT) == 1
    assert fig.data[0].marker.color[1] == ACCENT
    assert len(budget_bars([0.4, 0.3], [3, 2], 8).data) == 1
    with_ref = budget_bars([0.5, 0.5], [4, 4], 8, reference=[0.4, 0.3])
    assert len(with_ref.data) == 2 and "full model" in with_ref.layout.title.text
    one = model_bars(["full", "dense"], {"accuracy": [0.984, float("nan")]}, "t", "y")
    assert list(one.data[0].text) == ["0.984", ""] and one.data[0].textangle == 0
    pair = model_bars(["full", "dense"], {"accuracy": [0.98, 0.97], "macro-F1": [0.98, 0.97]}, "t", "y")
    assert all(bar.textangle == -90 for bar in pair.data)  # side by side labels stand up
    assert pair.layout.uniformtext.minsize == 12 and pair.layout.uniformtext.mode == "hide"  # never tiny
    assert fig.layout.xaxis.range[1] > 1.3  # room for the label of a bar at 100%


def test_a_deep_models_per_layer_card_shows_the_range_and_lists_every_layer_in_its_help():
    assert per_layer_value(["0.43", "0.36"]) == ("0.43 / 0.36", None)
    assert per_layer_value(["5", "4", "10", "5", "5", "4"]) == ("4–10", "Per layer: 5 / 4 / 10 / 5 / 5 / 4")
    assert per_layer_value(["5"] * 6) == ("5", "Per layer: 5 / 5 / 5 / 5 / 5 / 5")


def test_metric_cards(bbc_budgetformer, dense):
    full = run_analysis(bbc_budgetformer, SPORT)
    cards = metric_cards(full, speed.time_input(bbc_budgetformer, SPORT, None, ("bbc-dense", dense)),
                            Settings(), 8)
    assert [c.label for c in cards] == [
        "Prediction",
        "Budget s per layer",
        "Heads run",
        "FLOPs vs dense",
        "Latency (1 thread)",
    ]
    assert cards[0].value == "sports" and cards[1].note == "predicted by f_θ"
    assert cards[2].value == " / ".join(str(k) for k in full.k)
    assert cards[4].value.endswith(" ms") and cards[4].note.startswith("vs bbc-dense: ")
    assert "× live" in cards[4].note and "same rounds" in cards[4].help
    d = run_analysis(dense, SPORT)
    dense_cards = metric_cards(d, None, Settings(), 8)
    assert dense_cards[1].note == "dense: every head" and dense_cards[3].value == "100%"
    assert dense_cards[4].value == "timing…"  # shown until the input is timed, after the rest of the page
    assert latency_card(None, failed=True).value == "—"
    bba = method_of(ModelConfig(method="bba", default_budget=0.5))
    bba_cards = metric_cards(full, None, Settings(budget_mode="slider", budget=0.25), 8, bba)
    assert bba_cards[1].label == "Requested budget b per layer" and bba_cards[1].note == "requested: b = 0.25"


def test_comparison_rows_tell_prediction_and_confidence_apart(bbc_budgetformer):
    full = run_analysis(bbc_budgetformer, SPORT)
    same = run_analysis(bbc_budgetformer, SPORT, control_for(Settings(budget_mode="slider", budget=1.0), 0.3))
    rows = {r[""]: r for r in comparison_rows(full, same, "s = 1")}
    assert rows["prediction"]["changed"] == ("" if same.label == full.label else "yes")
    moved = f"{max(full.probs):.1%}" != f"{max(same.probs):.1%}"
    assert rows["confidence"]["changed"] == ("yes" if moved else "")
    assert "budget b per layer" in {r[""] for r in comparison_rows(full, same, "b", "b")}
    assert same_run(full, full) and not same_run(full, same)


def test_unknown_share():
    assert unknown_share([]) == 0.0
    assert unknown_share(["[UNK]", "a", "[UNK]", "b"]) == 0.5


# ----------------------------------------------------------------------------- other pages


def fake_evaluation() -> Evaluation:
    """An evaluation of 4 inputs, 3 classes, 2 layers of 2 heads (only the per-input arrays matter)."""
    return Evaluation(
        accuracy=0.5, n=4, mean_budget=0.0, mean_heads_fraction=0.0, flops_ratio=0.0,
        mean_budget_per_layer=[], head_entropy=0.0, attention_cost=0.0, attention_cost_estimated=0.0,
        macro_f1=0.0, head_usage=[],
        labels=np.array([0, 1, 2, 2]),
        predictions=np.array([0, 2, 2, 1]),
        probs=np.array([[0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0], [0.1, 0.6, 0.3]]),
        budgets=np.array([[0.2, 0.4], [0.5, 0.7], [0.1, 0.1], [0.9, 0.5]]),
        selected=np.array([[[1, 0], [1, 1]], [[1, 1], [0, 1]], [[0, 1], [1, 0]], [[1, 1], [1, 1]]], bool),  # (N, L, H)
    )  # fmt: skip


def fake_table(texts=("a", "b", "c", "d")):
    frame = fake_evaluation().to_frame([3, 5, 1, 9])
    return examples.per_example_table(frame, None if texts is None else list(texts), ["x", "y", "z"])


def test_per_example_table():
    t = fake_table()
    assert t["index"].tolist() == [0, 1, 2, 3]
    assert t["true"].tolist() == ["x", "y", "z", "z"]
    assert t["correct"].tolist() == [True, False, True, False]
    assert t["mean_s"].tolist() == pytest.approx([0.3, 0.6, 0.1, 0.7])
    assert examples.layer_columns(t) == ["s0", "s1"]
    assert t["loss"].tolist() == pytest.approx([-math.log(p) for p in (0.8, 0.3, 1.0, 0.3)])
    assert t["entropy"].iloc[2] == pytest.approx(0.0, abs=1e-9)
    assert t["entropy"].iloc[1] > t["entropy"].iloc[0]
    assert t["tokens"].tolist() == [3, 5, 1, 9] and t["text"].tolist() == ["a", "b", "c", "d"]
    assert t["k1"].tolist() == [2, 1, 1, 2] and t["heads1"].tolist() == ["0 1", "1", "0", "0 1"]
    assert fake_table(None)["text"].tolist() == [""] * 4  # texts not on this machine
    with pytest.raises(ValueError, match="1 texts for 4 rows"):
        fake_table(["a"])
    frame = fake_evaluation().to_frame([3, 5, 1, 9])
    with pytest.raises(ValueError, match="outside the 2 classes"):
        examples.per_example_table(frame, None, ["x", "y"])


def test_filters_and_confusion():
    t = fake_table()
    assert examples.filter_examples(t)["index"].tolist() == [1, 3]
    assert examples.filter_examples(t, true=["z"])["index"].tolist() == [3]
    assert examples.filter_examples(t, predicted=["z"], errors_only=False)["index"].tolist() == [1, 2]
    assert examples.filter_examples(t, s_range=(0.65, 1.0))["index"].tolist() == [3]
    assert examples.filter_examples(t, confidence_range=(0.0, 0.55))["index"].tolist() == [1]
    assert examples.filter_examples(t, true=[], predicted=None)["index"].tolist() == [1, 3]
    assert examples.confusion_matrix(t, ["x", "y", "z"]) == [[1, 0, 0], [0, 0, 1], [0, 1, 1]]
    lowest, highest = examples.extremes(t, 2)
    assert lowest["index"].tolist() == [2, 0] and highest["index"].tolist() == [3, 1]
    assert examples.example_label(t.iloc[1]) == "#1 · y → z (50.0%)"


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)  # ranks, not values
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # dense: s constant
    assert spearman([1, 2], [1, 2]) is None


HISTORY = [
    {"epoch": 1, "loss": 1.0, "task_loss": 1.1, "budget_loss": 0.01, "entropy": 2.0, "beta": -0.5,
     "train_accuracy": 0.5, "val_accuracy": 0.6, "val_mean_budget": 0.5, "val_head_entropy": 2.07,
     "train_mean_budget_per_layer": [0.5, 0.5], "val_mean_budget_per_layer": [0.5, 0.5]},
    {"epoch": 2, "loss": 0.1, "task_loss": 0.1, "budget_loss": 0.0, "entropy": 1.5, "beta": 0.5,
     "train_accuracy": 0.9, "val_accuracy": 0.9, "val_mean_budget": 0.3, "val_head_entropy": 1.6,
     "train_mean_budget_per_layer": [0.4, 0.2], "val_mean_budget_per_layer": [0.4, 0.2]},
]  # fmt: skip


def test_history_frame_and_story():
    f = dynamics.history_frame(HISTORY)
    assert f["epoch"].tolist() == [1, 2] and dynamics.history_layers(f) == 2
    assert f["val_s1"].tolist() == [0.5, 0.2] and f["lr"].isna().all()  # missing key: NaN
    story = dynamics.dynamics_story(f, 8, 0.1, 0.45)
    assert "exploration" in story and "exploitation" in story
    assert "turned positive in epoch 2" in story and "from 2.07 to 1.60" in story
    assert "inside the band [0.1, 0.45]" in story
    assert dynamics.history_frame([]).empty and dynamics.history_layers(dynamics.history_frame([])) == 0
    assert "no training history" in dynamics.dynamics_story(dynamics.history_frame([]), 8, None, None)


ADAPTIVE = {"recipe": "adaptive", "lambda_budget": 10.0, "lambda_entropy": 0.01, "lambda_cost": 2.0,
            "lambda_difficulty": 5.0, "lambda_balance": 0.0}
"""A run's recorded training config, its weights far from the defaults."""


def test_loss_terms_as_the_history_records_them():
    recorded = [{**h, "loss_terms": {"task": h["task_loss"], "budget": 0.3, "entropy_term": -0.2, "cost": 0.1}}
                for h in HISTORY]
    got = dynamics.loss_terms(recorded, dynamics.history_frame(recorded), ADAPTIVE, task_only=False)
    assert got.source == "history" and "as the run recorded" in got.note
    assert got.terms == {"task: cross-entropy": [1.1, 0.1], "λ_b·hinge (λ_b = 10)": [0.3, 0.3],
                         "λ_c·s (λ_c = 2)": [0.1, 0.1], "λ_e·β(t)·H(p)": [-0.2, -0.2]}  # the chart's order
    # a run whose history records only some epochs (resumed from an older state): derived throughout
    mixed = [recorded[0], HISTORY[1]]
    assert dynamics.loss_terms(mixed, dynamics.history_frame(mixed), ADAPTIVE, False).source == "config"


def test_loss_terms_of_an_older_history_come_from_its_own_config():
    """Weighted by the run's recorded λ (not the defaults); the terms the history does not hold
    apart are the total minus the others, named after each of them; they add up to the total."""
    old = [{**h, "cost": 0.25} for h in HISTORY]
    frame = dynamics.history_frame(old)
    got = dynamics.loss_terms(old, frame, ADAPTIVE, task_only=False)
    assert got.source == "config" and "from the run's own training config" in got.note
    assert list(got.terms) == ["task: cross-entropy", "λ_b·hinge (λ_b = 10)", "λ_c·s (λ_c = 2)",
                               "λ_e·β(t)·H(p) + λ_d·(s − target)² (not recorded apart: the total minus the others)"]
    assert got.terms["λ_b·hinge (λ_b = 10)"] == pytest.approx([0.1, 0.0])
    assert got.terms["λ_c·s (λ_c = 2)"] == pytest.approx([0.5, 0.5])
    assert [sum(v[e] for v in got.terms.values()) for e in range(2)] == pytest.approx([1.0, 0.1])
    paper = dynamics.loss_terms(old, frame, {**ADAPTIVE, "recipe": "paper"}, task_only=False)
    assert list(paper.terms) == ["task: cross-entropy", "λ_b·hinge (λ_b = 10)", "λ_e·β(t)·H(p)"]  # no λ_c·s
    dense = dynamics.loss_terms(old, frame, {}, task_only=True)  # the task loss alone, whatever is recorded
    assert dense.source == "history" and list(dense.terms) == ["task: cross-entropy", "not recorded apart (the "
                                                                "total minus the others)"]


def test_loss_terms_say_so_when_the_config_records_no_weights():
    for train_cfg in ({}, {k: v for k, v in ADAPTIVE.items() if k != "lambda_cost"}, {**ADAPTIVE, "recipe": None},
                      {**ADAPTIVE, "lambda_budget": "ten"}):
        got = dynamics.loss_terms(HISTORY, dynamics.history_frame(HISTORY), train_cfg, task_only=False)
        assert got.source == "unrecorded" and "does not record the weights" in got.note
        assert list(got.terms) == ["task: cross-entropy", dynamics.REST]  # the rest of the total, not split
        assert got.terms[dynamics.REST] == pytest.approx([-0.1, 0.0])
    assert dynamics.loss_terms([], dynamics.history_frame([]), {}, False).terms == {}


def test_page_charts():
    curves = [[0.5, 0.4], [0.5, 0.2]]
    fig = training_budget([1, 2], curves, curves, 0.1, 0.45)
    assert len(fig.data) == 1 + 2 + 2 and fig.data[0].fill == "toself"
    assert len(training_budget([1, 2], [], [[0.5, 0.4]]).data) == 1  # no band, no train
    lines = epoch_lines([1, 2], {"a": [1.0, -1.0]}, "t", "y", log_y=True, reference={"r": 1})
    assert list(lines.data[0].y) == [1.0, None] and len(lines.data) == 2  # ≤ 0: not on a log axis
    # a legend of three entries takes two rows of two, and the top margin holds both under the title
    three = epoch_lines([1, 2], {"total": [1, 2], "task": [1, 2], "budget": [1, 2]}, "Loss terms", "y")
    assert three.layout.legend.entrywidth == 0.5 and three.layout.legend.entrywidthmode == "fraction"
    assert three.layout.margin.t == 50 + 24 * 2 > lines.layout.margin.t == 50 + 24
    cm = confusion_heatmap([[1, 2], [0, 3]], ["x", "y"])
    assert [list(r) for r in cm.data[0].z] == [[1, 2], [0, 3]] and list(cm.data[0].y) == ["x", "y"]
    panels = [("entropy", [1, 2, 3], False), ("loss", [0.1, 1, 10], True)]
    sc = budget_scatter(panels, [0.1, 0.2, 0.3], [True, False, True], "abc", "t")
    # one figure, WebGL; per panel the smaller group first (beneath), both translucent
    assert [t.name for t in sc.data] == ["misclassified", "correct"] * 2 and list(sc.data[0].text) == ["b"]
    assert [len(t.x) for t in sc.data] == [1, 2, 1, 2] and {t.type for t in sc.data} == {"scattergl"}
    assert list(sc.data[3].x) == [0.1, 10] and [t.xaxis for t in sc.data] == ["x", "x", "x2", "x2"]
    assert all(0 < t.marker.opacity < 1 for t in sc.data) and [t.showlegend for t in sc.data] == [1, 1, 0, 0]
    assert (sc.layout.xaxis.title.text, sc.layout.xaxis2.title.text) == ("entropy", "loss")
    assert sc.layout.xaxis2.type == "log" and sc.layout.xaxis.domain[1] < sc.layout.xaxis2.domain[0]
    mostly_wrong = budget_scatter(panels, [0.1, 0.2, 0.3], [False, True, False], "abc", "t")
    assert [t.name for t in mostly_wrong.data][:2] == ["correct", "misclassified"]
    assert sc.layout.yaxis.title.text == "mean budget s"
    bba = budget_scatter(panels[:1], [0.5, 0.5, 0.5], [True] * 3, "abc", "t", symbol="b")
    assert bba.layout.yaxis.title.text == "mean budget b"
    # more inputs than it draws as points: each group's density as contour lines, log x binned in log10
    n, ok = 50, [i % 5 != 0 for i in range(50)]
    many = [("x", [i + 1 for i in range(n)], False), ("loss", [10.0 ** -(i / 10) for i in range(n)], True)]
    dense = budget_scatter(many, [i / n for i in range(n)], ok, [str(i) for i in range(n)], "t", max_points=20)
    assert {t.type for t in dense.data} == {"contour"}
    assert [t.name for t in dense.data] == ["misclassified", "correct"] * 2
    assert [int(np.asarray(t.text, dtype=int).sum()) for t in dense.data] == [10, 40] * 2  # each input once a panel
    for t in dense.data[:2]:  # z: log(1 + count), the counts in the hover text
        assert np.asarray(t.z) == pytest.approx(np.log1p(np.asarray(t.text, dtype=float)))
    levels = {(t.contours.start, t.contours.end, t.contours.size) for t in dense.data[:2]}
    assert len(levels) == 1 and not dense.data[0].autocontour  # both groups of a panel on one scale
    assert dense.layout.xaxis2.type == "linear" and dense.layout.xaxis2.title.text == "loss (log10)"
    assert min(dense.data[2].x) > -4.9 - 0.1 and max(dense.data[2].x) < 0.1  # bins of log10 of 10^-(i/10)
    box = budget_by_class(["x", "y", "x"], [0.1, 0.2, 0.3], ["x", "y"])
    assert [list(t.median) for t in box.data] == [[pytest.approx(0.2)], [0.2]]
    hist = budget_histogram([0.3, 0.4, 0.4], 0.1, 0.9, bins=5)  # binned here: bars of counts
    assert hist.layout.shapes[0].x0 == 0.1 and list(hist.data[0].y) == [1, 0, 0, 0, 2]
    assert hist.data[0].x[0] == pytest.approx(0.31) and sum(hist.data[0].width) == pytest.approx(0.1)
    assert list(budget_histogram([0.5, 0.5]).data[0].y)[15] == 2  # one value: a narrow range around it
    lo, hi = hist.layout.xaxis.range  # the data's range, not the band's
    assert 0.25 < lo < 0.3 and 0.4 < hi < 0.45


# --------------------------------------------------------------------------- precomputed results


def test_read_sweeps(tmp_path):
    path = tmp_path / "sweeps.csv"
    path.write_text(
        "dataset,model,budget,accuracy,flops_ratio,speedup_b32\n"
        "bbc,dense,own,0.97,1.0,1.0\n"
        "bbc,bba,0.25,0.90,0.5,\n"
        "bbc,bba,1,0.96,0.0,x\n"
    )
    frame = results.read_sweeps(path)
    assert frame["budget"].tolist() == ["own", "0.25", "1"]  # strings, as written
    assert frame["b"].tolist()[1:] == [0.25, 1.0] and math.isnan(frame["b"].iloc[0])
    assert frame["ideal_speedup"].tolist()[:2] == [1.0, 2.0] and math.isnan(frame["ideal_speedup"].iloc[2])
    assert frame["speedup_b32"].isna().tolist() == [False, True, True]  # "x" is not a number
    assert frame["latency_ms"].isna().all()  # an absent column
    path.write_text("model,budget\nbba,own\n")
    with pytest.raises(ValueError, match="dataset, accuracy are missing"):
        results.read_sweeps(path)
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError):
        results.read_sweeps(path)


def test_disagreements_joins_on_index_and_checks_the_texts():
    import pandas as pd

    a = pd.DataFrame({"index": [0, 1, 2], "label": [0, 1, 1], "prediction": [0, 1, 0]})
    b = pd.DataFrame({"index": [2, 1, 0], "label": [1, 1, 0], "prediction": [1, 1, 1]})
    rows, n = examples.disagreements({"a": a, "b": b}, ["neg", "pos"], ["t0", "t1", "t2"], [0, 1, 1])
    assert n == 3
    assert rows.to_dict("list") == {
        "index": [0, 2], "true": ["neg", "pos"], "a": ["neg", "neg"], "b": ["pos", "pos"],
        "right": ["1 of 2", "1 of 2"], "text": ["t0", "t2"],
    }  # fmt: skip
    rows, _ = examples.disagreements({"a": a, "b": b}, ["neg", "pos"], ["t0", "t1", "t2"], [1, 1, 1])
    assert "text" not in rows  # the labels say these are not the same texts
    assert examples.disagreements({}, [])[1] == 0


def adaptivity_of(rho_s, ratio, rho_k=None, frac=None, notes=()):
    from budgetformer_core.analysis.adaptivity import Adaptivity

    return Adaptivity(n=9, accuracy=0.9, mean_heads_fraction=0.3, layers=[], rho_s_reference_loss=rho_s,
                      heads_ratio_hard_easy=ratio, rho_k_needed=rho_k, frac_k_at_least_needed=frac,
                      notes=list(notes))  # fmt: skip


def test_adaptivity_reading_in_plain_words():
    assert examples.adaptivity_reading(adaptivity_of(0.41, 1.43)) == (
        "Harder inputs get more heads: 1.4× on the hardest third (ρ = +0.41)."
    )
    assert examples.adaptivity_reading(adaptivity_of(0.06, 1.0)) == (
        "The budget does not follow difficulty here: ρ = +0.06."
    )
    assert examples.adaptivity_reading(adaptivity_of(-0.29, 0.93)) == (
        "Harder inputs get fewer heads: 0.93× on the hardest third (ρ = −0.29)."
    )
    assert "barely do: 1.02×" in examples.adaptivity_reading(adaptivity_of(0.3, 1.02))
    constant = adaptivity_of(None, 1.0, notes=["s is the same for every input, so it cannot correlate with "
                                               "difficulty: rho_s_reference_loss is null"])  # fmt: skip
    assert examples.adaptivity_reading(constant) == (
        "The budget cannot follow difficulty here: s is the same for every input, so it cannot "
        "correlate with difficulty."
    )
    needs = examples.adaptivity_reading(adaptivity_of(0.5, 2.0, rho_k=0.95, frac=0.99))
    assert needs.endswith(
        "; k follows the heads an input needs: ρ = +0.95, k ≥ needed in every layer on 99% of inputs."
    )
    same_need = adaptivity_of(0.0, 1.0, frac=1.0, notes=["rho_k_needed is null: every input needs 2 heads"])
    assert examples.adaptivity_reading(same_need).endswith(
        "; every input needs 2 heads, k ≥ needed in every layer on 100% of inputs."
    )
    assert "nan" not in examples.adaptivity_reading(adaptivity_of(float("nan"), None)).lower()
    assert examples.figure_text(None, "+.2f") == examples.figure_text(float("nan"), ".2f") == "n/a"
    assert examples.figure_text(-0.123, "+.2f") == "−0.12"


def test_k_histogram_frame_and_chart():
    frame = examples.k_histogram_frame([{"2": 3, "4": 1}, {"3": 4}])
    assert frame["k"].tolist() == ["2", "3", "4"] * 2
    assert frame["layer"].tolist() == [0, 0, 0, 1, 1, 1]
    assert frame["inputs"].tolist() == [3, 0, 1, 0, 4, 0]
    assert frame["share"].tolist() == [0.75, 0.0, 0.25, 0.0, 1.0, 0.0]
    assert examples.k_histogram_frame([]).empty
    panels = [(layer, part["k"], part["inputs"]) for layer, part in frame.groupby("layer")]
    spec = k_histograms(panels).to_plotly_json()  # one figure, a panel per layer
    assert spec["layout"]["xaxis"]["type"] == spec["layout"]["xaxis2"]["type"] == "category"
    assert [list(t["x"]) for t in spec["data"]] == [["2", "3", "4"]] * 2
    assert [t["xaxis"] for t in spec["data"]] == ["x", "x2"]
    assert [list(t["y"]) for t in spec["data"]] == [[3, 0, 1], [0, 4, 0]]
    assert spec["layout"]["xaxis2"]["title"]["text"] == "layer 1: heads run k"
    assert spec["layout"]["xaxis"]["domain"][1] < spec["layout"]["xaxis2"]["domain"][0]


def test_k_by_need_and_the_adaptivity_notes():
    import pandas as pd

    table = pd.DataFrame({"label": [0, 1, 0, 1], "prediction": [0, 1, 1, 1],
                          "s0": [0.1, 0.2, 0.3, 0.4], "k0": [1, 2, 3, 4], "heads0": ["0", "0 1", "0 1 2", "0 1 2 3"],
                          "s1": [0.1, 0.2, 0.3, 0.4], "k1": [2, 2, 4, 4],
                          "heads1": ["0 1", "1 2", "0 1 2 3", "0 1 2 3"]})  # fmt: skip
    by_need = examples.k_by_need(table, [1, 1, 2, 2])
    assert by_need.to_dict("list") == {"needed": [1, 1, 2, 2], "layer": [0, 1, 0, 1],
                                       "mean_k": [1.5, 2.0, 3.5, 4.0], "inputs": [2, 2, 2, 2]}  # fmt: skip
    with pytest.raises(ValueError):
        examples.k_by_need(table, [1, 2])
    spec = k_by_need([1, 2], {"layer 0": [1.5, 3.5], "layer 1": [2.0, 4.0]}).to_plotly_json()
    assert spec["layout"]["xaxis"]["type"] == "category" and [t["name"] for t in spec["data"]][-1] == "k = n"

    figures = examples.adaptivity_figures(table, 4, table.assign(loss=[0.1, 0.2, 0.3, 0.4]), [1, 2, 4, 4])
    assert figures.rho_s_reference_loss == pytest.approx(1.0) and figures.rho_k_needed > 0.9
    assert figures.frac_k_at_least_needed == 0.75 and not figures.notes
    alone = examples.adaptivity_figures(table, 4, None, None, "bbc-dense")
    assert alone.rho_s_reference_loss is None and alone.rho_k_needed is None
    assert examples.null_reason(alone.notes, "heads_ratio_hard_easy", "?") == (
        "no reference model (bbc-dense) to judge difficulty by"
    )
    other = examples.adaptivity_figures(table, 4, table.head(3).assign(loss=0.1), [1, 2], "bbc-dense")
    assert other.heads_ratio_hard_easy is None and other.frac_k_at_least_needed is None
    assert "other inputs" in examples.null_reason(other.notes, "rho_s_reference_loss", "?")
    assert "2 needed-head counts" in examples.null_reason(other.notes, "rho_k_needed", "?")


def test_readable_decodes_ag_news_entity_leftovers():
    assert examples.readable("it#39;s a #36;10 deal") == "it's a $10 deal"
    assert examples.readable("said quot;no quot; today") == 'said "no " today'
    assert examples.readable("&lt;b&gt;Bold&lt;/b&gt; A\\team") == "<b>Bold</b> A team"  # still shown as text
    assert examples.readable("#151; and x&#39;y") == "— and x'y"
    for plain in ("AT&T and R&D", "item #1; ok", "aliquot; x", "Ünïcode 🎉"):
        assert examples.readable(plain) == plain
    text = "Wall St. #39;s rally " * 300
    assert "#39;" not in examples.preview(text) and examples.preview(text).startswith("Wall St. 's")
    assert examples.excerpt(text, 30) == examples.readable(text[:30]) + "…"


def test_a_map_selection_names_its_rows_and_the_listing_links_them():
    points = [{"customdata": 3}, {"customdata": [1]}, {"customdata": 3}, {"x": 1}, {"customdata": True}]
    assert examples.selected_rows(points) == [1, 3]
    assert examples.selected_rows([]) == []
    table = fake_table(("<b>a</b>", "b", "c", "d"))
    links = [explore_link("bbc-bba", i, Settings(budget_mode="slider", budget=0.25), Method("bba"))
             for i in (3, 0)]
    shown = examples.input_listing(table, [3, 0], links, {"p": [0.9, 0.1]})
    assert shown["index"].tolist() == [3, 0] and shown["true"].tolist() == ["z", "x"]
    assert shown["mean k"].tolist() == [2.0, 1.5] and shown["p"].tolist() == [0.9, 0.1]
    assert shown["text"].tolist() == ["d", "<b>a</b>"]  # shown as text by st.dataframe
    assert shown["explore"].tolist()[0] == "./?model=bbc-bba&index=3&mode=slider&budget=0.25"


def test_standing_against_dense():
    from app.logic.standing import standing

    def cfg(variant="budgetformer", accuracy=0.9, **model):
        return {"dataset": "d", "model": {"variant": variant, **model}, "test": {"accuracy": accuracy}}

    assert standing("d-budgetformer", cfg(accuracy=0.971), 1.0).kind == "fine"  # 2.9 points below
    flagged = standing("d-budgetformer-paper", cfg(accuracy=0.93), 1.0)
    assert flagged.kind == "flagged" and "93.0% against dense 100.0%" in flagged.note and "⚑" in flagged.mark
    assert standing("d-bba", cfg("bba", 0.5), 1.0).kind == "flagged"
    assert standing("d-no-budget-net", cfg(accuracy=0.5, use_budget_net=False), 1.0).kind == "expected"
    assert standing("d-no-head-scorer", cfg(accuracy=0.5, head_choice="uniform"), 1.0).kind == "expected"
    assert standing("d-dense", cfg("dense", 1.0), 1.0).kind == "reference"
    small = standing("d-dense-small", cfg("dense", 0.6), 1.0)
    assert small.kind == "expected" and "smaller dense" in small.note
    assert standing("d-budgetformer", cfg(accuracy=0.1), None).kind == "fine"  # no dense to judge by
    assert standing("x", {}, 1.0).kind == "fine"  # an unreadable config: nothing to say

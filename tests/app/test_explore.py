"""The default page, "Explore an input": the prediction, s, the heads, the budget controls,
ablations, bad input and the export.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.models import DEFAULT_MODEL, available_models

from .apptest import (
    BF,
    BUSINESS,
    MARKUP,
    PER_EXAMPLE,
    SPORT,
    all_markdown,
    chart,
    config,
    metric,
    requires_default_model,
    run,
    shipped,
    start,
    type_text,
)

pytestmark = requires_default_model


def test_default_page_shows_the_analysis(default_at):
    at, cfg = default_at, config(DEFAULT_MODEL)
    n_layers, n_heads = cfg["model"]["n_layers"], cfg["model"]["n_heads"]
    assert at.title[0].value == "Explore an input"
    assert at.sidebar.selectbox(key="model_for_bbc").value == DEFAULT_MODEL
    assert metric(at, "Prediction") == "sports"  # the default text is about a football match
    heads = metric(at, "Heads run").split(" / ")
    assert len(heads) == n_layers and all(1 <= int(k) <= n_heads for k in heads)
    assert metric(at, "FLOPs vs dense").endswith("%")
    assert metric(at, "Latency (1 thread)").endswith(" ms")  # sweeps.csv's at the model's own point: none timed yet
    assert latency_note(at).startswith(f"vs {DEFAULT_REFERENCE}, batch 1: live not timed, ")

    relevance = chart(at, "Head relevance p")["data"][0]
    assert len(relevance["z"]) == n_layers and len(relevance["z"][0]) == n_heads
    stars = sum(cell.startswith("★") for row in relevance["text"] for cell in row)
    assert stars == sum(int(k) for k in heads)  # one ★ per head that ran
    assert len(chart(at, "Head weight w")["data"][0]["z"]) == n_layers
    probs = chart(at, "Class probabilities")["data"][0]
    assert probs["y"] == cfg["label_names"] and abs(sum(probs["x"]) - 1) < 1e-4
    assert any(c.value.startswith("Server time for this update") for c in at.sidebar.caption)
    assert [b.label for b in at.get("download_button")] == [
        "Export this analysis (JSON)",
        "Probabilities (CSV)",
        "Offline report (HTML)",
    ]


DEFAULT_REFERENCE = "bbc-minilm-dense"


def latency_note(at) -> str:
    [card] = [m for m in at.metric if m.label == "Latency (1 thread)"]
    return card.proto.delta


def test_time_it_times_the_input_on_request_and_the_session_keeps_it(default_at):
    """The latency card is timed when asked ("Time it"), never on a slider's move; what was timed
    shows again, from the cache, when the page comes back to that text and setting."""
    at = default_at
    at.button(key="time_it").click()
    run(at)
    timed = latency_note(at)
    assert timed.startswith(f"vs {DEFAULT_REFERENCE}, batch 1: ") and "× live" in timed, timed
    assert "time_it" not in [b.key for b in at.button]  # nothing more to ask for at this setting
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(0.5)
    run(at)
    assert "live not timed" in latency_note(at) and "time_it" in [b.key for b in at.button]
    at.radio(key="budget_mode").set_value("learned")
    run(at)
    assert latency_note(at) == timed  # the same timing, not another one


def test_the_picked_models_per_example_tables_are_read_in_the_background(default_at):
    from app import models, state

    thread = state.PREFETCH[DEFAULT_MODEL]  # started by the run that picked the model, after its page
    thread.join(120)
    assert not thread.is_alive() and thread.daemon
    for model in (DEFAULT_MODEL, models.reference_model(DEFAULT_MODEL)):
        assert state.precomputed_table(model) is not None  # what the thread read: vouched and readable
    state.prefetch(DEFAULT_MODEL)
    assert state.PREFETCH[DEFAULT_MODEL] is thread  # once per server process


def test_typing_a_text_updates_the_prediction(at):
    assert metric(at, "Prediction") == "sports"
    type_text(at, BUSINESS)
    assert metric(at, "Prediction") == "business"
    type_text(at, SPORT)
    assert metric(at, "Prediction") == "sports"


def test_budget_slider_overrides_s_and_heads(at):
    type_text(at, SPORT)
    learned = metric(at, "Heads run")
    # in the model's own mode the sliders are off: they would show values the model does not use
    assert at.slider(key="budget_s").disabled and at.slider(key="force_k").disabled
    assert any(c.value.startswith("The sliders are off") for c in at.caption)
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    assert not at.slider(key="budget_s").disabled and at.slider(key="force_k").disabled
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    assert metric(at, "Heads run") == "8 / 8" != learned
    assert metric(at, "Budget s per layer") == "1.00 / 1.00"
    assert metric(at, "FLOPs vs dense") in ("100%", "101%")  # all heads, plus f_θ and g_φ
    assert any(s.value.startswith("Compared with the full model") for s in at.subheader)

    at.slider(key="budget_s").set_value(0.25)
    run(at)
    assert metric(at, "Heads run") == "2 / 2"
    assert "red line: full model" in chart(at, "Budget s per layer")["layout"]["title"]["text"]

    at.radio(key="budget_mode").set_value("learned")
    run(at)
    assert metric(at, "Heads run") == learned
    assert not any(s.value.startswith("Compared with") for s in at.subheader)


def test_force_k(at):
    at.radio(key="budget_mode").set_value("force_k")
    run(at)
    assert at.slider(key="budget_s").disabled and not at.slider(key="force_k").disabled
    at.slider(key="force_k").set_value(3)
    run(at)
    assert metric(at, "Heads run") == "3 / 3"
    # the budget card says s decides nothing now (no "predicted by f_θ" beside 3 / 3)
    [card] = [m for m in at.metric if m.label == "Budget s per layer"]
    assert card.value == "not in use" and "k = 3 forced" in card.delta


@pytest.mark.skipif("bbc-bba" not in available_models(), reason="no shipped bba model")
def test_force_k_on_bba_says_b_is_not_in_use(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at).radio(key="budget_mode").set_value("force_k")
    run(at).slider(key="force_k").set_value(8)
    run(at)
    [card] = [m for m in at.metric if m.label == "Budget b per layer"]
    assert card.value == "not in use" and "k = 8 forced" in card.delta
    assert metric(at, "Heads run") == "8 / 8"


def test_ablation_no_budget_net_uses_the_validation_mean_budget(at, bbc_budgetformer):
    type_text(at, SPORT)
    at.toggle(key="no_f").set_value(True)
    run(at)
    fixed = [float(x) for x in metric(at, "Budget s per layer").split(" / ")]
    assert len(set(fixed)) == 1 and fixed[0] == pytest.approx(bbc_budgetformer.validation_budget, abs=0.006)
    assert at.radio(key="budget_mode").disabled and at.slider(key="budget_s").disabled
    table = at.table[0].value
    assert list(table.columns) == ["full model", "this setting", "changed"]
    assert table.loc["budget s per layer", "changed"] == "yes"


def test_ablation_no_head_scorer_changes_the_heads(at):
    type_text(at, SPORT)
    at.toggle(key="no_g").set_value(True)
    run(at)  # the head-choice radio is enabled once the ablation is on
    at.radio(key="head_ablation").set_value("uniform")
    run(at)
    ks = [int(k) for k in metric(at, "Heads run").split(" / ")]
    ran, grey = chart(at, "Head relevance p")["data"][:2]
    for k, row, text, unrun in zip(ks, ran["z"], ran["text"], grey["text"], strict=True):
        assert row[:k] == pytest.approx([row[0]] * k) and row[k:] == [None] * (len(row) - k)
        assert [c.startswith("★") for c in text] == [h < k for h in range(len(text))]  # heads 0..k-1
        assert [c == "" for c in unrun] == [h < k for h in range(len(text))]  # the others: grey
    diff = chart(at, "Heads that ran")
    assert len(diff["data"][0]["z"]) == len(ks)
    assert at.number_input(key="head_seed").disabled and at.button(key="head_redraw").disabled


def ran_heads(at: AppTest) -> list[list[int]]:
    ran = chart(at, "Head relevance p")["data"][0]["z"]
    return [[h for h, v in enumerate(row) if v is not None] for row in ran]


def test_random_heads_show_their_seed_and_redraw(at):
    type_text(at, SPORT)
    at.toggle(key="no_g").set_value(True)
    run(at)
    at.radio(key="head_ablation").set_value("random")
    run(at)
    assert at.number_input(key="head_seed").value == 0 and not at.button(key="head_redraw").disabled
    assert any("random heads (seed 0)" in c.value.replace("\\", "") for c in at.caption)
    drawn = [ran_heads(at)]
    for seed in (1, 2, 3):
        at.button(key="head_redraw").click()
        run(at)
        assert at.number_input(key="head_seed").value == seed
        assert any(f"random heads (seed {seed})" in c.value.replace("\\", "") for c in at.caption)
        drawn.append(ran_heads(at))
    assert len({str(d) for d in drawn}) > 1  # other seeds, other heads
    at.number_input(key="head_seed").set_value(0)
    run(at)
    assert ran_heads(at) == drawn[0]  # a seed always draws the same heads


def test_empty_input_says_so(at):
    for blank in ("", "   \n\t ", "\u200b", "\u200e\u0301\ufeff"):  # nothing, or only invisible characters
        type_text(at, blank)
        assert any("text is empty" in i.value for i in at.info)
        assert not at.metric and not at.error


def test_markup_is_shown_as_text_never_as_html(at):
    type_text(at, MARKUP)
    assert at.text_area(key="text").value == MARKUP
    assert metric(at, "Prediction") in config()["label_names"]
    # the input only appears in plain-text elements; no markdown element carries it
    assert not any("<script>" in m or "<b>x" in m for m in all_markdown(at))
    assert any("script" in t.value for t in at.text)  # the tokens the model read, as text


def test_huge_input_is_cut_with_a_caption(at):
    huge = "The minister spoke about the election. " * 3000  # 117,000 characters
    type_text(at, huge)
    assert any("only the first 100,000 were kept" in w.value for w in at.warning)
    assert any("truncated" in c.value for c in at.caption)
    assert metric(at, "Prediction") in config()["label_names"]


def test_loading_a_test_sample_by_index(at):
    at.radio(key="pick_how").set_value("By index")
    run(at)
    at.number_input(key="pick_index").set_value(5)
    run(at)
    at.button(key="pick_index_go").click()
    run(at)
    text = at.text_area(key="text").value
    assert len(text) > 100 and text != SPORT
    assert any(c.value.startswith("Test text #5 of bbc") for c in at.caption)
    at.radio(key="pick_how").set_value("Search")
    run(at)
    at.text_input(key="pick_query").input("zzzz-not-a-word")
    run(at)
    assert any("No test text contains that" in c.value for c in at.caption)


@pytest.mark.skipif("bbc-dense" not in available_models(), reason="no dense checkpoint shipped")
def test_dense_checkpoint_disables_budget_controls(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-dense")
    run(at)
    assert any("dense" in i.value for i in at.info)
    # no budget to set and nothing to ablate: no budget controls, no toggles
    assert not at.slider and not at.toggle and "budget_mode" not in [r.key for r in at.radio]
    n_heads = config("bbc-dense")["model"]["n_heads"]
    assert set(metric(at, "Heads run").split(" / ")) == {str(n_heads)}
    assert metric(at, "FLOPs vs dense") == "100%"
    assert metric(at, "Prediction") in config("bbc-dense")["label_names"]


def test_any_unicode_is_fine(at):
    for text in (
        "Le gouvernement a annoncé une réforme 🎉",
        "北京奥运会 足球 比赛",
        "مرحبا بالعالم",
    ):
        type_text(at, text)
        assert metric(at, "Prediction") in config()["label_names"]


def test_sessions_do_not_share_settings(at):
    learned = metric(at, "Heads run")
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    other = start()
    assert other.radio(key="budget_mode").value == "learned"
    assert metric(other, "Heads run") == learned
    assert metric(at, "Heads run") == "8 / 8"


@pytest.mark.skipif("bbc-bba" not in available_models(), reason="no shipped bba model")
def test_bba_model_runs_the_requested_budget(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at)
    assert any("requested budget b" in c.value for c in at.caption)
    # no f_θ or g_φ to ablate: no toggles named after them (only the deeper views' switches)
    assert {t.key for t in at.toggle} == {"explain_on", "attention_on"}
    assert not [t.label for t in at.toggle if re.search("f_θ|g_φ|[Aa]blation", t.label)]
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(0.25)
    run(at)
    assert metric(at, "Heads run") == "2 / 2"
    at.slider(key="budget_s").set_value(0.75)
    run(at)
    assert metric(at, "Heads run") == "6 / 6"


def test_a_text_of_mostly_unknown_tokens_is_flagged(at):
    type_text(at, "qzxv wprk ǂʘǁ ꙮꙮ 𒀱𒀱 ⵣⵣⵣ")
    assert any("unknown to its vocabulary ([UNK])" in w.value for w in at.warning)
    type_text(at, SPORT)
    assert not any("[UNK]" in w.value for w in at.warning)


def test_a_model_change_starts_from_its_own_budget(at):
    no_f = next((m for m in available_models() if config(m)["model"].get("use_budget_net") is False
                 and config(m)["dataset"] == "bbc"), None)
    if no_f is None:
        pytest.skip("no bbc model without f_θ")
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    at.sidebar.selectbox(key="model_for_bbc").set_value(no_f)
    run(at)
    assert at.radio(key="budget_mode").value == "learned"  # the slider's s is not carried over
    fixed = config(no_f)["model"]["fixed_budget"]
    assert set(metric(at, "Budget s per layer").split(" / ")) == {f"{fixed:.2f}"}
    assert any("no f_θ" in o for o in at.radio(key="budget_mode").options)


def test_comparison_says_what_changed(at):
    type_text(at, SPORT)
    at.radio(key="budget_mode").set_value("force_k")
    run(at)
    for k in range(1, config()["model"]["n_heads"] + 1):
        at.slider(key="force_k").set_value(k)
        run(at)
        if not any(s.value.startswith("Compared with") for s in at.subheader):
            continue
        table = at.table[0].value
        same = table.loc["prediction", "changed"] == ""
        assert same == bool(at.success) and same != bool(at.warning)
        if same:
            moved = table.loc["confidence", "changed"] == "yes"
            assert ("only the confidence moved" in at.success[0].value) == moved


@pytest.mark.skipif("bbc-bba" not in available_models(), reason="no shipped bba model")
def test_bba_at_its_default_budget_has_nothing_to_compare(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at)
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(config("bbc-bba")["model"]["default_budget"])
    run(at)
    assert not any(s.value.startswith("Compared with") for s in at.subheader)
    assert any("nothing to compare" in c.value for c in at.caption)
    at.slider(key="budget_s").set_value(0.25)
    run(at)
    assert any(s.value.startswith("Compared with") for s in at.subheader)
    assert "budget b per layer" in at.table[0].value.index


def test_the_json_export_holds_what_is_in_effect(at, downloads):
    """The export: the settings in effect only (no greyed-out slider), the dataset, test index and
    true label of a test text, and the attention map once it is shown."""
    samples = pd.read_parquet(PER_EXAMPLE / f"{BF}.parquet") if shipped(BF) else None
    at.radio(key="pick_how").set_value("By index")
    run(at).number_input(key="pick_index").set_value(7)
    run(at).button(key="pick_index_go").click()
    run(at).radio(key="budget_mode").set_value("force_k")
    run(at).slider(key="force_k").set_value(3)
    run(at)
    record = json.loads(downloads[f"analysis-{BF}.json"])
    assert record["settings"] == {"budget_mode": "force_k", "no_budget_net": False, "head_ablation": None,
                                  "k": 3, "description": "k = 3"}  # no slider s, no seed
    assert record["source"]["dataset"] == "bbc" and record["source"]["test_index"] == 7
    labels = config()["label_names"]
    if samples is not None:
        assert record["source"]["true_label"] == labels[int(samples["label"].iloc[7])]
    assert record["input"]["text"] == at.text_area(key="text").value and record["attention"] is None
    at.toggle(key="attention_on").set_value(True)
    run(at)
    record = json.loads(downloads[f"analysis-{BF}.json"])
    attention = record["attention"]
    assert attention["layer"] == 0 and attention["head"] in record["analysis"]["selected_heads"][0]
    assert len(attention["rows"]) == len(attention["tokens"]) == record["input"]["n_tokens_read"]
    assert all(sum(row) == pytest.approx(1, abs=1e-4) for row in attention["rows"])
    assert at.query_params["attention"] == f"0.{attention['head']}"  # the link reopens it too

"""The Explore page's logic (app/logic/explore.py), without Streamlit: where a session's text
starts and the widget values a link to the page sets; the text cut to the one length limit
(:data:`budgetformer_core.io.inputs.MAX_CHARS`) and the tokens read; the analysis under a
setting's overrides and its comparison with the full model's; the metric cards and the JSON
export. The analyses run the shipped bbc models (``bbc-dense`` for the cards' reference)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from app import speed
from app.links import link_params, link_state, read_link
from app.logic.explore import (
    DEFAULT_TEXT,
    comparison_rows,
    export_record,
    flops_fraction,
    latency_card,
    metric_cards,
    per_layer_value,
    prepare_text,
    probability_rows,
    run_analysis,
    same_run,
    starting_sample,
    tokens_read,
    unknown_share,
)
from app.method import Method, method_of
from app.settings import Settings, control_for
from app.sources import Samples
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


def test_a_session_starts_from_the_football_text_or_test_text_zero():
    texts = Samples(["a", "b"], ["first text", "second text"], [0, 1])
    assert starting_sample("bbc", None, None) == (DEFAULT_TEXT, None)
    assert starting_sample("ag_news", texts, None) == ("first text", ("ag_news", 0))
    assert starting_sample("ag_news", texts, ("ag_news", 1)) is None  # opened with one of its texts
    assert starting_sample("ag_news", None, ("bbc", 1)) is None  # no texts here: the box stays


def test_a_link_sets_the_widgets_it_was_written_from():
    method = Method()
    settings = Settings(budget_mode="force_k", k=3, head_ablation="random", seed=7)
    params = link_params("bbc-budgetformer", "a text", None, settings, method, why=True, attention=(1, 2))
    view, notes = read_link(params, method, n_heads=4, n_texts=None)
    assert not notes
    assert link_state(view, n_layers=2) == dict(
        budget_mode="force_k", budget_s=0.5, no_f=False, no_g=True, head_seed=7, explain_on=True,
        attention_on=True, force_k=3, head_ablation="random", att_layer=1, att_head=2,
    )
    assert "att_layer" not in link_state(view, n_layers=1)  # a layer the model does not have


def test_prepare_text_cuts_huge_inputs():
    assert prepare_text(None).text == ""
    small = prepare_text("abc")
    assert small.text == "abc" and not small.cut
    huge = prepare_text("x" * (MAX_CHARS + 5))  # the engine's limit, which the CLI refuses
    assert len(huge.text) == MAX_CHARS == huge.limit and huge.cut and huge.n_chars == MAX_CHARS + 5


def test_app_cuts_at_the_one_limit():
    from app.logic.explore import prepare_text

    for text, kept, cut in [("x" * (MAX_CHARS + 5), MAX_CHARS, True), ("x" * MAX_CHARS, MAX_CHARS, False),
                            (None, 0, False), ("", 0, False)]:
        prepared = prepare_text(text)
        assert (len(prepared.text), prepared.cut, prepared.limit) == (kept, cut, MAX_CHARS)


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
    assert cards[4].value.endswith(" ms") and cards[4].note.startswith("vs bbc-dense, batch 1: ")
    assert "× live" in cards[4].note and "same rounds" in cards[4].help
    d = run_analysis(dense, SPORT)
    dense_cards = metric_cards(d, None, Settings(), 8)
    assert dense_cards[1].note == "dense: every head" and dense_cards[3].value == "100%"
    assert (dense_cards[4].value, dense_cards[4].note) == ("—", "live not timed")  # nothing shipped given, none timed
    shipped = (pd.Series({"latency_ms": 6.82, "speedup_b1": 1.42, "reference": "bbc-dense"}), "s = 0.50")
    card = latency_card(None, shipped)  # until the input is timed: sweeps.csv's figures at that budget
    assert (card.value, card.note) == ("6.82 ms", "vs bbc-dense, batch 1: live not timed, 1.42× shipped at s = 0.50")
    assert "not this input's" in card.help
    assert latency_card(None, failed=True).value == "—"
    bba = method_of(ModelConfig(method="bba", default_budget=0.5))
    bba_cards = metric_cards(full, None, Settings(budget_mode="slider", budget=0.25), 8, bba)
    assert bba_cards[1].label == "Budget b per layer" and bba_cards[1].note == "requested: b = 0.25"


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

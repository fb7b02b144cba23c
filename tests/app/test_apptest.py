"""The app through Streamlit's AppTest: no server, no browser, real widgets and the real model.

Assertions are on rendered values (metrics, chart specs, messages), not only on "no exception".
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import charts as charts_module
from app import results as results_module
from app.state import CHECKPOINTS, DEFAULT_MODEL, available_models

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"
VIEWS = sorted((ROOT / "app" / "views").glob("[!_]*.py"))
TIMEOUT = 120  # the first run imports torch and loads the model; the machine may be busy

SPORT = (
    "The striker scored a hat-trick as the champions beat their rivals 3-1 in the league, "
    "and the coach praised the team's defence after the football match."
)
BUSINESS = (
    "Shares in the bank rose sharply after it reported record annual profits, and analysts "
    "said the company's sales and the wider economy would keep growing."
)
MARKUP = "<script>alert(1)</script><b>x</b>"

pytestmark = pytest.mark.skipif(
    DEFAULT_MODEL not in available_models(), reason=f"{CHECKPOINTS / DEFAULT_MODEL} is missing"
)


def config(name: str = DEFAULT_MODEL) -> dict:
    return json.loads((CHECKPOINTS / name / "config.json").read_text())


def run(at: AppTest) -> AppTest:
    at.run(timeout=TIMEOUT)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def at() -> AppTest:
    return run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))


def metric(at: AppTest, label: str) -> str:
    """A metric's value; for a per-layer card of a deep model, which shows a range, the whole
    list from its help ("Per layer: a / b / …")."""
    [m] = [m for m in at.metric if m.label == label]
    listed = re.match(r"Per layer: (.*)$", m.help or "")
    return listed.group(1) if listed else m.value


def typed_arrays_as_lists(spec):
    """A chart spec with plotly's typed arrays (``{"dtype", "bdata"}``: base64 of a numpy array,
    as plotly sends arrays) as plain lists."""
    if isinstance(spec, dict):
        if set(spec) >= {"dtype", "bdata"}:
            values = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=spec["dtype"])
            shape = [int(v) for v in str(spec.get("shape", len(values))).split(",")]  # "2, 3" for 2-D
            return values.reshape(shape).tolist()
        return {k: typed_arrays_as_lists(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [typed_arrays_as_lists(v) for v in spec]
    return spec


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly chart specs by their key."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = typed_arrays_as_lists(json.loads(el.proto.spec))
        out[spec["layout"]["title"]["text"]] = spec
    return out


def chart(at: AppTest, title_start: str) -> dict:
    [spec] = [s for t, s in charts(at).items() if t.startswith(title_start)]
    return spec


def type_text(at: AppTest, text: str) -> AppTest:
    at.text_area(key="text").input(text)
    return run(at)


def all_markdown(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "subheader", "title")
    return [str(el.value) for kind in kinds for el in at.get(kind)]


# ----------------------------------------------------------------------------- pages


@pytest.mark.parametrize("view", VIEWS, ids=[v.stem for v in VIEWS])
def test_every_page_renders_on_its_own(view):
    at = run(AppTest.from_file(str(view), default_timeout=TIMEOUT))
    assert at.title, f"{view.name} shows no title"


def test_default_page_shows_the_analysis(at):
    cfg = config()
    n_layers, n_heads = cfg["model"]["n_layers"], cfg["model"]["n_heads"]
    assert at.title[0].value == "Explore an input"
    assert at.sidebar.selectbox(key="model_for_bbc").value == DEFAULT_MODEL
    assert metric(at, "Prediction") == "sports"  # the default text is about a football match
    heads = metric(at, "Heads run per layer").split(" / ")
    assert len(heads) == n_layers and all(1 <= int(k) <= n_heads for k in heads)
    assert metric(at, "FLOPs vs dense").endswith("%")
    assert metric(at, "Latency (1 thread)").endswith(" ms")

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


def test_the_picked_models_per_example_tables_are_read_in_the_background(at):
    from app import state

    thread = state.PREFETCH[DEFAULT_MODEL]  # started by the run that picked the model, after its page
    thread.join(120)
    assert not thread.is_alive() and thread.daemon
    for model in (DEFAULT_MODEL, state.reference_model(DEFAULT_MODEL)):
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
    learned = metric(at, "Heads run per layer")
    # in the model's own mode the sliders are off: they would show values the model does not use
    assert at.slider(key="budget_s").disabled and at.slider(key="force_k").disabled
    assert any(c.value.startswith("The sliders are off") for c in at.caption)
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    assert not at.slider(key="budget_s").disabled and at.slider(key="force_k").disabled
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    assert metric(at, "Heads run per layer") == "8 / 8" != learned
    assert metric(at, "Budget s per layer") == "1.00 / 1.00"
    assert metric(at, "FLOPs vs dense") in ("100%", "101%")  # all heads, plus f_θ and g_φ
    assert any(s.value.startswith("Compared with the full model") for s in at.subheader)

    at.slider(key="budget_s").set_value(0.25)
    run(at)
    assert metric(at, "Heads run per layer") == "2 / 2"
    assert "red line: full model" in chart(at, "Budget s per layer")["layout"]["title"]["text"]

    at.radio(key="budget_mode").set_value("learned")
    run(at)
    assert metric(at, "Heads run per layer") == learned
    assert not any(s.value.startswith("Compared with") for s in at.subheader)


def test_force_k(at):
    at.radio(key="budget_mode").set_value("force_k")
    run(at)
    assert at.slider(key="budget_s").disabled and not at.slider(key="force_k").disabled
    at.slider(key="force_k").set_value(3)
    run(at)
    assert metric(at, "Heads run per layer") == "3 / 3"
    # the budget card says s decides nothing now (no "predicted by f_θ" beside 3 / 3)
    [card] = [m for m in at.metric if m.label == "Budget s per layer"]
    assert card.value == "not in use" and "k = 3 forced" in card.delta


@pytest.mark.skipif("bbc-bba" not in available_models(), reason="no shipped bba model")
def test_force_k_on_bba_says_b_is_not_in_use(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at).radio(key="budget_mode").set_value("force_k")
    run(at).slider(key="force_k").set_value(8)
    run(at)
    [card] = [m for m in at.metric if m.label == "Requested budget b per layer"]
    assert card.value == "not in use" and "k = 8 forced" in card.delta
    assert metric(at, "Heads run per layer") == "8 / 8"


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
    ks = [int(k) for k in metric(at, "Heads run per layer").split(" / ")]
    ran, grey = chart(at, "Head relevance p")["data"][:2]
    for k, row, text, unrun in zip(ks, ran["z"], ran["text"], grey["text"], strict=True):
        assert row[:k] == pytest.approx([row[0]] * k) and row[k:] == [None] * (len(row) - k)
        assert [c.startswith("★") for c in text] == [h < k for h in range(len(text))]  # heads 0..k-1
        assert [c == "" for c in unrun] == [h < k for h in range(len(text))]  # the others: grey
    diff = chart(at, "Heads that ran: full model vs")
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
    for blank in ("", "   \n\t "):
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
    assert set(metric(at, "Heads run per layer").split(" / ")) == {str(n_heads)}
    assert metric(at, "FLOPs vs dense") == "100%"
    assert metric(at, "Prediction") in config("bbc-dense")["label_names"]


def test_any_unicode_is_fine(at):
    for text in (
        "Le gouvernement a annoncé une réforme 🎉",
        "北京奥运会 足球 比赛",
        "مرحبا بالعالم",
        "\u200b",
    ):
        type_text(at, text)
        assert metric(at, "Prediction") in config()["label_names"]


def test_sessions_do_not_share_settings(at):
    learned = metric(at, "Heads run per layer")
    at.radio(key="budget_mode").set_value("slider")
    run(at)
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    other = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    assert other.radio(key="budget_mode").value == "learned"
    assert metric(other, "Heads run per layer") == learned
    assert metric(at, "Heads run per layer") == "8 / 8"


@pytest.mark.parametrize("damage", ["truncated weights", "bad config"])
def test_broken_checkpoint_gives_a_clear_error(tmp_path, monkeypatch, damage):
    import shutil

    import app.state

    broken = tmp_path / "bbc-broken"
    shutil.copytree(CHECKPOINTS / DEFAULT_MODEL, broken)
    if damage == "truncated weights":
        weights = broken / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    else:
        (broken / "config.json").write_text('{"dataset": "bbc", "model": ')
    shutil.copytree(CHECKPOINTS / DEFAULT_MODEL, tmp_path / DEFAULT_MODEL)
    monkeypatch.setattr(app.state, "CHECKPOINTS", tmp_path)

    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    if damage != "truncated weights":  # an unreadable config.json: the model is not offered at all
        assert "bbc-broken" in app.state.unusable_models() and "bbc-broken" not in app.state.available_models()
        assert not at.exception
        return
    dataset = "bbc"
    at.sidebar.selectbox(key="dataset").set_value(dataset)
    run(at)
    at.sidebar.selectbox(key=f"model_for_{dataset}").set_value("bbc-broken")
    run(at)
    assert any("cannot be loaded" in e.value or "no usable config" in e.value for e in at.error)
    assert not at.metric


# ----------------------------------------------------------------------------- the other pages
# The per-example evaluation behind "Errors" and "Easy vs hard" is an st.cache_data entry shared
# by every AppTest in this process, so only the first of these tests pays for it (seconds).


def open_page(at: AppTest, view: str) -> AppTest:
    at.switch_page(f"views/{view}.py")
    return run(at)


def number(text: str) -> float:
    return float(text.replace("−", "-"))


def test_training_dynamics_page(at):
    cfg = config()
    n_layers, n_heads = cfg["model"]["n_layers"], cfg["model"]["n_heads"]
    history = json.loads((CHECKPOINTS / DEFAULT_MODEL / "history.json").read_text())
    open_page(at, "dynamics")
    assert at.title[0].value == "Training dynamics"

    budget = chart(at, "Budget s per layer during training")
    names = [t["name"] for t in budget["data"]]
    assert names == [
        f"target band [{cfg['train']['s_min']:g}, {cfg['train']['s_max']:g}]",
        *[f"layer {i} (val)" for i in range(n_layers)],
        *[f"layer {i} (train)" for i in range(n_layers)],
    ]
    band = budget["data"][0]
    assert set(band["y"]) == {cfg["train"]["s_min"], cfg["train"]["s_max"]}
    assert band["fill"] == "toself"
    val0 = budget["data"][1]
    assert val0["x"] == [h["epoch"] for h in history]
    assert val0["y"] == pytest.approx([h["val_mean_budget_per_layer"][0] for h in history])

    beta = chart(at, "Entropy weight β(t)")["data"][0]
    assert beta["y"] == pytest.approx([h["beta"] for h in history])
    entropy = chart(at, "Head entropy H(p)")
    ceiling = [t for t in entropy["data"] if t["name"] == f"maximum ln {n_heads}"][0]
    assert ceiling["y"][0] == pytest.approx(math.log(n_heads))
    accuracy = chart(at, "Accuracy")["data"]
    assert [t["name"] for t in accuracy] == ["training", "validation"]
    assert accuracy[1]["y"][-1] == pytest.approx(history[-1]["val_accuracy"])
    names = [t["name"] for t in chart(at, "Loss terms")["data"]]
    assert names[0] == "task: cross-entropy" and names[1].startswith("λ_b·hinge") and names[2].startswith("λ_c·s")
    assert "λ_e·β(t)·H(p)" in names[3] and names[-1].startswith("total loss")
    loss_terms_add_up(at, history)
    story = " ".join(all_markdown(at))
    assert "exploration" in story and "exploitation" in story
    assert f"{len(history)} epochs" in story
    ceiling = math.log(n_heads)
    assert entropy["layout"]["yaxis"]["range"] == pytest.approx([0, 1.05 * ceiling])  # from 0 to ln H
    last = history[-1]["val_head_entropy"]
    assert f"{last / ceiling:.0%} of its maximum ln {n_heads}" in story
    assert ("close to uniform" in story) == (last >= 0.95 * ceiling)


def loss_terms_add_up(at: AppTest, history: list[dict]) -> None:
    """The loss chart's bars (every term the model trained with) add up to its total each epoch,
    and the total is the history's."""
    data = chart(at, "Loss terms per epoch")["data"]
    bars, [total] = [t for t in data if t["type"] == "bar"], [t for t in data if t["type"] == "scatter"]
    assert total["y"] == pytest.approx([h["loss"] for h in history], abs=1e-12)
    for epoch, value in enumerate(total["y"]):
        assert sum(b["y"][epoch] for b in bars) == pytest.approx(value, abs=1e-6), epoch


@pytest.mark.parametrize("model", sorted({
    (config(m)["model"]["variant"], config(m)["train"].get("recipe"), bool(config(m)["train"].get("lambda_difficulty")),
     bool(config(m)["train"].get("lambda_balance"))): m for m in available_models()
}.values()))
def test_the_loss_terms_drawn_add_up_to_the_total(model):
    """One shipped model of each recipe (variant, recipe and which of λ_d, λ_u are on)."""
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    open_page(at, "dynamics")
    pick_model(at, model)
    loss_terms_add_up(at, json.loads((CHECKPOINTS / model / "history.json").read_text()))


def test_errors_page(at):
    cfg = config()
    labels, test = cfg["label_names"], cfg["test"]
    open_page(at, "errors")
    assert at.title[0].value == "Errors"

    confusion = chart(at, "Confusion matrix")["data"][0]
    z = confusion["z"]
    assert len(z) == len(labels) and all(len(row) == len(labels) for row in z)
    assert confusion["y"] == labels and confusion["x"] == labels
    assert sum(map(sum, z)) == test["n"]
    wrong = sum(z[i][j] for i in range(len(labels)) for j in range(len(labels)) if i != j)
    # the live evaluation reproduces the figures measured at training time
    assert int(metric(at, "Misclassified")) == wrong == round((1 - test["accuracy"]) * test["n"])
    assert metric(at, "Test accuracy") == f"{test['accuracy']:.1%}"
    table = at.dataframe[0].value
    assert len(table) == wrong and not table["correct"].any()
    assert (table["true"] != table["predicted"]).all()
    assert at.get("download_button")[0].label == f"Download these {wrong} rows (CSV)"

    # filters: one true class, then a confidence range nothing falls in
    cls = table["true"].value_counts().index[0]
    at.multiselect(key="err_true").set_value([cls])
    run(at)
    filtered = at.dataframe[0].value
    assert set(filtered["true"]) == {cls} and len(filtered) == (table["true"] == cls).sum()
    assert any(c.value.startswith(f"{len(filtered)} of {wrong} misclassified") for c in at.caption)
    at.multiselect(key="err_true").set_value([])
    at.slider(key="err_conf").set_value((0.0, 0.0))
    run(at)
    assert at.dataframe[0].value.empty
    at.slider(key="err_conf").set_value((0.0, 1.0))
    at.toggle(key="err_all").set_value(True)
    run(at)
    assert len(at.dataframe[0].value) == test["n"]
    at.toggle(key="err_all").set_value(False)
    run(at)

    # click-through: the picked text opens in "Explore an input", with its test index
    index = int(table["index"].iloc[-1])
    at.selectbox(key="errors_pick").set_value(index)
    run(at)
    at.button(key="err_open").click()
    run(at)
    assert at.title[0].value == "Explore an input"
    assert any(c.value.startswith(f"Test text #{index} of bbc") for c in at.caption)
    assert any(w.value.startswith(f"Misclassified: test text #{index}") for w in at.warning)
    assert metric(at, "Prediction") == table.set_index("index").loc[index, "predicted"]


def test_easy_vs_hard_page(at):
    cfg = config()
    n_layers, n = cfg["model"]["n_layers"], cfg["test"]["n"]
    open_page(at, "easy_hard")
    assert at.title[0].value == "Easy vs hard"
    rhos = [
        number(metric(at, label))
        for label in ("ρ(s, prediction entropy)", "ρ(s, loss)")
    ]
    assert len(rhos) == 2 and all(-1 <= r <= 1 for r in rhos)
    assert number(metric(at, "Mean s on the test split")) == pytest.approx(
        cfg["test"]["mean_budget"], abs=0.002
    )
    hist = chart(at, "Mean budget s over")["data"][0]  # bars of counts, binned by the server
    assert sum(hist["y"]) == n and all(0 < s < 1 for s in hist["x"])
    low, high = hist["customdata"][0][0], hist["customdata"][-1][1]  # the first bin's start, the last one's end
    scatter = chart(at, "s vs prediction entropy, loss and length")
    assert [sum(len(t["x"]) for t in scatter["data"] if t["xaxis"] == x) for x in ("x", "x2", "x3")] == [n] * 3
    assert [t["name"] for t in chart(at, "Mean budget s by true class")["data"]] == cfg[
        "label_names"
    ]

    lowest, highest = extremes_shown(at)
    assert len(lowest) == len(highest) == 10
    assert [v for _, v in lowest] == sorted(v for _, v in lowest)
    assert [v for _, v in highest] == sorted((v for _, v in highest), reverse=True)
    assert lowest[0][1] == pytest.approx(low, abs=5e-4) and highest[0][1] == pytest.approx(high, abs=5e-4)
    a, b = lowest[0][0], highest[0][0]
    maps = chart(at, "Head relevance p")  # both texts' maps in one figure, on one colour scale
    assert [n["text"] for n in maps["layout"]["annotations"]] == [f"A: #{a}", f"B: #{b}"]
    assert len(maps["data"]) == 2 * 2 + 2  # per text the heads that ran and the grey ones, then the legend
    assert maps["data"][0]["zmax"] == maps["data"][2]["zmax"] and [t["xaxis"] for t in maps["data"][:4]] == [
        "x", "x", "x2", "x2"]
    for trace in maps["data"][:4]:
        assert len(trace["z"]) == n_layers

    c = min(set(range(3)) - {a, b})
    at.number_input(key=f"eh_b_{DEFAULT_MODEL}").set_value(c)
    run(at)
    assert [n["text"] for n in chart(at, "Head relevance p")["layout"]["annotations"]] == [f"A: #{a}", f"B: #{c}"]


def extremes_shown(at: AppTest) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(index, mean budget) of the lowest and the highest budgets on "Easy vs hard", as its two
    tables show them (first and second column); the "Open one of them" picker lists the same."""
    tables = [el.proto.body for el in at.get("html") if 'id="T_eh_' in el.proto.body]
    assert len(tables) == 2
    shown = []
    for body in tables:
        cells = [re.findall(rf'class="data row\d+ col{c}" >(.*?)</td>', body) for c in (0, 1)]
        shown.append([(int(i), float(v)) for i, v in zip(*cells, strict=True)])
    picker = at.selectbox(key="eh_open_pick").options
    assert picker == [f"#{i} · {end} s {v:.3f}" for end, rows in zip(("lowest", "highest"), shown) for i, v in rows]
    return shown[0], shown[1]


@pytest.mark.skipif("bbc-dense" not in available_models(), reason="no dense checkpoint shipped")
def test_new_pages_with_a_dense_checkpoint(at):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-dense")
    run(at)
    open_page(at, "dynamics")
    assert any("no budget curves" in i.value for i in at.info)
    assert not [t for t in charts(at) if t.startswith("Budget s per layer")]
    assert chart(at, "Accuracy") and chart(at, "Loss terms")
    open_page(at, "easy_hard")
    assert any("s = 1 everywhere" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    open_page(at, "errors")
    test = config("bbc-dense")["test"]
    assert int(metric(at, "Misclassified")) == round((1 - test["accuracy"]) * test["n"])
    assert at.slider(key="err_s").disabled


def test_pages_without_the_dataset_texts(tmp_path, monkeypatch):
    """A checkpoint of a dataset whose texts are not on this machine: history only."""
    import shutil

    import app.state

    other = tmp_path / "agnews-budgetformer"
    shutil.copytree(CHECKPOINTS / DEFAULT_MODEL, other)
    cfg = config()
    (other / "config.json").write_text(json.dumps({**cfg, "dataset": "ag_news"}))
    shutil.copytree(CHECKPOINTS / DEFAULT_MODEL, tmp_path / DEFAULT_MODEL)
    monkeypatch.setattr(app.state, "CHECKPOINTS", tmp_path)

    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    at.sidebar.selectbox(key="dataset").set_value("ag_news")
    run(at)
    for view in ("errors", "easy_hard"):
        open_page(at, view)
        assert any("not available on this machine" in i.value for i in at.info), view
        assert not at.get("plotly_chart") and not at.metric
    open_page(at, "dynamics")
    assert chart(at, "Budget s per layer during training")


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
    assert metric(at, "Heads run per layer") == "2 / 2"
    at.slider(key="budget_s").set_value(0.75)
    run(at)
    assert metric(at, "Heads run per layer") == "6 / 6"


AG_NEWS = "ag_news-budgetformer"
SHARED_AG_NEWS = ROOT.parent / "shared" / "data" / "ag_news"


@pytest.mark.skipif(AG_NEWS not in available_models(), reason="no shipped ag_news model")
def test_unshipped_texts_precomputed_results_then_a_local_copy(at):
    """ag_news texts are not shipped: the pages show the precomputed per-example results, and
    the texts once the user points the app at a local copy."""
    at.sidebar.selectbox(key="dataset").set_value("ag_news")
    run(at)
    at.sidebar.selectbox(key="model_for_ag_news").set_value(AG_NEWS)
    run(at)
    assert any("Texts not shipped" in c.value for c in at.sidebar.caption)
    open_page(at, "errors")
    assert any("not on this machine" in c.value for c in at.caption)
    test = config(AG_NEWS)["test"]
    assert int(metric(at, "Misclassified")) == round((1 - test["accuracy"]) * test["n"])
    assert at.button(key="err_open").disabled
    if not SHARED_AG_NEWS.is_dir():
        pytest.skip("no local copy of ag_news to point the app at")
    at.sidebar.text_input(key="data_dir_ag_news").set_value(str(SHARED_AG_NEWS))
    run(at)
    assert not any("not on this machine" in c.value for c in at.caption)
    assert not at.button(key="err_open").disabled
    # AG News' texts carry entity leftovers ("it#39;s"): the page shows them decoded
    from budgetformer_core.data import load_dataset

    raw = load_dataset("ag_news", SHARED_AG_NEWS).split("test").texts
    shown = at.dataframe[0].value
    assert any("#39;" in raw[i] for i in shown["index"])
    assert not any("#39;" in t or "quot;" in t for t in shown["text"])
    assert not any("#39;" in t.value for t in at.text)
    at.sidebar.text_input(key="data_dir_ag_news").set_value(str(ROOT / "no-such-folder"))
    run(at)
    assert any("could be read" in w.value for w in at.sidebar.warning)


# ----------------------------------------------------------------------------- precomputed results
# "Budget sweep" and "Ablations" read precomputed/results; these tests write their own files (every
# model of bbc, with made-up but distinct numbers) and point app.state.RESULTS at them.

SWEEP_BUDGETS = [round(0.05 * i, 2) for i in range(1, 21)]
SWEEPING = {"budgetformer": 0.0, "no-budget-net": -0.02, "no-head-scorer": -0.04, "bba": -0.01, "posthoc": -0.2}
"""Models with a budget sweep, and how much worse than budgetformer they are made."""


def sweep_row(model: str, budget: str, b: float, offset: float = 0.0) -> dict:
    latency = 2 + 4 * b
    return {
        "dataset": "bbc", "model": model, "variant": "test", "budget": budget,
        "accuracy": round(0.5 + 0.45 * b + offset, 6), "macro_f1": round(0.49 + 0.45 * b + offset, 6),
        "n": 426, "mean_s": b, "heads_fraction": b, "attention_cost_estimated": b,
        "flops_ratio": 0.3 + 0.7 * b, "latency_ms": latency, "latency_iqr_ms": 0.1,
        "speedup_b1": 6 / latency,
        "speedup_b32": 7 / latency if budget in ("own", "0.25", "0.5", "0.75", "1") else None,
        "machine": "test",
    }  # fmt: skip


def fake_sweeps(without: tuple[str, ...] = ()) -> pd.DataFrame:
    rows = [sweep_row("dense", "own", 1.0)]
    for model, offset in SWEEPING.items():
        rows.append(sweep_row(model, "own", 0.4, offset))
        rows += [sweep_row(model, f"{b:g}", b, offset) for b in SWEEP_BUDGETS]
    for b in (0.25, 0.5, 0.75):
        rows += [sweep_row(f"static-{b:g}", f"{b:g}", b, -0.03), sweep_row(f"recovery-{b:g}", f"{b:g}", b, -0.05)]
    frame = pd.DataFrame(rows)
    return frame[~frame["model"].isin(without)]


def fake_per_example(labels: list[int], wrong: set[int]) -> pd.DataFrame:
    """A per-example table whose predictions are right except at ``wrong`` (there: the next class)."""
    pred = [(y + 1) % 5 if i in wrong else y for i, y in enumerate(labels)]
    return pd.DataFrame({"index": range(len(labels)), "label": labels, "prediction": pred,
                         "correct": [p == y for p, y in zip(pred, labels)]})  # fmt: skip


WRONG = {"budgetformer": {3, 10}, "dense": {10, 20}, "no-head-scorer": set()}
"""The per-example tables written: no-budget-net and bba have none."""


@pytest.fixture
def results(tmp_path, monkeypatch) -> pd.DataFrame:
    """Made-up precomputed results under tmp_path; returns sweeps.csv as written."""
    import app.state
    from budgetformer_core.data import load_dataset

    frame = fake_sweeps()
    frame.to_csv(tmp_path / "sweeps.csv", index=False)
    labels = list(load_dataset("bbc").split("test").labels)
    (tmp_path / "per_example").mkdir()
    for model, wrong in WRONG.items():
        fake_per_example(labels, wrong).to_parquet(tmp_path / "per_example" / f"bbc-{model}.parquet")
    monkeypatch.setattr(app.state, "RESULTS", tmp_path)
    return frame


def csv_value(frame: pd.DataFrame, model: str, budget: str, column: str) -> float:
    [value] = frame.loc[(frame["model"] == model) & (frame["budget"] == budget), column]
    return value


def budget_charts(at: AppTest) -> dict[str, dict]:
    """The sweep page's charts against the budget b (not those against the input length or the cost)."""
    return {t: spec for t, spec in charts(at).items()
            if not t.startswith("Cost vs input length") and "every method" not in t}


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The one table on the page with ``column``."""
    [table] = [d.value for d in at.dataframe if column in d.value.columns]
    return table


def test_sweep_page(at, results):
    open_page(at, "sweep")
    assert at.title[0].value == "Budget sweep"
    assert at.slider(key="sweep_budget").value == 0.5
    assert metric(at, "Accuracy") == f"{csv_value(results, 'budgetformer', '0.5', 'accuracy'):.1%}"
    assert metric(at, "FLOPs vs dense") == f"{csv_value(results, 'budgetformer', '0.5', 'flops_ratio'):.0%}"
    specs = budget_charts(at)
    assert len(specs) == 5
    for spec in specs.values():  # the slider's budget is marked on every chart against b
        assert [s["x0"] for s in spec["layout"]["shapes"]] == [0.5]
    accuracy = {t["name"]: t for t in chart(at, "Accuracy vs budget")["data"]}
    assert list(accuracy) == [
        "budgetformer", "post-hoc (zero-shot)", "budgetformer at its own point", "static gates",
        "post-hoc + recovery", "dense",
    ]  # fmt: skip
    assert accuracy["budgetformer"]["x"] == SWEEP_BUDGETS
    assert accuracy["static gates"]["x"] == [0.25, 0.5, 0.75]
    assert accuracy["dense"]["y"] == [csv_value(results, "dense", "own", "accuracy")] * 2
    speedup = {t["name"]: t for t in chart(at, "Speed-up over dense")["data"]}
    assert speedup["ideal (1 / FLOPs ratio)"]["y"] == pytest.approx([1 / (0.3 + 0.7 * b) for b in SWEEP_BUDGETS])
    assert speedup["measured, batch 32"]["x"] == [0.25, 0.5, 0.75, 1.0]

    at.slider(key="sweep_budget").set_value(0.25)
    run(at)
    assert metric(at, "Accuracy") == f"{csv_value(results, 'budgetformer', '0.25', 'accuracy'):.1%}"
    assert metric(at, "Accuracy") != f"{csv_value(results, 'budgetformer', '0.5', 'accuracy'):.1%}"
    assert all(s["layout"]["shapes"][0]["x0"] == 0.25 for s in budget_charts(at).values())

    table = frame_with(at, "budget_b")
    assert table.loc[table["budget_b"] == 0.25, "method"].tolist() == [
        "budgetformer", "BBA", "static gates", "post-hoc (zero-shot)", "post-hoc + recovery"
    ]
    at_one = ["budgetformer", "BBA", "post-hoc (zero-shot)", "dense"]  # the specialists stop at 0.75
    assert table.loc[table["budget_b"] == 1.0, "method"].tolist() == at_one
    assert sorted(set(table["budget_b"])) == [0.25, 0.5, 0.75, 1.0]
    assert "Download this table (19 rows, CSV)" in [b.label for b in at.get("download_button")]


def test_sweep_page_live_remeasure(at, results):
    open_page(at, "sweep")
    at.number_input(key="sweep_live_n").set_value(5)
    at.button(key="sweep_live_go").click()
    run(at)
    live = {t["name"]: t for t in chart(at, "Live accuracy vs budget")["data"]}
    assert list(live) == ["precomputed (whole split)", "live (first 5 texts)"]
    assert live["live (first 5 texts)"]["x"] == [0.1, 0.25, 0.5, 0.75, 1.0]
    assert all(round(y * 5) == pytest.approx(y * 5) for y in live["live (first 5 texts)"]["y"])
    table = frame_with(at, "timed")
    assert table["n"].tolist() == [5] * 5 and table["heads_fraction"].is_monotonic_increasing
    # latency is re-measured too, on the texts timed one at a time, not copied from sweeps.csv
    assert table["timed"].tolist() == [results_module.LIVE_TIMED] * 5
    assert (table["latency_ms"] > 0).all() and (table["speedup_b1"] > 0).all()
    latency = {t["name"]: t for t in chart(at, "Live latency vs budget")["data"]}
    live_latency = latency[f"live ({results_module.LIVE_TIMED} texts timed)"]["y"]
    assert live_latency == pytest.approx(table["latency_ms"].tolist())
    precomputed = latency["precomputed (whole split)"]["y"]
    assert precomputed == pytest.approx([2 + 4 * b for b in SWEEP_BUDGETS])  # the fake sweeps.csv
    at.slider(key="sweep_budget").set_value(0.75)
    run(at)  # the live result stays when the page is redrawn
    assert chart(at, "Live accuracy vs budget") and chart(at, "Live latency vs budget")


@pytest.mark.skipif("bbc-dense" not in available_models(), reason="no dense checkpoint shipped")
def test_sweep_page_with_a_dense_checkpoint(at, results):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-dense")
    run(at)
    open_page(at, "sweep")
    assert any("sweep does not apply" in i.value for i in at.info)
    assert not at.get("plotly_chart") and not at.metric
    assert "budgetformer" in at.dataframe[0].value["model"].tolist()


def test_ablation_page(at, results):
    import app.state

    open_page(at, "ablations")
    assert at.title[0].value == "Ablations"
    table = at.dataframe[0].value
    assert table["model"].tolist() == [
        "BudgetFormer (full)", "no budget net (no f_θ)", "no head scorer (no g_φ)", "dense", "BBA (own point)"
    ]  # fmt: skip
    models = ("budgetformer", "no-budget-net", "no-head-scorer", "dense", "bba")
    assert table["accuracy"].tolist() == pytest.approx([csv_value(results, m, "own", "accuracy") for m in models])
    bars = chart(at, "Accuracy and macro-F1")["data"]
    assert [t["name"] for t in bars] == ["accuracy", "macro-F1"] and bars[0]["x"] == table["model"].tolist()
    assert len(charts(at)) == 4

    # inputs on which they disagree: the made-up tables differ at 3, 10 and 20
    differ = frame_with(at, "right")
    labels = config()["label_names"]
    assert differ["index"].tolist() == [3, 10, 20]
    assert list(differ.columns) == ["index", "true", "budgetformer", "no-head-scorer", "dense", "right", "text"]
    assert differ["right"].tolist() == ["2 of 3", "1 of 3", "2 of 3"]
    assert set(differ["true"]) <= set(labels) and set(differ["budgetformer"]) <= set(labels)
    left_out = [c.value for c in at.caption if c.value.startswith("No per-example results")]
    assert left_out == ["No per-example results for: no\\-budget\\-net, bba; left out."]  # markdown-escaped
    assert any("3 of the 426 test inputs" in c.value for c in at.caption)
    from budgetformer_core.data import load_dataset

    assert at.text[0].value == load_dataset("bbc").split("test").texts[3][:3000]  # the first row, as text
    assert len(at.get("download_button")) == 3  # the table, its intervals, the disagreements

    # a model missing from sweeps.csv: one row per model that is there
    fake_sweeps(without=("no-budget-net", "bba")).to_csv(app.state.RESULTS / "sweeps.csv", index=False)
    run(at)
    assert at.dataframe[0].value["model"].tolist() == ["BudgetFormer (full)", "no head scorer (no g_φ)", "dense"]
    assert any(c.value.startswith("Not in sweeps") and "bba" in c.value for c in at.caption)


@pytest.mark.skipif(not all((ROOT / "precomputed" / "results" / "per_example" / f"bbc-{m}.parquet").is_file()
                            for m in results_module.INTERVAL_MODELS), reason="no shipped bbc tables")
def test_error_bars_on_the_ablation_and_sweep_pages(at):
    """The shipped per-example tables' paired bootstrap intervals, as the engine computes them, in
    the Ablations page's table and on its accuracy bars, and on the sweep page's every-method chart."""
    from budgetformer_core import bootstrap

    tables = {m: pd.read_parquet(ROOT / "precomputed" / "results" / "per_example" / f"bbc-{m}.parquet")
              for m in results_module.INTERVAL_MODELS}  # fmt: skip
    expected = bootstrap.compare(tables, list(results_module.ABLATION_PAIRS))
    open_page(at, "ablations")
    shown = frame_with(at, "95% interval (points)")
    names = results_module.ABLATIONS
    assert shown["model"].tolist() == [names[m] for m in expected["a"]]
    assert shown["against"].tolist() == [names[m] for m in expected["b"]]
    assert shown["difference (points)"].tolist() == pytest.approx((expected["difference"] * 100).round(2).tolist())
    assert shown["95% interval (points)"].tolist() == [
        f"[{lo * 100:+.2f}, {hi * 100:+.2f}]" for lo, hi in zip(expected["low"], expected["high"], strict=True)
    ]
    for row in shown.itertuples():  # the point difference lies in its interval
        lo, hi = (float(x) for x in row[6].strip("[]").split(", "))
        assert lo <= row[5] <= hi
    assert set(shown["verdict"]) <= {"within noise", "beyond noise"}
    assert any("Paired bootstrap over the 426 test inputs (2,000 resamples, seed 0)" in c.value for c in at.caption)
    # the spread over training seeds, as scripts/seed_table.py wrote it (seed 0: the shipped models)
    runs = bootstrap.read_seed_runs(ROOT / "precomputed" / "results" / "seeds.csv")
    seeds = frame_with(at, "per seed (%)")
    assert seeds.equals(results_module.seed_table(bootstrap.seed_spread(runs, "bbc")))
    assert (seeds["seeds"] == 3).all() and set(seeds["model"]) == set(results_module.INTERVAL_MODELS)
    intervals = bootstrap.accuracy_intervals(tables)
    accuracy = chart(at, "Accuracy and macro-F1")["data"][0]
    keys = [m for m, name in names.items() if name in accuracy["x"]]
    assert accuracy["error_y"]["array"] == pytest.approx([intervals[m].high - intervals[m].estimate for m in keys])

    open_page(at, "sweep")
    methods = {t["name"]: t for t in chart(at, "Accuracy vs cost, every method")["data"]}
    assert list(methods) == ["BBA (one checkpoint)", "post-hoc (zero-shot)", "BudgetFormer (its own point)", "dense",
                             "static gates", "post-hoc + recovery", "dense level"]
    rows = pd.read_csv(ROOT / "precomputed" / "results" / "sweeps.csv", dtype={"budget": str})
    own = rows[(rows.dataset == "bbc") & (rows.model == "budgetformer") & (rows.budget == "own")].iloc[0]
    assert methods["BudgetFormer (its own point)"]["x"] == [pytest.approx(own.heads_fraction)]
    iv = intervals["budgetformer"]
    assert methods["BudgetFormer (its own point)"]["error_y"]["array"] == [pytest.approx(iv.high - iv.estimate)]
    assert methods["static gates"]["x"] == pytest.approx([0.25, 0.5, 0.75])
    assert chart(at, "Latency vs cost, every method")["layout"]["xaxis"]["title"]["text"].startswith("heads run")
    at.radio(key="sweep_cost_axis").set_value("flops_ratio")
    run(at)
    assert chart(at, "Accuracy vs cost, every method")["layout"]["xaxis"]["title"]["text"] == "FLOPs vs dense"
    sweep_pairs = frame_with(at, "95% interval (points)")
    assert sweep_pairs["model"].tolist() == ["budgetformer"] * 5 and "dense" in sweep_pairs["against"].tolist()


def test_disagreements_and_extremes_open_in_explore(at, results):
    from budgetformer_core.data import load_dataset

    texts = load_dataset("bbc").split("test").texts
    open_page(at, "ablations")
    assert at.selectbox(key="ablation_pick").value == 3  # the first input they disagree on
    at.button(key="ablation_open").click()
    run(at)
    assert at.title[0].value == "Explore an input" and at.text_area(key="text").value == texts[3]
    assert any(c.value.startswith("Test text #3 of bbc") for c in at.caption)

    open_page(at, "easy_hard")
    pick = extremes_shown(at)[1][0][0]  # the highest budget
    at.selectbox(key="eh_open_pick").set_value(pick)
    run(at)
    at.button(key="eh_open").click()
    run(at)
    assert at.title[0].value == "Explore an input" and at.text_area(key="text").value == texts[pick]
    assert any(c.value.startswith(f"Test text #{pick} of bbc") for c in at.caption)


def test_errors_keeps_its_filters_and_picked_text_across_pages(at):
    open_page(at, "errors")
    table = at.dataframe[0].value
    cls = table["true"].value_counts().index[0]
    at.multiselect(key="err_true").set_value([cls])
    at.slider(key="err_conf").set_value((0.2, 1.0))
    at.toggle(key="err_all").set_value(True)
    run(at)
    picked = int(at.dataframe[0].value["index"].iloc[-1])
    at.selectbox(key="errors_pick").set_value(picked)
    run(at)
    shown = at.dataframe[0].value
    for view in ("dynamics", "explore", "errors"):  # away and back
        open_page(at, view)
    assert at.multiselect(key="err_true").value == [cls] and at.slider(key="err_conf").value == (0.2, 1.0)
    assert at.toggle(key="err_all").value and at.selectbox(key="errors_pick").value == picked
    assert at.dataframe[0].value.equals(shown)
    other = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))  # another session: its own
    open_page(other, "errors")
    assert other.multiselect(key="err_true").value == [] and not other.toggle(key="err_all").value


def test_a_text_of_mostly_unknown_tokens_is_flagged(at):
    type_text(at, "qzxv wprk ǂʘǁ ꙮꙮ 𒀱𒀱 ⵣⵣⵣ")
    assert any("unknown to its vocabulary ([UNK])" in w.value for w in at.warning)
    type_text(at, SPORT)
    assert not any("[UNK]" in w.value for w in at.warning)


@pytest.mark.parametrize("case", ["missing", "unreadable", "other dataset", "no sweep"])
def test_sweep_and_ablation_pages_without_results(tmp_path, monkeypatch, case):
    import app.state

    csv = tmp_path / "sweeps.csv"
    if case == "unreadable":
        csv.write_text("model,budget\nbudgetformer,own\n")
    elif case == "other dataset":
        fake_sweeps().assign(dataset="synthetic").to_csv(csv, index=False)
    elif case == "no sweep":
        fake_sweeps(without=("budgetformer",)).to_csv(csv, index=False)
    monkeypatch.setattr(app.state, "RESULTS", tmp_path)
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    expected = {
        "missing": "sweeps\\.csv is missing",
        "unreadable": "dataset, accuracy are missing",
        "other dataset": "no results for the dataset **bbc**",
        "no sweep": "no budget sweep of **budgetformer**",
    }[case]
    open_page(at, "sweep")
    assert any(expected in m.value and "make precompute" in m.value for m in [*at.info, *at.error])
    assert not at.metric
    if case == "no sweep":  # the rest of the page still works; the live re-measure is offered
        assert at.button(key="sweep_live_go")
        open_page(at, "ablations")
        assert "BudgetFormer (full)" not in at.dataframe[0].value["model"].tolist()
    else:
        assert not at.get("plotly_chart")
        open_page(at, "ablations")
        assert any(expected in m.value for m in [*at.info, *at.error])
        assert not at.get("plotly_chart") and not at.dataframe


# ----------------------------------------------------------------------------- adaptivity
PER_EXAMPLE = ROOT / "precomputed" / "results" / "per_example"


def expected_adaptivity(model: str, needed: list[int] | None = None):
    """The figures the page should show, from the shipped per-example tables."""
    from budgetformer_core.adaptivity import from_frames

    frame = pd.read_parquet(PER_EXAMPLE / f"{model}.parquet")
    reference = pd.read_parquet(PER_EXAMPLE / f"{model.split('-', 1)[0]}-dense.parquet")
    return from_frames(frame, config(model)["model"]["n_heads"], reference, needed)


def shipped(*models: str) -> bool:
    return all(m in available_models() and (PER_EXAMPLE / f"{m}.parquet").is_file() for m in models)


@pytest.mark.skipif(not shipped(DEFAULT_MODEL, "bbc-dense"), reason="no shipped bbc tables")
def test_easy_vs_hard_adaptivity_figures(at):
    from app.examples import adaptivity_reading

    expected = expected_adaptivity(DEFAULT_MODEL)
    open_page(at, "easy_hard")
    assert metric(at, "Accuracy") == f"{expected.accuracy:.1%}"
    assert metric(at, "Mean heads fraction") == f"{expected.mean_heads_fraction:.1%}"
    assert number(metric(at, "ρ(s, dense loss)")) == pytest.approx(expected.rho_s_reference_loss, abs=0.005)
    ratio = metric(at, "Heads run, hard / easy third")
    assert ratio.endswith("×") and float(ratio[:-1]) == pytest.approx(expected.heads_ratio_hard_easy, abs=0.005)
    reading = adaptivity_reading(expected)
    assert any(reading.split(":")[0] in m for m in all_markdown(at))
    assert not [m for m in at.metric if m.label.startswith("ρ(k")]  # bbc does not say what it needs
    bars = chart(at, "Heads run k per input")  # one figure, a panel per layer
    for layer, figures in enumerate(expected.layers):
        axis = "xaxis" + ("" if layer == 0 else str(layer + 1))
        assert bars["layout"][axis]["type"] == "category"
        assert bars["data"][layer]["xaxis"] == axis.replace("axis", "")
        shown = dict(zip(bars["data"][layer]["x"], bars["data"][layer]["y"], strict=True))
        assert {k: v for k, v in shown.items() if v} == figures.k_hist and sum(shown.values()) == expected.n
        assert metric(at, f"Layer {layer}: distinct head sets") == str(figures.distinct_head_sets)
        assert metric(at, f"Layer {layer}: head-set entropy") == f"{figures.head_set_entropy_bits:.2f} bits"
    assert chart(at, "Mean budget s over")  # the page's earlier content follows


@pytest.mark.skipif(not shipped("bbc-bba", "bbc-dense"), reason="no shipped bba model")
def test_easy_vs_hard_bba_shows_na_with_the_reason(at):
    from app.examples import in_terms_of, null_reason

    expected = expected_adaptivity("bbc-bba")
    assert expected.rho_s_reference_loss is None
    reason = in_terms_of(null_reason(expected.notes, "rho_s_reference_loss", "?"), "b")  # bba's words
    assert reason.startswith("b is the same for every input")
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at)
    open_page(at, "easy_hard")
    [rho] = [m for m in at.metric if m.label == "ρ(b, dense loss)"]
    assert rho.value == "n/a" and reason in rho.help
    assert any("n/a" in c.value and "same for every input" in c.value for c in at.caption)
    assert any("cannot follow difficulty" in m for m in all_markdown(at))
    assert not [m.value for m in at.metric if "nan" in m.value.lower()]


@pytest.mark.skipif(not shipped("synthetic-budgetformer", "synthetic-dense"), reason="no shipped synthetic model")
def test_easy_vs_hard_needed_heads_on_a_synthetic_task(at):
    from budgetformer_core.data import load_dataset

    needed = load_dataset("synthetic").split("test").needed_heads
    expected = expected_adaptivity("synthetic-budgetformer", needed)
    at.sidebar.selectbox(key="dataset").set_value("synthetic")
    run(at)
    at.sidebar.selectbox(key="model_for_synthetic").set_value("synthetic-budgetformer")
    run(at)
    open_page(at, "easy_hard")
    assert metric(at, "k ≥ needed in every layer") == f"{expected.frac_k_at_least_needed:.1%}"
    rho_k = metric(at, "ρ(k, needed heads)")
    if expected.rho_k_needed is None:
        assert rho_k == "n/a" and any("ρ(k, needed heads) is n/a" in c.value.replace("\\", "") for c in at.caption)
    else:
        assert number(rho_k) == pytest.approx(expected.rho_k_needed, abs=0.005)
    bars = chart(at, "Mean heads run k per needed n")
    assert [int(n) for n in bars["data"][0]["x"]] == sorted(set(needed))


# ----------------------------------------------------------------------------- every model in its own words


def pick_model(at: AppTest, model: str) -> AppTest:
    dataset = config(model).get("dataset", "unknown")
    at.sidebar.selectbox(key="dataset").set_value(dataset)
    run(at)
    at.sidebar.selectbox(key=f"model_for_{dataset}").set_value(model)
    return run(at)


def page_words(at: AppTest) -> str:
    """Every text of the page the user reads: markdown, metrics, widget labels, chart and axis
    titles."""
    widgets = [w.label for kind in ("radio", "slider", "toggle", "multiselect") for w in at.get(kind)]
    widgets += [o for r in at.radio for o in r.options]
    metrics = [f"{m.label} {m.value} {m.proto.body}" for m in at.metric]
    axes = [axis_title(spec, key) for spec in charts(at).values() for key in spec["layout"] if key[1:5] == "axis"]
    return " ".join([*all_markdown(at), *widgets, *metrics, *charts(at), *axes])


def axis_title(spec: dict, key: str) -> str:
    title = spec["layout"][key].get("title") or {}
    return title.get("text", "") if isinstance(title, dict) else str(title)


def class_axes_are_categories(spec: dict, labels: list[str], axes: tuple[str, ...]) -> None:
    for axis in axes:
        assert spec["layout"][f"{axis}axis"]["type"] == "category", (spec["layout"]["title"], axis)
        assert spec["data"][0][axis] == [str(n) for n in labels]


def every_axis_and_colour_bar_has_a_title(at: AppTest) -> None:
    """… and every chart is drawn in the app's own look (app.charts.TEMPLATE), not restyled by
    Streamlit's theme in the browser (through app.components.show_chart)."""
    from app.charts import TEMPLATE

    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        assert el.proto.theme == "", spec["layout"]["title"]
        assert spec["layout"]["template"]["layout"]["font"]["family"] == TEMPLATE.layout.font.family
    for title, spec in charts(at).items():
        for key in (k for k in spec["layout"] if k[1:5] == "axis"):
            assert axis_title(spec, key), (title, key)
        for trace in spec["data"]:
            if trace["type"] == "heatmap" and trace.get("showscale", True):
                assert trace["colorbar"]["title"]["text"], title


FOREIGN = {  # words of another method, case-insensitive: each page speaks its model's own
    "bba": [r"f_θ", r"g_φ", r"s·H·p", r"\bbudget s\b", r"\bmean s\b", r"relevance p\b", r"ρ\(s\b",
            r"\bs vs\b", r"\bs per layer", r"\bs went from"],
    "budgetformer": [r"requested budget b", r"gate scores? z", r"ρ\(b\b", r"\bmean b\b", r"\bbudget b\b"],
    "dense": [r"requested budget b", r"gate scores? z"],
}  # fmt: skip
PAGES = ("explore", "sweep", "compare", "easy_hard", "ablations", "errors", "batch", "dynamics")
SAME_FOR_EVERY_MODEL = ("ablations",)
"""Pages about the dataset's models side by side (BudgetFormer's ablations and BBA): each model
is named there in its own words, whichever is picked in the sidebar."""


@pytest.mark.parametrize("model", available_models())
def test_every_page_speaks_the_models_method(model):
    """Every page × every shipped model in one session: the method's own vocabulary, categorical
    class axes, titled axes and colour bars, and what each page shows of that kind of model."""
    cfg = config(model)
    mcfg, labels, variant = cfg["model"], cfg["label_names"], cfg["model"]["variant"]
    history = json.loads((CHECKPOINTS / model / "history.json").read_text() or "[]")
    texts_here = cfg["dataset"] in ("bbc", "synthetic", "synthetic_var")
    at = pick_model(run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)), model)
    card = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")  # markdown escapes dropped
    base = cfg.get("backbone")
    assert (f"backbone **{base['package']}** (pretrained)" if base else "trained from scratch") in card
    layers = "1 layer" if mcfg["n_layers"] == 1 else f"{mcfg['n_layers']} layers"
    assert f"{layers} × {mcfg['n_heads']} heads" in card
    for view in PAGES:
        if view != "explore":
            open_page(at, view)
        words = page_words(at)
        if view not in SAME_FOR_EVERY_MODEL and not (view == "sweep" and variant == "budgetformer"):
            # (the sweep runs a BudgetFormer at requested budgets b too: there b is its word)
            for word in FOREIGN[variant]:
                assert not re.search(word, words, re.IGNORECASE), (view, word)
        every_axis_and_colour_bar_has_a_title(at)
        check = PAGE_CHECKS.get(view)
        if check is not None:
            check(at, mcfg, labels, history, texts_here)


def check_explore(at, mcfg, labels, history, texts_here):
    variant = mcfg["variant"]
    assert at.title[0].value == "Explore an input"
    class_axes_are_categories(chart(at, "Class probabilities"), labels, ("y",))
    words = page_words(at)
    if variant == "bba":
        assert metric(at, "Requested budget b per layer") == " / ".join(
            [f"{mcfg['default_budget']:.2f}"] * mcfg["n_layers"]
        )
        assert chart(at, "Gate scores z") and chart(at, "Requested budget b per layer")
        assert chart(at, "Head weight w")["layout"]["title"]["text"].endswith("1 on the heads that ran, 0 elsewhere")
    elif variant == "budgetformer":
        assert metric(at, "Budget s per layer")
        gated = mcfg.get("head_weighting", "scaled") == "gated"
        weights = chart(at, "Head weight w")["layout"]["title"]["text"]
        assert weights == ("Head weight w = 1 on the heads that ran" if gated else "Head weight w = s·H·p")
        assert ("w = 1" in words) == gated and ("w = s·H·p" in words) != gated
    else:
        assert not at.toggle and not at.slider  # nothing to set, nothing to ablate
    if variant != "dense":  # heads not computed: grey, no colour, w shown as —
        ran, grey, *legend = chart(at, "Head weight w")["data"]
        ks = [int(k) for k in metric(at, "Heads run per layer").split(" / ")]
        assert [sum(v is not None for v in row) for row in ran["z"]] == ks
        assert [row.count("—") for row in grey["text"]] == [mcfg["n_heads"] - k for k in ks]
        relevance = chart(at, "Gate scores z" if variant == "bba" else "Head relevance p")
        assert relevance["data"][0]["colorbar"]["title"]["text"] in ("p", "softmax(z)")
        assert relevance["layout"]["xaxis"]["title"]["text"] == "head"
        # the legend beside the map says what ★ and the grey cells are
        names = [t["name"] for t in relevance["data"][2:]]
        assert names[0].startswith("head ran") and names[1].startswith("not computed")
        assert relevance["layout"]["showlegend"]


def check_errors(at, mcfg, labels, history, texts_here):
    sym = "b" if mcfg["variant"] == "bba" else "s"
    assert bool(at.get("plotly_chart")) or not texts_here
    if at.get("plotly_chart"):
        class_axes_are_categories(chart(at, "Confusion matrix"), labels, ("x", "y"))
        assert metric(at, f"Mean {sym} when right")


def check_easy_hard(at, mcfg, labels, history, texts_here):
    if mcfg["variant"] == "dense" or not at.get("plotly_chart"):
        return
    sym = "b" if mcfg["variant"] == "bba" else "s"
    assert metric(at, f"Mean {sym} on the test split") and metric(at, f"ρ({sym}, dense loss)")
    by_class = chart(at, f"Mean budget {sym} by true class")
    assert by_class["layout"]["xaxis"]["type"] == "category"
    assert by_class["layout"]["xaxis"]["categoryarray"] == [str(n) for n in labels]
    assert [t["x0"] for t in by_class["data"]] == [str(n) for n in labels]  # each box at its class
    scatter = chart(at, f"{sym} vs prediction entropy, loss and length")
    n = sum(int(c) for t in scatter["data"][:2] for row in t["text"] for c in row) \
        if scatter["data"][0]["type"] == "contour" else 0  # the counts (z is log(1 + count))
    if n:  # above its most points: densities (each input counted once per panel), else points drawn with WebGL
        assert {t["type"] for t in scatter["data"]} == {"contour"} and n > charts_module.SCATTER_POINTS
    else:
        assert {t["type"] for t in scatter["data"]} == {"scattergl"}


def check_dynamics(at, mcfg, labels, history, texts_here):
    if not history:
        return
    loss_terms_add_up(at, history)
    words = page_words(at)
    if mcfg["variant"] == "bba":
        assert "β" not in words and "band" not in words
        assert "soft gate" in words and "hard-gate adaptation" in words
        assert chart(at, "Share of heads run") and not [t for t in charts(at) if "β" in t]
    elif mcfg["variant"] == "budgetformer":
        assert chart(at, "Entropy weight β(t)") and "exploration" in words


def check_compare(at, mcfg, labels, history, texts_here):
    # by default the picked model against its dataset's dense model (or the budgetformer of a dense one)
    ks = [metric(at, f"{side} · Heads run per layer") for side in "AB"]
    layers = [config(at.selectbox(key=f"sbs_model_{side}").value)["model"]["n_layers"] for side in "AB"]
    assert layers[0] == mcfg["n_layers"]  # side A is the picked model; B may have another depth
    assert [len(k.split(" / ")) for k in ks] == layers
    assert ("A · Budget b per layer" in [m.label for m in at.metric]) == (mcfg["variant"] == "bba")


def check_batch(at, mcfg, labels, history, texts_here):
    assert at.file_uploader(key="batch_file") and any("Upload a file" in i.value for i in at.info)


PAGE_CHECKS = {"explore": check_explore, "errors": check_errors, "easy_hard": check_easy_hard,
               "dynamics": check_dynamics, "compare": check_compare, "batch": check_batch}  # fmt: skip


# ----------------------------------------------------------------------------- controls that are what they look


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


def test_switching_dataset_picks_its_budgetformer_and_flags_a_foreign_text(at):
    other = next(
        (d for d in sorted({config(m)["dataset"] for m in available_models()})
         if d != "bbc" and f"{d}-budgetformer" in available_models()), None
    )
    if other is None:
        pytest.skip("no second dataset with a budgetformer model")
    at.radio(key="pick_how").set_value("By index")
    run(at)
    at.button(key="pick_index_go").click()  # a bbc test text in the box
    run(at)
    at.sidebar.selectbox(key="dataset").set_value(other)
    run(at)
    assert at.sidebar.selectbox(key=f"model_for_{other}").value == f"{other}-budgetformer"
    assert any("is a test text of **bbc**" in w.value for w in at.warning)


# ----------------------------------------------------------------------------- no contradictions


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


# ----------------------------------------------------------------------------- side by side, batch

BBA = "bbc-bba"


def engine_analysis(model: str, text: str, budget: float | None = None):
    from app.analysis import run_analysis
    from app.state import get_checkpoint
    from budgetformer_core.budget import Control

    return run_analysis(get_checkpoint(model), text, None if budget is None else Control(budget=budget))


def shown_ks(at: AppTest, side: str) -> list[int]:
    return [int(k) for k in metric(at, f"{side} · Heads run per layer").split(" / ")]


@pytest.mark.skipif(BBA not in available_models(), reason="no bbc bba checkpoint")
def test_side_by_side_two_models_two_budgets_two_texts(at):
    from app.analysis import method_of, side_differences

    open_page(at, "compare")
    at.text_area(key="sbs_text").input(SPORT)
    at.selectbox(key="sbs_model_B").set_value(BBA)
    run(at)
    bf, bba = engine_analysis(DEFAULT_MODEL, SPORT), engine_analysis(BBA, SPORT)
    assert shown_ks(at, "A") == bf.k and shown_ks(at, "B") == bba.k  # each model's own analysis
    assert metric(at, "A · Budget s per layer") == " / ".join(f"{s:.2f}" for s in bf.budget)
    assert metric(at, "B · Budget b per layer") == " / ".join(f"{s:.2f}" for s in bba.budget)
    assert metric(at, "A · Prediction") == bf.label and metric(at, "B · Prediction") == bba.label
    a_map, b_map = chart(at, "A: Head relevance p"), chart(at, "B: Gate scores z")
    assert a_map["data"][0]["zmax"] == b_map["data"][0]["zmax"]  # one colour scale
    top = max(2 / config()["model"]["n_heads"], *(v for m in (bf.relevance, bba.relevance) for row in m for v in row))
    assert a_map["data"][0]["zmax"] == pytest.approx(top)
    lines = side_differences(bf, bba, method_of(config()["model"]), method_of(config(BBA)["model"]))
    assert lines[1].startswith("layer 0: k ") and len(lines) == 1 + config()["model"]["n_layers"]
    [listed] = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert listed.replace("\\", "") == "\n".join(f"- {line}" for line in lines)

    # the same model at two budgets
    at.selectbox(key="sbs_model_B").set_value(DEFAULT_MODEL)
    run(at)
    for side in "AB":
        at.radio(key=f"sbs_{side}_how").set_value("slider")
    run(at)
    for side, b in (("A", 0.25), ("B", 0.75)):
        at.slider(key=f"sbs_{side}_budget").set_value(b)
    run(at)
    assert shown_ks(at, "A") == engine_analysis(DEFAULT_MODEL, SPORT, 0.25).k == [2] * len(bf.k)
    assert shown_ks(at, "B") == engine_analysis(DEFAULT_MODEL, SPORT, 0.75).k == [6] * len(bf.k)
    assert any("k 2 vs 6" in m.value for m in at.markdown)

    # one model (bba) on two texts, with its budget control
    pick_model(at, BBA)
    open_page(at, "compare")
    at.radio(key="sbs_mode").set_value("texts")
    run(at)
    assert any("Text B is empty" in i.value for i in at.info)
    at.text_area(key="sbs_text_A").input(SPORT)
    at.text_area(key="sbs_text_B").input(MARKUP)
    at.radio(key="sbs_one_how").set_value("slider")
    run(at)
    at.slider(key="sbs_one_budget").set_value(0.25)
    run(at)
    assert shown_ks(at, "A") == engine_analysis(BBA, SPORT, 0.25).k and shown_ks(at, "B") == engine_analysis(
        BBA, MARKUP, 0.25).k
    assert not any(MARKUP in m.value for m in at.markdown)  # the texts stay in their text areas


@pytest.mark.parametrize("model", [DEFAULT_MODEL, BBA])
def test_batch_page_rows_are_the_engines(model):
    from app.analysis import BATCH_MAX_BYTES
    from app.state import get_checkpoint
    from budgetformer_core.infer import predict_rows
    from budgetformer_core.inputs import read_text_table

    if model not in available_models():
        pytest.skip(f"no {model}")
    at = pick_model(run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)), model)
    open_page(at, "batch")
    data = f'id,text\n1,"{SPORT}"\n2,"{BUSINESS}"\n3,{MARKUP}\n4,"   "\n'.encode()
    at.file_uploader(key="batch_file").set_value(("texts.csv", data, "text/csv"))
    run(at)
    table = at.dataframe[0].value
    expected = list(predict_rows(get_checkpoint(model), read_text_table(data, "texts.csv")))
    done = [p for p in expected if p.row]
    assert table["row"].tolist() == [1, 2, 3, 4] and table["text"].tolist()[2] == MARKUP  # markup as text
    assert table["prediction"].tolist()[:3] == [p.row["label"] for p in done]
    assert table["confidence"].tolist()[:3] == pytest.approx([max(p.row["probs"].values()) for p in done])
    sym = "b" if config(model)["model"]["variant"] == "bba" else "s"
    for layer in range(config(model)["model"]["n_layers"]):
        assert table[f"k{layer}"].tolist()[:3] == [p.row["k"][layer] for p in done]
        assert table[f"{sym}{layer}"].tolist()[:3] == pytest.approx([p.row["budget"][layer] for p in done])
        assert table[f"heads{layer}"].tolist()[:3] == [" ".join(map(str, p.row["selected_heads"][layer])) for p in done]
    assert table["error"].tolist() == ["", "", "", "blank line"]
    assert metric(at, "Texts classified") == "3 of 4" and metric(at, "Not classified") == "1"
    assert "Download this table (4 rows, CSV)" in [b.label for b in at.get("download_button")]
    for name, content, message in (
        ("empty.csv", b"", "is empty"),
        ("big.txt", b"x" * (BATCH_MAX_BYTES + 1), "the limit is"),
        ("broken.jsonl", b'{"text": "ok"}\n{"text": ', "line 2 is not JSON"),
        ("latin1.csv", "text\ncaf\u00e9\n".encode("latin-1"), "not valid UTF-8"),
    ):
        at.file_uploader(key="batch_file").set_value((name, content, "text/plain"))
        run(at)
        assert any(message in e.value.replace("\\", "") for e in at.error), (name, [e.value for e in at.error])
        assert not at.dataframe


@pytest.mark.skipif(not shipped(DEFAULT_MODEL, "bbc-dense"), reason="no shipped bbc tables")
def test_easy_vs_hard_per_class_rho_is_scipys(at):
    """Within each class, ρ(s, dense loss) is scipy's Spearman ρ on the per-example tables' rows
    of that class."""
    from scipy.stats import spearmanr

    frame = pd.read_parquet(PER_EXAMPLE / f"{DEFAULT_MODEL}.parquet")
    dense = pd.read_parquet(PER_EXAMPLE / "bbc-dense.parquet")
    open_page(at, "easy_hard")
    [shown] = [t.value for t in at.table if "ρ(s, dense loss)" in t.value.columns]
    labels = config()["label_names"]
    assert shown.index.tolist() == labels
    for label, name in enumerate(labels):
        rows = frame["label"] == label
        expected = spearmanr(frame.loc[rows, "mean_s"], dense.loc[rows, "loss"]).statistic
        assert shown.loc[name, "ρ(s, dense loss)"] == pytest.approx(expected, abs=1e-9), name
        assert shown.loc[name, "inputs"] == rows.sum()


def flagged_model() -> str | None:
    """A shipped full method more than 3 points below its dataset's dense model (config.json's
    test accuracies), if any."""
    from app.results import FLAG_POINTS

    for m in available_models():
        cfg, dense = config(m), f"{config(m)['dataset']}-dense"
        full = cfg["model"]["variant"] != "dense" and cfg["model"].get("use_budget_net", True) \
            and cfg["model"].get("head_choice", "learned") == "learned"
        if full and dense in available_models() and \
                (config(dense)["test"]["accuracy"] - cfg["test"]["accuracy"]) * 100 > FLAG_POINTS:
            return m
    return None


@pytest.mark.skipif(flagged_model() is None, reason="no shipped full method falls 3 points below dense")
def test_a_model_far_below_dense_is_flagged_wherever_it_appears(at):
    model = flagged_model()
    cfg, dense = config(model), config(f"{config(model)['dataset']}-dense")
    versus = f"{cfg['test']['accuracy']:.1%} against dense {dense['test']['accuracy']:.1%}"
    pick_model(at, model)
    picker = at.sidebar.selectbox(key=f"model_for_{cfg['dataset']}")
    shown = dict(zip(picker.options, [picker.format_func(o) for o in picker.options]))  # option → label
    assert "⚑" in picker.format_func(model)
    assert not any("⚑" in picker.format_func(m) for m in picker.options if m.endswith(("-dense", "no-budget-net")))
    for view in ("explore", "easy_hard", "dynamics"):
        if view != "explore":
            open_page(at, view)
        assert any(w.value.startswith("⚑") and versus in w.value for w in at.warning), (view, shown)
    ablation = f"{cfg['dataset']}-no-head-scorer"
    if ablation in available_models():
        at.sidebar.selectbox(key=f"model_for_{cfg['dataset']}").set_value(ablation)
        run(at)
        assert not any(w.value.startswith("⚑") for w in at.warning)
        assert any("expected to lose" in c.value for c in at.caption)


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """What the page's download buttons hand the browser, by file name (Streamlit's in-memory
    media store, which AppTest drops after each run, read as the files are added)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files: dict[str, bytes] = {}
    add = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        if filename is not None and not isinstance(path_or_data, str):
            files[filename] = path_or_data
        return add(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return files


def test_the_json_export_holds_what_is_in_effect(at, downloads):
    """The export: the settings in effect only (no greyed-out slider), the dataset, test index and
    true label of a test text, and the attention map once it is shown."""
    samples = pd.read_parquet(PER_EXAMPLE / f"{DEFAULT_MODEL}.parquet") if shipped(DEFAULT_MODEL) else None
    at.radio(key="pick_how").set_value("By index")
    run(at).number_input(key="pick_index").set_value(7)
    run(at).button(key="pick_index_go").click()
    run(at).radio(key="budget_mode").set_value("force_k")
    run(at).slider(key="force_k").set_value(3)
    run(at)
    record = json.loads(downloads[f"analysis-{DEFAULT_MODEL}.json"])
    assert record["settings"] == {"budget_mode": "force_k", "no_budget_net": False, "head_ablation": None,
                                  "k": 3, "description": "k = 3"}  # no slider s, no seed
    assert record["source"]["dataset"] == "bbc" and record["source"]["test_index"] == 7
    labels = config()["label_names"]
    if samples is not None:
        assert record["source"]["true_label"] == labels[int(samples["label"].iloc[7])]
    assert record["input"]["text"] == at.text_area(key="text").value and record["attention"] is None
    at.toggle(key="attention_on").set_value(True)
    run(at)
    record = json.loads(downloads[f"analysis-{DEFAULT_MODEL}.json"])
    attention = record["attention"]
    assert attention["layer"] == 0 and attention["head"] in record["analysis"]["selected_heads"][0]
    assert len(attention["rows"]) == len(attention["tokens"]) == record["input"]["n_tokens_read"]
    assert all(sum(row) == pytest.approx(1, abs=1e-4) for row in attention["rows"])
    assert at.query_params["attention"] == f"0.{attention['head']}"  # the link reopens it too


def test_batch_accuracy_from_a_label_column(downloads):
    """A ``label`` column (class names or indices) gives the accuracy and a confusion matrix of the
    rows it labels, and is carried into the table and its CSV; an empty row says so in its row."""
    from app.state import get_checkpoint
    from budgetformer_core.infer import predict_rows
    from budgetformer_core.inputs import read_text_table

    labels = config()["label_names"]
    sport, business = labels.index("sports"), labels.index("business")
    data = (f'text,label\n"{SPORT}",Sports\n"{BUSINESS}",{business}\n"{SPORT}",business\n"  ",sports\n'
            f'"{BUSINESS}",weather\n').encode()
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    open_page(at, "batch")
    at.file_uploader(key="batch_file").set_value(("labelled.csv", data, "text/csv"))
    run(at)
    predicted = [p.row["label"] if p.row else None
                 for p in predict_rows(get_checkpoint(DEFAULT_MODEL), read_text_table(data, "labelled.csv"))]
    truth = ["sports", labels[business], "business", "sports", ""]
    judged = [(t, p) for t, p in zip(truth, predicted, strict=True) if t and p]  # row 4 empty, row 5 no class
    expected = sum(t == p for t, p in judged) / len(judged)
    assert metric(at, "Accuracy against the file's labels") == f"{expected:.1%}" and len(judged) == 3
    matrix = chart(at, "Confusion")["data"][0]["z"]
    assert sum(map(sum, matrix)) == 3 and matrix[sport][labels.index(predicted[0])] >= 1
    table = at.dataframe[0].value
    assert table.columns.tolist()[:4] == ["row", "text", "error", "label"]  # the reason is seen first
    assert table["label"].tolist() == truth and table["error"].tolist()[3] == "blank line"
    carried = pd.read_csv(io.BytesIO(downloads[f"batch-{DEFAULT_MODEL}.csv"]), keep_default_na=False)
    assert carried["label"].tolist() == truth
    assert carried["correct"].tolist()[:3] == [str(t == p) for t, p in zip(truth[:3], predicted[:3], strict=True)]
    assert any("1 row(s) have no label" in c.value for c in at.caption)

"""The app through Streamlit's AppTest: no server, no browser, real widgets and the real model.

Assertions are on rendered values (metrics, chart specs, messages), not only on "no exception".
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

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
    [m] = [m for m in at.metric if m.label == label]
    return m.value


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly chart specs by their key."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
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
    ]


def test_typing_a_text_updates_the_prediction(at):
    assert metric(at, "Prediction") == "sports"
    type_text(at, BUSINESS)
    assert metric(at, "Prediction") == "business"
    type_text(at, SPORT)
    assert metric(at, "Prediction") == "sports"


def test_budget_slider_overrides_s_and_heads(at):
    type_text(at, SPORT)
    learned = metric(at, "Heads run per layer")
    at.slider(key="budget_s").set_value(1.0)
    run(at)
    assert at.radio(key="budget_mode").value == "slider"  # moving the slider switches to it
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
    at.slider(key="force_k").set_value(3)
    run(at)
    assert at.radio(key="budget_mode").value == "force_k"
    assert metric(at, "Heads run per layer") == "3 / 3"


def test_ablation_no_budget_net_uses_the_mean_budget(at):
    type_text(at, SPORT)
    full_s = [float(x) for x in metric(at, "Budget s per layer").split(" / ")]
    at.toggle(key="no_f").set_value(True)
    run(at)
    fixed = [float(x) for x in metric(at, "Budget s per layer").split(" / ")]
    assert len(set(fixed)) == 1 and fixed[0] == pytest.approx(sum(full_s) / len(full_s), abs=0.006)
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
    relevance = chart(at, "Head relevance p")["data"][0]
    for k, row, text in zip(ks, relevance["z"], relevance["text"], strict=True):
        assert row == pytest.approx([row[0]] * len(row))  # uniform p
        assert [c.startswith("★") for c in text] == [
            h < k for h in range(len(text))
        ]  # heads 0..k-1
    diff = chart(at, "Heads that ran: full model vs")
    assert len(diff["data"][0]["z"]) == len(ks)


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
    for widget in (at.slider(key="budget_s"), at.slider(key="force_k"), at.toggle(key="no_f")):
        assert widget.disabled
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
    dataset = "bbc" if damage == "truncated weights" else "unknown"
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
    assert len(chart(at, "Loss terms")["data"]) == 3
    story = " ".join(all_markdown(at))
    assert "exploration" in story and "exploitation" in story
    assert f"{len(history)} epochs" in story


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
        for label in ("Spearman ρ(s, prediction entropy)", "Spearman ρ(s, loss)")
    ]
    assert len(rhos) == 2 and all(-1 <= r <= 1 for r in rhos)
    assert number(metric(at, "Mean s on the test split")) == pytest.approx(
        cfg["test"]["mean_budget"], abs=0.002
    )
    hist = chart(at, "Mean budget s over")["data"][0]
    assert len(hist["x"]) == n and all(0 < s < 1 for s in hist["x"])
    for title in ("s vs prediction entropy", "s vs loss", "s vs length"):
        assert sum(len(t["x"]) for t in chart(at, title)["data"]) == n
    assert [t["name"] for t in chart(at, "Mean budget s by true class")["data"]] == cfg[
        "label_names"
    ]

    lowest, highest = at.dataframe[0].value, at.dataframe[1].value
    assert lowest["mean_s"].is_monotonic_increasing and highest["mean_s"].is_monotonic_decreasing
    assert lowest["mean_s"].iloc[0] == pytest.approx(min(hist["x"]))
    assert highest["mean_s"].iloc[0] == pytest.approx(max(hist["x"]))
    a, b = int(lowest["index"].iloc[0]), int(highest["index"].iloc[0])
    heads = {t: s for t, s in charts(at).items() if t.endswith("head relevance p")}
    assert list(heads) == [f"#{a}: head relevance p", f"#{b}: head relevance p"]
    for spec in heads.values():
        assert len(spec["data"][0]["z"]) == n_layers

    c = min(set(range(3)) - {a, b})
    at.number_input(key=f"eh_b_{DEFAULT_MODEL}").set_value(c)
    run(at)
    assert [t for t in charts(at) if t.endswith("head relevance p")] == [
        f"#{a}: head relevance p",
        f"#{c}: head relevance p",
    ]


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

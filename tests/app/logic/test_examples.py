"""The per-example tables of the Errors, Easy vs hard, Ablations and Head atlas pages
(app/logic/examples.py), without Streamlit: the table built from an evaluation, its filters,
confusion matrix and extremes, the text search, the models' disagreements, a map selection's
rows and their Explore links, AG News' entity leftovers decoded; the adaptivity figures and
their reading in plain words (with the engine's Spearman ρ they rest on), the k histograms and
k by needed heads, and the per-class reading of difficulty."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.charts.easy_hard import k_by_need, k_histograms
from app.links import explore_link
from app.logic import examples
from app.logic.examples import search_texts
from app.method import Method
from app.settings import Settings
from budgetformer_core.analysis.infer import Evaluation, spearman


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


def test_search_texts():
    texts = ["Football final", "Election news", "football again"]
    assert search_texts(texts, "FOOTBALL") == [0, 2]
    assert search_texts(texts, "  ") == []
    assert search_texts(texts, "football", limit=1) == [0]


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


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)  # ranks, not values
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # dense: s constant
    assert spearman([1, 2], [1, 2]) is None


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


def test_the_class_reading_tells_difficulty_from_class():
    from app.logic.examples import class_reading

    assert class_reading([0.5, 0.3, None, 0.25], 0.41).endswith("follows how hard an input is, not only its class.")
    assert "mostly follows the class" in class_reading([0.05, -0.1, 0.1], 0.41)
    assert "median of 3" in class_reading([0.05, -0.1, 0.1], 0.41)
    assert "neither" in class_reading([0.3, 0.3], 0.05)
    assert class_reading([None], 0.4) == "" and class_reading([0.3], None) == ""

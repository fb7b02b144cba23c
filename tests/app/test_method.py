"""How the pages name a model's method (app/method.py): each method's budget, head choice and
head weights in its own words, in the labels and in Explore's explanation."""

from __future__ import annotations

from app.logic.explore import explanation
from app.method import method_of
from app.settings import Settings
from budgetformer_core.config import ModelConfig


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

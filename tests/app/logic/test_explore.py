"""The Explore page's pure pieces: where a session's text starts, and the widget values a link
to the page sets (no Streamlit run, no model)."""

from __future__ import annotations

from app.links import link_params, link_state, read_link
from app.logic.explore import DEFAULT_TEXT, starting_sample
from app.method import Method
from app.settings import Settings
from app.state import Samples


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

"""The deeper views of "Explore an input", drawn below its results when their switches are on:
which tokens raised or lowered each layer's budget (bba: moved its gates), and one head's
attention on the input.

Not a page (its name starts with "_"): :mod:`app.views.explore` calls each view with its analysis.
The work is done by :mod:`app.live`; the words come from the model's method
(:class:`app.method.Method`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from app.charts.explore import ATTENTION_TOKENS, attention_heatmap
from app.components import md_escape, show_chart
from app.live import explanation as token_attribution
from app.live import head_attention
from app.logic.explore import attention_record, attribution_caption, explain_help, ran_heads_caption
from app.logic.pairs import marked
from budgetformer_core.analysis.report import attribution_html, attribution_legend_html, attribution_scale

if TYPE_CHECKING:
    from app.method import Method
    from app.settings import Settings
    from budgetformer_core.analysis.explain import Explanation
    from budgetformer_core.analysis.infer import Analysis


def why_this_budget(name: str, text: str, settings: Settings, method: Method, a: Analysis,
                    n_heads: int) -> Explanation | None:
    """Per layer, which tokens of ``text`` raised or lowered the budget s (bba: the gate margin)
    of the run ``a`` of model ``name`` under ``settings``, by occlusion: the explanation drawn, or
    None while its switch is off (or it cannot be computed)."""
    words, H, sym = method.description, n_heads, method.symbol
    what = words.attributed_name
    explained = None
    st.subheader(words.explain_title)
    if words.attributes_margin and all(k == H for k in a.k):  # no heads left out: no margin to attribute
        st.info(
            f"Here every layer runs all its heads (k = {H} of {H}): no gate decides anything, so there is no "
            "gate margin for a token to move. Request a smaller b, or force fewer heads, to see which "
            "tokens the gates depend on."
        )
    elif st.toggle(
        words.explain_toggle,
        key="explain_on",
        persist_state="session",
        help=explain_help(method),
    ):
        try:
            with st.spinner("Leaving out one token at a time…"):
                explained = token_attribution(name, text, settings.canonical())
        except ValueError as e:
            st.error(f"The attribution cannot be computed: {md_escape(e)}")
    if explained is not None and explained.fixed:
        st.info(
            f"Here s is set ({md_escape(settings.describe(sym))}), not predicted by f_θ: no token changes "
            "it, so there is nothing to attribute. Pick “learned by f_θ” or “force k heads” to see "
            "which tokens raise or lower s."
        )
    elif explained is not None:
        zmax = attribution_scale(explained)
        st.html(attribution_legend_html(zmax, what))
        for layer, (row, value) in enumerate(zip(explained.budget_attribution, explained.value, strict=True)):
            if words.attributes_margin and explained.k[layer] == H:
                st.markdown(f"**Layer {layer}** · k = {H} of {H}: every head runs, no gate margin to move")
                continue
            st.markdown(
                f"**Layer {layer}** · {words.attributed_symbol} = {value:.3f} · "
                f"k = {explained.k[layer]} of {H}"
            )
            st.html(attribution_html(marked(explained.tokens, explained.segments), row, zmax))  # ² second text
        st.caption(attribution_caption(what, zmax, explained.span))
    return explained


def one_head_attention(name: str, text: str, settings: Settings, a: Analysis, n_layers: int, n_heads: int,
                       tokens: list[str]) -> dict | None:
    """The attention of one head that ran in ``a`` (picked by layer and head) over ``text``'s
    ``tokens``, as the structural path computed it: the map drawn, as the export holds it
    (:func:`app.logic.explore.attention_record`), or None while its switch is off or the head
    picked did not run."""
    H = n_heads
    st.subheader("What the heads that ran looked at")
    if not st.toggle(
        "Show one head's attention on this input",
        key="attention_on",
        persist_state="session",
        help="The attention of one head, as the budgeted (structural) path computed it on this input: "
        "row q is how token q's attention is spread over the tokens.",
    ):
        return None
    h1, h2 = st.columns(2)
    att_layer = h1.selectbox("Layer", range(n_layers), format_func=lambda i: f"layer {i}", key="att_layer")
    ran = a.selected_heads[att_layer]
    if st.session_state.get("att_head") is None:
        st.session_state["att_head"] = ran[0]
    att_head = h2.selectbox(
        "Head",
        range(H),
        format_func=lambda h: f"head {h} · ran ★" if h in ran else f"head {h} · not computed",
        key="att_head",
    )
    st.caption(ran_heads_caption(att_layer, ran, H))
    if att_head not in ran:
        st.info(
            f"Head {att_head} did not run in layer {att_layer} on this input: it was not computed, so "
            "it has no attention to show. Pick a head marked ★."
        )
        return None
    probs = head_attention(name, text, settings.canonical(), att_layer, att_head)  # (T, T)
    shown = tokens if len(tokens) == len(probs) else ["[UNK]"] * len(probs)
    start = 0
    if len(shown) > ATTENTION_TOKENS:
        start = int(
            st.number_input(
                f"First token shown (of {len(shown)}; {ATTENTION_TOKENS} at a time)",
                0, len(shown) - 1, 0, ATTENTION_TOKENS // 2, key="att_start",
            )
        )
    show_chart(
        st,
        attention_heatmap(
            probs, shown, f"Attention of layer {att_layer}, head {att_head} on this input", start
        ),
        key="chart_attention",
    )
    st.caption(
        "Each row is one token's attention over the tokens of the text (it sums to 1), computed by "
        "the heads that ran — the budgeted path itself, not a second dense pass."
    )
    return attention_record(att_layer, att_head, shown, probs)

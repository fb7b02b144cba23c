"""A link to the "Explore an input" page: the query parameters that reopen a view, and what a
link's parameters ask for, checked (no Streamlit here).

A pair of texts goes into a link as its two texts, ``text`` and ``text_pair`` (as ``predict
--json`` names them), so that the link reopens the same pair in Explore's two boxes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.settings import BUDGET_MODES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.method import Method
    from app.settings import Settings
    from budgetformer_core.io.tokenizer import Text

LINK_TEXT_LIMIT = 2000
"""Texts up to this many characters (a pair's two together) go into the page's address; longer
ones do not (a test text goes in by its index)."""

LINK_ABLATIONS = ("no-budget-net", "no-head-scorer", "random-heads")
"""The ablations a link may name (``budget.ABLATIONS``' names)."""

BUDGET_STEPS = [round(0.05 * i, 2) for i in range(1, 21)]
"""The budget slider's values."""

LINK_TEXT_READ = 4 * LINK_TEXT_LIMIT
"""The most characters of a link's ``text`` the page reads (a longer one is cut, with a note)."""


def _link_number(value: str, digits: int) -> int | None:
    """``value`` as a whole number of at most ``digits`` ASCII digits, else None (``int()``
    alone would take "²" from ``isdigit()``'s yes, or spend seconds on 5,000 digits)."""
    return int(value) if re.fullmatch(f"[0-9]{{1,{digits}}}", value) else None


@dataclass(frozen=True)


class LinkView:
    """What a link to the Explore page asks for, checked against the model it opens."""

    text: Text | None = None
    """The text, or a pair of texts (the link's ``text`` and ``text_pair``)."""
    index: int | None = None
    """A test text by its index (instead of ``text``)."""
    budget_mode: str = "learned"
    budget: float = 0.5
    k: int | None = None
    no_budget_net: bool = False
    head_ablation: str | None = None
    seed: int = 0
    why: bool = False
    """The token attribution of the budget ("Why this budget?") is shown."""
    attention: tuple[int, int] | None = None
    """(layer, head) whose attention is shown."""


def link_model(params: Mapping[str, str], models: list[str]) -> tuple[str | None, str | None]:
    """(the model a link names, when it is shipped; a message when it names another)."""
    name = params.get("model")
    if name is None or name in models:
        return name, None
    return None, f"The link names a model that is not here ({shown_value(name)}): showing the default model instead."


def shown_value(value: str, limit: int = 40) -> str:
    """A link's value as a message quotes it: its repr, cut after ``limit`` characters."""
    return repr(value if len(value) <= limit else value[:limit] + "…")


def read_link(
    params: Mapping[str, str], method: Method, n_heads: int, n_texts: int | None, reads_pairs: bool = False
) -> tuple[LinkView, list[str]]:
    """The view a link's query parameters ask for, and a message for each value that was
    unusable (that one falls back to its default; nothing raises).

    Parameters: ``text`` (with ``text_pair``, a pair) or ``index`` (a test text), ``mode``
    (learned / slider / force_k), ``budget`` (the slider's s or b), ``k``, ``ablation`` (one of
    :data:`LINK_ABLATIONS`) and ``seed`` (of random heads). ``n_texts``: test texts available
    (None: none); ``reads_pairs``: the model reads pairs (else a ``text_pair`` is left out, said).
    """
    messages: list[str] = []
    view: dict = {}

    def bad(name: str, why: str) -> None:
        messages.append(f"The link's {name} ({shown_value(params.get(name) or '')}) {why}: using the default instead.")

    if "index" in params:
        index = _link_number(params["index"], 9)
        if n_texts is None:
            bad("index", "needs the test texts, which are not on this machine")
        elif index is None or not 0 <= index < n_texts:
            bad("index", f"is not a test text's index (0–{n_texts - 1})")
        else:
            view["index"] = index
    elif params.get("text"):
        parts = [params["text"], *([params["text_pair"]] if params.get("text_pair") else [])]
        if len(parts) == 2 and not reads_pairs:
            messages.append(f"The link's text_pair ({shown_value(parts.pop())}) is left out: this model reads "
                            "single texts.")
        view["text"] = tuple(p[:LINK_TEXT_READ] for p in parts) if len(parts) == 2 else parts[0][:LINK_TEXT_READ]
        for name, part in zip(("text", "text_pair"), parts):
            if len(part) > LINK_TEXT_READ:
                messages.append(f"The link's {name} has {len(part):,} characters; a link carries at most "
                                f"{LINK_TEXT_READ:,}: only its start is shown.")
    asked = [name for name in ("mode", "budget", "k", "ablation", "seed", "why", "attention") if name in params]
    if not method.budgeted:
        if asked:
            messages.append(f"A dense model has no budget or ablation: the link's {', '.join(asked)} "
                            "are ignored.")
        return LinkView(**view), messages
    mode = params.get("mode", "learned")
    if mode not in BUDGET_MODES:
        bad("mode", f"is not one of {', '.join(BUDGET_MODES)}")
        mode = "learned"
    view["budget_mode"] = mode
    if "budget" in params:
        try:
            budget = float(params["budget"])
        except ValueError:
            budget = float("nan")
        if not 0.05 <= budget <= 1.0:  # NaN fails too
            bad("budget", "is not a number in [0.05, 1]")
        else:
            view["budget"] = min(BUDGET_STEPS, key=lambda step: abs(step - budget))  # the slider's step
    if "k" in params:
        k = _link_number(params["k"], 4)
        if k is None or not 1 <= k <= n_heads:
            bad("k", f"is not a number of heads from 1 to {n_heads}")
        else:
            view["k"] = k
    if "ablation" in params:
        names = params["ablation"].split(",")
        usable = {"no-budget-net": method.has_f, "no-head-scorer": method.has_g, "random-heads": method.has_g}
        if not method.predicts_budget:
            bad("ablation", f"does not apply to a {method.kind} model (it has no f_θ or g_φ)")
        elif any(n not in LINK_ABLATIONS for n in names) or {"no-head-scorer", "random-heads"} <= set(names):
            bad("ablation", f"is not one or two of {', '.join(LINK_ABLATIONS)} (comma-separated)")
        elif not all(usable[n] for n in names):
            bad("ablation", "needs a network this model does not have")
        else:
            view["no_budget_net"] = "no-budget-net" in names
            heads = {"no-head-scorer": "uniform", "random-heads": "random"}
            view["head_ablation"] = next((heads[n] for n in names if n in heads), None)
    if "seed" in params:
        seed = _link_number(params["seed"], 7)
        if seed is not None and seed <= 10**6:
            view["seed"] = seed
        else:
            bad("seed", "is not a whole number from 0 to 1,000,000")
    if "why" in params:
        view["why"] = params["why"] == "1"
    if "attention" in params:
        found = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3})", params["attention"])
        if found is None or int(found.group(2)) >= n_heads:
            bad("attention", f"is not a layer and a head below {n_heads} (e.g. 0.3)")
        else:
            view["attention"] = (int(found.group(1)), int(found.group(2)))
    return LinkView(**view), messages


def link_params(
    model: str,
    text: Text,
    index: int | None,
    settings: Settings,
    method: Method,
    copy: str | None = None,
    why: bool = False,
    attention: tuple[int, int] | None = None,
) -> dict[str, str]:
    """The query parameters of a link that reopens this view (:func:`read_link` reads them):
    the model, the test text's index (with ``copy``, the name of the local copy it comes from,
    :func:`app.local_copy.copy_name`) or the text itself, a pair's two texts as ``text`` and
    ``text_pair`` (when at most :data:`LINK_TEXT_LIMIT` characters), the budget setting and
    ablation that are on, and the deeper views shown (``why``: the budget's token attribution;
    ``attention``: the (layer, head) whose attention is drawn)."""
    params = {"model": model}
    if index is not None:
        params["index"] = str(index)
        if copy:
            params["copy"] = copy
    elif link_length(text) <= LINK_TEXT_LIMIT:
        params.update(zip(("text", "text_pair"), text) if isinstance(text, tuple) else [("text", text)])
    if not method.budgeted:
        return params
    if why:
        params["why"] = "1"
    if attention is not None:
        params["attention"] = f"{attention[0]}.{attention[1]}"
    ablations = ["no-budget-net"] if settings.no_budget_net else []
    if not settings.no_budget_net:
        params["mode"] = settings.budget_mode
        if settings.budget_mode == "slider":
            params["budget"] = f"{settings.budget:g}"
        elif settings.budget_mode == "force_k":
            params["k"] = str(settings.k)
    if settings.head_ablation is not None:
        ablations.append("no-head-scorer" if settings.head_ablation == "uniform" else "random-heads")
    if settings.head_ablation == "random":
        params["seed"] = str(settings.seed)
    if ablations:
        params["ablation"] = ",".join(ablations)
    return params


def explore_link(model: str, index: int, settings: Settings, method: Method, copy: str | None = None) -> str:
    """The relative address that opens test text #``index`` in "Explore an input" (the app's
    default page) with ``settings``: :func:`link_params` as a query string (``copy``: the name of
    the local copy the text comes from, so that a new session reads the same text)."""
    from urllib.parse import urlencode

    return "./?" + urlencode(link_params(model, "", index, settings, method, copy=copy))


def link_state(view: LinkView, n_layers: int) -> dict:
    """The Explore page's widget values (session-state keys) that open ``view`` on a budgeted
    model of ``n_layers`` layers: budget mode and budget, ablations, seed, the deeper views shown,
    the forced k, the ablation's head choice and the attention's (layer, head) when the link names
    them (an attention layer the model does not have is left as it is)."""
    state = dict(
        budget_mode=view.budget_mode, budget_s=view.budget, no_f=view.no_budget_net,
        no_g=view.head_ablation is not None, head_seed=view.seed, explain_on=view.why,
        attention_on=view.attention is not None,
    )
    if view.k is not None:
        state["force_k"] = view.k
    if view.head_ablation is not None:
        state["head_ablation"] = view.head_ablation
    if view.attention is not None and view.attention[0] < n_layers:
        state.update(att_layer=view.attention[0], att_head=view.attention[1])
    return state


def link_length(text: Text) -> int:
    """The characters a text (a pair: both texts) takes in a link."""
    return sum(map(len, text)) if isinstance(text, tuple) else len(text)


def link_caption(sampled: bool, text: Text, explained: bool, budgeted: bool) -> str:
    """The line under the Explore page's export buttons: what the page's address holds (a test
    text when ``sampled``, the text — or both texts of a pair — when it fits in a link, else the
    settings only), and where the token attribution goes once it is shown."""
    pair = isinstance(text, tuple)
    linked = ("test text" if sampled else ("both texts" if pair else "text") if link_length(text) <= LINK_TEXT_LIMIT
              else f"settings (the {'texts are' if pair else 'text is'} too long)")
    return (
        f"The page's address holds this view (model, {linked}, budget and ablation): copy it from the "
        "address bar to share it."
        + ("" if explained or not budgeted else " The export holds the token attribution once shown above.")
    )

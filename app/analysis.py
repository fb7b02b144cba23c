"""What the "Explore an input" page computes, as plain functions (no Streamlit here).

The page reads its widgets into a :class:`Settings`, and this module turns that into the model
runs it shows: the full model's analysis of the text, the analysis under the chosen override or
ablation, the measured single-thread latency of both execution paths, the comparison rows and the
exportable record. Keeping it free of ``st.*`` lets the tests call it directly and lets
``app/state.py`` cache it. The other pages' logic lives beside it: :mod:`app.examples`
(per-example tables), :mod:`app.results` (sweeps and ablations), :mod:`app.history` (training
dynamics).

torch and the core are imported inside the functions that need them: importing them takes
seconds, and the page draws its title, input and controls before it first needs a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from app.cards import Card
from budgetformer_core.report import (  # noqa: F401  (the Explore page draws with them)
    attribution_html,
    attribution_legend_html,
    attribution_scale,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from app.speed import LiveSpeed
    from budgetformer_core.budget import Control
    from budgetformer_core.checkpoint import Checkpoint
    from budgetformer_core.config import ModelConfig
    from budgetformer_core.explain import Explanation
    from budgetformer_core.infer import Analysis

BUDGET_MODES = ("learned", "slider", "force_k")
"""``learned``: s from f_θ; ``slider``: s from the slider for every layer; ``force_k``: k heads."""

HEAD_ABLATIONS = ("random", "uniform")


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class PreparedInput:
    """The text as the page will analyse it."""

    text: str
    """At most ``limit`` characters."""
    n_chars: int
    """Length of the text as given."""
    limit: int
    """The engine's limit, :data:`budgetformer_core.infer.MAX_CHARS`."""

    @property
    def cut(self) -> bool:
        """True when the given text was longer than ``limit`` and was cut."""
        return self.n_chars > len(self.text)


def prepare_text(text: str | None) -> PreparedInput:
    """Cut ``text`` to the engine's limit on input length (``None`` counts as empty).

    The CLI refuses a longer text; the page keeps its start and says so.
    """
    from budgetformer_core.infer import MAX_CHARS

    text = text or ""
    return PreparedInput(text[:MAX_CHARS], len(text), MAX_CHARS)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What the page's controls ask for; hashable so results can be cached by it."""

    budget_mode: str = "learned"
    """One of :data:`BUDGET_MODES`."""
    budget: float = 0.5
    """s used in ``slider`` mode."""
    k: int = 2
    """Heads per layer in ``force_k`` mode."""
    no_budget_net: bool = False
    """Ablation "no f_θ" (``budget.ABLATIONS``): a constant s in every layer and for every input,
    the model's mean s on its validation split."""
    head_ablation: str | None = None
    """Heads chosen without g_φ: ``uniform`` (ablation "no g_φ": the first k heads) or
    ``random`` (ablation "random heads": k heads drawn at random)."""
    seed: int = 0
    """Seed of the random head choice."""

    def __post_init__(self) -> None:
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {BUDGET_MODES}, got {self.budget_mode!r}")
        if self.head_ablation not in (None, *HEAD_ABLATIONS):
            raise ValueError(
                f"head_ablation must be random, uniform or None, got {self.head_ablation!r}"
            )

    @property
    def is_full_model(self) -> bool:
        """True when nothing overrides the model's own f_θ and g_φ."""
        return (
            self.budget_mode == "learned" and not self.no_budget_net and self.head_ablation is None
        )

    def canonical(self) -> Settings:
        """The same setting with the fields it does not use reset (one cache entry per setting)."""
        default = Settings()
        return Settings(
            budget_mode="learned" if self.no_budget_net else self.budget_mode,
            budget=self.budget
            if self.budget_mode == "slider" and not self.no_budget_net
            else default.budget,
            k=self.k if self.budget_mode == "force_k" and not self.no_budget_net else default.k,
            no_budget_net=self.no_budget_net,
            head_ablation=self.head_ablation,
            seed=self.seed if self.head_ablation == "random" else default.seed,
        )

    def in_effect(self, symbol: str = "s") -> dict:
        """The fields that decide this run, as JSON-ready data: a greyed-out control's value is
        left out (the budget outside ``slider`` mode, k outside ``force_k``, the seed without
        random heads); the budget under its method's name (``symbol``: s, or bba's b)."""
        used = self.canonical()
        out: dict = {"budget_mode": used.budget_mode, "no_budget_net": used.no_budget_net,
                     "head_ablation": used.head_ablation}
        if used.budget_mode == "slider":
            out[f"budget_{symbol}"] = used.budget
        elif used.budget_mode == "force_k":
            out["k"] = used.k
        if used.head_ablation == "random":
            out["seed"] = used.seed
        return out | {"description": used.describe(symbol)}

    def describe(self, symbol: str = "s") -> str:
        """A short human-readable name of this setting (``symbol``: the budget's name, s or b)."""
        parts = []
        if self.no_budget_net:
            parts.append("no f_θ (s = validation mean)")
        elif self.budget_mode == "slider":
            parts.append(f"{symbol} = {self.budget:.2f}")
        elif self.budget_mode == "force_k":
            parts.append(f"k = {self.k}")
        if self.head_ablation:
            parts.append(
                "no g_φ (first k heads)" if self.head_ablation == "uniform" else f"random heads (seed {self.seed})"
            )
        return ", ".join(parts) or "full model"


def control_for(settings: Settings, validation_budget: float) -> Control | None:
    """The :class:`Control` implementing ``settings`` (``None`` for the full model).

    ``validation_budget`` is the model's mean s on its validation split, the "no f_θ" constant
    (``Checkpoint.validation_budget``), as in ``budgetformer eval --ablation no-budget-net``.
    """
    from budgetformer_core.budget import Control

    if settings.is_full_model:
        return None
    budget = k = None
    if settings.no_budget_net:
        budget = min(1.0, max(validation_budget, 1e-3))
    elif settings.budget_mode == "slider":
        budget = settings.budget
    elif settings.budget_mode == "force_k":
        k = settings.k
    return Control(budget=budget, k=k, head_choice=settings.head_ablation, seed=settings.seed)


def is_budgeted(ckpt: Checkpoint) -> bool:
    """False for a dense checkpoint (no budget, no head choice)."""
    return not method_of(ckpt.config).is_dense


def run_analysis(ckpt: Checkpoint, text: str, control: Control | None = None) -> Analysis:
    """One input through :func:`budgetformer_core.infer.analyze` (ValueError for a bad input).

    Runs on one thread: at batch size 1 more threads barely help, and on a busy machine their
    synchronisation can make a 5 ms forward pass take hundreds.
    """
    from budgetformer_core.infer import analyze
    from budgetformer_core.timing import torch_threads

    with torch_threads(1):
        [a] = analyze(ckpt, [text], control if is_budgeted(ckpt) else None)
    return a


def tokens_read(ckpt: Checkpoint, text: str) -> list[str]:
    """The tokens the model reads of ``text`` (its first ``max_len``), as strings."""
    from budgetformer_core.tokenizer import reading_prefix

    max_len = ckpt.config.max_len
    return ckpt.tokenizer.encode(reading_prefix(ckpt.tokenizer, text, max_len)).tokens[:max_len]


# --------------------------------------------------------------------------- why this budget, what the heads saw


def explain_input(ckpt: Checkpoint, text: str, control: Control | None = None) -> Explanation:
    """:func:`budgetformer_core.explain.explain` of one input on one thread (as
    :func:`run_analysis`): per layer, what each token did to s (bba: the gate margin)."""
    from budgetformer_core.explain import explain
    from budgetformer_core.timing import torch_threads

    with torch_threads(1):
        [e] = explain(ckpt, [text], control)
    return e


def head_attention(ckpt: Checkpoint, text: str, control: Control | None, layer: int) -> np.ndarray:
    """(H, T, T) the attention of each head of ``layer`` on ``text`` (query × key), as the
    structural path computed it (``capture_attention``); NaN for the heads that did not run."""
    import torch

    from budgetformer_core.timing import torch_threads
    from budgetformer_core.tokenizer import encode_batch, reading_prefix

    max_len = ckpt.config.max_len
    batch = encode_batch(ckpt.tokenizer, [reading_prefix(ckpt.tokenizer, text, max_len)], max_len)
    control = control if is_budgeted(ckpt) else None
    with torch.no_grad(), torch_threads(1):
        out = ckpt.model.eval()(batch.ids, batch.mask, control=control, capture_attention=True)
    return out.layers[layer].attention[0].numpy()  # (1, H, T, T) -> (H, T, T)


def offline_report(ckpt: Checkpoint, text: str, settings: Settings, name: str, symbol: str = "s") -> str:
    """:func:`budgetformer_core.report.build_report` of ``text`` under ``settings`` (what the
    Explore page shows): one self-contained HTML file. Runs on one thread, as :func:`run_analysis`."""
    from budgetformer_core.report import build_report
    from budgetformer_core.timing import torch_threads

    control = control_for(settings, ckpt.validation_budget) if is_budgeted(ckpt) else None
    with torch_threads(1):
        return build_report(ckpt, text, control, name, settings.describe(symbol))


def explanation_record(e: Explanation) -> dict:
    """The exported part of an explanation: tokens, what is attributed, the numbers per layer."""
    return {
        "method": "occlusion (leave one token out)",
        "attributed": e.attributed,
        "tokens": e.tokens,
        "value": e.value,
        "budget_attribution": e.budget_attribution,
        "span": e.span,
        "fixed": e.fixed,
    }


# --------------------------------------------------------------------------- a link to the view

LINK_TEXT_LIMIT = 2000
"""Texts up to this many characters go into the page's address; longer ones do not (a test
text goes in by its index)."""

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

    text: str | None = None
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
    return None, f"The link names a model that is not here ({name!r}): showing the default model instead."


def read_link(
    params: Mapping[str, str], method: Method, n_heads: int, n_texts: int | None
) -> tuple[LinkView, list[str]]:
    """The view a link's query parameters ask for, and a message for each value that was
    unusable (that one falls back to its default; nothing raises).

    Parameters: ``text`` or ``index`` (a test text), ``mode`` (learned / slider / force_k),
    ``budget`` (the slider's s or b), ``k``, ``ablation`` (one of :data:`LINK_ABLATIONS`) and
    ``seed`` (of random heads). ``n_texts``: test texts available (None: none).
    """
    messages: list[str] = []
    view: dict = {}

    def bad(name: str, why: str) -> None:
        value = params.get(name) or ""
        value = value if len(value) <= 40 else value[:40] + "…"
        messages.append(f"The link's {name} ({value!r}) {why}: using the default instead.")

    if "index" in params:
        index = _link_number(params["index"], 9)
        if n_texts is None:
            bad("index", "needs the test texts, which are not on this machine")
        elif index is None or not 0 <= index < n_texts:
            bad("index", f"is not a test text's index (0–{n_texts - 1})")
        else:
            view["index"] = index
    elif params.get("text"):
        view["text"] = params["text"][:LINK_TEXT_READ]
        if len(params["text"]) > LINK_TEXT_READ:
            messages.append(f"The link's text has {len(params['text']):,} characters; a link carries at most "
                            f"{LINK_TEXT_READ:,}: only its start is shown.")
    asked = [name for name in ("mode", "budget", "k", "ablation", "seed", "why", "attention") if name in params]
    if method.is_dense:
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
        if method.is_bba:
            bad("ablation", "does not apply to a bba model (it has no f_θ or g_φ)")
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
    text: str,
    index: int | None,
    settings: Settings,
    method: Method,
    copy: str | None = None,
    why: bool = False,
    attention: tuple[int, int] | None = None,
) -> dict[str, str]:
    """The query parameters of a link that reopens this view (:func:`read_link` reads them):
    the model, the test text's index (with ``copy``, the name of the local copy it comes from,
    :func:`app.local_copy.copy_name`) or the text itself (when it is at most :data:`LINK_TEXT_LIMIT`
    characters), the budget setting and ablation that are on, and the deeper views shown (``why``:
    the budget's token attribution; ``attention``: the (layer, head) whose attention is drawn)."""
    params = {"model": model}
    if index is not None:
        params["index"] = str(index)
        if copy:
            params["copy"] = copy
    elif len(text) <= LINK_TEXT_LIMIT:
        params["text"] = text
    if method.is_dense:
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


# --------------------------------------------------------------------------- the method's words


@dataclass(frozen=True)
class Method:
    """How the pages name a model's budget, head choice and head weights: each method in its own
    words (BudgetFormer: s from f_θ, relevance p from g_φ; bba: a requested budget b, gate
    scores z, weights 1 or 0)."""

    kind: str = "budgetformer"
    """``dense``, ``budgetformer`` or ``bba`` (the config's ``variant``)."""
    has_f: bool = True
    """A budget network f_θ predicts s (BudgetFormer with ``use_budget_net``)."""
    has_g: bool = True
    """A head scorer g_φ rates the heads (BudgetFormer with ``head_choice="learned"``)."""
    gated: bool = False
    """w = 1 on the heads that run (the adaptive recipe, ``head_weighting="gated"``), not s·H·p."""
    head_choice: str = "learned"
    default_budget: float = 0.5
    """bba: the budget b run when none is requested."""

    @property
    def is_dense(self) -> bool:
        """Every head runs on every input: no budget, no head choice."""
        return self.kind == "dense"

    @property
    def is_bba(self) -> bool:
        """A requested budget b gates nested head sets (no f_θ, no g_φ)."""
        return self.kind == "bba"

    @property
    def is_budgetformer(self) -> bool:
        """f_θ's budget s and g_φ's relevance p choose the heads (or their ablations)."""
        return self.kind == "budgetformer"

    @property
    def symbol(self) -> str:
        """The budget's name: b (bba), s (the others)."""
        return "b" if self.is_bba else "s"

    @property
    def budget_name(self) -> str:
        return "Requested budget b" if self.is_bba else "Budget s"

    @property
    def key_line(self) -> str:
        """One line that names the page's symbols (markdown), for the first screen."""
        if self.is_bba:
            return ("**Key** · b: the budget you request (share of heads) · z: the gates' score of each head "
                    "(softmax(z) on the map) · ★: the head ran · grey: not computed")
        if self.is_dense:
            return "**Key** · w: a head's weight (1: every head runs in a dense model)"
        return ("**Key** · s: the budget, the share of heads a layer runs, from the budget network f_θ · "
                "p: each head's relevance, from the head scorer g_φ · ★: the head ran (the top k = ⌊s·H⌋ "
                "by p) · grey: not computed")

    @property
    def own_budget(self) -> str:
        """Where the budget comes from when nothing overrides it."""
        if self.is_bba:
            return f"the model's default b = {self.default_budget:g}"
        return "predicted by f_θ" if self.has_f else "fixed by its config (no f_θ)"

    @property
    def mode_labels(self) -> dict[str, str]:
        """Labels of the budget modes of :data:`BUDGET_MODES`."""
        if self.is_bba:
            return {"learned": "the model's default b", "slider": "request b with the slider",
                    "force_k": "force k heads"}
        return {"learned": "learned by f_θ" if self.has_f else "fixed by its config (no f_θ)",
                "slider": "set s with the slider", "force_k": "force k heads"}

    def relevance_title(self, head_ablation: str | None = None) -> str:
        if self.is_bba:
            return "Gate scores z (softmax over the heads)"
        if head_ablation is not None:
            return f"Head relevance p (g_φ off: {head_ablation} heads)"
        return "Head relevance p (g_φ)" if self.has_g else f"Head relevance p (no g_φ: {self.head_choice} heads)"

    def chosen_by_relevance(self, head_ablation: str | None = None) -> bool:
        """The heads that run are the top k by the relevance map (bba: by z; a BudgetFormer with
        g_φ in use), so that heads can be tied at the cut."""
        return self.kind == "bba" or (self.kind == "budgetformer" and self.has_g and head_ablation is None)

    @property
    def relevance_symbol(self) -> str:
        return "softmax(z)" if self.is_bba else "p"

    @property
    def weight_title(self) -> str:
        if self.is_dense:
            return "Dense: every head runs, weight 1"
        if self.is_bba:
            return "Head weight w: 1 on the heads that ran, 0 elsewhere"
        return "Head weight w = 1 on the heads that ran" if self.gated else "Head weight w = s·H·p"

    @property
    def weight_note(self) -> str:
        """One sentence on what w is (the heads that ran are scaled by it)."""
        if self.is_bba:
            return "Each head that runs has weight **w = 1**, the others 0: the gates only choose."
        if self.gated:
            return ("Each head that runs has weight **w = 1** (the adaptive recipe: soft gates in "
                    "training, so s decides *which* heads contribute, not how loud they are).")
        return "Each head that runs is scaled by its **weight w = s·H·p**."


def method_of(cfg: ModelConfig) -> Method:
    """The :class:`Method` of a checkpoint's model config, as the engine reads config.json
    (:func:`budgetformer_core.config.model_config_from_dict`: its defaults, its checks)."""
    method = Method(kind=cfg.variant, head_choice=cfg.head_choice, default_budget=cfg.default_budget)
    if not method.is_budgetformer:
        return replace(method, has_f=False, has_g=False)
    return replace(method, has_f=cfg.use_budget_net, has_g=cfg.head_choice == "learned",
                   gated=cfg.head_weighting == "gated")


LATENCY_NOTE = (
    "- Latency is measured live on this server with one CPU thread, so it varies from run to run;\n"
    "  on very short texts the bookkeeping of choosing heads can cost more than the heads it saves."
)


def explanation(method: Method, n_heads: int) -> str:
    """The "What am I looking at?" text of the Explore page, in the model's own terms."""
    H = n_heads
    if method.is_dense:
        body = (
            f"- A **dense** model: every layer runs all of its {H} heads on every input, each with "
            "weight 1. There is no budget and no head choice; it is the reference the budgeted "
            "models' FLOPs and latency are compared with."
        )
    elif method.is_bba:
        body = (
            "- **Budgeted attention allocation (bba)**: you request a **budget b** ∈ (0, 1], the "
            f"share of each layer's {H} heads to run; the layer runs **k = ⌊b·{H}⌋** heads "
            "(at least 1).\n"
            "- A small gate network reads a summary of the input and gives every head a **gate "
            "score z**; the k heads with the highest z run (★), the others are not computed at "
            "all. The heads chosen for a smaller b are among those for a larger one (nested).\n"
            "- " + method.weight_note + "\n"
            f"- With no b requested the model runs its default b = {method.default_budget:g}."
        )
    else:
        f_line = (
            "- **f_θ** predicts the **budget s** ∈ (0, 1): the share of the layer's "
            f"{H} heads this input gets; the layer runs **k = ⌊s·{H}⌋** heads (at least 1)."
            if method.has_f
            else f"- This model has no f_θ: its **budget s** is fixed by its config; the layer "
            f"runs **k = ⌊s·{H}⌋** heads (at least 1)."
        )
        g_line = (
            "- **g_φ** scores the heads: the **relevance p** (sums to 1 per layer). The k most "
            "relevant heads run (★); the others are not computed at all — that is where the FLOPs "
            "and time are saved."
            if method.has_g
            else f"- This model has no g_φ: its heads are chosen as {method.head_choice} "
            "(p is uniform); the heads not chosen are not computed at all."
        )
        body = (
            "- In every layer, small networks look at a summary of the input (the mean of its "
            "token vectors).\n"
            + f_line + "\n" + g_line + "\n- " + method.weight_note + "\n"
            "- **Ablations**: *no f_θ* fixes s (at the model's mean s on its validation split) "
            "instead of predicting it per layer; *no g_φ* picks the heads at random or always the "
            "first ones instead of by relevance."
        )
    return body + "\n" + LATENCY_NOTE


def same_run(full: Analysis, current: Analysis) -> bool:
    """True when a setting ran exactly what the full model runs (e.g. bba at its default b):
    same budget, same heads, same probabilities."""
    return (
        current.selected_heads == full.selected_heads
        and all(abs(a - b) < 1e-6 for a, b in zip(current.budget, full.budget, strict=True))
        and all(abs(a - b) < 1e-6 for a, b in zip(current.probs, full.probs, strict=True))
    )


def unknown_share(tokens: list[str]) -> float:
    """The share of ``tokens`` that are ``[UNK]`` (words outside the model's vocabulary)."""
    from budgetformer_core.tokenizer import UNK

    return sum(t == UNK for t in tokens) / len(tokens) if tokens else 0.0


UNKNOWN_WARN = 0.3
"""Above this share of unknown tokens the page warns that the text is not what the model knows."""


def bba_dynamics_story(frame, train_cfg: dict, model_cfg: ModelConfig) -> str:
    """What a bba model's training history shows (markdown, our own words and numbers only).

    bba trains on the task loss alone (no budget loss, no entropy term, no β(t)): every batch
    requests a budget b, drawn uniformly in [budget_min, 1] (or the fixed ``train_budget``); the
    heads are weighted by soft gates sigmoid((z − threshold) / T) on all heads until
    ``structural_from`` of training, then only the ⌊b·H⌋ heads its gates rank highest run
    (hard-gate adaptation). Validation runs at the model's default b.
    """
    import math

    fixed = train_cfg.get("train_budget") or 0
    b_min = train_cfg.get("budget_min", 0.1)
    drawn = (
        f"every batch was trained at the fixed budget b = {fixed:g}"
        if fixed
        else f"every batch requested its own budget b, drawn uniformly in [{b_min:g}, 1]"
    )
    switch = train_cfg.get("structural_from", 0.7)
    parts = [
        f"A **bba** model learns on the task loss alone (no budget loss, no entropy term): {drawn}. "
        f"For the first {switch:.0%} of training every head runs, weighted by a **soft gate** "
        f"sigmoid((z − threshold) / T) of its gate score z (T = {model_cfg.gate_temperature:g}); "
        "after that only the ⌊b·H⌋ heads its gates rank highest run (**hard-gate adaptation**), "
        "as at inference."
    ]
    if train_cfg.get("freeze_gates"):
        parts.append("Its gate scores were kept fixed (post-hoc ranking, then recovery).")
    facts = []
    acc = frame["val_accuracy"].to_numpy() if "val_accuracy" in frame else []
    acc = [a for a in acc if math.isfinite(a)]
    if len(acc) >= 2:
        facts.append(f"the validation accuracy went from {acc[0]:.1%} to {acc[-1]:.1%}")
    heads = [h for h in frame.get("val_mean_heads_fraction", []) if math.isfinite(h)]
    if heads:
        facts.append(
            f"validation ran at the default b = {model_cfg.default_budget:g}, "
            f"{heads[-1]:.0%} of the heads"
        )
    if facts:
        parts.append("In this run " + "; ".join(facts) + ".")
    return " ".join(parts)


# --------------------------------------------------------------------------- cards

INLINE_LAYERS = 3
"""Layers whose values a metric card lists one by one ("0.43 / 0.36"); a deeper model's card
shows their range, the list in its help (the per-layer chart below has them too)."""


def per_layer_value(values: list[str]) -> tuple[str, str | None]:
    """A metric card's value for one formatted number per layer, and its help: "a / b" up to
    :data:`INLINE_LAYERS` layers, else "lo–hi" (one value when all are equal) with the whole
    list, "Per layer: a / b / …", as the help."""
    joined = " / ".join(values)
    if len(values) <= INLINE_LAYERS:
        return joined, None
    lo, hi = min(values, key=float), max(values, key=float)
    return (lo if lo == hi else f"{lo}–{hi}"), f"Per layer: {joined}"


def latency_card(timing: LiveSpeed | None, precomputed: tuple | None = None) -> Card:
    """The latency of one run, with its speed-up against the dense reference timed in the same
    rounds and the precomputed one at that budget (:func:`app.speed.precomputed_point`) beside it."""
    from app.speed import HOW, speed_note

    if timing is None:
        return Card("Latency (1 thread)", "—", "not measured")
    ref = timing.reference or "no dense reference on this machine"
    dense = "" if timing.dense is None else (
        f" and {ref} in the same rounds ({timing.dense.ms:.2f} ms, IQR {timing.dense.iqr_ms:.2f} ms); speed-up = "
        f"{ref}'s latency / this latency ({HOW}, batch 1)")
    return Card(
        "Latency (1 thread)",
        f"{timing.latency.ms:.2f} ms",
        speed_note(timing, precomputed),
        f"Median over interleaved rounds of single-thread forward passes of this input at this setting "
        f"(IQR {timing.latency.iqr_ms:.2f} ms){dense}, with the engine's timer (the CPU time of one "
        "thread, as sweeps.csv's latencies: waiting for a core on a busy server is not counted). The "
        "precomputed speed-up is sweeps.csv's at the nearest budget, on the test texts.",
    )


def metric_cards(
    a: Analysis, timing: LiveSpeed | None, settings: Settings, n_heads: int, method: Method | None = None,
    precomputed: tuple | None = None,
) -> list[Card]:
    """Prediction, budget (s, or bba's b), heads run, FLOPs and latency of one analysis, formatted
    (``precomputed``: the sweeps.csv row at this setting and where it is, for the latency card)."""
    method = method or Method()
    dense = a.k == [n_heads] * len(a.k) and a.flops == a.dense_flops
    if settings.no_budget_net:
        s_note = "fixed (no f_θ)"
    elif settings.budget_mode == "slider":
        s_note = f"requested: b = {settings.budget:.2f}" if method.is_bba else "set by the slider"
    elif method.is_dense or dense:
        s_note = "dense: every head"
    else:
        s_note = method.own_budget
    latency = latency_card(timing, precomputed)
    budget, budget_help = per_layer_value([f"{x:.2f}" for x in a.budget])
    if settings.budget_mode == "force_k" and not settings.no_budget_net and not method.is_dense:
        # k is set, so the budget decides nothing: no number that reads as if it did
        budget, s_note = "not in use", f"k = {settings.k} forced"
        budget_help = (f"With k forced every layer runs {settings.k} heads: the budget "
                       f"{method.symbol} does not decide how many.")
    heads, heads_help = per_layer_value([str(x) for x in a.k])
    return [
        Card("Prediction", a.label, f"{max(a.probs):.1%} confident"),
        Card(method.budget_name + " per layer", budget, s_note, budget_help),
        Card("Heads run per layer", heads, f"of {n_heads} per layer", heads_help),
        Card(
            "FLOPs vs dense",
            f"{flops_fraction(a):.0%}",
            f"{a.flops / 1e6:.2f} of {a.dense_flops / 1e6:.2f} MFLOPs",
        ),
        latency,
    ]


# --------------------------------------------------------------------------- comparison


def flops_fraction(a: Analysis) -> float:
    return a.flops / a.dense_flops


def comparison_rows(
    full: Analysis, current: Analysis, label: str, symbol: str = "s"
) -> list[dict[str, str]]:
    """Rows "what / full model / <label>" contrasting two analyses of the same input.

    The prediction and its confidence are two rows, so that "changed" says which of them moved.
    """

    def heads(a: Analysis) -> str:
        return " | ".join(",".join(str(h) for h in sel) for sel in a.selected_heads)

    def fmt(a: Analysis) -> dict[str, str]:
        return {
            "prediction": a.label,
            "confidence": f"{max(a.probs):.1%}",
            f"budget {symbol} per layer": " / ".join(f"{s:.2f}" for s in a.budget),
            "heads run per layer (k)": " / ".join(str(k) for k in a.k),
            "which heads ran (layer | layer)": heads(a),
            "FLOPs vs dense": f"{flops_fraction(a):.1%}",
        }

    f, c = fmt(full), fmt(current)
    return [
        {"": key, "full model": f[key], label: c[key], "changed": "yes" if f[key] != c[key] else ""}
        for key in f
    ]


def probability_rows(label_names: list[str], probs: list[float]) -> list[dict[str, object]]:
    return [
        {"class": name, "probability": round(float(p), 6)}
        for name, p in zip(label_names, probs, strict=True)
    ]


# --------------------------------------------------------------------------- export


def analysis_record(a: Analysis) -> dict:
    """An :class:`Analysis` as JSON-ready data, without the (separately stored) text."""
    d = a.to_dict()
    d.pop("text", None)
    return d


def export_record(
    *,
    prepared: PreparedInput,
    checkpoint_name: str,
    checkpoint_path: str,
    checkpoint_sha256: str,
    label_names: list[str],
    settings: Settings,
    control: dict | None,
    current: Analysis,
    full: Analysis,
    timing: LiveSpeed | None,
    tokens: list[str] | None = None,
    explanation: Explanation | None = None,
    symbol: str = "s",
    source: dict | None = None,
    attention: dict | None = None,
) -> dict:
    """Everything needed to reproduce and judge one analysis, as JSON-ready data: with the
    tokens the model read, only the settings in effect (:meth:`Settings.in_effect`; the budget
    named ``symbol``), where the text comes from (``source``: dataset, test index and true label;
    None for a typed text), the token attribution of the budget when it was computed, and the
    attention map when one is shown (``attention``: layer, head, tokens and the (T, T) rows)."""
    from budgetformer_core.timing import machine_info

    return {
        "source": source,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "input": {
            "text": prepared.text,
            "n_chars": prepared.n_chars,
            "cut_to_chars": prepared.limit if prepared.cut else None,
            "n_tokens_read": current.n_tokens,
            "tokens": tokens,
            "truncated": current.truncated or prepared.cut,
        },
        "checkpoint": {
            "name": checkpoint_name,
            "path": checkpoint_path,
            "model_sha256": checkpoint_sha256,
        },
        "label_names": label_names,
        "settings": settings.in_effect(symbol),
        "control": control,
        "truncated": current.truncated or prepared.cut,
        "analysis": analysis_record(current),
        "full_model": analysis_record(full),
        "timing": None if timing is None else timing.to_dict(),
        "explanation": None if explanation is None else explanation_record(explanation),
        "attention": attention,
        "machine": machine_info(1).to_dict(),
    }


def search_texts(texts: list[str], query: str, limit: int = 50) -> list[int]:
    """Indices of the texts containing ``query`` (case-insensitive), at most ``limit``."""
    q = query.strip().lower()
    if not q:
        return []
    return [i for i, t in enumerate(texts) if q in t.lower()][:limit]




# --------------------------------------------------------------------------- side by side


def _heads(heads) -> str:
    return "{" + ",".join(str(h) for h in sorted(heads)) + "}"


def side_differences(
    a: Analysis, b: Analysis, method_a: Method, method_b: Method, names: tuple[str, str] = ("A", "B")
) -> list[str]:
    """What differs between two analyses shown side by side, a line each (markdown-free): the
    prediction, then per layer k, the budget (each side's own: s, or bba's b; none for dense) and
    the heads only one side ran ("layer 1: k 3 vs 5; heads {1,2} only in A")."""
    na, nb = names
    conf_a, conf_b = max(a.probs), max(b.probs)
    if a.label == b.label:
        lines = [f"same prediction: {a.label} ({conf_a:.1%} in {na}, {conf_b:.1%} in {nb})"]
    else:
        lines = [f"prediction: {a.label} ({conf_a:.1%}) in {na}, {b.label} ({conf_b:.1%}) in {nb}"]

    def budget(m: Method, x: float) -> str | None:
        return None if m.is_dense else f"{m.symbol} {x:.2f}"

    for layer in range(max(len(a.k), len(b.k))):
        if layer >= len(a.k) or layer >= len(b.k):
            lines.append(f"layer {layer}: only {na if layer < len(a.k) else nb} has it")
            continue
        parts = [f"k {a.k[layer]} vs {b.k[layer]}" if a.k[layer] != b.k[layer] else f"k {a.k[layer]} in both"]
        ba, bb = budget(method_a, a.budget[layer]), budget(method_b, b.budget[layer])
        if (ba or bb) and ba != bb:
            parts.append(f"{ba or 'no budget'} vs {bb or 'no budget'}")
        sa, sb = set(a.selected_heads[layer]), set(b.selected_heads[layer])
        if sa == sb:
            parts.append(f"the same heads {_heads(sa)}")
        else:
            parts += [f"heads {_heads(s)} only in {n}" for s, n in ((sa - sb, na), (sb - sa, nb)) if s]
        lines.append(f"layer {layer}: " + "; ".join(parts))
    return lines


def side_cards(a: Analysis, settings: Settings, n_heads: int, method: Method, side: str) -> list[Card]:
    """The headline numbers of one side (:func:`metric_cards` without latency, labelled with the
    side; a dense model has no budget card: it has no budget). For bba the budget card reads
    "Budget b per layer" (its note says where b comes from): "Requested budget b per layer" does
    not fit half a page."""
    cards = metric_cards(a, None, settings, n_heads, method)[:4]
    if method.is_dense:
        cards = [c for c in cards if not c.label.startswith(method.budget_name)]
    short = {method.budget_name + " per layer": f"Budget {method.symbol} per layer"}
    return [Card(f"{side} · {short.get(c.label, c.label)}", c.value, c.note, c.help) for c in cards]


# --------------------------------------------------------------------------- batch

BATCH_MAX_MB = 2
"""The largest file the batch page takes, in MiB: the server's limit (``server.maxUploadSize`` in
.streamlit/config.toml: a larger upload is refused before it is buffered) and its upload widget's,
which counts a MB as 10^6 bytes (2^20 on Windows)."""
BATCH_MAX_BYTES = BATCH_MAX_MB * 2**20
"""The same limit in bytes: the largest file the batch page reads."""
BATCH_MAX_ROWS = 500
"""The most texts the batch page classifies from one file."""


def true_label(value: str | None, label_names: list[str]) -> str | None:
    """A file's ``label`` cell as one of the model's classes: its name (any case) or its index;
    None when it names none of them."""
    if value is None:
        return None
    lowered = {n.lower(): n for n in label_names}
    if value.lower() in lowered:
        return lowered[value.lower()]
    return label_names[int(value)] if value.isdigit() and int(value) < len(label_names) else None


def batch_table(predictions: list, symbol: str = "s", labels: dict[int, str] | None = None,
                label_names: list[str] | None = None):
    """A DataFrame, a row per input of :func:`budgetformer_core.infer.predict_rows`: its number, the text,
    why it was not classified (``error``, "" when it was), prediction, confidence, per layer the
    budget (``symbol``: s, or bba's b), k and the heads that ran, tokens read and FLOPs vs dense.
    With ``labels`` (a file's label per row number, :func:`budgetformer_core.inputs.read_labels`)
    it has the true ``label`` (one of ``label_names``, or "" when the cell names no class) and
    whether the prediction is ``correct``."""
    import pandas as pd

    rows = []
    for p in predictions:
        row = {"row": p.line, "text": p.text, "error": p.error or ""}
        if labels:
            row["label"] = true_label(labels.get(p.line), label_names or []) or ""
        if p.row is not None:
            r = p.row
            row |= {"prediction": r["label"], "confidence": max(r["probs"].values())}
            for layer, (s, k, heads) in enumerate(zip(r["budget"], r["k"], r["selected_heads"], strict=True)):
                row |= {f"{symbol}{layer}": s, f"k{layer}": k, f"heads{layer}": " ".join(map(str, heads))}
            row |= {"tokens": r["n_tokens"], "truncated": r["truncated"],
                    "flops_vs_dense": r["flops"] / r["dense_flops"]}
            if labels and row["label"]:
                row["correct"] = row["label"] == r["label"]
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()] + ["tokens"]:
        if column in table:  # whole numbers, blank where a row has none
            table[column] = table[column].astype("Int64")
    n_layers = max((len(p.row["k"]) for p in predictions if p.row is not None), default=0)
    layers = [c for layer in range(n_layers) for c in (f"{symbol}{layer}", f"k{layer}", f"heads{layer}")]
    order = ["row", "text", "error", "label", "prediction", "correct", "confidence", *layers, "tokens", "truncated",
             "flops_vs_dense"]
    return table[[c for c in order if c in table.columns]]


def batch_accuracy(table, label_names: list[str]) -> tuple[float, int, list[list[int]]] | None:
    """(accuracy, rows judged, confusion counts true × predicted in ``label_names`` order) of the
    rows of :func:`batch_table` that have a true label and a prediction; None when none has."""
    if "correct" not in table:
        return None
    judged = table[table["correct"].notna()]
    if judged.empty:
        return None
    index = {n: i for i, n in enumerate(label_names)}
    matrix = [[0] * len(label_names) for _ in label_names]
    for true, predicted in zip(judged["label"], judged["prediction"], strict=True):
        matrix[index[true]][index[predicted]] += 1
    return float(judged["correct"].astype(bool).mean()), len(judged), matrix

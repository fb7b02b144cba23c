"""Why this budget: which tokens of an input raised or lowered what each layer decided.

The method is **occlusion, leave one out**: the input is run again with one token removed — its
position masked out exactly as padding is (no other token attends to it, the pooled summaries
f_θ, g_φ and the gates read leave it out; every other token keeps its position) — and the token's
attribution in layer l is

    attribution_l(t) = q_l(input) − q_l(input without token t),

so a positive number means the token *raised* q_l and a negative one that it *lowered* it, in the
units of q_l. What q_l is depends on the method:

* **BudgetFormer**: q_l = s_l, the budget f_θ predicts in layer l.
* **bba**: the requested budget b comes from the caller, not the text, so it is not attributed.
  What the text decides is *which* heads b buys: q_l is the **gate margin** of layer l, the mean
  gate score z of the k heads that ran at b minus the mean z of the H − k that did not (for the
  head set chosen on the whole input, held fixed). A positive attribution: the token makes the
  chosen heads more clearly the chosen ones. With k = H every head runs whatever the text says:
  q_l = 0.

Why occlusion and not gradient × input: every layer normalises its input first (pre-norm), and
a layer norm is blind to the scale of its input, so its Jacobian maps an embedding x onto zero
(J·x = 0). Gradient × input on the embeddings is therefore exactly zero for the first layer's s
(up to the norm's ε) and says nothing there. Occlusion needs no gradient, also sees through the
structural path's discrete top-k (a token whose removal changes which heads run is charged with
that), and is exact and deterministic: each number is the change of a quantity the model
computes, run in the model's own precision (float32: differences below about 1e-6 are rounding).

It costs one forward pass per token (all in batches). An input of more than ``max_passes``
tokens is occluded in consecutive spans of ⌈T / max_passes⌉ tokens instead, and every token of
a span gets the span's attribution (``span`` says how many).

A pair of texts is explained as the model reads it, joined by the tokenizer's separators; every
token keeps its segment (``segments``: 0 for the first text, 1 for the second) when its
neighbours are left out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

import torch
from torch import Tensor

from ..io.checkpoint import Checkpoint
from ..io.tokenizer import Text, encode_batch, read_tokens, reading_prefix
from ..model.budget import Control
from ..model.trace import LayerTrace
from .infer import check_kind, check_texts

MAX_PASSES = 128
"""Occluded forward passes per input at most (longer inputs are occluded in spans)."""


@dataclass
class Explanation:
    """Token attributions of one input, per layer (see the module docstring)."""

    text: Text
    tokens: list[str]
    """The tokens the model read (its first ``max_len``)."""
    variant: str
    """``budgetformer`` or ``bba``: the model's ``ModelConfig.method``, named ``variant`` in
    ``explain --json``'s output."""
    attributed: str
    """What is attributed (the method's ``Allocator.attributed``)."""
    budget: list[float]
    """s per layer (bba: the requested budget b)."""
    value: list[float]
    """The attributed quantity per layer on the whole input (s, or the gate margin)."""
    budget_attribution: list[list[float]]
    """L × T: per layer, per token, the quantity on the whole input minus without the token."""
    k: list[int]
    selected_heads: list[list[int]]
    span: int
    """Tokens occluded together (1: each token alone)."""
    fixed: bool
    """True when no token can change the quantity: s forced (a requested budget, or a model
    without f_θ) — every attribution is then 0."""
    segments: list[int] = field(default_factory=list)
    """Each token's segment: 0, or 1 for the second text of a pair (a single text: all 0)."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class _SameDraws(Control):
    """A random-heads Control whose every forward pass runs the heads drawn in its first one:
    the occluded copies of an input then run the heads the whole input ran."""

    draws: list[Tensor] = field(default_factory=list, repr=False, compare=False)
    replaying: bool = field(default=False, repr=False, compare=False)
    calls: int = field(default=0, repr=False, compare=False)

    def random_scores(self, batch: int, n_heads: int) -> Tensor:
        if not self.replaying:
            self.draws.append(super().random_scores(1, n_heads))
            return self.draws[-1].expand(batch, -1)
        scores = self.draws[self.calls % len(self.draws)]  # layer by layer, in every pass
        self.calls += 1
        return scores.expand(batch, -1)


def _one_input_control(control: Control | None) -> Control | None:
    """A copy of ``control`` for one input's passes: a per-input k reduced to its int, random
    head choices replayed (:class:`_SameDraws`)."""
    if control is None:
        return None
    values = {f.name: getattr(control, f.name) for f in fields(Control)}
    if control.k is not None and not isinstance(control.k, int):
        [values["k"]] = control._ks()
    return _SameDraws(**values) if control.head_choice == "random" else Control(**values)


def _quantity(trace: LayerTrace, chosen: Tensor) -> Tensor:
    """(B,) the attributed quantity of a layer: s, or bba's gate margin for the head set
    ``chosen`` (H,) bool of the whole input."""
    if trace.gate_scores is None:
        return trace.budget
    k = int(chosen.sum())
    if k == chosen.numel():
        return torch.zeros_like(trace.budget)
    z = trace.gate_scores  # (B, H)
    return z[:, chosen].mean(-1) - z[:, ~chosen].mean(-1)


@torch.no_grad()
def explain(
    ckpt: Checkpoint,
    texts: list[Text],
    control: Control | None = None,
    max_passes: int = MAX_PASSES,
    batch_size: int = 32,
) -> list[Explanation]:
    """Occlusion attributions of each layer's s (bba: gate margin) for each text.

    Args:
        ckpt: a budgetformer or bba checkpoint.
        texts: as for :func:`budgetformer_core.analysis.infer.analyze`.
        control: the run to explain (forced k, requested budget, head-choice ablation); random
            heads are drawn once per text and kept for its occluded copies.
        max_passes: occluded forward passes per text at most (longer texts: spans).

    Raises:
        ValueError: a dense checkpoint (nothing is budgeted), or unusable texts.
    """
    check_texts(texts)
    check_kind(ckpt, texts)
    model = ckpt.model.eval()
    method = model.method
    if not method.budgeted:
        raise ValueError("a dense checkpoint has no budget to explain: every layer runs all of its heads")
    if max_passes < 1:
        raise ValueError(f"max_passes must be >= 1, got {max_passes}")
    fixed = method.budget_is_set(model.cfg, control)
    max_len = model.cfg.max_len
    out = []
    for text in texts:
        prefix = reading_prefix(ckpt.tokenizer, text, max_len)
        batch = encode_batch(ckpt.tokenizer, [prefix], max_len)
        tokens, segments = read_tokens(ckpt.tokenizer, prefix, max_len)
        T = batch.ids.shape[1]  # ids (1, T)
        run = _one_input_control(control)
        whole = model(batch.ids, batch.mask, control=run, types=batch.types)
        chosen = [t.selected[0] for t in whole.layers]  # (H,) per layer
        base = torch.stack([_quantity(t, c) for t, c in zip(whole.layers, chosen, strict=True)], 1)  # (1, L)
        if isinstance(run, _SameDraws):
            run.replaying = True
        span = math.ceil(T / max_passes)
        starts = list(range(0, T, span)) if T > 1 else []  # a lone token has nothing to compare with
        attribution = torch.zeros(len(whole.layers), T)  # (L, T)
        for c in range(0, len(starts), batch_size):
            group = starts[c : c + batch_size]
            mask = batch.mask.expand(len(group), T).clone()  # (n, T): one span removed per row
            for row, s in enumerate(group):
                mask[row, s : s + span] = False
            types = None if batch.types is None else batch.types.expand(len(group), T)  # (n, T)
            res = model(batch.ids.expand(len(group), T), mask, control=run, types=types)
            q = torch.stack([_quantity(t, ch) for t, ch in zip(res.layers, chosen, strict=True)], 1)  # (n, L)
            for row, s in enumerate(group):
                attribution[:, s : s + span] = (base[0] - q[row])[:, None]
        if fixed:
            attribution.zero_()
        out.append(
            Explanation(
                text=text,
                tokens=tokens,
                variant=model.cfg.method,
                attributed=method.attributed,
                budget=[float(t.budget[0]) for t in whole.layers],
                value=base[0].tolist(),
                budget_attribution=attribution.tolist(),
                k=[int(t.k[0]) for t in whole.layers],
                selected_heads=[c.nonzero().flatten().tolist() for c in chosen],
                span=span,
                fixed=fixed,
                segments=segments,
            )
        )
    return out


def top_tokens(e: Explanation, layer: int, n: int = 3) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The ``n`` tokens that raised layer ``layer``'s quantity most and the ``n`` that lowered
    it most, as (token, attribution), strongest first."""
    pairs = list(zip(e.tokens, e.budget_attribution[layer], strict=True))
    raised = sorted((p for p in pairs if p[1] > 0), key=lambda p: -p[1])[:n]
    lowered = sorted((p for p in pairs if p[1] < 0), key=lambda p: p[1])[:n]
    return raised, lowered

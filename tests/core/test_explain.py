"""Occlusion attributions of the budget: each number is the change of s (bba: the gate margin)
when its token is masked out, as a forward pass of that occluded input computes it; on
synthetic_var the cue tokens should carry most of it."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from budgetformer_core.analysis.explain import explain, top_tokens
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode_batch
from budgetformer_core.model.budget import Control

from ..conftest import PRECOMPUTED

TEXT = "The striker scored twice in the cup final <b>and</b> the manager praised his players"


def occluded(ckpt, text: str, position: int, control: Control | None = None):
    """The traces of ``text`` run alone with token ``position`` masked out."""
    batch = encode_batch(ckpt.tokenizer, [text], ckpt.config.max_len)
    mask = batch.mask.clone()
    mask[0, position] = False
    with torch.no_grad():
        return ckpt.model(batch.ids, mask, control=control).layers


@pytest.mark.parametrize("control", [None, Control(k=3), Control(head_choice="random", seed=4)],
                         ids=["learned", "k=3", "random heads"])
def test_each_number_is_the_change_of_s_when_its_token_is_left_out(bbc_budgetformer, control):
    [e] = explain(bbc_budgetformer, [TEXT], control)
    T = len(e.tokens)
    assert e.span == 1 and np.array(e.budget_attribution).shape == (2, T)
    for t in (0, 5, T - 1):
        fresh = None if control is None else Control(k=control.k, head_choice=control.head_choice, seed=control.seed)
        layers = occluded(bbc_budgetformer, TEXT, t, fresh)  # random heads: the same draws as the whole input
        for layer, trace in enumerate(layers):
            assert e.budget_attribution[layer][t] == pytest.approx(e.value[layer] - float(trace.budget[0]), abs=1e-6)
    assert e.value == e.budget and not e.fixed
    assert any(abs(a) > 1e-3 for row in e.budget_attribution for a in row)  # this model's s follows its text
    raised, lowered = top_tokens(e, 0)
    assert all(a > 0 for _, a in raised) and all(a < 0 for _, a in lowered)


def test_a_forced_s_has_nothing_to_attribute(bbc_budgetformer):
    [e] = explain(bbc_budgetformer, [TEXT], Control(budget=0.5))
    assert e.fixed and e.budget == [0.5, 0.5] and not any(any(row) for row in e.budget_attribution)


def test_long_inputs_are_occluded_in_spans(bbc_budgetformer):
    [e] = explain(bbc_budgetformer, [TEXT], max_passes=4)
    T = len(e.tokens)
    assert e.span == -(-T // 4)
    for row in e.budget_attribution:  # every token of a span carries the span's number
        assert all(len(set(row[s : s + e.span])) == 1 for s in range(0, T, e.span))
    # the first span's number is the change of s without all of its tokens
    batch = encode_batch(bbc_budgetformer.tokenizer, [TEXT], 512)
    mask = batch.mask.clone()
    mask[0, : e.span] = False
    with torch.no_grad():
        s = bbc_budgetformer.model(batch.ids, mask).layers[0].budget
    assert e.budget_attribution[0][0] == pytest.approx(e.value[0] - float(s), abs=1e-6)


@pytest.fixture(scope="module")
def bbc_bba():
    return load_checkpoint(PRECOMPUTED / "bbc-bba")


def test_bba_attributes_the_gate_margin_of_the_heads_that_ran(bbc_bba):
    [e] = explain(bbc_bba, [TEXT], Control(budget=0.25))
    assert e.variant == "bba" and e.attributed.startswith("gate margin") and e.budget == [0.25, 0.25]
    assert e.k == [2, 2]
    chosen = torch.zeros(8, dtype=torch.bool)
    for layer, trace in enumerate(occluded(bbc_bba, TEXT, 3, Control(budget=0.25))):
        chosen[:] = False
        chosen[e.selected_heads[layer]] = True
        z = trace.gate_scores[0]
        margin = float(z[chosen].mean() - z[~chosen].mean())
        assert e.budget_attribution[layer][3] == pytest.approx(e.value[layer] - margin, abs=1e-5)
    [full] = explain(bbc_bba, [TEXT], Control(budget=1.0))  # every head runs whatever the text
    assert full.value == [0.0, 0.0] and not any(any(row) for row in full.budget_attribution)


def test_a_dense_checkpoint_is_refused():
    with pytest.raises(ValueError, match="dense checkpoint has no budget"):
        explain(load_checkpoint(PRECOMPUTED / "bbc-dense"), [TEXT])


ANCHOR = re.compile(r"^q[01]{4}$")  # synthetic_var's anchor q{mask}: the only word that names the slots in use


def cue_mask(tokens: list[str]) -> np.ndarray:
    """True on synthetic_var's cue token, the anchor (its slots' letters say nothing of the need)."""
    return np.array([bool(ANCHOR.match(t)) for t in tokens])


def cue_share(name: str, n_inputs: int = 20) -> tuple[float, float, float]:
    """(share of |attribution| on cue tokens, share of tokens that are cue tokens, mean total
    |attribution|) over the first test inputs of synthetic_var that carry 3 or 4 cues."""
    from budgetformer_core.io.data import load_dataset

    split = load_dataset("synthetic_var").split("test")
    texts = [t for t, n in zip(split.texts, split.needed_heads, strict=True) if n >= 3][:n_inputs]
    cue = total = n_cue = n_tok = 0.0
    for e in explain(load_checkpoint(PRECOMPUTED / name), texts):
        a = np.abs(np.array(e.budget_attribution[0]))
        is_cue = cue_mask(e.tokens)
        cue, total = cue + a[is_cue].sum(), total + a.sum()
        n_cue, n_tok = n_cue + is_cue.sum(), n_tok + len(is_cue)
    return cue / max(total, 1e-30), n_cue / n_tok, total / len(texts)


@pytest.mark.parametrize("name", ["synthetic_var-budgetformer", "synthetic_var-budgetformer-paper"])
def test_cue_tokens_carry_most_of_the_attribution_when_there_are_many_cues(name):
    share, token_share, total = cue_share(name)
    print(f"\n{name}: cue tokens carry {share:.1%} of |attribution| ({token_share:.1%} of the tokens); "
          f"mean total |attribution| {total:.2e}")
    assert total > 1e-3, "s does not follow the input at all"
    assert share > 0.5 and share > token_share

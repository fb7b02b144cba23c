"""The head atlas's engine (budgetformer_core.analysis.atlas) on a tiny trained model and on made-up tables.

Usage shares are counts over n; slices, head sets and the input map are checked against numbers
worked out here; a head's attention profile against the attention maps the structural path
returns for the same inputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from budgetformer_core.analysis import atlas
from budgetformer_core.io.data import load_synthetic
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.splits import Split
from budgetformer_core.io.tokenizer import encode_batch
from budgetformer_core.model.budget import Control

FRAME = pd.DataFrame({
    "index": [0, 1, 2, 3, 4],
    "label": [0, 0, 1, 1, 1],
    "correct": [True, False, True, True, False],
    "loss": [0.1, 2.0, 0.2, 0.3, 1.5],
    "mean_s": [0.2, 0.5, 0.5, 0.9, 1.0],
    "tokens": [5, 10, 20, 40, 80],
    "k0": [1, 2, 2, 2, 3], "heads0": ["0", "0 2", "0 2", "1 2", "0 1 2"],
    "k1": [1, 1, 1, 1, 1], "heads1": ["1", "1", "1", "1", "0"],
})  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


@pytest.fixture(scope="module")
def split() -> Split:
    return load_synthetic(n_train=10, n_val=10, n_test=40).split("test")


def test_usage_is_the_count_of_inputs_over_n():
    selected = atlas.heads_matrix(FRAME, 2, 3)  # (N, L, H)
    assert selected.shape == (5, 2, 3) and selected[4, 0].tolist() == [True, True, True]
    np.testing.assert_allclose(atlas.head_usage(selected), [[4 / 5, 2 / 5, 4 / 5], [1 / 5, 4 / 5, 0]])
    assert atlas.head_usage(selected[:0]).tolist() == [[0, 0, 0], [0, 0, 0]]  # an empty slice
    with pytest.raises(ValueError, match="outside 0–1"):
        atlas.heads_matrix(FRAME, 2, 2)
    with pytest.raises(ValueError, match="heads2"):
        atlas.heads_matrix(FRAME, 3, 3)


def test_slices_and_head_sets():
    assert atlas.slice_rows(FRAME).all()
    assert atlas.slice_rows(FRAME, label=1, correct=True).tolist() == [False, False, True, True, False]
    assert atlas.slice_rows(FRAME, budget=(0.5, 1.0), tokens=(10, 40)).tolist() == [False, True, True, True, False]
    sets = atlas.head_sets(FRAME, 0)
    assert sets["heads"].tolist() == ["0 2", "0", "0 1 2", "1 2"]  # most inputs first, ties by the set
    first = sets.iloc[0]
    assert (first["k"], first["inputs"], first["share"], first["accuracy"]) == (2, 2, 0.4, 0.5)
    assert first["mean_loss"] == pytest.approx(1.1)
    assert atlas.rows_with_heads(FRAME, 0, "0 2").tolist() == [False, True, True, False, False]
    assert atlas.selection_summary(FRAME, [1, 4]) == {"inputs": 2, "accuracy": 0.0, "mean_k": 1.75}
    assert atlas.selection_summary(FRAME, [])["accuracy"] is None


def test_input_map_is_the_pca_of_the_relevance():
    rng = np.random.default_rng(0)
    relevance = rng.dirichlet(np.ones(4), size=(30, 2))  # (N, L, H)
    placed = atlas.input_map(relevance)
    assert placed.xy.shape == (30, 2) and 0 < placed.explained[1] <= placed.explained[0] <= 1
    flat = relevance.reshape(30, -1) - relevance.reshape(30, -1).mean(0)
    _, _, vt = np.linalg.svd(flat, full_matrices=False)
    np.testing.assert_allclose(np.abs(placed.xy), np.abs(flat @ vt[:2].T), atol=1e-9)  # up to the sign
    same = atlas.input_map(np.full((5, 2, 4), 0.25))  # p never varies: nothing to place
    assert same.xy.tolist() == [[0.0, 0.0]] * 5 and same.explained == [0.0, 0.0]
    assert atlas.input_map(relevance[:1]).xy.shape == (1, 2)
    assert atlas.ranked(relevance, 1, 2, 3).tolist() == np.argsort(-relevance[:, 1, 2], kind="stable")[:3].tolist()


def test_allocate_keeps_the_relevance_of_the_evaluation(tiny, split):
    allocation = atlas.allocate(tiny, split)
    n_layers, n_heads = tiny.config.n_layers, tiny.config.n_heads
    assert allocation.relevance.shape == (len(split.texts), n_layers, n_heads)
    np.testing.assert_allclose(allocation.relevance.sum(-1), 1, atol=1e-5)  # p sums to 1 per layer
    selected = atlas.heads_matrix(allocation.frame, n_layers, n_heads)
    for i in (0, 17):  # the model itself on one input: the same p and the same heads
        batch = encode_batch(tiny.tokenizer, [split.texts[i]], tiny.config.max_len)
        with torch.no_grad():
            out = tiny.model(batch.ids, batch.mask)
        for layer, trace in enumerate(out.layers):
            np.testing.assert_allclose(allocation.relevance[i, layer], trace.relevance[0].numpy(), atol=1e-5)
            assert selected[i, layer].tolist() == trace.selected[0].tolist()
    one = atlas.allocate(tiny, split, Control(budget=0.25))  # a forced budget: ⌊0.25 · 4⌋ = 1 head
    assert (one.frame["k0"] == 1).all()


def test_attention_profile_averages_the_structural_attention(tiny, split):
    texts = split.texts[:6]
    layer, head = 0, 1
    profile = atlas.attention_profile(tiny, texts, layer, head, Control(k=4), batch_size=4)
    batch = encode_batch(tiny.tokenizer, texts, tiny.config.max_len)
    with torch.no_grad():
        out = tiny.model(batch.ids, batch.mask, control=Control(k=4), capture_attention=True)
    first = same = queries = 0.0
    for b in range(len(texts)):
        n = int(out.lengths[b])
        att = out.layers[layer].attention[b, head, :n, :n].double().numpy()  # (n, n)
        first, same, queries = first + att[:, 0].sum(), same + np.trace(att), queries + n
    assert profile.inputs == 6 and profile.queries == queries
    assert profile.shares["first token"] == pytest.approx(first / queries)
    assert profile.shares["same token"] == pytest.approx(same / queries)
    assert all(0 <= v <= 1 for v in profile.shares.values())
    skipped = atlas.attention_profile(tiny, texts, layer, head, Control(k=1))  # one head runs: maybe not this one
    runs = (out.layers[layer].order[:, 0] == head).sum().item()  # with k = 1 only the top-ranked head runs
    assert skipped.inputs == runs


def test_punctuation_tokens():
    assert atlas.is_punctuation(".") and atlas.is_punctuation("##,") and atlas.is_punctuation("«")
    assert not atlas.is_punctuation("a.") and not atlas.is_punctuation("##") and not atlas.is_punctuation("[SEP]")

"""The compiled allocation and attention (budgetformer_core.model.native) against the eager path
they replace at inference: the same heads, k and predictions on whole test splits, s, z and the
outputs to float32 rounding; and without a compiler, or with a library built from other sources,
the eager path with a one-line notice."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from budgetformer_core.analysis.infer import evaluate
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode
from budgetformer_core.model import native
from budgetformer_core.model.budget import Control, compiled_weights
from budgetformer_core.model.trace import ForwardContext

from ..conftest import PRECOMPUTED

built = pytest.mark.skipif(native.library() is None, reason="the compiled allocation is not built")
attends = pytest.mark.skipif(native.attention() is None, reason="the compiled attention is not usable here")

MODELS = {
    "bbc-budgetformer": None,  # mean pooling, f_θ and g_φ
    "bbc-bba": None,  # gates on the pooled embedding output, layer-normed
    "synthetic_var-budgetformer": None,  # the first token's state is the summary
    "bbc-minilm-budgetformer": 12,  # the summary standardised by running statistics (12 texts: MiniLM)
}
"""Shipped models compared, and how many of their test texts (None: all) go in batches of
:data:`BATCH` padded inputs (each input its own k and heads); the first :data:`ONE_BY_ONE` also one
at a time (a shared k: the path of a typed text)."""
BATCH = 8
"""Small enough for the compiled call at every length (``native.MAX_ELEMENTS``)."""
ONE_BY_ONE = 32


def _compare(ckpt, ids, labels, control: Control | None, batch_size: int) -> None:
    compiled = evaluate(ckpt.model, ids, labels, control, batch_size=batch_size)
    with native.eager(attention=False):
        eager = evaluate(ckpt.model, ids, labels, control, batch_size=batch_size)
    assert (compiled.selected == eager.selected).all(), f"other heads at batch {batch_size}"
    assert (compiled.predictions == eager.predictions).all()
    # the same heads and products; where inputs of one k share a head set, the eager allocation's
    # path projects them together and the call that also allocates input by input (float32 rounding)
    np.testing.assert_allclose(compiled.probs, eager.probs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(compiled.budgets, eager.budgets, rtol=0, atol=1e-6)
    if eager.relevance is not None:
        np.testing.assert_allclose(compiled.relevance, eager.relevance, rtol=0, atol=1e-6)


@built
@pytest.mark.parametrize("name", list(MODELS))
def test_the_compiled_allocation_runs_the_heads_the_eager_one_runs(name):
    """f_θ's own budget (BudgetFormer) and a requested one, on the model's test split."""
    ckpt = load_checkpoint(PRECOMPUTED / name)
    split = load_dataset(ckpt.meta["dataset"], None, seed=ckpt.meta.get("split_seed", 0)).split("test")
    n = MODELS[name] or len(split.texts)
    ids, _ = encode(ckpt.tokenizer, split.texts[:n], ckpt.model.cfg.max_len)
    for control in ([Control(budget=0.5)] if "bba" in name else [None, Control(budget=0.5)]):
        _compare(ckpt, ids, split.labels[:n], control, BATCH)
        m = min(n, ONE_BY_ONE)
        _compare(ckpt, ids[:m], split.labels[:m], control, 1)


@built
def test_the_compiled_call_runs_at_inference_and_nowhere_else():
    """The allocators take the compiled call on a layer input at inference, and the eager path
    with autograd on, in training, inside ``native.eager()`` and on a batch too large for it."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    layer = model.layers[0]
    ids = torch.randint(3, model.cfg.vocab_size, (BATCH, model.cfg.max_len))

    def compiled(ids: torch.Tensor) -> bool:
        x = model.embed(ids)
        ctx = ForwardContext(None, Control(), "structural", x)
        return layer.alloc.compiled(layer.ln1(x), ctx, None, "learned") is not None

    with torch.no_grad():
        assert compiled(ids)
        with native.eager():
            assert not compiled(ids)
        big = ids.repeat(native.MAX_ELEMENTS // ids.numel() // model.cfg.d_model + 1, 1)
        assert not compiled(big)
        model.train()
        assert not compiled(ids)
        model.eval()
    assert not compiled(ids)  # autograd on


@built
def test_the_compiled_call_follows_the_weights_when_they_change():
    """The packed copy of f_θ's and g_φ's weights is made again after an in-place update (an
    optimiser step) and after new data (``module.to``): the compiled call then agrees with the
    eager path on the new weights."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    ids = torch.randint(3, model.cfg.vocab_size, (4, 40), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids, dtype=torch.bool)

    def agree() -> None:
        out = model(ids, mask)
        with native.eager():
            eager = model(ids, mask)
        for trace, eager_trace in zip(out.layers, eager.layers, strict=True):
            torch.testing.assert_close(trace.relevance, eager_trace.relevance, atol=1e-6, rtol=0)
            torch.testing.assert_close(trace.budget, eager_trace.budget, atol=1e-6, rtol=0)

    scorer, budget_net = model.layers[0].alloc.scorer, model.layers[0].alloc.budget_net
    with torch.no_grad():
        agree()  # packs the weights
        scorer.net[0].weight.mul_(-1.5)
        budget_net.net[2].bias.add_(0.7)
        agree()
        scorer.net[2].weight.data = scorer.net[2].weight.flip(0).contiguous()  # new data, as module.to makes
        agree()


@built
@pytest.mark.parametrize("spread", [60.0, 200.0, 1000.0])
def test_heads_whose_p_underflows_go_in_index_order_as_on_the_eager_path(spread):
    """BudgetFormer ranks the heads by p = softmax(z / τ), not by z: where g_φ's scores lie far
    apart, p underflows to 0 (or to the same subnormal float) for several heads, and those tie and
    go in index order, whatever their z. Every k, inputs alone and in a padded batch."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.alloc.scorer.net[2].weight.mul_(spread)  # z spread over hundreds: p of 0 for some heads
    ids = torch.randint(3, model.cfg.vocab_size, (6, 48), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[3:, 30:] = False
    ties = 0
    with torch.no_grad():
        for k in range(1, model.cfg.n_heads):
            for rows in (slice(0, 6), slice(0, 1), slice(4, 5)):
                out = model(ids[rows], mask[rows], control=Control(k=k))
                with native.eager():
                    eager = model(ids[rows], mask[rows], control=Control(k=k))
                for trace, eager_trace in zip(out.layers, eager.layers, strict=True):
                    assert torch.equal(trace.order, eager_trace.order), (spread, k, rows)
                    assert torch.equal(trace.selected, eager_trace.selected)
                    ties += int((eager_trace.relevance == 0).sum())
    assert ties > 0, "no p underflowed: the test would not see a ranking by z"


@built
def test_the_ranking_keeps_index_order_on_equal_scores_and_reads_only_real_tokens():
    """g_φ's scores tied (a zero last layer): heads 0 … k−1 run, as the eager stable sort picks;
    padding does not move an input's summary."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    for layer in model.layers:
        torch.nn.init.zeros_(layer.alloc.scorer.net[2].weight)
        torch.nn.init.zeros_(layer.alloc.scorer.net[2].bias)
    ids = torch.randint(3, model.cfg.vocab_size, (2, 24))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 10:] = False  # the second input is 10 tokens and padding
    with torch.no_grad():
        out = model(ids, mask, control=Control(budget=0.5))
        alone = model(ids[1:, :10], mask[1:, :10], control=Control(budget=0.5))
        with native.eager():
            eager = model(ids, mask, control=Control(budget=0.5))
    for trace, eager_trace, alone_trace in zip(out.layers, eager.layers, alone.layers, strict=True):
        assert trace.order[:, :4].tolist() == [[0, 1, 2, 3]] * 2 == eager_trace.order[:, :4].tolist()
        assert torch.equal(trace.gate_scores if trace.gate_scores is not None else trace.relevance,
                           eager_trace.gate_scores if eager_trace.gate_scores is not None else eager_trace.relevance)
        assert alone_trace.order[0, :4].tolist() == [0, 1, 2, 3]
    assert torch.allclose(out.logits[1], alone.logits[0], atol=1e-5)


def test_without_a_compiler_the_build_says_why_in_one_line_and_keeps_the_library(tmp_path):
    out = tmp_path / "lib.so"
    out.write_bytes(b"kept")
    for cc in ("no-such-compiler-here", "false"):
        problem = native.build(cc, out=out)
        assert problem and "\n" not in problem and cc in problem, problem
        assert out.read_bytes() == b"kept"
    assert list(tmp_path.iterdir()) == [out]  # no half-built file left


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler here")
def test_a_missing_or_stale_library_means_the_eager_path_and_a_one_line_notice(tmp_path):
    with pytest.warns(RuntimeWarning, match="not built") as notices:
        assert native.library(tmp_path / "none.so") is None
    assert all("\n" not in str(w.message) for w in notices)
    sources = tuple(tmp_path / source.name for source in native.SOURCES)
    for source, copy in zip(native.SOURCES, sources, strict=True):
        shutil.copy(source, copy)
    sources[-1].write_text(sources[-1].read_text() + "\n/* another version */\n")
    assert native.build(sources=sources, out=tmp_path / "other.so") is None
    assert native.library(tmp_path / "other.so", sources) is not None  # built from those sources
    with pytest.warns(RuntimeWarning, match="another version"):
        assert native.library(tmp_path / "other.so") is None  # not from this one
    with pytest.warns(RuntimeWarning, match="unusable"):
        (tmp_path / "junk.so").write_bytes(b"\x7fELF junk")
        assert native.library(tmp_path / "junk.so") is None


@attends
@pytest.mark.parametrize("name", list(MODELS))
def test_the_compiled_attention_predicts_what_the_eager_one_predicts(name):
    """Dense, at f_θ's own budget or b = 0.5 and masked, on the model's test split in padded
    batches (a head set per input) and one text at a time: the same heads and predictions, the
    probabilities to float32 rounding."""
    ckpt = load_checkpoint(PRECOMPUTED / name)
    split = load_dataset(ckpt.meta["dataset"], None, seed=ckpt.meta.get("split_seed", 0)).split("test")
    n = MODELS[name] or len(split.texts)
    ids, _ = encode(ckpt.tokenizer, split.texts[:n], ckpt.model.cfg.max_len)
    labels = split.labels[:n]
    for control, mode in ((None, "dense"), (None, None), (Control(budget=0.5), None), (Control(budget=0.5), "masked")):
        for batch_size, m in ((BATCH, n), (1, min(n, ONE_BY_ONE))):
            compiled = evaluate(ckpt.model, ids[:m], labels[:m], control, mode, batch_size=batch_size)
            with native.eager(allocation=False):
                eager = evaluate(ckpt.model, ids[:m], labels[:m], control, mode, batch_size=batch_size)
            assert (compiled.selected == eager.selected).all(), (mode, control, batch_size)
            assert (compiled.predictions == eager.predictions).all(), (mode, control, batch_size)
            np.testing.assert_allclose(compiled.probs, eager.probs, rtol=0, atol=1e-5)


@attends
def test_the_compiled_attention_runs_at_inference_and_nowhere_else():
    """A layer takes the compiled call on float32 at inference, and the eager path with autograd
    on, inside ``native.eager()``, on float64 and when the attention is captured."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    attn = model.layers[0].attn
    x = torch.randn(2, 9, model.cfg.d_model)
    heads = torch.tensor([5, 1, 2])
    assert attn._compiled(x, None, heads, None) is None  # autograd on
    with torch.no_grad():
        assert attn._compiled(x, None, heads, None) is not None
        with native.eager(allocation=False):
            assert attn._compiled(x, None, heads, None) is None
        with native.eager(attention=False):
            assert attn._compiled(x, None, heads, None) is not None
        assert attn._compiled(x.double(), None, heads, None) is None
        ids = torch.randint(3, 50, (1, 9))
        mask = torch.ones_like(ids, dtype=torch.bool)
        out = model(ids, mask, control=Control(budget=0.5))
        captured = model(ids, mask, control=Control(budget=0.5), capture_attention=True)
        torch.testing.assert_close(out.logits, captured.logits, atol=1e-5, rtol=0)
        assert out.layers[0].attention is None and captured.layers[0].attention is not None


@attends
def test_the_compiled_attention_reads_only_real_keys_and_gives_a_query_without_any_zeros():
    """Padding does not move an input's output; a query whose keys are all padding gets zeros, as
    PyTorch's fused kernel gives it; heads in any order and repeated runs of consecutive heads."""
    torch.manual_seed(0)
    attn = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.layers[0].attn
    x = torch.randn(3, 12, attn.d_model)
    mask = torch.ones(3, 12, dtype=torch.bool)
    mask[1, 7:] = False
    mask[2] = False
    w = torch.rand(3, 8) + 0.5
    with torch.no_grad():
        for sets in (torch.tensor([[6, 0, 7, 1]] * 3), torch.tensor([[0, 1, 2, 3], [7, 5, 3, 1], [2, 3, 4, 6]])):
            compiled = attn.structural(x, mask, sets, w.gather(1, sets))
            with native.eager():
                eager = attn.structural(x, mask, sets, w.gather(1, sets))
            torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=0)
            alone = attn.structural(x[1:2, :7], None, sets[1:2], w.gather(1, sets)[1:2])
            torch.testing.assert_close(compiled[1, :7], alone[0], atol=1e-5, rtol=0)
            torch.testing.assert_close(compiled[2], attn.out.bias.expand(12, -1), atol=0, rtol=0)


ONE_CALL = {**MODELS, "bbc-budgetformer-paper": None}  # and the paper's weights w = s·H·p


@attends
@pytest.mark.parametrize("name", list(ONE_CALL))
def test_allocating_and_attending_in_one_call_gives_what_two_calls_give(name, monkeypatch):
    """The allocation and the chosen heads' attention in one compiled call (``Allocator.run``)
    against the two calls one after the other: the same s, p, heads and predictions, the
    probabilities to float32 rounding, at f_θ's own budget and at requested ones, in padded
    batches (each input its own k) and one text at a time."""
    ckpt = load_checkpoint(PRECOMPUTED / name)
    split = load_dataset(ckpt.meta["dataset"], None, seed=ckpt.meta.get("split_seed", 0)).split("test")
    n = ONE_CALL[name] or len(split.texts)
    ids, _ = encode(ckpt.tokenizer, split.texts[:n], ckpt.model.cfg.max_len)
    labels, method = split.labels[:n], type(ckpt.model.allocators[0])
    controls = [Control(budget=b) for b in (0.25, 0.5, 1.0)] + ([] if "bba" in name else [None])
    for control in controls:
        for batch_size, m in ((BATCH, n), (1, min(n, ONE_BY_ONE))):
            one = evaluate(ckpt.model, ids[:m], labels[:m], control, batch_size=batch_size)
            with monkeypatch.context() as patch:
                patch.setattr(method, "runs_attention", False)
                two = evaluate(ckpt.model, ids[:m], labels[:m], control, batch_size=batch_size)
            assert (one.selected == two.selected).all(), (control, batch_size)
            assert (one.predictions == two.predictions).all(), (control, batch_size)
            np.testing.assert_allclose(one.probs, two.probs, rtol=0, atol=1e-5)
            np.testing.assert_allclose(one.budgets, two.budgets, rtol=0, atol=1e-6)  # layers after the first read
            if two.relevance is not None:  # outputs that differ by float32 rounding
                np.testing.assert_allclose(one.relevance, two.relevance, rtol=0, atol=1e-6)


@attends
@pytest.mark.parametrize("name", ["bbc-budgetformer", "bbc-bba"])
def test_one_call_runs_on_the_structural_path_at_inference_and_nowhere_else(name):
    """``Allocator.run`` returns the attention only at inference on the structural path, with the
    k known before the call; dense and masked passes, a k per input (``Control(k=...)``),
    ``native.eager()`` of either call, training and autograd leave the attention to the layer."""
    model = load_checkpoint(PRECOMPUTED / name).model.eval()
    layer = model.layers[0]
    x = model.embed(torch.randint(3, model.cfg.vocab_size, (2, 20)))

    def ran(mode: str = "structural", control: Control | None = None) -> bool:
        ctx = ForwardContext(None, control or Control(budget=0.5), mode, x, pooling=model.cfg.pooling)
        trace, attended = layer.alloc.run(layer.ln1(x), ctx, layer.attn)
        if attended is not None:  # what the layer's attention gives on the same trace
            torch.testing.assert_close(attended, layer.attn(layer.ln1(x), None, trace, mode), atol=1e-5, rtol=0)
        return attended is not None

    assert not ran()  # autograd on
    with torch.no_grad():
        assert ran() and ran(control=Control(budget=0.125))
        assert ran(control=Control()) == ("bba" in name or model.cfg.use_budget_net)
        assert not ran("dense") and not ran("masked") and not ran(control=Control(k=[1, 3]))
        for off in ({}, {"allocation": False}, {"attention": False}):
            with native.eager(**off):
                assert not ran()
        model.train()
        assert not ran()


@attends
def test_one_call_refuses_a_k_it_cannot_run():
    """k outside 1 … H, or k from f_θ for networks without it: a clear error, nothing computed."""
    model = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").model.eval()
    layer, H = model.layers[0], model.cfg.n_heads
    x = torch.randn(1, 6, model.cfg.d_model)
    norm = (native.NORM_NONE, None, None, 0.0)
    with torch.no_grad():
        packed = compiled_weights(None, layer.alloc.scorer, x, "mean", norm, model.cfg.tau)
        for k in (-1, 0, H + 1):
            with pytest.raises(ValueError, match=f"k must be among 1..{H}"):
                layer.attn.allocate_attend(x, x, None, packed, k)
        assert layer.attn.allocate_attend(x, x, None, packed, H) is not None

"""analyze() on awkward inputs: a prediction or a clear error, never a crash."""

from __future__ import annotations

import pytest

from budgetformer_core.analysis.infer import analyze
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.measure.flops import dense_flops
from budgetformer_core.model.budget import Control

AWKWARD = {
    "emoji": "🚀🔥 markets rally 📈 as 🏦 banks report profits 💰",
    "cjk": "英国首相在议会发表讲话 日本の経済 한국 경제",
    "rtl": "الأسواق المالية ترتفع שוק המניות עולה",
    "markup": "<script>alert('x')</script><b>Bold</b> &amp; <i>shares</i> rise",
    "control": "tabs\tand\nnewlines\r\nand \x00 nulls \u200b zero-width",
    "one char": "x",
}


@pytest.fixture(scope="module")
def ckpt(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


@pytest.mark.parametrize("name", list(AWKWARD))
def test_awkward_text_gets_a_prediction(ckpt, name):
    [a] = analyze(ckpt, [AWKWARD[name]])
    assert a.text == AWKWARD[name]  # kept verbatim (the app shows it as text)
    assert a.label in ckpt.label_names
    assert sum(a.probs) == pytest.approx(1.0, abs=1e-5)
    assert len(a.budget) == len(a.selected_heads) == ckpt.config.n_layers
    assert 1 <= a.n_tokens <= ckpt.config.max_len


def test_huge_text_is_truncated(ckpt):
    text = "w1 m0 a " * 12_500  # 100,000 characters
    assert len(text) == 100_000
    [a] = analyze(ckpt, [text])
    assert a.truncated and a.n_tokens == ckpt.config.max_len
    assert a.dense_flops == dense_flops(ckpt.config, ckpt.config.max_len)


@pytest.mark.parametrize("bad, message", [([""], "empty"), (["   \n\t"], "empty"), ([], "no texts"),
                                          ("a string", "list"), ([None], "not text"),
                                          (["x" * 1_000_001], "limit")])
def test_bad_input_is_a_clear_error(ckpt, bad, message):
    with pytest.raises(ValueError, match=message):
        analyze(ckpt, bad)


def test_analysis_is_consistent(ckpt):
    texts = ["w1 m0 a w2 m1 b w3 m2 a m3 b", "w5 w6 m0 b m1 a m2 b m3 a w9"]
    batch = analyze(ckpt, texts)
    alone = [analyze(ckpt, [t])[0] for t in texts]
    for a, b in zip(batch, alone):
        assert a.label == b.label and a.selected_heads == b.selected_heads
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
        assert a.k == [len(s) for s in a.selected_heads]
        assert a.flops < a.dense_flops
    full = analyze(ckpt, texts, Control(budget=1.0))
    assert all(len(s) == ckpt.config.n_heads for a in full for s in a.selected_heads)
    assert all(f.flops > a.flops for f, a in zip(full, batch))

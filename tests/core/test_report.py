"""The offline report (budgetformer_core.analysis.report and ``budgetformer report``): one self-contained
HTML file holding the analysis, plotly's JavaScript inside, nothing fetched, user text escaped.
The browser test opens it from file:// with the network off."""

from __future__ import annotations

import html
import re

import pytest

from budgetformer_core.analysis.infer import analyze
from budgetformer_core.analysis.report import build_report
from budgetformer_core.cli import main
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.model.budget import Control
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config

MARKUP = "w1 m0 a <script>alert(1)</script> <b>bold</b> & m1 b"


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    return load_checkpoint(tiny_checkpoint)


def test_the_report_holds_the_analysis_and_fetches_nothing(tiny, tiny_checkpoint):
    page = build_report(tiny, MARKUP, Control(budget=0.5), name="tiny <model>")
    [a] = analyze(tiny, [MARKUP], Control(budget=0.5))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert html.escape(MARKUP) in page and "<b>bold</b>" not in page and "alert(1)</script>" not in page
    assert "tiny &lt;model&gt;" in page and "<model>" not in page
    assert f"<b>{a.label}</b>" in page  # the prediction
    for layer, heads in enumerate(a.selected_heads):  # budget and heads per layer
        assert f"<td>{layer}</td><td class=\"num\">{a.budget[layer]:.3f}</td>" in page
        assert f"<td>{' '.join(map(str, heads))}</td>" in page
    assert "Head relevance p" in page and "Why this budget?" in page and "s = 0.5" in page
    assert file_sha256(tiny_checkpoint / "model.safetensors") in page
    # plotly's JavaScript is inside; nothing is loaded from elsewhere, and the policy forbids it
    assert "plotly.js v" in page or "Plotly" in page
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|<img[^>]+src=\"http", page)
    assert "default-src 'none'" in page


def test_a_dense_model_has_no_budget_to_explain_or_to_set(tiny, tmp_path):
    shape = dict(vocab_size=tiny.config.vocab_size, n_classes=tiny.config.n_classes, max_len=64)
    dense = BudgetFormer(small_config(method="dense", **shape))
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "dense", dense, tiny.tokenizer, tiny.label_names))
    page = build_report(ckpt, MARKUP)
    assert "no budget to explain" in page and "data-a=" not in page
    with pytest.raises(ValueError, match="dense checkpoint has no budget"):
        build_report(ckpt, MARKUP, Control(budget=0.5))
    with pytest.raises(ValueError, match="empty"):
        build_report(ckpt, " ")


def test_the_cli_writes_the_file_and_refuses_bad_input(capsys, tiny_checkpoint, tmp_path):
    out = tmp_path / "r" / "report.html"
    code = main(["report", "--checkpoint", str(tiny_checkpoint), "--budget", "0.25", "--out", str(out), MARKUP])
    printed = capsys.readouterr().out
    assert code == 0 and out.is_file() and str(out) in printed
    assert html.escape(MARKUP) in out.read_text(encoding="utf-8")
    assert main(["report", "--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path / "x.html"), "   "]) == 2
    assert "is empty" in capsys.readouterr().err
    assert main(["report", "--checkpoint", str(tiny_checkpoint), "--out", str(tmp_path), "text"]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["report", "--checkpoint", str(tmp_path / "missing"), "--out", str(out), "text"]) == 2

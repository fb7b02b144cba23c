"""Shared fixtures: small real models (random or briefly trained), the shipped checkpoints, and the
bad input that the engine's and the app's bad-input tests share (files, hostile texts, hashes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.data import load_synthetic
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.inputs import MAX_CHARS
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import load_tokenizer
from budgetformer_core.measure.timing import torch_threads
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.train.loop import train

ROOT = Path(__file__).resolve().parents[1]
PRECOMPUTED = ROOT / "precomputed" / "checkpoints"


def small_config(**kw) -> ModelConfig:
    base = dict(vocab_size=50, n_classes=3, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=40, dropout=0.0,
                head_weighting="scaled")
    return ModelConfig(**{**base, **kw})


def spread(model: BudgetFormer) -> BudgetFormer:
    """``model`` in eval mode with f_θ's and g_φ's last layers drawn wide, so that inputs get
    varied s and p and so pick different k and heads."""
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.budget_net.net[-1].weight.normal_(0, 3.0)
            alloc.scorer.net[-1].weight.normal_(0, 3.0)
    return model.eval()


@pytest.fixture
def small_model() -> BudgetFormer:
    """A randomly initialised budgetformer whose budget nets give varied s and p."""
    torch.manual_seed(0)
    return spread(BudgetFormer(small_config()))


def train_tiny(out: Path) -> Path:
    """Train a budgetformer briefly on a slice of the synthetic task (seconds) into ``out``, with
    the shipped models' adaptive recipe: gated head weights (w = 1 on the heads that run), gates
    read from the embeddings, the adaptive loss."""
    data = load_synthetic()
    data.splits = {k: v.head(300) for k, v in data.splits.items()}
    cfg = small_config(vocab_size=200, max_len=64, head_weighting="gated", gate_source="embedding")
    with torch_threads(1):  # one thread: the same sums in the same order, whatever ran before
        train(data, cfg, TrainConfig(epochs=2, batch_size=32, recipe="adaptive"), out, progress=False)
    return out


BBC_CLASSES = ["business", "entertainment", "politics", "sports", "tech"]
"""The label names of the bbc dataset (and of its shipped models)."""


def write_hf_classifier(out: Path, labels: list[str] = BBC_CLASSES) -> Path:
    """Write a small BertForSequenceClassification (2 layers × 4 heads, d 32, random weights
    spread wide enough that the classes' logits differ) with its own vocabulary — the special
    tokens, a few words, every letter alone and as a word piece, so that any lower-case text is
    spelt out — as ``transformers``' ``save_pretrained`` writes it."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    words = "the market shares film music election vote match goal phone software rose fell won new".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *letters, *(f"##{c}" for c in letters)]
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, initializer_range=0.3,
                        id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(out)
    BertTokenizerFast(vocab_file=str(out / "vocab.txt")).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def hf_classifier(tmp_path_factory) -> Path:
    """A Hugging Face sequence classifier's folder with bbc's classes (see :func:`write_hf_classifier`)."""
    return write_hf_classifier(tmp_path_factory.mktemp("hf") / "my-bert")


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("ckpt") / "tiny")


@pytest.fixture(scope="session")
def bbc_budgetformer():
    path = PRECOMPUTED / "bbc-budgetformer"
    if not path.is_dir():
        pytest.fail(f"{path} is missing: run `make precompute`")
    return load_checkpoint(path)


DEEP = "bbc-6x12"
"""The name of :func:`deep_checkpoint`'s model."""


@pytest.fixture(scope="session")
def deep_checkpoint(tmp_path_factory) -> Path:
    """A BudgetFormer of MiniLM's shape, 6 layers × 12 heads (narrow: d_model 48, reading 64
    tokens), randomly initialised with budgets spread so that inputs run different heads, for
    the BBC texts (bbc-budgetformer's tokenizer and classes). Its folder holds it alone, as
    precomputed/checkpoints holds the shipped ones."""
    shipped = PRECOMPUTED / "bbc-budgetformer"
    cfg = json.loads((shipped / "config.json").read_text())
    tokenizer = load_tokenizer(shipped / "tokenizer.json")
    torch.manual_seed(0)
    model = spread(BudgetFormer(small_config(vocab_size=tokenizer.get_vocab_size(), n_classes=len(cfg["label_names"]),
                                             d_model=48, n_heads=12, n_layers=6, d_ff=96, max_len=64)))
    path = tmp_path_factory.mktemp("deep") / DEEP
    save_checkpoint(path, model, tokenizer, cfg["label_names"], {"dataset": "bbc", "split_seed": 0})
    return path


# --------------------------------------------------------------------------- bad input

def snapshot(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots``."""
    return {str(p): file_sha256(p) for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ws(tiny_checkpoint, tmp_path_factory) -> Path:
    """The bad-input tests' good files: the tiny synthetic checkpoint (classes 00, 10, 01, 11) and
    data files for it, good and bad."""
    ws = tmp_path_factory.mktemp("ws")
    shutil.copytree(tiny_checkpoint, ws / "ckpt")
    split = load_synthetic().split("test").head(40)
    names = ["00", "10", "01", "11"]

    def write(name: str, labels, texts=None) -> None:
        pd.DataFrame({"text": texts or split.texts, "label": labels}).to_csv(ws / name, index=False)

    pairs = [(t, y) for t, y in zip(split.texts, split.labels) if y in (1, 3)]
    write("two_classes.csv", [names[y] for _, y in pairs], [t for t, _ in pairs])
    write("all.csv", [names[y] for y in split.labels])
    write("unseen.csv", ["10", "tennis"] * 20)
    write("ints.csv", [7, 8, 9, 10, 11] * 8)
    write("nan.csv", ["NaN", "10"] * 20)
    write("empty_label.csv", ["", "10"] * 20)
    write("negative.csv", [-1, 0] * 20)
    write("long.csv", ["10"] * 40, split.texts[:39] + ["w1 " * (MAX_CHARS // 3 + 1)])
    pd.DataFrame({"text": ["a goal in the final", "a merger of two banks"] * 5,
                  "label": [7, 8, 9, 10, 11] * 2}).to_csv(ws / "bbc_ints.csv", index=False)
    (ws / "lines.txt").write_bytes("w1 m0 a\u2028w2 m1 b\r\nw3 m0 b\x85w4\n".encode())
    (ws / "blank.txt").write_text("w1 m0 a\n\n   \nw2 m1 b\n")
    (ws / "latin1.txt").write_bytes(b"w1 m0 a\nw2 \xff m1\nw3\n")
    (ws / "empty.txt").write_text("")
    (ws / "long.txt").write_text("w1 m0 a\n" + "w " * (MAX_CHARS // 2 + 1) + "\n")
    (ws / "a_file").write_text("not a folder")
    (ws / "bigint.jsonl").write_text('{"text": "w1 m0 a"}\n{"text": "w2", "n": ' + "9" * 5000 + "}\n")
    (ws / "nested.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    return ws


HOSTILE_TEXTS = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-1+1", "@SUM(1)", "\tx", "\r=2+2",
                 "a \"quoted\", text\nover two lines", "plain"]


def read_back(data: str | bytes) -> tuple[list[list[str]], pd.DataFrame]:
    """A downloaded CSV read back with ``csv`` (rows after the header) and with pandas."""
    import csv
    import io

    text = data.decode() if isinstance(data, bytes) else data
    return list(csv.reader(io.StringIO(text, newline="")))[1:], pd.read_csv(io.StringIO(text), dtype=str,
                                                                               keep_default_na=False)


def no_formula(rows: list[list[str]], frame: pd.DataFrame) -> None:
    from budgetformer_core.io.inputs import FORMULA_STARTS

    cells = [c for r in rows for c in r] + [c for col in frame.columns for c in frame[col]] + list(frame.columns)
    bad = [c for c in cells if c.startswith(FORMULA_STARTS) and not _number(c)]
    assert not bad, bad


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False

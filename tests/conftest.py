"""Shared fixtures: small real models (random or briefly trained) and the shipped checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.data import load_synthetic
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

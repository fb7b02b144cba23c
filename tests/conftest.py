"""Shared fixtures: small real models (random or briefly trained), the shipped checkpoints, and the
bad input that the engine's and the app's bad-input tests share (files, hostile texts, hashes)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.data import load_synthetic, load_synthetic_pairs
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.inputs import MAX_CHARS
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import load_tokenizer
from budgetformer_core.measure.timing import torch_threads
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.train.loop import train

ROOT = Path(__file__).resolve().parents[1]
PRECOMPUTED = ROOT / "precomputed" / "checkpoints"

WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:  # `make test`: each worker's torch gets its share of the cores; two workers of two threads
    # on two cores wait on each other (bbc-budgetformer over BBC's test split: 4–22 s so, 2.5 s on one)
    torch.set_num_threads(max(1, torch.get_num_threads() // WORKERS))


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


def train_pairs(out: Path) -> Path:
    """Train a budgetformer briefly on a slice of the synthetic pair task (seconds) into ``out``:
    a model of ours that reads pairs (premise, hypothesis), as :func:`train_tiny` with its recipe."""
    data = load_synthetic_pairs()
    data.splits = {k: v.head(n) for (k, v), n in zip(data.splits.items(), (800, 150, 200), strict=True)}
    cfg = small_config(vocab_size=200, max_len=32, head_weighting="gated", gate_source="embedding")
    with torch_threads(1):
        train(data, cfg, TrainConfig(epochs=4, batch_size=32, lr=3e-3, recipe="adaptive"), out, progress=False)
    return out


@pytest.fixture(scope="session")
def pair_checkpoint(tmp_path_factory) -> Path:
    """A tiny budgetformer of ours trained on text pairs (``synthetic_pairs``: does the second
    text name the first's topic word; classes same, other, none)."""
    return train_pairs(tmp_path_factory.mktemp("pairs") / "tiny-pairs")


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
    BertTokenizerFast(vocab={token: i for i, token in enumerate(vocab)}).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def hf_classifier(tmp_path_factory) -> Path:
    """A Hugging Face sequence classifier's folder with bbc's classes (see :func:`write_hf_classifier`)."""
    return write_hf_classifier(tmp_path_factory.mktemp("hf") / "my-bert")


FAMILY_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "albert")
"""The ``model_type`` of every encoder family a classifier folder may be of."""
WORDS = "the market shares film music election vote match goal phone software rose fell won new".split()
CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789"


def family_tokenizer(model_type: str, out: Path):
    """A small tokenizer of the family's kind, made offline, with its special tokens and
    post-processor: WordPiece (bert, distilbert, electra), byte-level BPE trained on a few
    words (roberta), SentencePiece Unigram pieces (xlm-roberta, albert)."""
    import transformers
    from tokenizers.pre_tokenizers import ByteLevel

    wordpiece = {"bert": transformers.BertTokenizerFast, "distilbert": transformers.DistilBertTokenizerFast,
                 "electra": transformers.ElectraTokenizerFast}
    if model_type in wordpiece:
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *CHARACTERS, *(f"##{c}" for c in CHARACTERS)]
        (out / "vocab.txt").write_text("\n".join(vocab) + "\n")
        return wordpiece[model_type](vocab=str(out / "vocab.txt"))
    if model_type == "roberta":  # every byte, then each word merged letter by letter after its space (Ġ)
        vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", *sorted(ByteLevel.alphabet())])}
        merges: list[tuple[str, str]] = []
        for word in WORDS:
            for i, c in enumerate(word):
                pair = ("Ġ" + word[:i], c)
                if pair not in merges:
                    merges.append(pair)
                    vocab["".join(pair)] = len(vocab)
        vocab["<mask>"] = len(vocab)
        return transformers.RobertaTokenizerFast(vocab=vocab, merges=merges)
    pieces = [*(f"▁{w}" for w in WORDS), "▁", *CHARACTERS, *(f"▁{c}" for c in CHARACTERS)]
    scored = [(piece, -float(len(piece))) for piece in pieces]
    if model_type == "xlm-roberta":  # <pad> at 1: not at id 0
        specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
        return transformers.XLMRobertaTokenizerFast(vocab=[*specials, *scored, ("<mask>", 0.0)])
    specials = [(t, 0.0) for t in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")]
    return transformers.AlbertTokenizerFast(vocab=[*specials, *scored])


def write_family_classifier(out: Path, model_type: str, labels: list[str] = BBC_CLASSES) -> Path:
    """Write a small ``…ForSequenceClassification`` of ``model_type`` (:data:`FAMILY_TYPES`) with
    random weights spread wide enough that the classes' logits differ, and its own tokenizer
    (:func:`family_tokenizer`), as ``transformers``' ``save_pretrained`` writes them: 2 layers ×
    4 heads of width 32 reading 64 tokens; RoBERTa and XLM-R with their position offset
    (66 positions, one token type), ELECTRA and ALBERT with factorised embeddings of width 16,
    ALBERT with 3 layers sharing one group."""
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = family_tokenizer(model_type, out)
    spread = {"xlm-roberta": 0.2, "electra": 0.2, "albert": 0.2}.get(model_type, 0.3)  # wider: one class wins
    shape = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64, initializer_range=spread,
                 id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})
    if model_type == "bert":
        config = transformers.BertConfig(**shape)
    elif model_type == "distilbert":
        kept = ("vocab_size", "max_position_embeddings", "initializer_range", "id2label", "label2id")
        config = transformers.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                               **{k: shape[k] for k in kept})
    elif model_type in ("roberta", "xlm-roberta"):
        config = transformers.AutoConfig.for_model(model_type, **{**shape, "max_position_embeddings": 66},
                                                   type_vocab_size=1)
    elif model_type == "electra":
        config = transformers.ElectraConfig(embedding_size=16, **shape)
    else:
        config = transformers.AlbertConfig(embedding_size=16, num_hidden_groups=1, **{**shape, "num_hidden_layers": 3})
    torch.manual_seed(0)
    transformers.AutoModelForSequenceClassification.from_config(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def family_classifier(tmp_path_factory):
    """``family_classifier(model_type)``: the folder of :func:`write_family_classifier`'s
    classifier of that family with bbc's classes, written once per session."""
    folders: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in folders:
            folders[model_type] = write_family_classifier(tmp_path_factory.mktemp("hf") / model_type, model_type)
        return folders[model_type]

    return get


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

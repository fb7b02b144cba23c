"""Sequence classifiers of every encoder family (budgetformer_core.io.families) open as checkpoints.

For each family — BERT, DistilBERT, RoBERTa, XLM-R, ELECTRA (factorised embeddings) and ALBERT
(factorised embeddings, layers sharing one group) — a tiny random-weight classifier that
``transformers`` writes with ``save_pretrained``, its tokenizer made offline, is read as it is:
our token ids are ``transformers``' tokenizer's (with truncation), our logits are within 1e-4
of ``transformers``' and our class is theirs on every text; ``predict``, ``eval`` and ``bench``
take the folder; with its heads ranked it runs structurally at a budget (at b = 1 equal to the
dense classifier) and its FLOPs count the embedding projection; ``prune`` makes of it a checkpoint
that reads texts as the folder does.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from budgetformer_core.analysis.infer import pair_columns
from budgetformer_core.cli import main
from budgetformer_core.io.checkpoint import round_weights
from budgetformer_core.io.classifier import describe
from budgetformer_core.io.families import FAMILIES
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode_batch
from budgetformer_core.measure.flops import forward_flops
from budgetformer_core.model import native
from budgetformer_core.model.budget import Control
from budgetformer_core.train.rank import open_checkpoint

from ..conftest import BBC_CLASSES, FAMILY_TYPES

os.environ["HF_HUB_OFFLINE"] = "1"  # the reference reads the same local folder, never the hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TEXTS = [
    "the market rose as shares won",
    "Über café naïve — 東京 “quotes” <b>markup</b> and emoji 🙂",
    "x",
    "film music and the new phone software " * 20,  # longer than the 64 tokens read
    "the election vote fell",
    "a goal in the match",
    "phone software new",
]
LABELS = ["business", "tech", "entertainment", "entertainment", "politics", "sports", "tech"]
MAX_LEN = 64
SHAPES = {  # type_vocab_size, embedding_size, pooler_activation, activation, n_layers
    "bert": (2, 0, "tanh", "gelu", 2),
    "distilbert": (0, 0, "relu", "gelu", 2),
    "roberta": (1, 0, "tanh", "gelu", 2),
    "xlm-roberta": (1, 0, "tanh", "gelu", 2),
    "electra": (2, 16, "gelu", "gelu", 2),
    "albert": (2, 16, "tanh", "gelu_tanh", 3),
}
"""What each family's folder reads as (conftest.write_family_classifier's shapes)."""


@pytest.fixture(scope="module", params=FAMILY_TYPES)
def folder(request, family_classifier):
    return family_classifier(request.param)


@pytest.fixture(scope="module")
def reference(folder):
    """transformers' own classifier, its tokenizer, and its logits on TEXTS (a padded batch cut
    to MAX_LEN tokens)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    enc = tokenizer(TEXTS, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt")
    with torch.no_grad():
        return model, enc, model(**enc).logits  # (B, C)


@pytest.fixture(scope="module")
def rank_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("rank") / "rank.csv"
    path.write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in zip(TEXTS, LABELS)), encoding="utf-8")
    return path


def test_each_family_reads_its_own_shape(folder):
    ckpt = load_checkpoint(folder)
    cfg = ckpt.config
    model_type = folder.name
    assert (cfg.type_vocab_size, cfg.embedding_size, cfg.pooler_activation, cfg.activation,
            cfg.n_layers) == SHAPES[model_type]
    assert (cfg.method, cfg.pooling, cfg.norm, cfg.max_len, cfg.n_heads, cfg.d_model) == ("dense", "pooler", "post",
                                                                                           MAX_LEN, 4, 32)
    assert ckpt.label_names == BBC_CLASSES
    stated = describe(folder)["model"]  # a field added since the shipped models is stated only when set
    assert ("embedding_size" in stated) == bool(cfg.embedding_size)
    assert ("pooler_activation" in stated) == (cfg.pooler_activation != "tanh")


def test_tokens_logits_and_classes_equal_transformers(folder, reference):
    _, enc, theirs = reference
    ckpt = load_checkpoint(folder)
    batch = encode_batch(ckpt.tokenizer, TEXTS, ckpt.config.max_len)
    for i in range(len(TEXTS)):  # the same ids, special tokens kept in a cut text (padding ids may differ)
        assert batch.ids[i][batch.mask[i]].tolist() == enc["input_ids"][i][enc["attention_mask"][i].bool()].tolist()
    assert batch.truncated[3] and batch.ids.shape[1] == MAX_LEN and batch.n_tokens[3] > MAX_LEN
    with torch.no_grad():
        ours = ckpt.model(batch.ids, batch.mask).logits  # (B, C)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    assert ours.argmax(-1).tolist() == theirs.argmax(-1).tolist()
    assert len(set(theirs.argmax(-1).tolist())) > 1  # the weights tell the classes apart


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_eval_and_bench_take_each_family(capsys, folder, reference, rank_csv):
    theirs = reference[2]
    code, out, err = run(capsys, "predict", "--checkpoint", folder, "--json", *TEXTS)
    assert code == 0, err
    assert [json.loads(line)["label"] for line in out.splitlines()] == [BBC_CLASSES[i] for i in
                                                                        theirs.argmax(-1).tolist()]
    code, out, err = run(capsys, "eval", "--checkpoint", folder, "--dataset", rank_csv, "--json")
    assert code == 0, err
    truth = torch.tensor([BBC_CLASSES.index(y) for y in LABELS])
    assert json.loads(out)["accuracy"] == pytest.approx((theirs.argmax(-1) == truth).float().mean().item())
    code, out, err = run(capsys, "bench", "--checkpoint", folder, "--rank-file", rank_csv, "--seq-len", 16,
                         "--budgets", "0.5,1", "--repeats", 2, "--warmup", 1, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[0]["flops_ratio"] < 1 == pytest.approx(rows[1]["flops_ratio"])


def test_ranked_heads_run_structurally_at_a_budget(folder, rank_csv):
    dense = load_checkpoint(folder)
    ranked = open_checkpoint(folder, rank_csv)
    batch = encode_batch(dense.tokenizer, TEXTS, MAX_LEN)
    with torch.no_grad():
        full = dense.model(batch.ids, batch.mask).logits
        torch.testing.assert_close(ranked.model(batch.ids, batch.mask, control=Control(budget=1.0)).logits, full,
                                   atol=1e-5, rtol=0)
        half = ranked.model(batch.ids, batch.mask, mode="structural", control=Control(budget=0.5))
        masked = ranked.model(batch.ids, batch.mask, mode="masked", control=Control(budget=0.5)).logits
    assert all(t.selected.sum(-1).tolist() == [2] * len(TEXTS) for t in half.layers)  # 2 of 4 heads per layer
    torch.testing.assert_close(half.logits, masked, atol=1e-5, rtol=0)  # only the selected heads computed
    assert not torch.allclose(half.logits, full)


def test_a_pruned_classifier_reads_texts_as_the_classifier_does(capsys, folder, reference, rank_csv, tmp_path):
    """``prune`` on the folder, the checkpoint reloaded: a text longer than max_len keeps its
    closing separator as in ``transformers``, and at b = 1 the logits are the classifier's (with
    its weights as the checkpoint stores them, float16); pairs are read as before."""
    _, enc, _ = reference
    code, _, err = run(capsys, "prune", "--checkpoint", folder, "--dataset", rank_csv, "--out", tmp_path / "pruned")
    assert code == 0, err
    dense, pruned = load_checkpoint(folder), load_checkpoint(tmp_path / "pruned")
    assert pruned.config.method == "bba" and pruned.meta["classifier"] == dense.meta["classifier"]
    batch = encode_batch(pruned.tokenizer, TEXTS, MAX_LEN)
    assert batch.ids[3].tolist() == enc["input_ids"][3].tolist()  # cut, its [SEP] (</s>) kept
    assert batch.truncated[3] and batch.n_tokens == encode_batch(dense.tokenizer, TEXTS, MAX_LEN).n_tokens
    round_weights(dense.model)
    with torch.no_grad():
        expected = dense.model(batch.ids, batch.mask).logits
        ours = pruned.model(batch.ids, batch.mask, mode="structural", control=Control(budget=1.0)).logits
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    assert pair_columns(pruned) == pair_columns(dense) == ("text", "text_pair")


def test_flops_count_each_familys_forward_pass(folder):
    model = load_checkpoint(folder).model
    ids = torch.randint(5, model.cfg.vocab_size, (1, 9))
    with (torch.no_grad(), sdpa_kernel(SDPBackend.MATH), native.eager(),
          FlopCounterMode(display=False) as counter):  # the compiled calls' products are not counted
        model(ids, torch.ones(1, 9, dtype=torch.bool))
    assert counter.get_total_flops() == forward_flops(model.cfg, 9)  # the embedding projection included


@pytest.mark.parametrize("model_type", FAMILY_TYPES)
def test_a_missing_value_defaults_as_in_transformers(model_type):
    from transformers import AutoConfig

    theirs = AutoConfig.for_model(model_type).to_dict()
    family = FAMILIES[model_type]
    assert {key: theirs[key] for key in family.defaults} == family.defaults
    assert set(family.sizes.values()) <= set(theirs)

"""A researcher's own sequence classifier (budgetformer_core.io.classifier).

A BertForSequenceClassification that ``transformers`` writes with ``save_pretrained`` opens as
``--checkpoint`` in predict, eval and bench, and its predictions are ``transformers``'; its heads
ranked on a file (labelled, or by its own predictions) give nested budgets without training;
folders that are not such a classifier get one-line errors naming what is missing.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from budgetformer_core.cli import main
from budgetformer_core.io.files import CheckpointError
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode_batch
from budgetformer_core.model.budget import Control
from budgetformer_core.train.rank import open_checkpoint, rank_heads, read_rank_file

from ..conftest import BBC_CLASSES

os.environ["HF_HUB_OFFLINE"] = "1"  # the reference reads the same local folder, never the hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TEXTS = [
    "the market rose as shares won",
    "Über café naïve — 東京 “quotes” <b>markup</b> and emoji 🙂",
    "x",
    "film music and the new phone software " * 3,
    "the election vote fell",
    "a goal in the match",
]
LABELS = ["business", "tech", "entertainment", "entertainment", "politics", "sports"]


@pytest.fixture(scope="module")
def reference(hf_classifier):
    """transformers' own model and tokenizer, read from the same folder."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(str(hf_classifier), local_files_only=True).eval()
    return model, AutoTokenizer.from_pretrained(str(hf_classifier), local_files_only=True)


@pytest.fixture(scope="module")
def their_logits(reference):
    model, tokenizer = reference
    enc = tokenizer(TEXTS, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits  # (B, C)


@pytest.fixture(scope="module")
def rank_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("rank") / "rank.csv"
    path.write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in zip(TEXTS, LABELS)), encoding="utf-8")
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_it_loads_with_its_pooler_classifier_and_labels_and_equals_transformers(hf_classifier, their_logits):
    ckpt = load_checkpoint(hf_classifier)
    cfg = ckpt.config
    assert (cfg.method, cfg.pooling, cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.max_len) == ("dense", "pooler", 2, 4,
                                                                                                  32, 64)
    assert ckpt.label_names == BBC_CLASSES
    batch = encode_batch(ckpt.tokenizer, TEXTS, cfg.max_len)
    with torch.no_grad():
        ours = ckpt.model(batch.ids, batch.mask).logits  # (B, C)
    torch.testing.assert_close(ours, their_logits, atol=1e-5, rtol=0)
    assert ours.argmax(-1).tolist() == their_logits.argmax(-1).tolist()
    assert len(set(their_logits.argmax(-1).tolist())) > 1  # the weights tell the classes apart


def test_a_longer_text_is_cut_as_transformers_cuts_it(hf_classifier, reference):
    ckpt = load_checkpoint(hf_classifier)
    text = "film music and the new phone software " * 20
    batch = encode_batch(ckpt.tokenizer, [text], 64)
    assert batch.truncated == [True] and batch.ids.shape == (1, 64) and batch.n_tokens[0] > 64
    model, tokenizer = reference
    enc = tokenizer([text], truncation=True, max_length=64, return_tensors="pt")
    assert batch.ids.tolist() == enc["input_ids"].tolist()  # the final [SEP] kept
    with torch.no_grad():
        torch.testing.assert_close(ckpt.model(batch.ids, batch.mask).logits, model(**enc).logits, atol=1e-5, rtol=0)


def test_cli_predict_eval_and_bench_take_the_folder(capsys, hf_classifier, their_logits, rank_csv):
    probs = torch.softmax(their_logits, -1)
    for ranking in ([], ["--rank-file", rank_csv]):  # ranked, the default budget is 1: the classifier itself
        code, out, err = run(capsys, "predict", "--checkpoint", hf_classifier, *ranking, "--json", *TEXTS)
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        assert [r["label"] for r in rows] == [BBC_CLASSES[i] for i in their_logits.argmax(-1).tolist()]
        ours = torch.tensor([[r["probs"][c] for c in BBC_CLASSES] for r in rows])
        torch.testing.assert_close(ours, probs, atol=1e-5, rtol=0)
        assert all(r["k"] == [4, 4] for r in rows)

    truth = torch.tensor([BBC_CLASSES.index(y) for y in LABELS])
    accuracy = (their_logits.argmax(-1) == truth).float().mean().item()
    code, out, err = run(capsys, "eval", "--checkpoint", hf_classifier, "--dataset", rank_csv, "--json")
    assert code == 0, err
    assert json.loads(out)["accuracy"] == pytest.approx(accuracy) and json.loads(out)["n"] == len(TEXTS)
    code, out, err = run(capsys, "eval", "--checkpoint", hf_classifier, "--rank-file", rank_csv,
                         "--dataset", rank_csv, "--budget", "0.5", "--json")
    assert code == 0, err
    assert json.loads(out)["mean_heads_fraction"] == 0.5

    code, out, err = run(capsys, "bench", "--checkpoint", hf_classifier, "--rank-file", rank_csv, "--seq-len", 16,
                         "--budgets", "0.5,1", "--repeats", 2, "--warmup", 1, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["model"]["pooling"] == "pooler" and result["model"]["variant"] == "bba"
    assert [row["budget"] for row in result["rows"]][:2] == ["0.5", "1"]
    assert result["rows"][0]["flops_ratio"] < 1 == pytest.approx(result["rows"][1]["flops_ratio"])


@pytest.mark.parametrize("command", [["bench", "--seq-len", "8"], ["predict", "--budget", "0.5", "x"],
                                     ["eval", "--budget", "0.5"], ["explain", "x"]])
def test_a_budget_without_a_ranking_says_how_to_get_one(capsys, hf_classifier, rank_csv, command):
    extra = ["--dataset", rank_csv] if command[0] == "eval" else []
    code, out, err = run(capsys, command[0], "--checkpoint", hf_classifier, *extra, *command[1:])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--rank-file" in err


def test_the_ranking_gives_nested_head_sets_from_labels_or_own_predictions(hf_classifier, rank_csv, tmp_path):
    dense = load_checkpoint(hf_classifier)
    ranked = open_checkpoint(hf_classifier, rank_csv)
    assert ranked.config.method == "bba" and not ranked.config.gate_input and ranked.config.default_budget == 1.0
    assert ranked.meta["ranking"] == {"source": str(rank_csv), "rows": len(TEXTS), "labels": "given"}
    texts, labels = read_rank_file(rank_csv, BBC_CLASSES)
    assert labels == [BBC_CLASSES.index(y) for y in LABELS]
    as_ids = tmp_path / "ids.csv"  # integer labels are ids of id2label
    as_ids.write_text("text,label\n" + "".join(f'"{t}",{BBC_CLASSES.index(y)}\n' for t, y in zip(TEXTS, LABELS)))
    assert open_checkpoint(hf_classifier, as_ids).meta["importance"] == ranked.meta["importance"]

    unlabelled = tmp_path / "texts.txt"
    unlabelled.write_text("\n".join(TEXTS) + "\n\n")
    own = open_checkpoint(hf_classifier, unlabelled)
    assert own.meta["ranking"]["labels"] == "predicted" and own.meta["ranking"]["rows"] == len(TEXTS)
    batch = encode_batch(dense.tokenizer, TEXTS, 64)
    with torch.no_grad():
        predicted = dense.model(batch.ids, batch.mask).logits.argmax(-1).tolist()
    assert own.meta["importance"] == rank_heads(dense, TEXTS, predicted).meta["importance"]

    previous = None
    with torch.no_grad():
        for b in (0.25, 0.5, 0.75, 1.0):
            out = ranked.model(batch.ids, batch.mask, control=Control(budget=b))
            heads = [set(torch.nonzero(t.selected[0]).flatten().tolist()) for t in out.layers]
            assert [len(h) for h in heads] == [int(b * 4)] * 2
            for layer, importance in zip(heads, ranked.meta["importance"]):  # the most important heads run
                assert min(importance[h] for h in layer) >= max((v for i, v in enumerate(importance)
                                                                 if i not in layer), default=0)
            assert previous is None or all(p <= h for p, h in zip(previous, heads))  # nested
            previous = heads
        full = ranked.model(batch.ids, batch.mask).logits
        torch.testing.assert_close(full, dense.model(batch.ids, batch.mask).logits, atol=1e-5, rtol=0)


def broken(hf_classifier, tmp_path, edit=None, remove=None):
    folder = tmp_path / "broken"
    shutil.copytree(hf_classifier, folder)
    if edit is not None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    if remove is not None:
        (folder / remove).unlink()
    return folder


def no_pooler(folder):
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if "pooler" not in k}, str(folder / "model.safetensors"))


@pytest.mark.parametrize("edit, remove, message", [
    (lambda c: c.update(architectures=["BertModel"]), None, "names no sequence classifier"),
    (lambda c: c.pop("architectures"), None, "names no sequence classifier"),
    (lambda c: c.pop("id2label"), None, "no id2label"),
    (lambda c: c.update(id2label={"0": "only"}), None, "regression"),
    (lambda c: c.update(problem_type="multi_label_classification"), None, "problem_type"),
    (lambda c: c.update(model_type="gpt2"), None, "model_type 'gpt2' is not supported"),
    (None, "model.safetensors", "model.safetensors: not found"),
    (None, "vocab.txt", None),  # tokenizer.json is enough
    ("no pooler", None, "no tensor bert.pooler.dense.weight"),
])  # fmt: skip
def test_a_folder_that_is_not_such_a_classifier_is_refused_in_one_line(capsys, hf_classifier, tmp_path, edit,
                                                                         remove, message):
    folder = broken(hf_classifier, tmp_path, None if edit == "no pooler" else edit, remove)
    if edit == "no pooler":
        no_pooler(folder)
    if message is None:
        assert load_checkpoint(folder).label_names == BBC_CLASSES
        return
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(folder)
    code, out, err = run(capsys, "predict", "--checkpoint", folder, "x")
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_a_tokenizer_is_needed_and_a_bad_rank_file_is_one_line(capsys, hf_classifier, tmp_path):
    folder = broken(hf_classifier, tmp_path, remove="vocab.txt")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer"):
        load_checkpoint(folder)
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("text,label\nthe market,weather\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    for rank_file, message in ((unknown, "labels the model does not know"), (empty, "holds no texts"),
                               (tmp_path / "missing.csv", "no such file")):
        code, out, err = run(capsys, "predict", "--checkpoint", hf_classifier, "--rank-file", rank_file, "x")
        assert code == 2 and err.count("\n") == 1 and message in err, err

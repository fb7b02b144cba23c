"""``budgetformer export``: a BERT-shaped model of ours written in the Hugging Face layout, read
back by ``transformers`` in a fresh process (offline, as a user would) with our predictions.

The shipped MiniLM models pool by the mean, so their export carries its modeling file
(``trust_remote_code=True``); an imported BERT classifier exports as a plain
``BertForSequenceClassification``; a budgeted model as its dense base; a pruned one with its
pruned heads zeroed. What cannot be exported, or written there, is one line and exit status 2,
with every file as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from budgetformer_core.cli import main
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.export import MEAN_POOL_CLASS, MODELING_FILE, WRITTEN, cuts_like_transformers
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode, encode_batch
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import PRECOMPUTED

BATCH = 32
TOLERANCE = 1e-3
"""Largest |difference| of a logit between our model and ``transformers`` (float32 both)."""

READ_BACK = r"""
import json, sys
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

for job in json.load(sys.stdin):
    model = AutoModelForSequenceClassification.from_pretrained(job["folder"], trust_remote_code=job["remote"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(job["folder"])
    texts, logits = json.loads(open(job["texts"]).read()), []
    with torch.inference_mode():
        for i in range(0, len(texts), job["batch"]):
            if job["cut"]:  # the first max_len ids of each text, as the command says for a plain BERT
                ids = [x[: job["cut"]] for x in tokenizer(texts[i : i + job["batch"]])["input_ids"]]
                batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt")
            else:
                batch = tokenizer(texts[i : i + job["batch"]], padding=True, truncation=job["truncation"],
                                  return_tensors="pt")
            logits += model(**batch).logits.tolist()
    job.update(model_class=type(model).__name__, logits=logits, model_max_length=tokenizer.model_max_length)
    open(job["answer"], "w").write(json.dumps(job))
"""
"""Each job: a folder read by AutoModelForSequenceClassification and AutoTokenizer, its texts'
logits (batches padded on the right; ``cut``: the first ``cut`` ids of each, else the tokenizer
with or without ``truncation``) written to the job's answer file."""


def hf_read_back(tmp_path: Path, *jobs: dict) -> list[dict]:
    """Run :data:`READ_BACK` on ``jobs`` (``folder``, ``texts``, ``remote``, ``cut``, ``truncation``) in one
    fresh Python, offline, its remote code cached under ``tmp_path``; what each job read."""
    for i, job in enumerate(jobs):
        texts_file = tmp_path / f"texts-{i}.json"
        texts_file.write_text(json.dumps(job.pop("texts")))
        job.update(folder=str(job["folder"]), texts=str(texts_file), answer=str(tmp_path / f"answer-{i}.json"),
                   batch=BATCH, cut=job.get("cut"), truncation=job.get("truncation", False))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "hf-modules"),
           "TRANSFORMERS_VERBOSITY": "error", "OMP_NUM_THREADS": str(torch.get_num_threads())}  # this worker's share
    done = subprocess.run([sys.executable, "-c", READ_BACK], input=json.dumps(jobs), text=True, env=env,
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(Path(job["answer"]).read_text()) for job in jobs]


def our_logits(ckpt, texts: list[str]) -> torch.Tensor:
    """Our model's logits with every head run (a budgeted model's dense base), in batches."""
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), BATCH):
            batch = encode_batch(ckpt.tokenizer, texts[i : i + BATCH], ckpt.config.max_len)
            out.append(ckpt.model(batch.ids, batch.mask, mode="dense").logits)
    return torch.cat(out)


def export(capsys, *argv: str) -> tuple[int, str, str]:
    """``budgetformer export ARGV``: exit status, stdout, stderr."""
    rc = main(["export", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@dataclasses.dataclass
class Exported:
    """One ``budgetformer export`` run of the module's read-back: where it wrote, what it said, and
    what ``transformers`` made of the folder (None when the export failed)."""

    source: Path
    """The checkpoint exported."""
    texts: list[str]
    """The texts read back, in their order."""
    folder: Path
    rc: int
    out: str
    err: str
    read: dict | None = None


@pytest.fixture(scope="module")
def exported(tmp_path_factory, hf_classifier) -> dict[str, Exported]:
    """Every export the tests read back, made once and read by ``transformers`` in one fresh
    process: the shipped MiniLM dense model on all 426 BBC test texts (sorted by length, batches of
    like length), the MiniLM BudgetFormer (its dense base) on the first :data:`BATCH`, and the
    small BERT classifier of conftest, plain and with heads pruned, on :data:`CLASSIFIER_TEXTS`."""
    tmp = tmp_path_factory.mktemp("export")
    pruned = tmp / "pruned"
    ckpt = load_checkpoint(hf_classifier)
    ckpt.model.prune_heads([[0, 2], [1, 2, 3]])
    save_checkpoint(pruned, ckpt.model, ckpt.tokenizer, ckpt.label_names)
    sources = {"minilm-dense": "bbc-minilm-dense", "minilm-budgetformer": "bbc-minilm-budgetformer",  # by name
               "plain": hf_classifier, "pruned": pruned}
    bbc = load_dataset("bbc").split("test").texts
    texts = {"minilm-dense": by_length(load_checkpoint(PRECOMPUTED / "bbc-minilm-dense"), bbc),
             "minilm-budgetformer": bbc[:BATCH], "plain": CLASSIFIER_TEXTS, "pruned": CLASSIFIER_TEXTS}
    done, jobs = {}, {}
    for name, source in sources.items():
        folder = tmp / f"{name}-hf"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["export", "--checkpoint", str(source), "--out", str(folder)])
        done[name] = Exported(PRECOMPUTED / source if isinstance(source, str) else source, texts[name], folder, rc,
                              out.getvalue(), err.getvalue())
        if rc == 0:
            classifier = name in ("plain", "pruned")  # fed as the command says; ours pool by the mean and cut
            feed = reading(load_checkpoint(done[name].source)) if classifier else {}
            jobs[name] = {"folder": folder, "texts": list(texts[name]), "remote": not classifier, **feed}
    for name, read in zip(jobs, hf_read_back(tmp, *jobs.values()), strict=True):
        done[name].read = read
    return done


def by_length(ckpt, texts: list[str]) -> list[str]:
    """``texts`` ordered by their length in ``ckpt``'s tokens (batches of like length)."""
    lengths = encode(ckpt.tokenizer, texts, ckpt.config.max_len)[1]
    return [texts[i] for i in sorted(range(len(texts)), key=lengths.__getitem__)]


def test_a_minilm_model_exports_with_its_mean_pooling_and_predicts_every_bbc_test_text_as_ours(exported):
    run = exported["minilm-dense"]
    assert run.rc == 0, run.err
    assert "trust_remote_code=True" in run.out and "tokenizer(text) gives this model's prediction" in run.out
    assert "dense base" not in run.out
    folder = run.folder
    assert sorted(p.name for p in folder.iterdir()) == sorted(WRITTEN)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [MEAN_POOL_CLASS] and config["model_type"] == "bert"
    assert config["auto_map"]["AutoModelForSequenceClassification"] == f"modeling_budgetformer.{MEAN_POOL_CLASS}"
    ckpt = load_checkpoint(PRECOMPUTED / "bbc-minilm-dense")
    assert config["id2label"] == {str(i): name for i, name in enumerate(ckpt.label_names)}
    assert config["max_position_embeddings"] == ckpt.config.max_len == 256

    texts = run.texts  # every BBC test text
    lengths = encode(ckpt.tokenizer, texts, ckpt.config.max_len)[1]
    assert sum(n > ckpt.config.max_len for n in lengths) > 100  # the cut to max_len is exercised
    theirs = run.read
    assert theirs["model_class"] == MEAN_POOL_CLASS
    assert theirs["model_max_length"] > max(lengths)  # no warning of a length the model cuts itself
    ours, logits = our_logits(ckpt, texts), torch.tensor(theirs["logits"])
    assert sorted(texts) == sorted(load_dataset("bbc").split("test").texts) and len(logits) == len(texts) == 426
    assert torch.equal(ours.argmax(1), logits.argmax(1))
    assert (ours - logits).abs().max() < TOLERANCE


def test_a_budgeted_model_exports_its_dense_base_and_says_so(exported):
    run = exported["minilm-budgetformer"]
    assert run.rc == 0, run.err
    assert "budgetformer model: its dense base is exported" in run.out
    assert json.loads((run.folder / "config.json").read_text())["architectures"] == [MEAN_POOL_CLASS]
    with safe_open(run.folder / "model.safetensors", "pt") as f:  # BertModel's, the classifier's; no f_θ / g_φ
        assert {name.split(".")[0] for name in f.keys()} == {"bert", "classifier"}
    ckpt = load_checkpoint(run.source)
    assert (our_logits(ckpt, run.texts) - torch.tensor(run.read["logits"])).abs().max() < TOLERANCE


CLASSIFIER_TEXTS = ["the market rose", "new phone software", "the election vote fell", "a goal in the match",
                    "film music " * 40]
"""Texts for the small classifier of conftest (64 positions): the last is longer than it reads."""


def reading(ckpt) -> dict:
    """How the export of ``ckpt`` is to be fed for our predictions, as the command says."""
    return {"truncation": True} if cuts_like_transformers(ckpt.tokenizer) else {"cut": ckpt.config.max_len}


def test_a_bert_classifier_exports_as_a_plain_bert_classifier_and_a_pruned_one_with_zero_heads(
        exported, hf_classifier, tmp_path, capsys):
    for name in ("plain", "pruned"):
        run = exported[name]
        assert run.rc == 0, run.err
        model = load_checkpoint(run.source)
        config = json.loads((run.folder / "config.json").read_text())
        assert config["architectures"] == ["BertForSequenceClassification"] and "auto_map" not in config
        assert not (run.folder / MODELING_FILE).exists()
        assert ("truncation=True) gives this model's prediction" in run.out) == ("truncation" in reading(model))
        assert run.read["model_class"] == "BertForSequenceClassification" and run.read["model_max_length"] == 64
        assert (our_logits(model, CLASSIFIER_TEXTS) - torch.tensor(run.read["logits"])).abs().max() < TOLERANCE
    assert "pruned to 5 of 8 heads" in exported["pruned"].out
    # our loader reads the plain export back as the classifier it was
    again = our_logits(load_checkpoint(exported["plain"].folder), CLASSIFIER_TEXTS)
    assert (again - our_logits(load_checkpoint(hf_classifier), CLASSIFIER_TEXTS)).abs().max() < 1e-5
    # an earlier export is replaced with --force (a copy: the module's exports stay as they were made)
    earlier = tmp_path / "plain-hf"
    shutil.copytree(exported["plain"].folder, earlier)
    rc, _, err = export(capsys, "--checkpoint", str(exported["pruned"].source), "--out", str(earlier), "--force")
    assert rc == 0, err
    assert file_sha256(earlier / "model.safetensors") == file_sha256(exported["pruned"].folder / "model.safetensors")


def files(root: Path) -> dict[str, str]:
    """Every path under ``root``: a file's sha256, or ``dir``."""
    return {str(p): "dir" if p.is_dir() else file_sha256(p) for p in sorted(root.rglob("*"))}


def test_what_cannot_be_exported_or_written_there_is_one_line_and_changes_nothing(hf_classifier, tmp_path, capsys):
    model = tmp_path / "my-bert"
    shutil.copytree(hf_classifier, model)
    other = tmp_path / "other-bert"
    shutil.copytree(hf_classifier, other)
    ckpt = load_checkpoint(hf_classifier)  # a post-norm model reading the first token's state alone
    first = dataclasses.replace(ckpt.config, pooling="first")
    save_checkpoint(tmp_path / "first-token", BudgetFormer(first), ckpt.tokenizer, ckpt.label_names)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    cases = {
        "norm='pre'": ["--checkpoint", "bbc-dense", "--out", str(tmp_path / "new")],
        "pooling='first'": ["--checkpoint", str(tmp_path / "first-token"), "--out", str(tmp_path / "new")],
        "exists; pass --force": ["--checkpoint", str(model), "--out", str(tmp_path / "taken")],
        "export does not write (notes.txt)": ["--checkpoint", str(model), "--out", str(tmp_path / "taken"), "--force"],
        "inside it": ["--checkpoint", str(model), "--out", str(model / "export")],
        "own folder": ["--checkpoint", str(model), "--out", str(model), "--force"],
        "holds the checkpoint": ["--checkpoint", str(model), "--out", str(tmp_path), "--force"],
        "inside the model folder": ["--checkpoint", str(model), "--out", str(other / "export")],
    }
    before = files(tmp_path)
    for says, argv in cases.items():
        rc, out, err = export(capsys, *argv)
        assert rc == 2 and not out, (argv, out)
        assert says in err and err.count("\n") == 1, (argv, err)
        assert files(tmp_path) == before, argv

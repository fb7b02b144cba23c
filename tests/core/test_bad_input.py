"""Bad input to the engine — the command line and the Python API — gets a correct result or a
clear one-line error: exit status 2 (130 for Ctrl-C, tested in test_resume.py), never a
traceback, and no good file changes (every file is hashed before and after each case). The app's
cases are in tests/app/test_bad_input.py; the files both use are tests/conftest.py's ``ws``.

The cases: labels a checkpoint does not
know, a dataset of another task, non-finite or out-of-range settings, sizes that would allocate
gigabytes, a checkpoint in the way, changed or damaged checkpoint files, input files that are not
UTF-8 or hold blank lines, and texts that are empty, odd or over the one length limit
(:data:`budgetformer_core.io.inputs.MAX_CHARS`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from budgetformer_core.cli import main
from budgetformer_core.io.files import CheckpointError
from budgetformer_core.io.inputs import MAX_CHARS
from budgetformer_core.io.loader import load_checkpoint

from ..conftest import HOSTILE_TEXTS, PRECOMPUTED, no_formula, read_back, snapshot

BBC = PRECOMPUTED / "bbc-dense"
BBC_BF = PRECOMPUTED / "bbc-budgetformer"
BBC_BBA = PRECOMPUTED / "bbc-bba"


def damaged(ws: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the good checkpoint with one thing wrong (the good one is left alone)."""
    bad = tmp_path / "bad"
    shutil.copytree(ws / "ckpt", bad)
    weights, config = bad / "model.safetensors", bad / "config.json"
    if how == "bit flip":
        data = bytearray(weights.read_bytes())
        data[-3] ^= 0x01
        weights.write_bytes(bytes(data))
    elif how == "truncated":
        weights.write_bytes(weights.read_bytes()[:500])
    elif how.startswith(("config.json:", "history.json:")):  # the file's whole text
        name, text = how.split(":", 1)
        (bad / name).write_text(text)
    elif how.startswith("label_names="):
        cfg = json.loads(config.read_text())
        cfg["label_names"] = json.loads(how.split("=", 1)[1])
        config.write_text(json.dumps(cfg))
    elif how == "other tokenizer":
        from budgetformer_core.io.tokenizer import train_tokenizer

        other = train_tokenizer(["shares rose after record profits", "the match ended in a draw"] * 5, 200)
        (bad / "tokenizer.json").write_text(other.to_str(pretty=False) + "\n")
    else:  # a config value: "field=json"
        field, value = how.split("=", 1)
        cfg = json.loads(config.read_text())
        cfg["model"][field] = json.loads(value)
        config.write_text(json.dumps(cfg))  # json writes NaN bare
    return bad


def cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``budgetformer ARGV`` in this process: exit status (argparse's usage errors too), stdout, stderr."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def scored(split: str = "all") -> Callable[[str], None]:
    """A JSON evaluation of every row of the file (``all``) or of its split."""
    def check(out: str) -> None:
        r = json.loads(out)
        path = r["rows"].rsplit(" of ", 1)[1]
        n = len(pd.read_csv(path))
        assert r["split"] == split and 0.0 <= r["accuracy"] <= 1.0
        assert r["n"] == n if split == "all" else 0 < r["n"] < n

    return check


def predicted(lines: list[int | None], errors: dict[int, str] | None = None) -> Callable[[str], None]:
    def check(out: str) -> None:
        got = rows(out)
        assert [r.get("line") for r in got] == lines
        for r in got:
            if r.get("line") in (errors or {}):
                assert errors[r["line"]] in r["error"]
            else:
                assert sum(r["probs"].values()) == pytest.approx(1, abs=1e-5)

    return check


def one_line_each(n_inputs: int) -> Callable[[str], None]:
    """``predict``'s text output: a line per input, four tab-separated fields, no control character."""
    def check(out: str) -> None:
        lines = out.splitlines()
        assert len(lines) == n_inputs, out
        assert all(line.count("\t") == 3 for line in lines), out
        assert not any(c in out for c in "\x1b\r\x85\u2028"), out

    return check


def explained(n_inputs: int, n_layers: int = 2) -> Callable[[str], None]:
    """One JSON row per input: a number per token the model read, per layer."""
    def check(out: str) -> None:
        got = rows(out)
        assert len(got) == n_inputs
        for r in got:
            assert len(r["budget_attribution"]) == n_layers
            assert all(len(layer) == len(r["tokens"]) > 0 for layer in r["budget_attribution"])

    return check


TRAIN = ["train", "--dataset", "synthetic", "--out", "{tmp}/new", "--quiet"]
# id, argv ({ckpt}: the good checkpoint, {ws}: the data files, {bad}: a damaged copy, {tmp}: a
# fresh folder), the expected exit status, and for 2 a pattern of the one-line error, for 0 a check
CLI_CASES = [
    # labels: the checkpoint's label_names are the truth
    ("eval: a file of two of the four classes, by name", ["eval", "--checkpoint", "{ckpt}", "--dataset",
     "{ws}/two_classes.csv", "--json"], 0, scored()),
    ("eval: a single file is scored whole", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/all.csv",
     "--json"], 0, scored()),
    ("eval: --split test of a file", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/all.csv", "--split",
     "test", "--json"], 0, scored("test")),
    ("eval: unseen label strings", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/unseen.csv"], 2,
     r"labels the model does not know \('tennis'\)"),
    ("eval: integer labels 7-11", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/ints.csv"], 2,
     r"labels must lie in \[0, 4\)"),
    ("eval: integer labels 7-11 on the 5-class BBC model", ["eval", "--checkpoint", str(BBC), "--dataset",
     "{ws}/bbc_ints.csv"], 2, r"labels must lie in \[0, 5\)"),
    ("eval: a label 'NaN' is not a new class", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/nan.csv"], 2,
     r"does not know \('NaN'\)"),
    ("eval: negative integer labels", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/negative.csv"], 2,
     r"labels must lie in \[0, 4\)"),
    ("eval: empty label cells", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/empty_label.csv"], 2,
     "empty label"),
    ("eval: --dataset synthetic on a BBC checkpoint", ["eval", "--checkpoint", str(BBC), "--dataset", "synthetic"],
     2, "a different task"),
    ("eval: --limit -1", ["eval", "--checkpoint", "{ckpt}", "--limit", "-1"], 2, "positive integer"),
    ("eval: --limit 0", ["eval", "--checkpoint", "{ckpt}", "--limit", "0"], 2, "positive integer"),
    ("eval: an unknown dataset", ["eval", "--checkpoint", "{ckpt}", "--dataset", "imagenet"], 2, "unknown dataset"),
    ("eval: a text over the length limit", ["eval", "--checkpoint", "{ckpt}", "--dataset", "{ws}/long.csv"], 2,
     f"text 40 of all 40 labelled rows .* the limit is {MAX_CHARS:,}"),
    ("eval: --budget 0", ["eval", "--checkpoint", "{ckpt}", "--budget", "0"], 2, r"budget must be in \(0, 1\]"),
    ("eval: --budget nan", ["eval", "--checkpoint", "{ckpt}", "--budget", "nan"], 2, r"budget must be in \(0, 1\]"),
    ("eval: --budget on a dense model", ["eval", "--checkpoint", str(BBC), "--budget", "0.5"], 2,
     "a dense checkpoint has no budget"),
    ("prune: unknown labels, before ranking", ["prune", "--checkpoint", str(BBC), "--dataset", "{ws}/unseen.csv",
     "--out", "{tmp}/p"], 2, "'10', 'tennis'|does not know"),
    ("prune: not a dense checkpoint", ["prune", "--checkpoint", "{ckpt}", "--out", "{tmp}/p"], 2,
     "ranks the heads of a dense checkpoint"),
    # checkpoints: missing, damaged, changed
    ("predict: a checkpoint that is not there", ["predict", "--checkpoint", "/nonexistent/ckpt", "hi"], 2,
     "not a directory"),
    ("eval: a checkpoint folder without its files", ["eval", "--checkpoint", "{ws}"], 2, "lacks model.safetensors"),
    ("eval: a bit-flipped model.safetensors", ["eval", "--checkpoint", "{bad}"], 2,
     r"model\.safetensors has changed since the checkpoint was written", "bit flip"),
    ("predict: a tokenizer.json from another checkpoint", ["predict", "--checkpoint", "{bad}", "w1 m0 a"], 2,
     r"tokenizer\.json has changed since the checkpoint was written", "other tokenizer"),
    ("eval: truncated weights", ["eval", "--checkpoint", "{bad}"], 2, "corrupt or truncated", "truncated"),
    ("predict: config.json with tau NaN", ["predict", "--checkpoint", "{bad}", "w1"], 2, "NaN", "tau=NaN"),
    ("predict: config.json with max_len 8000000", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     "max_len must be <= 65,536", "max_len=8000000"),
    ("predict: config.json with a string n_heads", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     "n_heads must be an integer", 'n_heads="4"'),
    ("predict: config.json with vocab_size 1", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     "vocab_size must be >= 3", "vocab_size=1"),
    # texts
    ("predict: an empty text", ["predict", "--checkpoint", "{ckpt}", ""], 2, "empty"),
    ("predict: a text of white space", ["predict", "--checkpoint", "{ckpt}", " \n\t "], 2, "empty"),
    ("predict: no input", ["predict", "--checkpoint", "{ckpt}"], 2, "no input"),
    ("predict: a text over the length limit", ["predict", "--checkpoint", "{ckpt}", "x" * (MAX_CHARS + 1)], 2,
     f"the limit is {MAX_CHARS:,}"),
    ("predict: a text of exactly the limit", ["predict", "--checkpoint", "{ckpt}", "--json", "w " * (MAX_CHARS // 2)],
     0, predicted([None])),
    ("predict: markup, emoji, RTL, NUL", ["predict", "--checkpoint", "{ckpt}", "--json", "<b>x</b> 🚀 שלום \x00"],
     0, predicted([None])),
    ("predict --input-file: lines end at \\n only", ["predict", "--checkpoint", "{ckpt}", "--json", "--input-file",
     "{ws}/lines.txt"], 0, predicted([1, 2])),
    ("predict --input-file: blank lines are numbered error rows", ["predict", "--checkpoint", "{ckpt}", "--json",
     "--input-file", "{ws}/blank.txt"], 2, "2 of 4 inputs were not classified"),
    ("predict --input-file: invalid UTF-8 names the line", ["predict", "--checkpoint", "{ckpt}", "--json",
     "--input-file", "{ws}/latin1.txt"], 2, "line 2 is not valid UTF-8"),
    ("predict --input-file: a line over the length limit", ["predict", "--checkpoint", "{ckpt}", "--json",
     "--input-file", "{ws}/long.txt"], 2, "1 of 2 inputs were not classified"),
    ("predict --input-file: an empty file", ["predict", "--checkpoint", "{ckpt}", "--input-file", "{ws}/empty.txt"],
     2, "has no lines"),
    ("predict --input-file: a file that is not there", ["predict", "--checkpoint", "{ckpt}", "--input-file",
     "{ws}/nowhere.txt"], 2, "cannot read"),
    ("explain: two texts, markup and emoji among them", ["explain", "--checkpoint", "{ckpt}", "--json", "w1 m0 a",
     "<b>x</b> 🚀 שלום"], 0, explained(2)),
    ("explain: a bba model at a requested budget", ["explain", "--checkpoint", str(BBC_BBA), "--budget", "0.25",
     "--json", "shares rose"], 0, explained(1)),
    ("explain: a dense checkpoint", ["explain", "--checkpoint", str(BBC), "a text"], 2,
     "a dense checkpoint has no budget to explain"),
    ("explain: --budget on a budgetformer model", ["explain", "--checkpoint", "{ckpt}", "--budget", "0.5", "w1"], 2,
     "--budget forces s on a budgetformer model"),
    ("explain: --budget 1.5", ["explain", "--checkpoint", str(BBC_BBA), "--budget", "1.5", "w1"], 2,
     r"budget must be in \(0, 1\]"),
    ("explain: an empty text", ["explain", "--checkpoint", "{ckpt}", "  "], 2, "empty"),
    ("explain: no input", ["explain", "--checkpoint", "{ckpt}"], 2, "no input"),
    ("explain: a text over the length limit", ["explain", "--checkpoint", "{ckpt}", "x" * (MAX_CHARS + 1)], 2,
     f"the limit is {MAX_CHARS:,}"),
    ("explain: a checkpoint that is not there", ["explain", "--checkpoint", "/nonexistent/ckpt", "hi"], 2,
     "not a directory"),
    # training settings, checked before anything runs
    *[(f"train: --set {item}", [*TRAIN, "--set", item], 2, message) for item, message in [
        ("lr=inf", "lr must be a finite number"), ("tau=nan", "tau must be a finite number"),
        ("grad_clip=nan", "grad_clip must be a finite number"), ("weight_decay=nan", "weight_decay must be a finite"),
        ("lambda_budget=nan", "lambda_budget must be a finite"), ("grad_clip=-1", "grad_clip must be > 0"),
        ("max_train=-5", "max_train must be >= 0"), ("budget_hidden=0", "budget_hidden must be >= 1"),
        ("max_len=8000000", "max_len must be <= 65,536"), ("vocab_size=1", "vocab_size must be >= 3"),
        ("n_heads=four", "expected int"), ("d_model=65536", "implies about"), ("warp_speed=9", "unknown config key"),
    ]],
    ("train: --out an existing file", [*TRAIN[:3], "--out", "{ws}/a_file"], 2, "existing file"),
    ("train: --out inside a file", [*TRAIN[:3], "--out", "/dev/null/ckpt"], 2, "is a file, not a folder"),
    ("train: --out a folder of other files", [*TRAIN[:3], "--out", "{ws}"], 2, "holding other files"),
    ("train: --out an existing checkpoint, no --force", [*TRAIN[:3], "--out", "{ckpt}"], 2,
     "already holds a checkpoint; pass --force"),
    ("prune: --out an existing checkpoint, no --force", ["prune", "--checkpoint", str(BBC), "--out", "{ckpt}"], 2,
     "already holds a checkpoint; pass --force"),
    ("train: an unknown dataset", ["train", "--dataset", "imagenet", "--out", "{tmp}/x"], 2, "unknown dataset"),
    ("train: --resume a folder without a saved run", ["train", "--resume", "{ws}"], 2, "not the saved state"),
    ("train: no --out", ["train", "--dataset", "synthetic"], 2, "train needs --out"),
    ("bench: --set max_len=8000000", ["bench", "--set", "max_len=8000000"], 2, "max_len must be <= 65,536"),
    ("bench: --seq-len over max_len", ["bench", "--checkpoint", "{ckpt}", "--seq-len", "100000"], 2,
     r"seq_len must be in \[1, 64\]"),
    ("an unknown command", ["transmogrify"], 2, "invalid choice"),
    # hostile files and sizes
    ("predict --input-file: a JSONL number of 5,000 digits", ["predict", "--checkpoint", "{ckpt}", "--input-file",
     "{ws}/bigint.jsonl"], 2, r"bigint\.jsonl: line 2 is not JSON \(.*4300 digits"),
    ("predict --input-file: JSONL nested 100,000 deep", ["predict", "--checkpoint", "{ckpt}", "--input-file",
     "{ws}/nested.jsonl"], 2, r"nested\.jsonl: line 1 is not JSON \(lists or objects nested too deeply\)"),
    ("predict --input-file /dev/zero: one endless line", ["predict", "--checkpoint", "{ckpt}", "--input-file",
     "/dev/zero"], 2, r"/dev/zero: line 1 runs over 400,002 bytes without a line end"),
    ("bench: --threads 100000", ["bench", "--checkpoint", "{ckpt}", "--threads", "100000"], 2,
     r"threads must be from 1 to \d+ \(this machine's CPUs\), got 100000"),
    ("bench: --batch-size 2000000", ["bench", "--checkpoint", "{ckpt}", "--batch-size", "2000000"], 2,
     r"batch_size 2,000,000 × 64 tokens needs about .* GiB; the limit is 2 GiB"),
    ("bench: --batch-size 2000000 over lengths", ["bench", "--checkpoint", "{ckpt}", "--batch-size", "2000000",
     "--seq-lens", "8,64"], 2, r"batch_size 2,000,000 × 8 tokens needs about"),
    ("train: --split-seed -1", [*TRAIN, "--split-seed", "-1"], 2, "expected a seed from 0 to 4294967295, got -1"),
    ("eval: --split-seed -1", ["eval", "--checkpoint", "{ckpt}", "--split-seed", "-1"], 2,
     "expected a seed from 0 to 4294967295, got -1"),
    # a checkpoint's side files
    ("eval --ablation no-budget-net: history.json an object", ["eval", "--checkpoint", "{bad}", "--ablation",
     "no-budget-net", "--limit", "5"], 2, r"history\.json must be a list of per-epoch records",
     'history.json:{"epochs": 3}'),
    ("eval --ablation no-budget-net: history.json's last s NaN", ["eval", "--checkpoint", "{bad}", "--ablation",
     "no-budget-net", "--limit", "5"], 2, r"val_mean_budget is not a number in \(0, 1\] \(it is nan\)",
     'history.json:[{"val_mean_budget": NaN}]'),
    ("eval: history.json nested 100,000 deep", ["eval", "--checkpoint", "{bad}", "--limit", "5"], 2,
     r"history\.json nests lists or objects too deeply", "history.json:" + "[" * 100_000 + "]" * 100_000),
    ("predict: config.json nested 100,000 deep", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     r"config\.json nests lists or objects too deeply", "config.json:" + "[" * 100_000 + "]" * 100_000),
    ("predict: config.json a list", ["predict", "--checkpoint", "{bad}", "w1"], 2, "not a JSON object",
     "config.json:[1, 2]"),
    ("predict: label_names a string", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     "label_names must be a list of strings", 'label_names="ABCD"'),
    ("predict: label_names of numbers", ["predict", "--checkpoint", "{bad}", "w1"], 2,
     "label_names must be a list of strings", "label_names=[0, 1, 2, 3]"),
    ("predict: class names with line breaks, tabs and escapes stay on one line", ["predict", "--checkpoint", "{bad}",
     "w1 m0 a", "w2 m1 b"], 0, one_line_each(2), 'label_names=["a\\nb", "c\\td", "\\u001b[31mred", "e\\u2028f\\rg"]'),
]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli(capsys, ws, tmp_path, case):
    name, argv, expected, check, *damage = case
    bad = damaged(ws, tmp_path, damage[0]) if damage else None
    argv = [a.format(ckpt=ws / "ckpt", ws=ws, tmp=tmp_path, bad=bad) for a in argv]
    good = (ws, BBC, BBC_BF, BBC_BBA)
    before = snapshot(*good)
    code, out, err = cli(capsys, argv)
    assert code == expected, (code, out, err)
    assert "Traceback" not in out + err
    if expected:
        lines = err.strip().splitlines()
        assert len(lines) == 1 or lines[0].startswith("usage:"), err  # argparse's usage errors: usage, then the error
        assert re.search(check, lines[-1]), err
    else:
        check(out)
    assert snapshot(*good) == before  # no good file changed
    assert not (tmp_path / "new").exists() and not (tmp_path / "p").exists()  # nothing half-written


API_CASES = [
    ("analyze: an empty text", lambda c: _analyze(c, [""]), ValueError, "empty"),
    ("analyze: white space", lambda c: _analyze(c, ["   \n\t"]), ValueError, "empty"),
    ("analyze: no texts", lambda c: _analyze(c, []), ValueError, "no texts"),
    ("analyze: a string, not a list", lambda c: _analyze(c, "a string"), ValueError, "list"),
    ("analyze: None in the list", lambda c: _analyze(c, [None]), ValueError, "not text"),
    ("analyze: over the length limit", lambda c: _analyze(c, ["x" * (MAX_CHARS + 1)]), ValueError,
     f"the limit is {MAX_CHARS:,}"),
    ("load_checkpoint: a bit-flipped weight file", lambda c: load_checkpoint(c.bad("bit flip")), CheckpointError,
     "has changed"),
    ("load_checkpoint: another checkpoint's tokenizer", lambda c: load_checkpoint(c.bad("other tokenizer")),
     CheckpointError, "tokenizer.json has changed"),
    ("load_checkpoint: tau NaN in config.json", lambda c: load_checkpoint(c.bad("tau=NaN")), CheckpointError, "NaN"),
    ("ModelConfig: max_len 8000000", lambda c: _model(max_len=8_000_000), ValueError, "max_len must be <="),
    ("ModelConfig: a string n_heads", lambda c: _model(n_heads="8"), ValueError, "n_heads must be an integer"),
    ("ModelConfig: vocab_size 1", lambda c: _model(vocab_size=1), ValueError, "vocab_size must be >= 3"),
    ("TrainConfig: lr inf", lambda c: _train_cfg(lr=float("inf")), ValueError, "lr must be a finite number"),
    ("load_dataset: an unknown name", lambda c: _load("imagenet"), ValueError, "unknown dataset"),
    ("load_dataset: another task's classes", lambda c: _load("bbc", classes=["00", "10", "01", "11"]), ValueError,
     "different task"),
    ("save_checkpoint: over a folder of other files", lambda c: _save_into(c, c.ws), CheckpointError,
     "other than a checkpoint"),
    ("train: over a checkpoint without force", lambda c: _train_into(c.ws / "ckpt"), CheckpointError,
     "pass --force"),
    ("posthoc_checkpoint: over a checkpoint without force", lambda c: _posthoc_into(c.ws / "ckpt"), CheckpointError,
     "pass --force"),
]


class Ctx:
    def __init__(self, ws: Path, tmp_path: Path):
        self.ws, self.tmp_path = ws, tmp_path

    def ckpt(self):
        return load_checkpoint(self.ws / "ckpt")

    def bad(self, how: str) -> Path:
        return damaged(self.ws, self.tmp_path, how)


def _analyze(c: Ctx, texts):
    from budgetformer_core.analysis.infer import analyze

    return analyze(c.ckpt(), texts)


def _model(**kw):
    from budgetformer_core.config import ModelConfig

    return ModelConfig(**kw)


def _train_cfg(**kw):
    from budgetformer_core.config import TrainConfig

    return TrainConfig(**kw)


def _load(name: str, **kw):
    from budgetformer_core.io.data import load_dataset

    return load_dataset(name, **kw)


def _save_into(c: Ctx, path: Path):
    from budgetformer_core.io.checkpoint import save_checkpoint

    ckpt = c.ckpt()
    return save_checkpoint(path, ckpt.model, ckpt.tokenizer, ckpt.label_names)


def _train_into(out: Path):
    from budgetformer_core.config import ModelConfig, TrainConfig
    from budgetformer_core.io.data import load_synthetic
    from budgetformer_core.train.loop import train

    return train(load_synthetic(), ModelConfig(), TrainConfig(), out, progress=False)


def _posthoc_into(out: Path):
    import torch

    from budgetformer_core.train.prune import posthoc_checkpoint

    dense = load_checkpoint(BBC)
    return posthoc_checkpoint(dense, torch.ones(dense.config.n_layers, dense.config.n_heads), out, {})


@pytest.mark.parametrize("case", API_CASES, ids=[c[0] for c in API_CASES])
def test_api(ws, tmp_path, case):
    _, call, error, message = case
    before = snapshot(ws, BBC)
    with pytest.raises(error, match=message):
        call(Ctx(ws, tmp_path))
    assert snapshot(ws, BBC) == before


# --------------------------------------------------------------------------- exports, checkpoints

def test_csv_exports_neutralise_formulas_and_keep_rows():
    from budgetformer_core.io.inputs import table_csv

    frame = pd.DataFrame({"text": HOSTILE_TEXTS, "n": range(-4, 4), "=col": ["x"] * 8})
    rows, back = read_back(table_csv(frame))
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].tolist() == [("'" + t if t[0] in "=+-@\t\r" else t) for t in HOSTILE_TEXTS]
    assert back["n"].tolist() == [str(n) for n in range(-4, 4)]  # numbers stay numbers
    assert back.columns.tolist() == ["text", "n", "'=col"]


def test_saving_over_a_linked_checkpoint_keeps_the_link(ws, tmp_path):
    from budgetformer_core.io.checkpoint import save_checkpoint

    real, link = tmp_path / "real", tmp_path / "link"
    shutil.copytree(ws / "ckpt", real)
    link.symlink_to(real)
    ckpt = load_checkpoint(ws / "ckpt")
    save_checkpoint(link, ckpt.model, ckpt.tokenizer, ckpt.label_names, ckpt.meta, ckpt.history)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # nothing hidden left behind
    modes = {p.name: p.stat().st_mode & 0o777 for p in real.iterdir()}
    assert len(set(modes.values())) == 1, modes  # model.safetensors is not the odd one out
    assert load_checkpoint(link).label_names == ckpt.label_names


def test_train_force_over_a_linked_checkpoint_keeps_the_link(capsys, ws, tmp_path):
    """``train --force --out LINK``: the folder the link names gets the new checkpoint, the link
    stays, nothing hidden is left beside them, and every file has a new plain file's mode."""
    real, link = tmp_path / "real", tmp_path / "link"
    shutil.copytree(ws / "ckpt", real)
    link.symlink_to(real)
    tiny = [f"--set={item}" for item in ("epochs=1", "d_model=16", "n_layers=1", "n_heads=2", "vocab_size=50",
                                         "max_len=16")]
    code, out, err = cli(capsys, ["train", "--dataset", str(ws / "all.csv"), "--out", str(link), "--force", "--quiet",
                                  *tiny])
    assert code == 0, err
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # nothing hidden left behind
    assert load_checkpoint(link).config.d_model == 16  # the new model
    (tmp_path / "plain").write_text("")
    plain = (tmp_path / "plain").stat().st_mode & 0o777  # 0644 under the usual umask
    assert {p.name: p.stat().st_mode & 0o777 for p in real.iterdir()} == dict.fromkeys(
        ["config.json", "history.json", "model.safetensors", "tokenizer.json"], plain)


def test_a_checkpoint_replaced_while_read_says_so(ws, tmp_path):
    """A reader racing a writer that saves over the folder: each load succeeds or says the
    checkpoint was being rewritten — never that a good file "has changed" or is missing."""
    import copy
    import threading

    import torch

    from budgetformer_core.io.checkpoint import save_checkpoint

    path = tmp_path / "ckpt"
    shutil.copytree(ws / "ckpt", path)
    ckpt = load_checkpoint(path)
    other = copy.deepcopy(ckpt.model)  # other weights: a reader that mixes the two sees changed hashes
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    done = threading.Event()

    def write() -> None:
        for i in range(60):
            save_checkpoint(path, other if i % 2 else ckpt.model, ckpt.tokenizer, ckpt.label_names, ckpt.meta,
                            ckpt.history)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    errors = []
    while not done.is_set():
        try:
            load_checkpoint(path)
        except CheckpointError as e:
            errors.append(str(e))
    writer.join()
    wrong = [e for e in errors if "was being rewritten" not in e and "is not a directory" not in e]
    assert not wrong, wrong[:3]
    assert load_checkpoint(path).label_names == ckpt.label_names




# --------------------------------------------------------------------------- hostile model folders

def hostile(source: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the model folder ``source`` with one thing wrong. ``how``: ``key=JSON`` (a value
    of config.json; ``-key`` drops it), ``remove:NAME``, ``pickle`` (the weights as a pickle
    only, one that would write a file if it were ever unpickled), or ``tensor NAME:KIND`` (KIND
    nan, inf, int64, complex64 or a shorter shape; a checkpoint of ours gets its recorded sha256
    rewritten, so that only the tensor is wrong)."""
    import pickle

    import torch
    from safetensors.torch import load_file, save_file

    from budgetformer_core.io.files import file_sha256

    bad = tmp_path / "bad"
    shutil.copytree(source, bad)
    config = json.loads((bad / "config.json").read_text())
    if how.startswith("tensor "):
        name, kind = how.removeprefix("tensor ").split(":")
        tensors = load_file(str(bad / "model.safetensors"))
        t = tensors[name]
        if kind in ("nan", "inf"):
            t.view(-1)[0] = float(kind)
        tensors[name] = t.to(getattr(torch, kind)) if kind in ("int64", "complex64") else t[:-2] if kind == "shorter" \
            else t
        save_file(tensors, str(bad / "model.safetensors"))
        if "sha256" in config:
            config["sha256"]["model.safetensors"] = file_sha256(bad / "model.safetensors")
    elif how.startswith("remove:"):
        for name in how.removeprefix("remove:").split(","):
            (bad / name).unlink()
    elif how == "pickle":
        class Canary:
            def __reduce__(self):
                return open, (str(tmp_path / "unpickled"), "w")

        (bad / "model.safetensors").unlink()
        (bad / "pytorch_model.bin").write_bytes(pickle.dumps(Canary()))
    elif how.startswith("-"):
        config.pop(how[1:])
    else:
        key, value = how.split("=", 1)
        config[key] = json.loads(value)
    (bad / "config.json").write_text(json.dumps(config))  # json writes NaN bare
    return bad


FOLDER_CASES = [  # id, the folder (a family's classifier, or "ours"), what is wrong, the one-line error
    ("an unknown model_type", "bert", 'model_type="gpt2"', r"model_type 'gpt2' is not supported \(only 'bert', "
     r"'distilbert', 'roberta', 'xlm-roberta', 'electra', 'albert'\)"),
    ("a model_type that is a list", "bert", "model_type=[1]", r"model_type \[1\] is not supported"),
    ("a pickle only, never unpickled", "bert", "pickle", r"model\.safetensors: not found; pytorch_model\.bin is "
     "never loaded"),
    ("a position table of another shape", "bert", "tensor bert.embeddings.position_embeddings.weight:shorter",
     r"bert\.embeddings\.position_embeddings\.weight has shape \(62, 32\), config\.json implies \(64, 32\)"),
    ("RoBERTa's table without its offset rows", "roberta", "tensor roberta.embeddings.position_embeddings.weight:"
     "shorter", r"position_embeddings\.weight has shape \(64, 32\), config\.json implies \(66, 32\)"),
    ("ALBERT's shared layer of another shape", "albert", "tensor albert.encoder.albert_layer_groups.0.albert_layers.0."
     "ffn.weight:shorter", r"albert_layers\.0\.ffn\.weight has shape \(62, 32\), config\.json implies \(64, 32\)"),
    ("id2label not 0 … C-1", "bert", 'id2label={"0": "a", "2": "b"}', r"id2label's keys must be the ids 0 … 1"),
    ("id2label keys 00, 1", "bert", 'id2label={"00": "a", "1": "b"}', r"id2label's keys must be the ids 0 … 1"),
    ("id2label names that are not strings", "bert", 'id2label={"0": "a", "1": ["b"]}', "names must be strings"),
    ("no tokenizer", "bert", "remove:tokenizer.json,vocab.txt", "the checkpoint has no tokenizer"),
    ("no tokenizer (RoBERTa)", "roberta", "remove:tokenizer.json", "the checkpoint has no tokenizer"),
    ("a NaN in the classifier", "roberta", "tensor classifier.out_proj.weight:nan",
     r"tensor classifier\.out_proj\.weight holds NaN or infinity"),
    ("an infinity in a layer", "bert", "tensor bert.encoder.layer.1.output.dense.weight:inf",
     r"tensor bert\.encoder\.layer\.1\.output\.dense\.weight holds NaN or infinity"),
    ("integer weights", "bert", "tensor classifier.weight:int64",
     r"tensor classifier\.weight is int64; weights must be floating-point"),
    ("complex weights", "electra", "tensor electra.embeddings_project.weight:complex64",
     r"tensor electra\.embeddings_project\.weight is complex64"),
    ("ours: a NaN with its sha256 recorded", "ours", "tensor head.weight:nan",
     r"weight head\.weight holds NaN or infinity"),
    ("ours: complex weights with their sha256", "ours", "tensor layers.0.attn.qkv.weight:complex64",
     r"weight layers\.0\.attn\.qkv\.weight is complex64; weights must be floating-point"),
    *[(f"config.json: {how}", family, how, message) for family, how, message in [
        ("bert", 'hidden_act="gelu_2"', r"hidden_act 'gelu_2' is not supported \(only gelu"),
        ("bert", 'hidden_act=["gelu"]', r"hidden_act \['gelu'\] is not supported"),
        ("bert", "layer_norm_eps=0", r"layer_norm_eps must be in \(0, 1\), got 0"),
        ("bert", "layer_norm_eps=NaN", "layer_norm_eps must be a finite number"),
        ("bert", "hidden_dropout_prob=1.0", r"hidden_dropout_prob must be in \[0, 1\), got 1.0"),
        ("bert", 'hidden_dropout_prob="0.1"', "hidden_dropout_prob must be a number"),
        ("bert", 'num_attention_heads="4"', "num_attention_heads must be an integer, got '4'"),
        ("bert", "hidden_size=true", "hidden_size must be an integer, got True"),
        ("bert", "num_hidden_layers=2.0", "num_hidden_layers must be an integer, got 2.0"),
        ("bert", "num_attention_heads=5", r"hidden_size \(32\) must be divisible by n_heads \(5\)"),
        ("bert", "type_vocab_size=0", "type_vocab_size must be >= 1"),
        ("bert", "vocab_size=1000000000000", "implies about .* weights"),
        ("bert", "max_position_embeddings=1000000", "max_position_embeddings must be <= 65,536"),
        ("bert", "-hidden_size", "no 'hidden_size'"),
        ("bert", 'position_embedding_type="relative_key"', "position_embedding_type 'relative_key' is not supported"),
        ("bert", "is_decoder=true", "is_decoder True: a decoder's causal attention"),
        ("distilbert", 'activation="tanhh"', r"activation 'tanhh' is not supported"),
        ("distilbert", 'dim="32"', "dim must be an integer"),
        ("roberta", 'pad_token_id="1"', "pad_token_id must be a whole number >= 0"),
        ("roberta", "pad_token_id=65", "max_position_embeddings less the 66 positions before the first token must "
         "be >= 1"),
        ("electra", "embedding_size=0", "embedding_size must be >= 1"),
        ("albert", "inner_group_num=2", r"inner_group_num 2 is not supported \(only 1"),
        ("albert", "num_hidden_groups=0", "num_hidden_groups must be a whole number from 1 to num_hidden_layers"),
    ]],
]


@pytest.mark.parametrize("case", FOLDER_CASES, ids=[c[0] for c in FOLDER_CASES])
def test_a_hostile_model_folder_is_one_line(capsys, ws, family_classifier, tmp_path, case):
    """Each is refused before it is used: exit 2, one line naming what is wrong, no traceback,
    nothing unpickled, no file changed."""
    _, family, how, message = case
    source = ws / "ckpt" if family == "ours" else family_classifier(family)
    bad = hostile(source, tmp_path, how)
    before = snapshot(source, bad)
    capsys.readouterr()  # (transformers' progress bar, when the folder was written just now)
    code, out, err = cli(capsys, ["predict", "--checkpoint", str(bad), "the market rose"])
    assert code == 2 and out == "" and "Traceback" not in err, (code, out, err)
    assert err.count("\n") == 1 and re.search(message, err), err
    assert snapshot(source, bad) == before
    assert not (tmp_path / "unpickled").exists()


def test_a_fifo_in_a_model_folder_is_refused_at_once(ws, family_classifier, tmp_path):
    """A FIFO (which an open would wait on for ever) named as a file the loader reads, in a
    classifier's folder and in ours: refused before anything is opened, by predict and by the
    app's description of a classifier folder. Run in a child process with a time limit, so that
    a hang fails the test instead of stopping the suite."""
    import os
    import subprocess
    import sys

    from ..conftest import ROOT

    folders = []
    for source, name in ((family_classifier("roberta"), "model.safetensors"), (family_classifier("bert"),
                                                                               "config.json"),
                         (ws / "ckpt", "history.json"), (ws / "ckpt", "tokenizer.json")):
        folder = tmp_path / f"{len(folders)}"
        shutil.copytree(source, folder)
        (folder / name).unlink()
        os.mkfifo(folder / name)
        folders.append(str(folder))
    script = """
import contextlib, io, json, sys
from budgetformer_core.cli import main
from budgetformer_core.io.classifier import describe
from budgetformer_core.io.files import CheckpointError
results = []
for folder in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["predict", "--checkpoint", folder, "the market rose"])
    try:
        described = str(describe(folder))
    except CheckpointError as e:
        described = str(e)
    results.append([code, err.getvalue(), described])
print(json.dumps(results))
"""
    done = subprocess.run([sys.executable, "-c", script, *folders], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    for folder, (code, err, described) in zip(folders, json.loads(done.stdout), strict=True):
        assert code == 2 and err.count("\n") == 1 and "is not a regular file (a FIFO" in err and folder in err, err
        assert "Traceback" not in err and "is not a regular file (a FIFO" in described  # the app's description too

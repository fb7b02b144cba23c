"""Bad input on every surface — the command line, the Python API and the app — gets a correct
result or a clear one-line error: exit status 2 (130 for Ctrl-C, tested in test_resume.py), never
a traceback, and no good file changes (every file is hashed before and after each case).

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
from budgetformer_core.io.files import CheckpointError, file_sha256
from budgetformer_core.io.inputs import MAX_CHARS
from budgetformer_core.io.loader import load_checkpoint

from ..conftest import PRECOMPUTED

BBC = PRECOMPUTED / "bbc-dense"
BBC_BF = PRECOMPUTED / "bbc-budgetformer"
BBC_BBA = PRECOMPUTED / "bbc-bba"


def snapshot(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots``."""
    return {str(p): file_sha256(p) for root in roots for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ws(tiny_checkpoint, tmp_path_factory) -> Path:
    """Good files: the tiny synthetic checkpoint (classes 00, 10, 01, 11) and data files for it."""
    from budgetformer_core.io.data import load_synthetic

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
    ("train: --split-seed -1", [*TRAIN, "--split-seed", "-1"], 2, "expected a whole number >= 0, got -1"),
    ("eval: --split-seed -1", ["eval", "--checkpoint", "{ckpt}", "--split-seed", "-1"], 2,
     "expected a whole number >= 0, got -1"),
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


# --------------------------------------------------------------------------- the app

def test_app_cuts_at_the_one_limit():
    from app.logic.explore import prepare_text

    for text, kept, cut in [("x" * (MAX_CHARS + 5), MAX_CHARS, True), ("x" * MAX_CHARS, MAX_CHARS, False),
                            (None, 0, False), ("", 0, False)]:
        prepared = prepare_text(text)
        assert (len(prepared.text), prepared.cut, prepared.limit) == (kept, cut, MAX_CHARS)


def test_app_reads_no_folder_outside_the_operators_list(tmp_path, monkeypatch):
    from app import local_copy as copies

    allowed, private = tmp_path / "data", tmp_path / "private"
    allowed.mkdir()
    private.mkdir()
    (private / "secret.csv").write_text("text,label\nmy diary,World\n")
    (allowed / "one.csv").write_text("text,label\na text,World\n")
    monkeypatch.setenv(copies.DATA_ROOTS_ENV, str(allowed))
    before = snapshot(tmp_path)
    for typed in (str(private), str(private / "secret.csv"), str(allowed / ".." / "private"), "/etc", "bad\0name"):
        assert copies.local_copy(typed) is None, typed
    assert copies.local_copy(str(allowed / "one.csv")) == (allowed / "one.csv").resolve()  # a single file is fine
    assert snapshot(tmp_path) == before


APP_TEXTS = {
    "empty": ("", "text is empty"),
    "white space": (" \n\t ", "text is empty"),
    "markup": ("<script>alert(1)</script><b>x</b>", None),
    "emoji, RTL, zero-width, NUL": ("🚀 שלום مرحبا \u200b \x00 x", None),
    "over the limit": ("The minister spoke about the election. " * (MAX_CHARS // 39 + 10),
                       f"only the first {MAX_CHARS:,} were kept"),
}


@pytest.fixture(scope="module")
def explore():
    from streamlit.testing.v1 import AppTest

    from app.state import CHECKPOINTS, DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"{CHECKPOINTS / DEFAULT_MODEL} is missing")
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app" / "main.py"), default_timeout=120)
    at.run(timeout=120)
    assert not at.exception
    return at


@pytest.mark.parametrize("name", list(APP_TEXTS))
def test_app_explore_page(explore, name):
    text, message = APP_TEXTS[name]
    before = snapshot(PRECOMPUTED)
    explore.text_area(key="text").input(text).run(timeout=120)
    assert not explore.exception, [e.value for e in explore.exception]
    shown = [str(el.value) for kind in ("info", "warning", "error") for el in explore.get(kind)]
    if message:
        assert any(message in s for s in shown), shown
    else:  # a prediction, and the text never rendered as markup
        assert [m for m in explore.metric if m.label == "Prediction"]
        assert not any("<script>" in str(m.value) for m in explore.markdown)
    assert not any("Traceback" in s for s in shown)
    assert snapshot(PRECOMPUTED) == before


# --------------------------------------------------------------------------- hostile links, exports, checkpoints

NINES = "9" * 5000
HOSTILE_LINKS = {  # query parameters → the link value that falls back to its default, with its message
    "k superscript two": ({"mode": "force_k", "k": "\u00b2"}, "k", "is not a number of heads from 1 to"),
    "k of 5,000 digits": ({"mode": "force_k", "k": NINES}, "k", "is not a number of heads from 1 to"),
    "k full-width": ({"mode": "force_k", "k": "\uff13"}, "k", "is not a number of heads from 1 to"),
    "seed superscript one": ({"ablation": "random-heads", "seed": "\u00b9"}, "seed", "is not a whole number"),
    "seed of 5,000 digits": ({"ablation": "random-heads", "seed": NINES}, "seed", "is not a whole number"),
    "index of 5,000 digits": ({"index": NINES}, "index", "is not a test text's index"),
    "index Arabic-Indic": ({"index": "\u0663"}, "index", "is not a test text's index"),
    "budget of 5,000 digits": ({"mode": "slider", "budget": NINES}, "budget", "is not a number in"),
}


@pytest.mark.parametrize("name", list(HOSTILE_LINKS))
def test_link_reader_falls_back_on_hostile_numbers(name):
    from app.links import LinkView, read_link
    from app.method import Method

    params, field, message = HOSTILE_LINKS[name]
    view, notes = read_link(params, Method(), n_heads=8, n_texts=100)
    assert getattr(view, field) == getattr(LinkView(), field)  # the default
    [note] = notes
    assert note.startswith(f"The link's {field} (") and message in note and note.endswith("using the default instead.")
    assert len(note) < 200  # 5,000 digits are not repeated back


def test_link_reader_says_when_it_cuts_a_long_text():
    from app.links import LINK_TEXT_READ, read_link
    from app.method import Method

    text = "w" * (LINK_TEXT_READ + 500)
    view, [note] = read_link({"text": text}, Method(), 8, None)
    assert view.text == text[:LINK_TEXT_READ]
    assert f"{len(text):,} characters" in note and f"at most {LINK_TEXT_READ:,}" in note
    view, notes = read_link({"text": text[:LINK_TEXT_READ], "k": "3", "mode": "force_k"}, Method(), 8, None)
    assert (view.text, view.k, notes) == (text[:LINK_TEXT_READ], 3, [])  # a good link reads as before


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


def test_csv_exports_neutralise_formulas_and_keep_rows():
    from budgetformer_core.io.inputs import table_csv

    frame = pd.DataFrame({"text": HOSTILE_TEXTS, "n": range(-4, 4), "=col": ["x"] * 8})
    rows, back = read_back(table_csv(frame))
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].tolist() == [("'" + t if t[0] in "=+-@\t\r" else t) for t in HOSTILE_TEXTS]
    assert back["n"].tolist() == [str(n) for n in range(-4, 4)]  # numbers stay numbers
    assert back.columns.tolist() == ["text", "n", "'=col"]


def test_class_names_are_text_in_charts():
    from app.charts.easy_hard import budget_by_class
    from app.charts.errors import confusion_heatmap
    from app.charts.explore import probabilities_bar

    names = ["<b>bold</b>", "<a href='https://x'>link</a>", "R&D", "plain"]
    bar = probabilities_bar(names, [0.1, 0.2, 0.3, 0.4]).to_dict()["data"][0]
    assert list(bar["y"]) == ["&lt;b&gt;bold&lt;/b&gt;", "&lt;a href='https://x'&gt;link&lt;/a&gt;", "R&amp;D", "plain"]
    confusion = confusion_heatmap([[1] * 4] * 4, names).to_dict()["data"][0]
    assert list(confusion["x"]) == list(confusion["y"]) == list(bar["y"])
    boxes = budget_by_class(names, [0.5] * 4, names).to_dict()
    assert all("<" not in str(b["x0"]) + str(b["name"]) for b in boxes["data"])


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


def test_the_upload_limit_is_the_batch_pages():
    import tomllib

    from app.logic.batch import BATCH_MAX_BYTES, BATCH_MAX_MB

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == BATCH_MAX_MB  # MB: Streamlit's unit
    assert BATCH_MAX_BYTES == BATCH_MAX_MB * 2**20  # what the server refuses, the page refuses too


# --------------------------------------------------------------------------- the app, hostile

MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"


def app_run(at):
    at.run(timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """What the page's download buttons serve, by file name, as the browser would receive it
    (Streamlit's in-memory media store, recorded as the page fills it)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    served: dict[str, bytes] = {}
    store = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        served[filename] = path_or_data
        return store(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return served


def warnings_of(at) -> list[str]:
    return [str(w.value).replace("\\", "") for w in at.warning]


def test_app_hostile_link():
    """An Explore link with k = "²", a seed of 5,000 digits and a text longer than a link carries:
    a note for each, the analysis at the defaults, no traceback (``read_link``'s cases above)."""
    from streamlit.testing.v1 import AppTest

    from app.state import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    query = {"model": DEFAULT_MODEL, "mode": "force_k", "k": "\u00b2", "ablation": "random-heads", "seed": NINES,
             "text": "w " * 5000}
    at = AppTest.from_file(str(MAIN), default_timeout=180)
    at.query_params.update(query)
    app_run(at)
    shown = warnings_of(at)
    for start in ("The link's k ('²')", "The link's seed ('9999", "The link's text has 10,000 characters"):
        assert any(w.startswith(start) for w in shown), (start, shown)
    assert at.text_area(key="text").value == query["text"][:8000]
    assert [m for m in at.metric if m.label == "Prediction"]  # the analysis, at the defaults


def test_app_one_bad_checkpoint_disables_itself(tmp_path, monkeypatch):
    """A checkpoint folder whose config.json nests 100,000 lists deep, or names its classes with
    a string, drops out of the model list with a note; the other models and pages work."""
    from streamlit.testing.v1 import AppTest

    from app import state

    good = state.CHECKPOINTS / state.DEFAULT_MODEL
    if not good.is_dir():
        pytest.skip(f"{good} is missing")
    shelf = tmp_path / "checkpoints"
    shelf.mkdir()
    (shelf / state.DEFAULT_MODEL).symlink_to(good)
    for name, text in (("bbc-deep", "[" * 100_000 + "]" * 100_000),
                       ("bbc-letters", json.dumps({"model": {"n_layers": 2, "n_heads": 4}, "label_names": "ABCDE"}))):
        (shelf / name).mkdir()
        (shelf / name / "config.json").write_text(text)
    monkeypatch.setattr(state, "CHECKPOINTS", shelf)
    before = snapshot(PRECOMPUTED)
    at = app_run(AppTest.from_file(str(MAIN), default_timeout=180))
    notes = [str(c.value).replace("\\", "") for c in at.sidebar.caption if "Not offered" in str(c.value)]
    assert len(notes) == 2 and "bbc-deep" in notes[0] and "label_names" in notes[1], notes
    assert at.sidebar.selectbox(key="model_for_bbc").options == [state.DEFAULT_MODEL]
    assert [m for m in at.metric if m.label == "Prediction"]
    for page in ("dynamics", "batch"):
        at.switch_page(f"views/{page}.py")
        app_run(at)
    assert snapshot(PRECOMPUTED) == before


def test_app_batch_csv_download_of_hostile_texts(downloads):
    from streamlit.testing.v1 import AppTest

    from app.state import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    at = app_run(AppTest.from_file(str(MAIN.parent / "views" / "batch.py"), default_timeout=180))  # the page alone
    upload = pd.DataFrame({"text": HOSTILE_TEXTS}).to_csv(index=False, lineterminator="\r\n").encode()
    at.file_uploader(key="batch_file").set_value(("hostile.csv", upload, "text/csv"))
    app_run(at)
    assert len(at.dataframe[0].value) == len(HOSTILE_TEXTS)
    rows, back = read_back(downloads[f"batch-{DEFAULT_MODEL}.csv"])
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].str.removeprefix("'").tolist() == HOSTILE_TEXTS


def test_app_batch_page_names_the_jsonl_line_that_is_not_json(ws):
    """The Batch page with a JSONL line holding a 5,000-digit number, or 100,000 nested brackets:
    the file's line and why, no traceback (the same reader as ``predict --input-file``)."""
    from streamlit.testing.v1 import AppTest

    from app.state import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    at = app_run(AppTest.from_file(str(MAIN.parent / "views" / "batch.py"), default_timeout=180))  # the page alone
    for name, message in (("bigint.jsonl", "line 2 is not JSON ("),
                          ("nested.jsonl", "line 1 is not JSON (lists or objects nested too deeply)")):
        at.file_uploader(key="batch_file").set_value((name, (ws / name).read_bytes(), "application/json"))
        app_run(at)
        errors = [e.value.replace("\\", "") for e in at.error]
        assert len(errors) == 1 and message in errors[0] and "\n" not in errors[0], errors
        assert not at.dataframe


AG_NEWS = "ag_news-budgetformer"


def test_app_errors_csv_download_of_hostile_texts(downloads, tmp_path, monkeypatch):
    """The Errors page over a local copy of hostile test texts (evaluated live: the precomputed
    table is of the published split)."""
    from streamlit.testing.v1 import AppTest

    from app import state
    from app.local_copy import DATA_ROOTS_ENV

    if AG_NEWS not in state.available_models():
        pytest.skip(f"no {AG_NEWS}")
    monkeypatch.setenv(DATA_ROOTS_ENV, str(tmp_path))
    monkeypatch.setattr(state, "MANIFEST", tmp_path / "no-manifest.json")  # nothing vouched for: run live
    local = tmp_path / "ag_news_test.csv"
    labels = ["World", "Sports", "Business", "Sci/Tech"] * 2
    pd.DataFrame({"text": HOSTILE_TEXTS, "label": labels}).to_csv(local, index=False, lineterminator="\r\n")
    at = AppTest.from_file(str(MAIN.parent / "views" / "errors.py"), default_timeout=180)  # the page alone
    at.session_state[state.MODEL_KEY] = AG_NEWS  # what the sidebar's picker and local copy field store
    at.session_state[state.DATA_DIRS_KEY] = {"ag_news": str(local)}
    app_run(at)
    at.toggle(key="err_all").set_value(True)  # every text, not only the misclassified ones
    app_run(at)
    rows, back = read_back(downloads[f"errors-{AG_NEWS}-test.csv"])
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].str.removeprefix("'").tolist() == [t.strip() for t in HOSTILE_TEXTS]  # the loader strips

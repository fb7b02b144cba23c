"""Per-input budgets fitted on a frozen model (``budgetformer fit-budget``): only the allocation
networks learn, they are written as a small adapter that names its base by sha256, and the
adapter opens wherever a checkpoint does — on a user's Hugging Face classifier from texts alone,
and on one of our dense checkpoints with labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from budgetformer_core.cli import main
from budgetformer_core.io.checkpoint import save_checkpoint
from budgetformer_core.io.files import CheckpointError, file_sha256
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode, pad
from budgetformer_core.model.budget import Control
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config

TEXTS = ["the market rose", "new phone software", "the election vote", "a goal in the match", "film music won",
         "shares fell after the vote", "software shares rose", "the match was a new film"] * 3
MB = 2**20


def logits(ckpt, texts: list[str], control: Control | None = None) -> torch.Tensor:
    ids, _ = encode(ckpt.tokenizer, texts, ckpt.config.max_len)
    batch = pad(ids)
    with torch.no_grad():
        return ckpt.model(batch.ids, batch.mask, control=control).logits


def fit(base: Path, dataset: str | Path, out: Path, *extra: str) -> int:
    return main(["fit-budget", "--checkpoint", str(base), "--dataset", str(dataset), "--out", str(out),
                 "--set", "epochs=2", "--set", "batch_size=8", "--quiet", *extra])


@pytest.fixture
def users_base(hf_classifier, tmp_path) -> Path:
    """A copy of the user's classifier (the test alters it) beside a file of texts alone."""
    base = tmp_path / "my-bert"
    shutil.copytree(hf_classifier, base)
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    return base


def test_a_users_classifier_gets_budgets_from_texts_alone(users_base, tmp_path, capsys):
    adapter = tmp_path / "my-bert-budgets"
    assert fit(users_base, tmp_path / "texts.txt", adapter) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["adapter"] == str(adapter)

    # small, and nothing of the base in it: the allocators' tensors alone
    assert {p.name for p in adapter.iterdir()} == {"config.json", "model.safetensors", "history.json"}
    assert sum(p.stat().st_size for p in adapter.iterdir()) < 5 * MB
    stored = load_file(str(adapter / "model.safetensors"))
    base_names = set(BudgetFormer(load_checkpoint(users_base).config).state_dict())
    assert stored and all(".alloc." in name for name in stored) and not set(stored) & base_names
    config = json.loads((adapter / "config.json").read_text())
    assert config["adapter"]["base"] == {"name": "my-bert", "path": "../my-bert",
                                         "sha256": file_sha256(users_base / "model.safetensors")}
    assert config["fit"]["labels"] == "predicted by the base" and "test" not in config

    # it opens as a checkpoint: a BudgetFormer on the base's weights, which stay as they were
    fitted, base = load_checkpoint(adapter), load_checkpoint(users_base)
    assert fitted.config.method == "budgetformer" and fitted.label_names == base.label_names
    assert torch.equal(logits(fitted, TEXTS, Control(budget=1.0)), logits(base, TEXTS))
    assert main(["predict", "--checkpoint", str(adapter), "--json", *TEXTS[:5]]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    H = fitted.config.n_heads
    assert len(rows) == 5 and all(1 <= k <= H for r in rows for k in r["k"])


def test_an_adapter_refuses_a_changed_base_in_one_line(users_base, tmp_path, capsys):
    adapter = tmp_path / "budgets"
    assert fit(users_base, tmp_path / "texts.txt", adapter) == 0
    weights = load_file(str(users_base / "model.safetensors"))
    name = next(n for n in sorted(weights) if n.endswith("attention.self.query.weight"))
    weights[name][0, 0] += 1.0  # one weight of the base changes
    save_file(weights, str(users_base / "model.safetensors"), metadata={"format": "pt"})
    capsys.readouterr()
    assert main(["predict", "--checkpoint", str(adapter), "the market rose"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "fitted on another my-bert" in err and "fit-budget" in err
    with pytest.raises(CheckpointError, match="fitted on another"):
        load_checkpoint(adapter)
    shutil.rmtree(users_base)  # a base that is gone: one line naming where it was looked for
    with pytest.raises(CheckpointError, match="its base my-bert is not at"):
        load_checkpoint(adapter)


@pytest.fixture(scope="module")
def our_dense(tiny_checkpoint, tmp_path_factory) -> Path:
    """One of our dense checkpoints for the synthetic task (random weights, the tiny model's tokenizer)."""
    tiny = load_checkpoint(tiny_checkpoint)
    torch.manual_seed(0)
    model = BudgetFormer(small_config(method="dense", vocab_size=tiny.config.vocab_size, n_classes=4, max_len=64))
    path = tmp_path_factory.mktemp("dense") / "synthetic-dense"
    save_checkpoint(path, model.eval(), tiny.tokenizer, tiny.label_names, {"dataset": "synthetic", "split_seed": 0})
    return path


@pytest.mark.parametrize("method", ["budgetformer", "bba"])
def test_one_of_our_dense_checkpoints_with_labels(our_dense, tmp_path, capsys, method):
    adapter = tmp_path / method
    assert fit(our_dense, "synthetic", adapter, "--method", method, "--set", "max_train=48") == 0
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])
    config = json.loads((adapter / "config.json").read_text())
    assert config["fit"] == {"rows": 48, "labels": "given"} and config["dataset"] == "synthetic"
    assert config["test"]["accuracy"] == printed["accuracy"] and 0 <= config["test"]["agreement"] <= 1
    assert [row["epoch"] for row in json.loads((adapter / "history.json").read_text())] == [1, 2]

    fitted, base = load_checkpoint(adapter), load_checkpoint(our_dense)
    assert fitted.config.method == method and 0 < fitted.validation_budget <= 1
    texts = ["w1 m0 a", "w2 m1 b w3", "w4"]
    assert torch.equal(logits(fitted, texts, Control(budget=1.0)), logits(base, texts))
    assert main(["eval", "--checkpoint", str(adapter), "--limit", "40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_heads_fraction"] <= 1
    if method == "bba":  # nested head sets: a larger budget runs a superset of a smaller one's heads
        ids, _ = encode(fitted.tokenizer, texts, 64)
        batch = pad(ids)
        with torch.no_grad():
            small, large = (fitted.model(batch.ids, batch.mask, control=Control(budget=b)) for b in (0.25, 0.75))
        for a, b in zip(small.layers, large.layers):
            assert bool((a.selected <= b.selected).all())


def test_what_fit_budget_refuses(our_dense, tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "never"
    # the base's shape is the base's; a budgeted model's budgets are its own
    assert fit(our_dense, "synthetic", out, "--set", "d_model=64") == 2
    assert "the frozen base decides it" in capsys.readouterr().err
    assert fit(tiny_checkpoint, "synthetic", out) == 2
    assert "its budgets are its own" in capsys.readouterr().err
    assert fit(our_dense, "synthetic", out, "--set", "temperature=hot") == 2
    assert "expected a number" in capsys.readouterr().err
    assert not out.exists()


def test_an_adapter_reads_pairs_as_its_base_does(users_base, tmp_path, capsys):
    from budgetformer_core.analysis.infer import pair_columns

    rows = [(a, b, "business" if i % 2 else "tech") for i, (a, b) in enumerate(zip(TEXTS, reversed(TEXTS)))]
    (tmp_path / "pairs.csv").write_text("text,text_pair,label\n" + "".join(f"{a},{b},{y}\n" for a, b, y in rows))
    adapter = tmp_path / "pair-adapter"
    assert fit(users_base, tmp_path / "pairs.csv", adapter) == 0
    fitted, base = load_checkpoint(adapter), load_checkpoint(users_base)
    assert pair_columns(fitted) == pair_columns(base) == ("text", "text_pair")
    assert "classifier" in json.loads((adapter / "config.json").read_text())  # said where the app reads it
    capsys.readouterr()
    assert main(["predict", "--checkpoint", str(adapter), "--pair", "the market rose", "shares fell", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["label"] in base.label_names

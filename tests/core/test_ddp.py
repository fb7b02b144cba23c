"""Training on several processes (``budgetformer_core.train.distributed``): two gloo processes launched
by torchrun train what one process trains, each computing its own rows of every batch.

The same file is the torchrun worker (``python -m torch.distributed.run ... test_ddp.py``): on
every rank it checks DDP's reduced gradients against one process's gradient of the whole batch,
runs ``budgetformer train`` as ``-m budgetformer_core.cli`` does, and writes what that rank's
model was fed to ``rank<r>.json``.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import random
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from budgetformer_core import cli
from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.model.budget import Control, TrainingControl
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.model.losses import total_loss
from budgetformer_core.train.loop import distributed

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["--quiet", "--set", "epochs=2", "--set", "max_len=24", "--set", "d_model=32", "--set", "n_heads=4",
         "--set", "d_ff=64", "--set", "vocab_size=100", "--set", "dropout=0", "--set", "random_k=0.5",
         "--set", "s_max=0.75"]
"""A tiny recipe: the default adaptive BudgetFormer, 2 epochs, without dropout (whose masks
cannot be the same when the rows are spread over processes), ranking first (``random_k``: a
random k of 1 … 3 per input for the first epoch, then f_θ alone learns, which DDP must allow)."""


def write_task(path: Path, n: int = 1200, seed: int = 0) -> Path:
    """Three classes, each marked by one of its cue letters among 15 noise letters, with 25 % of
    the labels drawn at random (so accuracy stays well below 100 %). Every word is one
    character: the WordPiece vocabulary has no ties to break, the same in every process."""
    rng = random.Random(seed)
    noise, cues, names = list("abcdefghijklmnopqrstuvw0123456789"), ["xX", "yY", "zZ"], ["first", "second", "third"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for _ in range(n):
            y = rng.randrange(3)
            words = [rng.choice(noise) for _ in range(16)]
            words[rng.randrange(16)] = rng.choice(cues[y])
            w.writerow([" ".join(words), names[y if rng.random() > 0.25 else rng.randrange(3)]])
    return path


@contextmanager
def training_inputs():
    """Yields a list that gets, for every training forward of a BudgetFormer, its rows (each
    the tuple of its real token ids). A global forward pre-hook: it sees the model inside DDP."""
    seen: list[list[tuple[int, ...]]] = []

    def hook(module, args):
        if isinstance(module, BudgetFormer) and module.training:
            ids, mask = args[0], args[1]  # (B, T) each
            seen.append([tuple(row[keep].tolist()) for row, keep in zip(ids, mask)])

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


GRADIENT_CASES = {
    "adaptive, soft gates": (dict(head_weighting="gated"), "soft", TrainingControl(soft_gates=True)),
    "adaptive, exact top-k": (dict(head_weighting="gated"), "soft", Control()),
    "paper, structural top-k": (dict(head_weighting="scaled"), "structural", Control()),
    "bba, structural": (dict(method="bba"), "structural", Control(budget=0.4)),
    "dense": (dict(method="dense"), "dense", Control()),
}


def gradient_gaps() -> dict[str, float]:
    """Per case, the largest gap between this rank's DDP gradient of its shard and one process's
    gradient of the whole batch (inputs of several lengths, so ranks pick different heads)."""
    gaps = {}
    for name, (kw, mode, control) in GRADIENT_CASES.items():
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=60, n_classes=3, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=20,
                          dropout=0.0, **kw)
        model = BudgetFormer(cfg).train()
        whole = copy.deepcopy(model)
        ids = torch.randint(3, 60, (7, 20), generator=torch.Generator().manual_seed(1))  # (B, T)
        mask = torch.arange(20)[None] < torch.tensor([20, 5, 17, 9, 12, 20, 3])[:, None]  # (B, T)
        y = torch.tensor([0, 1, 2, 0, 1, 2, 0])
        cost_only = cfg.method != "budgetformer"
        total_loss(whole(ids, mask, mode=mode, control=control), y, TrainConfig(), 0.5, cost_only).total.backward()
        net = distributed.wrap(model, seed=0)
        mine, share = distributed.shard(len(y))
        out = net(ids[mine], mask[mine], mode=mode, control=control)
        (total_loss(out, y[mine], TrainConfig(), 0.5, cost_only).total * share).backward()
        gaps[name] = max(float((p.grad - q.grad).abs().max()) for p, q in zip(model.parameters(), whole.parameters()))
    return gaps


def helpers() -> dict:
    """What the small helpers give on this rank: sums over ranks (types kept), rank 0's text, the
    refusal of a batch too small to share."""
    try:
        distributed.check_batches(33, 32)  # the last batch would hold 1 row for 2 processes
        refused = None
    except ValueError as e:
        refused = str(e)
    mine = distributed.sum_over_ranks({"loss": 0.5, "correct": distributed.rank() + 1})
    return {"sums": mine, "int": type(mine["correct"]).__name__, "refused": refused,
            "text": distributed.broadcast_text(f"rank {distributed.rank()}: β ✓")}


def worker(data: str, out: str, report_dir: str) -> int:
    """One torchrun rank: the helpers, the gradient check, then ``budgetformer train``; writes rank<r>.json."""
    with distributed.process_group():
        report = {"rank": distributed.rank(), "world_size": distributed.world_size(), "helpers": helpers(),
                  "gaps": gradient_gaps()}
        with training_inputs() as seen:
            code = cli.main(["train", "--dataset", data, "--out", out, *TRAIN])
        report["batches"] = seen
        Path(report_dir, f"rank{distributed.rank()}.json").write_text(json.dumps(report))
    return code


@contextmanager
def one_thread():
    """Torch on one thread, as each torchrun process (OMP_NUM_THREADS=1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def test_two_processes_train_what_one_process_trains(tmp_path, capsys):
    data = str(write_task(tmp_path / "task.csv"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    two_processes = subprocess.Popen(  # torchrun starts its processes while this one trains alone
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", __file__, data,
         str(tmp_path / "two"), str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=ROOT)
    try:
        with one_thread(), training_inputs() as single:
            assert cli.main(["train", "--dataset", data, "--out", str(tmp_path / "one"), *TRAIN]) == 0
        stdout, stderr = two_processes.communicate(timeout=300)
    finally:
        if two_processes.poll() is None:  # torchrun stops its workers on SIGTERM
            two_processes.terminate()
            two_processes.wait(30)
    printed_single = json.loads(capsys.readouterr().out)
    assert two_processes.returncode == 0, stderr[-3000:]

    printed = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert len(printed) == 1, stdout  # rank 0 alone prints
    assert printed[0]["world_size"] == 2 and printed_single["world_size"] == 1
    one = json.loads((tmp_path / "one" / "config.json").read_text())
    two = json.loads((tmp_path / "two" / "config.json").read_text())
    assert two["world_size"] == 2 and "world_size" not in one  # absent: one process, files as before
    assert 0.4 < one["test"]["accuracy"] < 0.9  # learnt something, far from a ceiling
    assert abs(one["test"]["accuracy"] - two["test"]["accuracy"]) <= 0.005
    h1 = json.loads((tmp_path / "one" / "history.json").read_text())
    h2 = json.loads((tmp_path / "two" / "history.json").read_text())
    for a, b in zip(h1, h2, strict=True):  # the same run up to rounding, epoch by epoch
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4) and a["train_accuracy"] == b["train_accuracy"]
        assert a["val_accuracy"] == pytest.approx(b["val_accuracy"], abs=0.005)

    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    for r in ranks:
        assert r["helpers"]["sums"] == {"loss": 1.0, "correct": 3} and r["helpers"]["int"] == "int"
        assert r["helpers"]["text"] == "rank 0: β ✓"
        assert "a batch of 1 row cannot be shared by 2 processes" in r["helpers"]["refused"]
    for r in ranks:  # DDP's reduced gradient of the shards is the gradient of the whole batch
        assert max(r["gaps"].values()) < 1e-5, r["gaps"]
    a, b = ranks[0]["batches"], ranks[1]["batches"]
    assert len(a) == len(b) == len(single) == 2 * 27  # 840 training rows, batches of 32, 2 epochs
    for whole, mine, theirs in zip(single, a, b):  # each rank its own rows, together the whole batch
        assert not set(map(tuple, mine)) & set(map(tuple, theirs))
        assert Counter(map(tuple, mine)) + Counter(map(tuple, theirs)) == Counter(whole)
        assert abs(len(mine) - len(theirs)) <= 1


def test_one_process_shards_nothing():
    assert distributed.world_size() == 1 and distributed.rank() == 0 and distributed.is_main()
    assert distributed.shard(5) == ([0, 1, 2, 3, 4], 1.0)
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap(model, seed=0) is model
    sums = {"loss": 1.5, "correct": 3}
    assert distributed.sum_over_ranks(sums) is sums
    distributed.check_batches(33, 32)  # a last batch of one row is one process's


if __name__ == "__main__":
    sys.exit(worker(*sys.argv[1:]))

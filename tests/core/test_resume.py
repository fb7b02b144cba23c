"""No lost work: a checkpoint is replaced only with --force, and a run killed by Ctrl-C (SIGINT)
or SIGKILL in the middle of an epoch continues with --resume to the very checkpoint an
uninterrupted run writes. Real CLI subprocesses on a tiny run (the uninterrupted one runs the
same CLI in this process, at the same time; seconds on an idle machine)."""

from __future__ import annotations

import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from budgetformer_core.cli import main
from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.data import load_dataset
from budgetformer_core.train.loop import resume_dir, train

ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 3
TINY = [f"epochs={EPOCHS}", "batch_size=8", "d_model=16", "n_heads=2", "d_ff=32", "n_layers=1", "max_len=16",
        "vocab_size=64", "embed_init=normal", "lr=3e-3"]
"""Each epoch is 27 steps of a one-layer model: long enough to be killed in, short enough for a test."""
FILES = ("model.safetensors", "config.json", "tokenizer.json", "history.json")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return keyword_task(tmp_path_factory.mktemp("data") / "keywords.csv")


def keyword_task(path: Path) -> Path:
    """A 3-class keyword task of one-character words: a vocabulary that needs no merges, so every
    process learns the same one."""
    import pandas as pd

    rng = random.Random(0)
    rows = []
    for i in range(300):
        words = [rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10)]
        words[rng.randrange(10)] = "123"[i % 3]
        rows.append({"text": " ".join(words), "label": ["one", "two", "three"][i % 3]})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def command(data: Path, out: Path, *extra: str) -> list[str]:
    sets = [a for s in TINY for a in ("--set", s)]
    return [sys.executable, "-m", "budgetformer_core.cli", "train", "--dataset", str(data), "--out", str(out),
            "--quiet", *sets, *extra]


def start(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}  # one thread: the same sums each run
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def signal_when_saved(runs: dict[signal.Signals, subprocess.Popen], saved: dict[signal.Signals, Path]) -> None:
    """Send each run its signal 0.1 s after its first epoch's state is saved (into the second epoch)."""
    deadline, due = time.monotonic() + 180, {}
    while len(due) < len(runs) or any(t is not None for t in due.values()):
        for sig, p in runs.items():
            if sig in due and due[sig] is None:  # signalled already
                continue
            assert p.poll() is None, f"the run ended before it was signalled: {p.communicate()}"
            if sig not in due and saved[sig].exists():
                due[sig] = time.monotonic() + 0.1
            if due.get(sig) is not None and time.monotonic() >= due[sig]:
                p.send_signal(sig)
                due[sig] = None
        assert time.monotonic() < deadline, "no state was saved"
        time.sleep(0.005)


def saved_position(state_dir: Path) -> tuple[int, int]:
    state = torch.load(state_dir / "state.pt", map_location="cpu", weights_only=True)
    return state["epoch"], state["batch"]


@pytest.fixture
def one_thread():
    """One torch thread, as the subprocesses run: the same sums in the same order, the same bytes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def train_here(capsys, argv: list[str]) -> dict:
    """Run ``budgetformer train`` in this process (no start-up cost); its JSON line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def same_checkpoint(a: Path, b: Path) -> None:
    """Every file byte for byte, but for the --out path inside the recorded command."""
    for name in FILES:
        assert (a / name).read_bytes().replace(str(a).encode(), b"OUT") == \
            (b / name).read_bytes().replace(str(b).encode(), b"OUT"), name


def test_runs_killed_mid_epoch_resume_to_the_uninterrupted_checkpoint(data, tmp_path, capsys, one_thread):
    outs = {sig: tmp_path / sig.name / "ckpt" for sig in (signal.SIGINT, signal.SIGKILL)}
    runs = {sig: start(command(data, out)) for sig, out in outs.items()}  # both at once: one start-up wait
    signal_when_saved(runs, {sig: resume_dir(out) / "state.pt" for sig, out in outs.items()})
    stopped_at = {}
    for sig, p in runs.items():
        state_dir = resume_dir(outs[sig])
        _, err = p.communicate(timeout=120)
        stopped_at[sig] = saved_position(state_dir)
        assert not outs[sig].exists()
        assert (1, 0) <= stopped_at[sig] < (EPOCHS, 0)  # after the first epoch, before the last one ended
        if sig == signal.SIGINT:
            assert p.returncode == 130
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in err, err
            assert lines[0].startswith("budgetformer train: interrupted: stopped ")
            assert lines[0].endswith(f"continue with `budgetformer train --resume {state_dir}`")
        else:
            assert p.returncode == -signal.SIGKILL  # the last epoch's state is there; the rest is redone

    with pytest.raises(ValueError, match="holds the state of another run"):  # the API checks what it resumes
        train(load_dataset(str(data)), ModelConfig(), TrainConfig(epochs=EPOCHS + 1), outs[signal.SIGKILL],
              progress=False, resume=True)
    resumed = {sig: start([sys.executable, "-m", "budgetformer_core.cli", "train", "--resume", str(resume_dir(out)),
                           "--quiet"]) for sig, out in outs.items()}  # new processes: only the files carry over
    reference = train_here(capsys, command(data, tmp_path / "ref" / "ckpt")[3:])  # uninterrupted, meanwhile here
    assert not resume_dir(tmp_path / "ref" / "ckpt").exists()  # removed once the checkpoint is written
    for sig, p in resumed.items():
        stdout, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        result = json.loads(stdout)
        assert result["accuracy"] == reference["accuracy"] and result["n"] == reference["n"]  # exact
        same_checkpoint(tmp_path / "ref" / "ckpt", outs[sig])  # weights, tokenizer, history, command
        assert not resume_dir(outs[sig]).exists()
    print("stopped at (epoch, batch):", {sig.name: at for sig, at in stopped_at.items()})


def test_a_checkpoint_is_replaced_only_with_force(tiny_checkpoint, data, tmp_path, capsys):
    target = tmp_path / "ckpt"
    target.mkdir()
    for name in FILES:
        (target / name).write_bytes((tiny_checkpoint / name).read_bytes())
    before = {name: (target / name).read_bytes() for name in FILES}
    assert main(command(data, target)[3:]) == 2
    assert "already holds a checkpoint; pass --force to replace it" in capsys.readouterr().err
    assert {name: (target / name).read_bytes() for name in FILES} == before
    code = main(["prune", "--checkpoint", str(ROOT / "precomputed/checkpoints/bbc-dense"), "--out", str(target)])
    assert code == 2 and "pass --force" in capsys.readouterr().err
    assert {name: (target / name).read_bytes() for name in FILES} == before


def test_force_replaces_and_is_not_recorded(data, tmp_path, capsys):
    target = tmp_path / "ckpt"
    target.mkdir()
    (target / "config.json").write_text("{}")  # a (broken) checkpoint in the way
    argv = ["train", "--dataset", str(data), "--out", str(target), "--quiet", "--set", "epochs=1",
            *[a for s in TINY[1:] for a in ("--set", s)]]
    assert main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert json.loads((target / "config.json").read_text())["command"] == shlex.join(["budgetformer", *argv])


def test_a_fresh_run_does_not_overwrite_saved_state(data, tmp_path, capsys):
    state_dir = tmp_path / "ckpt.resume"
    state_dir.mkdir()
    (state_dir / "state.pt").write_bytes(b"an interrupted run's state")
    code = main(["train", "--dataset", str(data), "--out", str(tmp_path / "ckpt"), "--quiet",
                 *[a for s in TINY for a in ("--set", s)]])
    err = capsys.readouterr().err
    assert code == 2 and "holds the state of an interrupted run" in err and "--force" in err
    assert (state_dir / "state.pt").read_bytes() == b"an interrupted run's state"


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["--resume", "{dir}"], "is not the saved state of a training run"),
    ("garbage", ["--resume", "{dir}"], "state.pt cannot be read"),
    ("bad-json", ["--resume", "{dir}"], "run.json is not valid JSON"),
    ("garbage", ["--resume", "{dir}", "--set", "lr=1"], "give only --resume DIR"),
    (None, ["--out", "{dir}"], "train needs --dataset"),
    ("moved", ["--resume", "{dir}"], "holds the state of the run writing --out elsewhere"),
])
def test_resume_errors_are_one_line(tmp_path, capsys, setup, argv, message):
    state_dir = tmp_path / "x.resume"
    state_dir.mkdir()
    if setup:
        out = "elsewhere" if setup == "moved" else tmp_path / "x"
        run = {"command": f"budgetformer train --dataset bbc --out {out}"}
        (state_dir / "run.json").write_text("{not json" if setup == "bad-json" else json.dumps(run))
        (state_dir / "state.pt").write_bytes(b"\x80\x02garbage")
    code = main(["train", *[a.format(dir=state_dir) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_rebuild_retrains_with_force_and_records_the_plain_command(monkeypatch):
    from rebuild import jobs as rebuild_jobs

    job = next(j for j in rebuild_jobs.plan(["bbc"]) if j.name == "dense")
    ran = {}

    def record(argv, **kw):
        ran["argv"] = argv
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(rebuild_jobs.subprocess, "run", record)
    rebuild_jobs.run_job(job, force=True)  # a deliberate rebuild
    assert ran["argv"][-1] == "--force" and ran["argv"][3:-1] == job.command()[1:]


def test_a_run_recorded_before_a_config_field_existed_or_after_one_went_resumes(tmp_path):
    from budgetformer_core.config import to_dict
    from budgetformer_core.train.resume import load_state

    run = {"dataset": "x", "model": to_dict(ModelConfig()), "train": to_dict(TrainConfig()), "force": False}
    old = {**run, "model": {k: v for k, v in run["model"].items() if k != "norm"},
           "train": {**{k: v for k, v in run["train"].items() if k != "freeze_embeddings"}, "gone": False}}
    (tmp_path / "run.json").write_text(json.dumps(old))
    torch.save({"step": 3}, tmp_path / "state.pt")
    assert load_state(tmp_path, run) == {"step": 3}
    changed = {**old, "train": {**old["train"], "lr": 0.5}}
    (tmp_path / "run.json").write_text(json.dumps(changed))
    with pytest.raises(ValueError, match=r"another run \(train differ\)"):
        load_state(tmp_path, run)

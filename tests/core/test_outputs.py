"""Nothing a command writes lands on what it reads, inside a model folder, or half-written
(budgetformer_core.io.outputs), and operating-system errors are one line.

Each case runs the real command and checks exit status 2 with one line on stderr, no traceback,
and the sha256 of every file it could have harmed unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budgetformer_core.cli import main
from budgetformer_core.io.outputs import output_lock

from ..conftest import PRECOMPUTED, snapshot
from .test_resume import command, keyword_task, start


def one_line_refusal(capsys, argv: list[str], *needles: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def ckpt(ws, tmp_path) -> Path:
    """A copy of the tiny checkpoint, to be harmed if anything is wrong."""
    return Path(shutil.copytree(ws / "ckpt", tmp_path / "ckpt"))


# --------------------------------------------------------------------------- report --out


def test_report_never_overwrites_a_checkpoints_weights(ckpt, capsys):
    before = snapshot(ckpt)
    weights = ckpt / "model.safetensors"
    one_line_refusal(capsys, ["report", "--checkpoint", str(ckpt), "--out", str(weights), "w1 m0"], "exists", "--force")
    one_line_refusal(capsys, ["report", "--checkpoint", str(ckpt), "--out", str(weights), "--force", "w1 m0"],
                     "inside the model folder")
    one_line_refusal(capsys, ["report", "--checkpoint", str(ckpt), "--out", str(ckpt / "new.html"), "w1 m0"],
                     "inside the model folder")
    assert snapshot(ckpt) == before and not (ckpt / "new.html").exists()


def test_report_replaces_a_file_only_with_force_and_whole(ckpt, tmp_path, capsys):
    out = tmp_path / "page.html"
    out.write_text("my notes")
    one_line_refusal(capsys, ["report", "--checkpoint", str(ckpt), "--out", str(out), "w1 m0"], "--force")
    assert out.read_text() == "my notes"
    assert main(["report", "--checkpoint", str(ckpt), "--out", str(out), "--force", "w1 m0"]) == 0
    assert out.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("where", ["/dev/full", "{file}/page.html", "/proc/page.html", "{dir}"])
def test_report_into_what_is_not_a_file_is_one_line(ckpt, tmp_path, capsys, where):
    (tmp_path / "a_file").write_text("x")
    out = where.format(file=tmp_path / "a_file", dir=tmp_path)
    one_line_refusal(capsys, ["report", "--checkpoint", str(ckpt), "--out", out, "--force", "w1 m0"])


# --------------------------------------------------------------------------- prune --out


def test_prune_never_writes_over_its_own_input(tmp_path, capsys):
    dense = Path(shutil.copytree(PRECOMPUTED / "bbc-dense", tmp_path / "dense"))
    (tmp_path / "link").symlink_to(dense)
    before = snapshot(dense)
    for out in (dense, tmp_path / "link", dense / "pruned"):
        one_line_refusal(capsys, ["prune", "--checkpoint", str(dense), "--out", str(out), "--force"],
                         "--out")
    assert snapshot(dense) == before and not (dense / "pruned").exists()


# --------------------------------------------------------------------------- train --out and --resume


@pytest.fixture(scope="module")
def keywords(tmp_path_factory) -> Path:
    return keyword_task(tmp_path_factory.mktemp("data") / "keywords.csv")


def interrupted(runs: list[tuple[list[str], Path]]) -> None:
    """Run the train commands at once and Ctrl-C each as soon as its first epoch's state is saved
    (watched together: one run may save its state while the other is still waited for)."""
    procs = [(start(argv), state) for argv, state in runs]
    deadline, waiting = time.monotonic() + 180, list(procs)
    while waiting:
        for run, state in list(waiting):
            if (state / "state.pt").exists():
                run.send_signal(signal.SIGINT)
                waiting.remove((run, state))
            else:
                assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no state was saved"
        time.sleep(0.01)
    for run, _ in procs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 130, err


def test_a_resume_is_granted_force_only_when_typed_and_never_follows_a_moved_link(keywords, ws, tmp_path, capsys):
    forced = Path(shutil.copytree(ws / "ckpt", tmp_path / "forced"))  # replaced by a --force run
    precious = Path(shutil.copytree(ws / "ckpt", tmp_path / "precious"))  # a link is turned onto it
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    interrupted([(command(keywords, forced, "--force"), tmp_path / "forced.resume"),
                 (command(keywords, link), tmp_path / "link.resume")])
    before, forced_before = snapshot(forced, precious), snapshot(forced)
    one_line_refusal(capsys, ["train", "--resume", str(tmp_path / "forced.resume")], "--force")
    link.unlink()
    link.symlink_to(precious)
    one_line_refusal(capsys, ["train", "--resume", str(tmp_path / "link.resume"), "--force"], "link")
    assert snapshot(forced, precious) == before
    assert main(["train", "--resume", str(tmp_path / "forced.resume"), "--force", "--quiet"]) == 0
    assert snapshot(forced) != forced_before  # the typed --force replaced it
    capsys.readouterr()


def test_two_runs_on_one_out_the_second_is_refused(keywords, tmp_path, capsys):
    out = tmp_path / "ckpt"
    with output_lock(out):  # a run writing it now
        one_line_refusal(capsys, command(keywords, out)[3:], "another run is writing")
    assert not out.exists()
    assert main(command(keywords, out)[3:]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # the lock is gone with the run


# --------------------------------------------------------------------------- OS errors, one line


def test_latency_check_into_a_folder_fails_before_measuring(tmp_path, capsys):
    started = time.monotonic()
    one_line_refusal(capsys, ["latency-check", "--datasets", "bbc", "--json", str(tmp_path)], "folder")
    assert time.monotonic() - started < 30


def test_an_unreadable_input_file_is_one_line(ckpt, capsys):
    one_line_refusal(capsys, ["predict", "--checkpoint", str(ckpt), "--input-file", "/proc/self/mem"])


def test_a_reader_that_stops_early_is_not_an_error():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run(f"{sys.executable} -m budgetformer_core.cli models | head -1", shell=True, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() and run.stderr == "", run.stderr


@pytest.mark.parametrize("run", [{"command": 5}, {"command": "budgetformer train --out x", "model": [1]},
                                 {"command": "budgetformer train --out x", "force": "yes"}])
def test_a_run_json_of_the_wrong_types_is_one_line(tmp_path, capsys, run):
    state = tmp_path / "x.resume"
    state.mkdir()
    (state / "run.json").write_text(json.dumps(run))
    (state / "state.pt").write_bytes(b"state")
    one_line_refusal(capsys, ["train", "--resume", str(state)], "run.json", "start again with --force")


def test_latency_check_keeps_its_results_when_the_file_cannot_be_written(tmp_path):
    """A file-size limit of 64 bytes stands in for a full disk: the table is printed, the reason
    is one line, and neither a truncated file nor a temporary one is left."""
    import resource

    def full_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    out = tmp_path / "rows.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run([sys.executable, "-m", "budgetformer_core.cli", "latency-check", "--datasets", "synthetic",
                          "--models", "bba", "--json", str(out)], env=env, preexec_fn=full_disk,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "live speed-ups" in run.stdout, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "was not written (File too large)" in run.stderr
    assert list(tmp_path.iterdir()) == []

"""``budgetformer analyze``: a corpus's records equal the shipped per-example table, with the local
engine and with Ray Data (two actors of a local Ray); a killed local run resumes without writing a
shard twice; bad input is one line and an exit status, never a traceback or a lost file.

The shipped table of ``bbc-budgetformer`` was made over the whole test split in one evaluation
(batches of 64 inputs sorted by length); here the rows run in other batches, so their floats may
differ in the last of the 6 decimals the tables keep (a row's padding changes the order of float
sums): floats are compared to 1e-5, everything else exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from budgetformer_core import shipped
from budgetformer_core.analysis.corpus import labelled, read_records
from budgetformer_core.cli import main

MODEL = "bbc-budgetformer"
"""A small BudgetFormer trained from scratch (2 layers × 4 heads): seconds over BBC's test split."""
SHARD_ROWS = 8
"""Rows per shard of the local runs: over a hundred shards, so that a run killed at its first
shard has many left."""

pytestmark = pytest.mark.skipif(not shipped.per_example_path(MODEL).is_file(), reason=f"{MODEL} is not shipped")


def analyze(capsys, *argv) -> tuple[int, str, str]:
    code = main(["analyze", "--checkpoint", MODEL, "--quiet", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_same_records(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    """Row for row by index: floats within 1e-5, the rest (labels, predictions, k, heads run, tokens) equal."""
    ours, theirs = (f.sort_values("index").reset_index(drop=True) for f in (ours, theirs))
    assert list(ours.columns) == list(theirs.columns) and len(ours) == len(theirs)
    for column in theirs.columns:
        if theirs[column].dtype.kind == "f":
            np.testing.assert_allclose(ours[column].to_numpy(float), theirs[column].to_numpy(float), atol=1e-5,
                                       err_msg=column)
        else:
            assert ours[column].tolist() == theirs[column].tolist(), column


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> tuple:
    """One uninterrupted local run over BBC's test split (one thread, :data:`SHARD_ROWS` a shard):
    its folder and printed summary."""
    out = tmp_path_factory.mktemp("analysis") / "bbc-test"
    code = main(["analyze", "--checkpoint", MODEL, "--dataset", "bbc", "--split", "test", "--out", str(out),
                 "--workers", "1", "--batch-size", str(SHARD_ROWS), "--quiet"])
    assert code == 0
    return out, json.loads((out / "summary.json").read_text())


def test_local_engine_gives_the_shipped_records(local_run):
    out, summary = local_run
    shipped_table = pd.read_parquet(shipped.per_example_path(MODEL))
    records = read_records(out)
    assert records["label"].notna().all()  # every row of a split has its label
    assert_same_records(labelled(records), shipped_table)
    assert summary["rows"] == summary["labelled"] == len(shipped_table)
    assert summary["engine"] == "local" and summary["workers"] == 1 and summary["texts_per_second"] > 0
    assert summary["shards"] == -(-len(shipped_table) // SHARD_ROWS)
    assert summary["model_sha256"] == shipped_sha256()
    assert summary["accuracy"] == pytest.approx(shipped_table["correct"].mean())
    assert [sum(layer["k_hist"].values()) for layer in summary["layers"]] == [len(shipped_table)] * 2


def shipped_sha256() -> str:
    from budgetformer_core.io.files import file_sha256

    return file_sha256(shipped.checkpoint_dir(MODEL) / "model.safetensors")


def test_ray_engine_gives_the_shipped_records(capsys, tmp_path):
    pytest.importorskip("ray.data", reason="Ray is an optional extra: pip install -e '.[ray]'")
    out = tmp_path / "ray"
    code, printed, err = analyze(capsys, "--dataset", "bbc", "--split", "test", "--out", str(out),
                                 "--engine", "ray", "--workers", "2", "--batch-size", "64")
    assert code == 0, err
    summary = json.loads(printed)
    assert summary["engine"] == "ray" and summary["workers"] == 2
    assert sorted(p.name for p in out.iterdir()) == [f"part-{i:05d}.parquet" for i in range(7)] + [
        "run.json", "summary.json"]  # 426 rows in blocks of 64, no staging folder left
    assert_same_records(labelled(read_records(out)), pd.read_parquet(shipped.per_example_path(MODEL)))


def shard_stats(folder) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("part-*.parquet")}


def test_a_killed_run_resumes_where_it_stopped(capsys, tmp_path, local_run):
    out = tmp_path / "killed"
    argv = ["analyze", "--checkpoint", MODEL, "--dataset", "bbc", "--split", "test", "--out", str(out),
            "--workers", "1", "--batch-size", str(SHARD_ROWS), "--quiet"]
    run = subprocess.Popen([sys.executable, "-m", "budgetformer_core.cli", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / "part-00000.parquet").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(run.pid, signal.SIGKILL)  # as a machine that goes down: no chance to tidy up
    finally:
        run.wait()
    before = shard_stats(out)
    shards = len(shard_stats(local_run[0]))
    assert 1 <= len(before) < shards and not (out / "summary.json").exists()
    code, printed, _ = analyze(capsys, *argv[3:-1])  # the same command again
    assert code == 0
    assert json.loads(printed)["analysed_now"] == len(read_records(local_run[0])) - sum(
        len(pd.read_parquet(out / name)) for name in before)
    after = shard_stats(out)
    assert {name: after[name] for name in before} == before  # no shard written twice
    assert len(after) == shards and not [p for p in out.iterdir() if p.name.startswith(".")]
    pd.testing.assert_frame_equal(read_records(out), read_records(local_run[0]))  # as the run never stopped


def test_bad_input_is_one_line_and_nothing_is_overwritten(capsys, tmp_path, local_run):
    empty, columns, junk, words = (tmp_path / n for n in ("empty.csv", "columns.csv", "junk.parquet", "words.csv"))
    empty.write_text("")
    columns.write_text("title,body\nno text column,here\n")
    junk.write_bytes(b"\0not parquet")
    words.write_text("text\nThe striker scored twice in the final.\n\nShares fell sharply.\n")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep me")
    cases = {
        ("--dataset", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o1")): "no such file",
        ("--dataset", str(empty), "--out", str(tmp_path / "o2")): "empty.csv",
        ("--dataset", str(columns), "--out", str(tmp_path / "o3")): "no text column",
        ("--dataset", str(junk), "--out", str(tmp_path / "o4")): "junk.parquet",
        ("--dataset", str(words), "--out", str(other)): "holding other files",
        ("--dataset", str(words), "--out", str(junk)): "is a file",
        ("--dataset", str(words), "--out", str(words)): "never writes over what it reads",
        ("--dataset", str(words), "--out", str(local_run[0])): "another run",
        ("--dataset", str(words), "--out", str(tmp_path / "o5"), "--address", "auto"): "--engine ray",
    }
    before = {p: p.stat().st_mtime_ns for p in local_run[0].iterdir()}
    for argv, message in cases.items():
        code, _, err = analyze(capsys, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "Traceback" not in err
    assert {p: p.stat().st_mtime_ns for p in local_run[0].iterdir()} == before
    assert (other / "todo.txt").read_text() == "keep me" and [p.name for p in other.iterdir()] == ["todo.txt"]
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 6))

    code, printed, _ = analyze(capsys, "--dataset", str(words), "--out", str(tmp_path / "unlabelled"))
    records = read_records(tmp_path / "unlabelled")
    assert code == 0 and records["index"].tolist() == [0, 1]  # the blank line is no CSV row
    assert records["label"].isna().all() and records["loss"].isna().all() and records["correct"].isna().all()
    assert json.loads(printed)["accuracy"] is None


def test_without_ray_the_ray_engine_names_the_extra(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as where the extra is not installed: `import ray` fails
    code, _, err = analyze(capsys, "--dataset", "bbc", "--out", str(tmp_path / "o"), "--engine", "ray")
    assert code == 2 and err.strip() == ("budgetformer analyze: error: --engine ray needs Ray, an optional extra: "
                                         "pip install -e '.[ray]'")
    assert not (tmp_path / "o").exists()

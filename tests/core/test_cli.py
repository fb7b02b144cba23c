"""The budgetformer command: JSON outputs with the documented keys, clear errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from budgetformer_core.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_json(capsys, tiny_checkpoint):
    code, out, _ = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--json",
                       "w1 m0 a m1 b m2 a m3 b", "<b>markup</b> 🚀")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert {"label", "probs", "budget", "selected_heads"} <= set(r)
        assert len(r["budget"]) == len(r["selected_heads"]) == 2
        assert sum(r["probs"].values()) == pytest.approx(1, abs=1e-5)


def test_predict_budget_and_input_file(capsys, tiny_checkpoint, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("w1 m0 a\n\n   \nw2 m1 b\n")
    code, out, err = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--budget", "1.0",
                         "--json", "--input-file", str(f))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and len(rows) == 4  # blank lines are rows that say so, not dropped
    assert [r["line"] for r in rows] == [1, 2, 3, 4]
    assert rows[1] == {"line": 2, "error": "blank line"} and rows[2]["error"] == "blank line"
    assert all(len(h) == 4 for r in (rows[0], rows[3]) for h in r["selected_heads"])
    assert "2 of 4 inputs were not classified" in err


def test_eval_json_and_ablations(capsys, tiny_checkpoint):
    base = ["eval", "--checkpoint", str(tiny_checkpoint), "--limit", "100", "--json"]
    results = {}
    ablations = [["--ablation", name] for name in ("no-budget-net", "no-head-scorer", "random-heads")]
    for extra in ([], ["--budget", "1.0"], *ablations):
        code, out, _ = run(capsys, *base, *extra)
        assert code == 0
        results[" ".join(extra)] = r = json.loads(out)
        assert {"accuracy", "n", "mean_budget", "mean_heads_fraction", "flops_ratio"} <= set(r)
        assert r["n"] == 100
    assert results["--budget 1.0"]["mean_heads_fraction"] == 1.0
    assert results["--budget 1.0"]["flops_ratio"] > results[""]["flops_ratio"]
    # no f_θ: a constant s, the model's mean s on its validation split (as the trained ablation)
    from budgetformer_core.io.loader import load_checkpoint

    validation_s = load_checkpoint(tiny_checkpoint).validation_budget
    assert validation_s == load_checkpoint(tiny_checkpoint).history[-1]["val_mean_budget"]
    assert results["--ablation no-budget-net"]["mean_budget"] == pytest.approx(validation_s, abs=1e-6)
    # no g_φ runs the first k heads; random heads spread over all of them
    first_k = results["--ablation no-head-scorer"]["head_usage"]
    assert all(layer[-1] == 0.0 or layer[0] == 1.0 for layer in first_k)
    assert sum(u > 0 for u in results["--ablation random-heads"]["head_usage"][0]) > sum(u > 0 for u in first_k[0])


def test_console_script_is_installed(tiny_checkpoint):
    exe = Path(sys.executable).with_name("budgetformer")
    if not exe.exists():
        pytest.skip("package not installed in this environment (`make test` installs it)")
    out = subprocess.run([exe, "predict", "--checkpoint", str(tiny_checkpoint), "--json", "w1 m0 a"],
                         capture_output=True, text=True, check=True).stdout
    assert "selected_heads" in json.loads(out)


# --------------------------------------------------------------------------- bad input: labels
# (every bad input as a one-line error, with no good file changed: test_bad_input.py)

def write_rows(path: Path, texts, labels) -> Path:
    import pandas as pd

    pd.DataFrame({"text": list(texts), "label": list(labels)}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def test_rows():
    """The tiny checkpoint's test rows (synthetic, classes 00, 10, 01, 11)."""
    from budgetformer_core.io.data import load_synthetic

    split = load_synthetic().split("test").head(60)
    return split.texts, split.labels


def test_eval_maps_a_subset_of_classes_by_name_and_scores_every_row(capsys, tiny_checkpoint, tmp_path, test_rows):
    from budgetformer_core.analysis.infer import evaluate_split
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.splits import Split

    ckpt = load_checkpoint(tiny_checkpoint)
    texts, labels = test_rows
    rows = [(t, y) for t, y in zip(texts, labels) if y in (1, 3)]  # classes "10" and "11" only
    f = write_rows(tmp_path / "two.csv", [t for t, _ in rows], [ckpt.label_names[y] for _, y in rows])
    code, out, err = run(capsys, "eval", "--checkpoint", str(tiny_checkpoint), "--dataset", str(f), "--json")
    assert code == 0, err
    r = json.loads(out)
    expected = evaluate_split(ckpt, Split([t for t, _ in rows], [y for _, y in rows]), None, None)
    assert r["n"] == len(rows) and r["split"] == "all"  # the whole file, not its 20 % test split
    assert r["rows"] == f"all {len(rows)} labelled rows of {f}"
    assert r["accuracy"] == pytest.approx(expected.accuracy)
    code, out, _ = run(capsys, "eval", "--checkpoint", str(tiny_checkpoint), "--dataset", str(f), "--json",
                       "--split", "test", "--limit", "3")
    assert code == 0 and json.loads(out)["n"] == 3 and json.loads(out)["rows"].startswith("the first 3 of the test")


def test_prune_checks_labels_and_out_before_ranking(capsys, tmp_path):
    from tests.conftest import PRECOMPUTED

    dense = PRECOMPUTED / "bbc-dense"
    f = write_rows(tmp_path / "odd.csv", ["a goal", "a merger"], ["sports", "weather"])
    code, _, err = run(capsys, "prune", "--checkpoint", str(dense), "--dataset", str(f), "--out", str(tmp_path / "p"))
    assert code == 2 and "'weather'" in err and not (tmp_path / "p").exists()
    code, _, err = run(capsys, "prune", "--checkpoint", str(dense), "--out", str(f))
    assert code == 2 and "existing file" in err


# --------------------------------------------------------------------------- bad input: training

def test_train_stops_when_the_loss_is_not_finite(capsys, tmp_path, test_rows):
    texts, labels = test_rows
    f = write_rows(tmp_path / "small.csv", texts, labels)
    out = tmp_path / "diverged"
    code, stdout, err = run(capsys, "train", "--dataset", str(f), "--out", str(out), "--quiet",
                            *[a for s in ("lr=1e30", "epochs=2", "d_model=16", "n_heads=2", "d_ff=16",
                                          "max_len=16", "n_layers=1", "embed_init=normal") for a in ("--set", s)])
    assert code == 2 and "the loss is nan" in err and "no checkpoint was written" in err
    assert stdout == "" and not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["small.csv"]


def test_a_warm_start_from_scratch_refuses_another_length_by_name(capsys, tmp_path, tiny_checkpoint):
    """A model trained from scratch learnt its position table at its own length (64 here): a warm
    start asked for another length is refused by name before anything is read or written
    (one on a pretrained base may change it: test_backbone)."""
    out = tmp_path / "longer"
    code, _, err = run(capsys, "train", "--dataset", "synthetic", "--variant", "bba", "--init", str(tiny_checkpoint),
                       "--set", "max_len=128", "--out", str(out), "--quiet")
    assert code == 2 and "trained from scratch at max_len=64" in err and "max_len=128" in err
    assert not out.exists()


def test_train_checks_out_before_reading_data(capsys, tmp_path):
    (tmp_path / "taken").write_text("keep")
    for out, message in ((tmp_path / "taken", "existing file"), (tmp_path / "taken" / "sub", "is a file")):
        code, _, err = run(capsys, "train", "--dataset", "imagenet-not-read", "--out", str(out))
        assert code == 2 and message in err and "unknown dataset" not in err
    assert (tmp_path / "taken").read_text() == "keep"


def test_json_output_never_holds_bare_nan():
    from budgetformer_core.cli.commands import dumps

    assert dumps({"a": float("nan"), "b": [float("inf"), 1.5]}) == '{"a": null, "b": [null, 1.5]}'


def test_ctrl_c_prints_one_line_and_exits_130(capsys, monkeypatch, tiny_checkpoint):
    from budgetformer_core import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "eval", interrupted)
    code, out, err = run(capsys, "eval", "--checkpoint", str(tiny_checkpoint))
    assert code == 130 and err == "budgetformer eval: interrupted\n"


# --------------------------------------------------------------------------- bad input: predict files

def test_predict_file_splits_on_newline_only_and_numbers_rows(capsys, tiny_checkpoint, tmp_path):
    f = tmp_path / "in.txt"
    f.write_bytes("w1 m0 a\u2028w2 m1 b\r\nw3 m0 b\x85w4\n".encode())
    code, out, _ = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--json", "--input-file", str(f))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["line"] for r in rows] == [1, 2]


def test_predict_file_refuses_invalid_utf8_naming_the_line(capsys, tiny_checkpoint, tmp_path):
    f = tmp_path / "in.txt"
    f.write_bytes(b"w1 m0 a\nw2 \xff m1\nw3\n")
    code, out, err = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--json", "--input-file", str(f))
    assert code == 2 and "line 2 is not valid UTF-8" in err
    assert [json.loads(line)["line"] for line in out.splitlines()] == [1]  # what came before is printed


def test_predict_file_streams_its_rows(capsys, tiny_checkpoint, tmp_path, monkeypatch):
    from budgetformer_core.analysis import infer

    f = tmp_path / "in.txt"
    f.write_text("w1 m0 a\n" * (2 * infer.PREDICT_BATCH + 1))
    seen = []
    real = infer.analyze

    def counting(ckpt, texts, control=None):
        seen.append((len(texts), len(capsys.readouterr().out.splitlines())))
        return real(ckpt, texts, control)

    monkeypatch.setattr(infer, "analyze", counting)  # predict_rows, which predict runs, calls it
    code, _, _ = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--json", "--input-file", str(f))
    assert code == 0
    assert seen == [(infer.PREDICT_BATCH, 0), (infer.PREDICT_BATCH, infer.PREDICT_BATCH), (1, infer.PREDICT_BATCH)]


def test_latency_check_refuses_an_unknown_dataset_or_absent_texts_in_one_line(capsys):
    import pandas as pd

    from budgetformer_core.shipped import PRECOMPUTED

    if not (PRECOMPUTED / "results" / "sweeps.csv").is_file():
        pytest.skip("no shipped results")
    shipped = ", ".join(dict.fromkeys(pd.read_csv(PRECOMPUTED / "results" / "sweeps.csv")["dataset"]))
    code, out, err = run(capsys, "latency-check", "--datasets", "imdb")
    assert code == 2 and out == ""
    assert err.strip() == f"budgetformer latency-check: error: unknown dataset imdb; choose from {shipped}"
    code, out, err = run(capsys, "latency-check", "--datasets", "bbc", "ag_news")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "test texts of ag_news are not shipped: pass --data-dir DIR" in err

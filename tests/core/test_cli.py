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
    code, out, _ = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--budget", "1.0",
                       "--json", "--input-file", str(f))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 2  # blank lines skipped
    assert all(len(h) == 4 for r in rows for h in r["selected_heads"])


@pytest.mark.parametrize("argv, message", [
    (["predict", "--checkpoint", "{ckpt}", ""], "empty"),
    (["predict", "--checkpoint", "{ckpt}"], "no input"),
    (["predict", "--checkpoint", "/nonexistent/ckpt", "hi"], "not a directory"),
    (["train", "--dataset", "bbc", "--out", "{tmp}/x", "--set", "warp_speed=9"], "unknown config key 'warp_speed'"),
    (["train", "--dataset", "imagenet", "--out", "{tmp}/x"], "unknown dataset"),
])
def test_user_errors_exit_2_with_a_message(capsys, tiny_checkpoint, tmp_path, argv, message):
    argv = [a.format(ckpt=tiny_checkpoint, tmp=tmp_path) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


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
    from budgetformer_core.checkpoint import load_checkpoint

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

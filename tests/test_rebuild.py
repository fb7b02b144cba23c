"""The rebuild of precomputed/: every model once, warm starts after what they start from, baselines
off-ship, typed recipes that the configs accept, and the check that a checkpoint is current."""

from __future__ import annotations

import json
import shlex
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from budgetformer_core.analysis.infer import evaluate
from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.data import load_dataset
from budgetformer_core.measure.latency import agrees, live_check
from budgetformer_core.overrides import apply_overrides
from budgetformer_core.shipped import dense_reference
from rebuild import jobs as rebuild_jobs
from rebuild.__main__ import main, parser
from rebuild.jobs import Job, plan, run_all
from rebuild.manifest import merged_timing
from rebuild.measure import TEXT_BASELINE, accuracy_changes, retime, text_baseline, untimed_partners
from rebuild.recipes import RECIPES, SHIPPED

ROOT_DIR = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT_DIR / "precomputed" / "checkpoints" / "bbc-dense" / "tokenizer.json"


def test_plan_orders_warm_starts_after_their_source():
    jobs = plan(list(RECIPES))
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys))
    for i, job in enumerate(jobs):
        assert set(job.after) <= set(keys[:i]), job.key
        if "--init" in job.argv:
            source = job.argv[job.argv.index("--init") + 1]
            assert any(str(jobs[keys.index(a)].out) == source for a in job.after), job.key


@pytest.mark.artifacts
def test_shipped_models_and_baselines():
    jobs = plan(["bbc"])
    assert {j.name for j in jobs if j.shipped} == {*SHIPPED, "minilm-dense", "minilm-budgetformer",
                                                   "minilm-frozen-budgetformer"}
    names = {j.name for j in jobs}
    assert {"static-0.25", "static-0.5", "static-0.75", "posthoc", "recovery-0.5"} <= names
    for j in jobs:
        assert str(j.out).startswith("precomputed/checkpoints/" if j.shipped else "runs/precompute/")
    ablation = next(j for j in jobs if j.name == "no-head-scorer")
    assert ablation.overrides["head_choice"] == "uniform"
    assert ["--set", "head_choice=uniform"] == ablation.command()[-5:-3]
    for j in jobs:  # the commands the CLI accepts (prune has no --quiet)
        assert j.command()[:2] == ["budgetformer", j.argv[0]]
        assert ("--quiet" in j.command()) == (j.argv[0] == "train")
    recovery = next(j for j in jobs if j.name == "recovery-0.5")
    assert {"epochs=1", "freeze_gates=true", "train_budget=0.5"} <= set(recovery.command())


def test_models_on_the_pretrained_encoder_start_from_it_or_from_its_dense_fine_tune():
    jobs = {j.name: j for j in plan(["ag_news"])}
    first, dense, bba = jobs["minilm-dense-epoch1"], jobs["minilm-dense"], jobs["minilm-bba"]
    assert dense.shipped and bba.shipped and not jobs["minilm-static-0.5"].shipped and not first.shipped
    assert first.argv[first.argv.index("--backbone") + 1] == "minilm-l6" and "--init" not in first.argv
    # the second stage goes on from the first
    assert dense.argv[dense.argv.index("--init") + 1] == str(first.out) and dense.after == (first.key,)
    assert bba.argv[bba.argv.index("--init") + 1] == str(dense.out) and bba.after == (dense.key,)
    assert jobs["minilm-posthoc"].argv[:1] == ["prune"]
    assert jobs["minilm-recovery-0.5"].after == ("ag_news-minilm-posthoc",)
    assert {j.budget for n, j in jobs.items() if n.startswith("minilm-static")} == {0.25, 0.5}


def test_the_frozen_budgets_are_fitted_on_the_dense_fine_tune_and_compared_like_any_command():
    """bbc-minilm-frozen-budgetformer is a fit-budget command on bbc-minilm-dense, after it; its
    distillation settings are typed like the configs' (2 and 2.0 make the same adapter)."""
    job = {j.name: j for j in plan(["bbc"])}["minilm-frozen-budgetformer"]
    dense = {j.name: j for j in plan(["bbc"])}["minilm-dense"]
    assert job.shipped and job.argv[:3] == ["fit-budget", "--checkpoint", str(dense.out)]
    assert job.after == (dense.key,) and "--dataset" in job.argv and job.command()[-2:] == ["--out", str(job.out)]
    command = " ".join(job.command())
    assert rebuild_jobs.difference(command, command.replace("temperature=2.0", "temperature=2")) is None
    assert rebuild_jobs.difference(command, command.replace("temperature=2.0", "temperature=3")) == (
        "temperature: 2.0 → 3.0")


def test_a_checkpoint_is_current_when_its_command_makes_the_same_model():
    """Printing (--quiet), where the data lies (--data-dir), the spelling of a value and a key
    given twice do not change the model, nor does setting a field to the value the checkpoint's
    config holds; another value, a new key or another argument does."""
    difference = rebuild_jobs.difference
    base = "budgetformer train --dataset d --data-dir a/d --set lr=3e-3 --set epochs=8 --set epochs=6 --out x"
    same = "budgetformer train --dataset d --data-dir b/d --set lr=0.003 --set epochs=6 --out x --quiet"
    assert difference(base, same) is None
    assert difference(base, base.replace("epochs=6", "epochs=7")) == "epochs: 6 → 7"
    assert difference(base, base + " --set gate_source=embedding") == "gate_source: - → embedding"
    # a value the recorded command left to its default: the checkpoint's config says what it was
    made = {"model": {"gate_source": "embedding"}, "train": {"epochs": 6}}
    assert difference(base, base + " --set gate_source=embedding", made) is None
    assert difference(base, base + " --set gate_source=layer", made) == "gate_source: embedding → layer"
    assert difference(base, base.replace("--dataset d", "--dataset d --init y")) == "arguments - → --init y"
    assert difference("budgetformer train --set freeze_attention=true", "budgetformer train").startswith(
        "its command no longer parses")


def test_recipes_are_typed_overrides_the_configs_accept_and_commands_carry_them_back():
    for job in plan(list(RECIPES)):
        # the --set text parses to the typed values (a fit-budget command's distillation keys too)
        assert rebuild_jobs.meaning(shlex.join(job.command()))[1] == job.overrides, job.key
        assert all(isinstance(v, (bool, int, float, str)) for v in job.overrides.values()), job.key
    jobs = {j.key: j for j in plan(["synthetic_var", "ag_news"])}
    assert jobs["synthetic_var-budgetformer"].overrides["epochs"] == 8  # the adaptive set wins over scratch's 6
    assert jobs["synthetic_var-dense"].overrides["lr"] == pytest.approx(3e-3)
    assert jobs["ag_news-dense"].argv[3:5] == ["--data-dir", "../shared/data/ag_news"]
    elsewhere = {j.key: j for j in plan(["ag_news"], "/data")}
    assert elsewhere["ag_news-dense"].argv[3:5] == ["--data-dir", "/data/ag_news"]
    with pytest.raises(ValueError, match="unknown config key 'n_head'"):
        apply_overrides(ModelConfig(), TrainConfig(), {"n_head": 2})
    with pytest.raises(ValueError, match="n_heads must be an integer"):
        apply_overrides(ModelConfig(), TrainConfig(), {"n_heads": "2"})


@pytest.mark.artifacts
def test_the_dry_run_lists_the_shipped_models_of_bbc_and_synthetic_var_as_current(capsys):
    assert main(["--dry-run", "--datasets", "bbc", "synthetic_var", "--models", "dense", "budgetformer*",
                 "no-*", "minilm-*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line.split(None, 2)[2] for line in lines[:-1]}
    assert listed.pop("bbc-minilm-dense-128") in {  # a first stage: made where it was needed
        "current", "not needed: what goes on from it is current (bbc-minilm-dense)"}
    assert set(listed) == {f"{d}-{m}" for d in ("bbc", "synthetic_var") for m in (
        "dense", "budgetformer", "budgetformer-paper", "no-budget-net", "no-head-scorer")} | {
        "bbc-minilm-dense", "bbc-minilm-budgetformer", "bbc-minilm-frozen-budgetformer"}
    assert set(listed.values()) == {"current"}, listed
    assert lines[-1].endswith("; 0 would be trained")


@pytest.mark.artifacts
def test_the_dry_run_lists_the_shipped_minilm_models_of_ag_news_as_current(capsys):
    """Their first stage is current where it was made, or need not be made (a fresh clone)."""
    if not (ROOT_DIR / "../shared/data/ag_news").is_dir():
        pytest.skip("the AG News copy is not here")
    assert main(["--dry-run", "--datasets", "ag_news", "--models", "minilm-dense*", "minilm-bba"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line.split(None, 2)[2] for line in lines[:-1]}
    assert listed.pop("ag_news-minilm-dense-epoch1") in {
        "current", "not needed: what goes on from it is current (ag_news-minilm-dense)"}
    assert listed == {"ag_news-minilm-dense": "current", "ag_news-minilm-bba": "current"}
    assert lines[-1].endswith("; 0 would be trained")


def test_run_times_are_recorded_once_per_model_and_an_interrupted_run_is_resumed(tmp_path, monkeypatch):
    monkeypatch.setattr(rebuild_jobs, "ROOT", tmp_path)
    rebuild_jobs.record_time("bbc-dense", 12.4)
    rebuild_jobs.record_time("bbc-bba", 30.0, resumed=True)
    rebuild_jobs.record_time("bbc-dense", 11.0)
    times = pd.read_csv(tmp_path / rebuild_jobs.TIMES)
    assert times[["model", "seconds", "resumed"]].values.tolist() == [["bbc-bba", 30, True], ["bbc-dense", 11, False]]
    job = next(j for j in plan(["bbc"]) if j.name == "bba")
    command = " ".join(job.command())
    assert rebuild_jobs.resumable(job, command) is None
    state = tmp_path / f"{job.out}.resume"
    state.mkdir(parents=True)
    (state / "run.json").write_text('{"command": "budgetformer train --other"}')
    assert rebuild_jobs.resumable(job, command) is None  # another run's state
    (state / "run.json").write_text(json.dumps({"command": " ".join(job.command()[:-1])}))  # no --quiet
    assert rebuild_jobs.resumable(job, command) == Path(f"{job.out}.resume")


def test_paper_recipe_beside_the_adaptive_one():
    jobs = {j.name: j for j in plan(["bbc"])}
    assert jobs["budgetformer-paper"].overrides["recipe"] == "paper"
    assert not any("recipe" in j.overrides for n, j in jobs.items() if n != "budgetformer-paper")


def test_select_keeps_the_chosen_models_and_starts_from_built_sources(tmp_path, monkeypatch):
    jobs = plan(["bbc"])
    chosen = rebuild_jobs.select(jobs, ["budgetformer*", "bba"])
    assert {j.name for j in chosen} == {"budgetformer", "budgetformer-paper", "bba"}
    assert all(j.after == () for j in chosen)  # bbc-dense is not selected: bba starts from it as built
    assert rebuild_jobs.select(jobs, None) == jobs
    with pytest.raises(SystemExit, match="no model matches"):
        rebuild_jobs.select(jobs, ["nothing*"])
    monkeypatch.setattr(rebuild_jobs, "ROOT", tmp_path)  # nothing built there
    with pytest.raises(SystemExit, match="neither selected nor built"):
        rebuild_jobs.select(jobs, ["bba"])


def test_run_all_runs_in_parallel_after_sources_and_rebuilds_what_starts_from_a_rebuild(monkeypatch):
    # a → b → d, a → c, e alone; only "a" is out of date, so b, c and d are rebuilt because a was
    jobs = [Job("t", "a", ["train"]), Job("t", "b", ["train"], ("t-a",)), Job("t", "c", ["train"], ("t-a",)),
            Job("t", "d", ["train"], ("t-b",)), Job("t", "e", ["train"])]
    out_of_date = {"t-a"}
    started, finished, forced, lock = [], [], {}, threading.Lock()
    at_once = {"now": 0, "most": 0}

    def fake_run(job, force=False):
        with lock:
            assert all(a in finished for a in job.after), job.key
            started.append(job.key)
            at_once["now"] += 1
            at_once["most"] = max(at_once["most"], at_once["now"])
        time.sleep(0.05)
        with lock:
            at_once["now"] -= 1
            finished.append(job.key)
            forced[job.key] = force
        return job, force or job.key in out_of_date

    monkeypatch.setattr(rebuild_jobs, "run_job", fake_run)
    done = run_all(jobs, workers=2)
    assert [j.key for j in done] == [j.key for j in jobs] and sorted(started) == sorted(forced)
    assert forced == {"t-a": False, "t-b": True, "t-c": True, "t-d": True, "t-e": False}
    assert at_once["most"] == 2  # two workers busy at once, never more
    run_all(jobs, workers=2, force=True)
    assert all(forced.values())
    with pytest.raises(RuntimeError, match="cannot order"):
        run_all([Job("t", "x", ["train"], ("t-y",)), Job("t", "y", ["train"], ("t-x",))], workers=1)
    with pytest.raises(RuntimeError, match="not among them"):
        run_all([Job("t", "x", ["train"], ("t-nowhere",))], workers=1)


def test_a_first_stage_is_made_only_for_a_model_to_be_made(tmp_path, monkeypatch):
    """A first stage that is not here is skipped while the model going on from it is current; it is
    made (and that model after it) when the model is out of date, and checked when it is here."""
    monkeypatch.setattr(rebuild_jobs, "ROOT", tmp_path)
    jobs = [j for j in plan(["ag_news"]) if j.name in ("minilm-dense-epoch1", "minilm-dense")]
    stage, second = jobs
    assert stage.stage and not second.stage and second.after == (stage.key,)

    def made_by(job, command):  # a checkpoint on the pretrained base recording ``command``
        (tmp_path / job.out).mkdir(parents=True, exist_ok=True)
        (tmp_path / job.out / "config.json").write_text(json.dumps({"command": command, "backbone": {}}))
        (tmp_path / job.out / "tokenizer.json").write_bytes(TOKENIZER.read_bytes())

    ran = []

    def fake_run(job, force=False):
        ran.append((job.key, force))
        return job, force or job.key == stage.key

    monkeypatch.setattr(rebuild_jobs, "run_job", fake_run)
    made_by(second, " ".join(second.command()))
    run_all(jobs, workers=1)
    assert ran == [(second.key, False)]  # the second stage is current: its first need not be here
    assert [why for _, why in rebuild_jobs.dry_run(jobs)] == [
        f"not needed: what goes on from it is current ({second.key})", "current"]
    made_by(second, " ".join(second.command()).replace("epochs=1", "epochs=3"))  # out of date
    ran.clear()
    run_all(jobs, workers=1)
    assert ran == [(stage.key, False), (second.key, True)]
    ran.clear()
    made_by(second, " ".join(second.command()))
    made_by(stage, "budgetformer train --other")  # here, so checked (and rebuilt when out of date)
    run_all(jobs, workers=1)
    assert ran == [(stage.key, False), (second.key, True)]


def test_evaluation_frame_written_per_example(small_model):
    ids = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]
    ev = evaluate(small_model, ids, [0, 1, 2])
    frame = ev.to_frame([len(x) for x in ids])
    assert list(frame["index"]) == [0, 1, 2]
    assert list(frame["tokens"]) == [4, 2, 3]
    assert (frame["correct"] == (frame["prediction"] == frame["label"])).all()
    for layer in range(small_model.cfg.n_layers):
        heads = frame[f"heads{layer}"].str.split().map(len)
        assert (heads == frame[f"k{layer}"]).all()
        assert (frame[f"k{layer}"] == ev.selected[:, layer].sum(-1)).all()
    assert np.allclose(frame["loss"], -np.log(frame["p_true"]))
    with pytest.raises(ValueError, match="differ in length"):
        ev.to_frame([4, 2])


def test_accuracy_changes_reports_points_per_model():
    def frame(acc):
        return pd.DataFrame({"dataset": "bbc", "model": ["dense", "bba", "bba", "bba", "static-0.25"],
                             "budget": ["own", "own", "0.25", "0.5", "0.25"], "accuracy": acc})

    old = frame([0.97, 0.96, 0.90, 0.95, 0.9])
    new = pd.concat([frame([0.97, 0.965, 0.92, 0.95, 0.897]),  # a model only in the new run is left out
                     pd.DataFrame({"dataset": ["ag_news"], "model": ["dense"], "budget": ["own"], "accuracy": [0.9]})])
    out = accuracy_changes(old, new).set_index("model")
    assert list(out.index) == ["bba", "dense", "static-0.25"]
    assert out.loc["bba", "before"] == pytest.approx(96.0) and out.loc["bba", "after"] == pytest.approx(96.5)
    assert out.loc["bba", "change"] == pytest.approx(0.5)
    assert out.loc["bba", "largest_change"] == pytest.approx(2.0)  # at b = 0.25
    assert out.loc["dense", "largest_change"] == pytest.approx(0.0)
    assert np.isnan(out.loc["static-0.25", "before"]) and out.loc["static-0.25", "largest_change"] == pytest.approx(0.3)


def test_live_check_times_the_shipped_points_again_beside_their_figures():
    """The check re-times the rows asked for (and their dense reference) on the shipped models and
    keeps the shipped figures beside the live ones; ``agrees`` judges the ratio of speed-ups."""
    keys = ["dataset", "model", "budget"]
    frame = pd.DataFrame({"dataset": "synthetic_var", "model": ["dense", "budgetformer", "budgetformer", "bba"],
                          "budget": ["own", "own", "1", "0.5"], "latency_ms": [0.5, 0.4, 0.5, 0.3],
                          "speedup_b1": [1.0, 1.25, 1.0, 1.6], "speedup_b32": [1.0, 1.1, 1.0, 1.3]})
    check = live_check(frame, ["synthetic_var"], models=("budgetformer",))
    assert check[keys].values.tolist() == [["synthetic_var", "budgetformer", "own"],
                                           ["synthetic_var", "budgetformer", "1"]]
    assert check.speedup_b1.tolist() == [1.25, 1.0] and check.latency_ms.tolist() == [0.4, 0.5]
    assert (check.latency_ms_live > 0).all() and (check.speedup_b32_live > 0).all()
    assert check.ratio.to_numpy() == pytest.approx((check.speedup_b1_live / check.speedup_b1).to_numpy())
    judged = agrees(pd.DataFrame({"ratio": [0.74, 0.76, 1.0, 1.24, 1.26]}))
    assert judged.tolist() == [False, True, True, True, False]
    with pytest.raises(ValueError, match="no rows"):
        live_check(frame, ["bbc"])


def test_retiming_chosen_models_times_them_beside_their_dense_reference_and_keeps_the_other_rows():
    frame = pd.DataFrame({"dataset": ["synthetic_var"] * 3 + ["bbc"], "model": ["dense", "budgetformer", "bba", "bba"],
                          "budget": ["own", "own", "0.5", "own"], "accuracy": [0.9, 0.8, 0.7, 0.6],
                          "latency_ms": [-1.0, -2.0, -3.0, -4.0], "machine": "elsewhere"})
    timed, entries = retime(frame, ["synthetic_var", "bbc"], keys={"synthetic_var-bba"})
    timed = timed.set_index(["dataset", "model"])
    assert list(timed.index) == [("synthetic_var", "dense"), ("synthetic_var", "budgetformer"), ("bbc", "bba"),
                                 ("synthetic_var", "bba")]
    kept = timed.drop(("synthetic_var", "bba"))
    assert kept.latency_ms.tolist() == [-1.0, -2.0, -4.0] and (kept.machine == "elsewhere").all()
    bba = timed.loc[("synthetic_var", "bba")]
    assert bba.latency_ms > 0 and bba.dense_latency_ms > 0 and bba.dense_model == "dense"
    assert bba.speedup_b1 == pytest.approx(bba.dense_latency_ms / bba.latency_ms) and bba.accuracy == 0.7
    assert list(entries) == ["synthetic_var-bba"] and entries["synthetic_var-bba"]["threads"] == 1
    # an entry per model re-timed alone; a dataset timed whole drops its models' older entries
    old = {"bbc": {"when": 1}, "bbc-bba": {"when": 2}, "ag_news-bba": {"when": 3}}
    assert merged_timing(old, {"bbc-dense": {"when": 4}}) == {**old, "bbc-dense": {"when": 4}}
    assert merged_timing(old, {"bbc": {"when": 5}}) == {"bbc": {"when": 5}, "ag_news-bba": {"when": 3}}


def test_models_are_timed_alone_only_with_every_row_beside_the_same_dense_model(capsys):
    """A row's dense latency is its dense model's own, from the same rounds: ``--models`` timing
    some of the rows beside a dense model (and not the others, nor the dense row) is refused
    before anything runs, naming what is missing; a whole group, or --skip-timing, is not."""
    frame = pd.DataFrame({"dataset": ["bbc"] * 4 + ["dbpedia"] * 2,
                          "model": ["dense", "budgetformer", "static-0.5", "tfidf-lr", "minilm-dense", "minilm-bba"],
                          "latency_ms": [1.0, 2.0, 3.0, None, 4.0, 5.0],
                          "dense_model": ["dense", "dense", "dense", "dense", "minilm-dense", "minilm-dense"]})
    assert untimed_partners(frame, {"bbc-budgetformer"}) == ["bbc-dense", "bbc-static-0.5"]  # not the untimed row
    assert untimed_partners(frame, {"bbc-dense"}) == ["bbc-budgetformer", "bbc-static-0.5"]
    assert untimed_partners(frame, {"dbpedia-minilm-bba", "dbpedia-minilm-dense"}) == []
    with pytest.raises(SystemExit) as stop:
        main(["--datasets", "bbc", "--models", "budgetformer"])
    assert stop.value.code == 2
    assert "bbc-dense" in capsys.readouterr().err


def test_text_baseline_is_a_row_of_its_own_on_the_test_split():
    row = text_baseline("synthetic", None)
    test = load_dataset("synthetic").split("test")
    assert (row["dataset"], row["model"], row["budget"]) == ("synthetic", TEXT_BASELINE, "own")
    assert row["n"] == len(test.texts)
    assert 0 <= row["macro_f1"] <= 1 and 0 <= row["accuracy"] <= 1
    assert dense_reference("synthetic", TEXT_BASELINE) == "dense"


def test_retime_takes_no_evaluation_options():
    for extra in (["--skip-timing"], ["--models", "bba"], ["--skip-train"]):
        with pytest.raises(SystemExit) as stop:
            main(["--retime", *extra])
        assert stop.value.code == 2, extra


def test_the_help_is_plain_text():
    """Every option has a help line, and the help shows no source markup."""
    p = parser()
    text = p.format_help()
    assert "``" not in text and "SPEC" not in text
    assert all(a.help for a in p._actions), [a.dest for a in p._actions if not a.help]

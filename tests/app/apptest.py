"""Helpers of the app's AppTests (no server, no browser, real widgets and the real models):
running a page, reading its metrics and chart specs, picking a model, made-up precomputed results.

Assertions are on rendered values (metrics, chart specs, messages), not only on "no exception".
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.models import DEFAULT_MODEL, available_models
from budgetformer_core.shipped import CHECKPOINTS

ROOT = Path(__file__).resolve().parents[2]


MAIN = ROOT / "app" / "main.py"


VIEWS = sorted((ROOT / "app" / "views").glob("[!_]*.py"))


TIMEOUT = 120  # the first run imports torch and loads the model; the machine may be busy


SPORT = (
    "The striker scored a hat-trick as the champions beat their rivals 3-1 in the league, "
    "and the coach praised the team's defence after the football match."
)


BUSINESS = (
    "Shares in the bank rose sharply after it reported record annual profits, and analysts "
    "said the company's sales and the wider economy would keep growing."
)


MARKUP = "<script>alert(1)</script><b>x</b>"


BF = "bbc-budgetformer"
"""The BudgetFormer trained from scratch on BBC (2 layers × 4 heads), shipped beside ``bbc-bba``,
the per-budget baselines, the ablations and the seeds: the model most page tests open (the
app's default, :data:`app.models.DEFAULT_MODEL`, is its MiniLM fine-tune)."""


def start(model: str | None = BF) -> AppTest:
    """A session opened on ``model`` (its link, ``?model=``), run once; None: as a visitor first
    sees the app, on its default model."""
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    if model is not None:
        at.query_params["model"] = model
    return run(at)


def config(name: str = BF) -> dict:
    return json.loads((CHECKPOINTS / name / "config.json").read_text())


def run(at: AppTest) -> AppTest:
    at.run(timeout=TIMEOUT)
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    """A metric's value; for a per-layer card of a deep model, which shows a range, the whole
    list from its help ("Per layer: a / b / …")."""
    [m] = [m for m in at.metric if m.label == label]
    listed = re.match(r"Per layer: (.*)$", m.help or "")
    return listed.group(1) if listed else m.value


def typed_arrays_as_lists(spec):
    """A chart spec with plotly's typed arrays (``{"dtype", "bdata"}``: base64 of a numpy array,
    as plotly sends arrays) as plain lists."""
    if isinstance(spec, dict):
        if set(spec) >= {"dtype", "bdata"}:
            values = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=spec["dtype"])
            shape = [int(v) for v in str(spec.get("shape", len(values))).split(",")]  # "2, 3" for 2-D
            return values.reshape(shape).tolist()
        return {k: typed_arrays_as_lists(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [typed_arrays_as_lists(v) for v in spec]
    return spec


def charts(at: AppTest) -> dict[str, dict]:
    """Plotly chart specs by their key."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = typed_arrays_as_lists(json.loads(el.proto.spec))
        out[spec["layout"]["title"]["text"]] = spec
    return out


def chart(at: AppTest, title_start: str) -> dict:
    [spec] = [s for t, s in charts(at).items() if t.startswith(title_start)]
    return spec


def type_text(at: AppTest, text: str) -> AppTest:
    at.text_area(key="text").input(text)
    return run(at)


def all_markdown(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "subheader", "title")
    return [str(el.value) for kind in kinds for el in at.get(kind)]


def open_page(at: AppTest, view: str) -> AppTest:
    at.switch_page(f"views/{view}.py")
    return run(at)


def number(text: str) -> float:
    return float(text.replace("−", "-"))


def loss_terms_add_up(at: AppTest, history: list[dict]) -> None:
    """The loss chart's bars (every term the model trained with) add up to its total each epoch,
    and the total is the history's."""
    data = chart(at, "Loss terms per epoch")["data"]
    bars, [total] = [t for t in data if t["type"] == "bar"], [t for t in data if t["type"] == "scatter"]
    assert total["y"] == pytest.approx([h["loss"] for h in history], abs=1e-12)
    for epoch, value in enumerate(total["y"]):
        assert sum(b["y"][epoch] for b in bars) == pytest.approx(value, abs=1e-6), epoch


def extremes_shown(at: AppTest) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(index, mean budget) of the lowest and the highest budgets on "Easy vs hard", as its two
    tables show them (first and second column); the "Open one of them" picker lists the same."""
    tables = [el.proto.body for el in at.get("html") if 'id="T_eh_' in el.proto.body]
    assert len(tables) == 2
    shown = []
    for body in tables:
        cells = [re.findall(rf'class="data row\d+ col{c}" >(.*?)</td>', body) for c in (0, 1)]
        shown.append([(int(i), float(v)) for i, v in zip(*cells, strict=True)])
    picker = at.selectbox(key="eh_open_pick").options
    assert picker == [f"#{i} · {end} s {v:.3f}" for end, rows in zip(("lowest", "highest"), shown) for i, v in rows]
    return shown[0], shown[1]


AG_NEWS = "ag_news-budgetformer"


SWEEP_BUDGETS = [round(0.05 * i, 2) for i in range(1, 21)]


SWEEPING = {"budgetformer": 0.0, "no-budget-net": -0.02, "no-head-scorer": -0.04, "bba": -0.01, "posthoc": -0.2}
"""Models with a budget sweep, and how much worse than budgetformer they are made."""


def sweep_row(model: str, budget: str, b: float, offset: float = 0.0) -> dict:
    latency = 2 + 4 * b
    return {
        "dataset": "bbc", "model": model, "variant": "test", "budget": budget,
        "accuracy": round(0.5 + 0.45 * b + offset, 6), "macro_f1": round(0.49 + 0.45 * b + offset, 6),
        "n": 426, "mean_s": b, "heads_fraction": b, "attention_cost_estimated": b,
        "flops_ratio": 0.3 + 0.7 * b, "latency_ms": latency, "latency_iqr_ms": 0.1,
        "speedup_b1": 6 / latency,
        "speedup_b32": 7 / latency if budget in ("own", "0.25", "0.5", "0.75", "1") else None,
        "machine": "test",
    }  # fmt: skip


def fake_sweeps(without: tuple[str, ...] = ()) -> pd.DataFrame:
    rows = [sweep_row("dense", "own", 1.0)]
    for model, offset in SWEEPING.items():
        rows.append(sweep_row(model, "own", 0.4, offset))
        rows += [sweep_row(model, f"{b:g}", b, offset) for b in SWEEP_BUDGETS]
    for b in (0.25, 0.5, 0.75):
        rows += [sweep_row(f"static-{b:g}", f"{b:g}", b, -0.03), sweep_row(f"recovery-{b:g}", f"{b:g}", b, -0.05)]
    frame = pd.DataFrame(rows)
    return frame[~frame["model"].isin(without)]


def fake_per_example(labels: list[int], wrong: set[int]) -> pd.DataFrame:
    """A per-example table whose predictions are right except at ``wrong`` (there: the next class)."""
    pred = [(y + 1) % 5 if i in wrong else y for i, y in enumerate(labels)]
    return pd.DataFrame({"index": range(len(labels)), "label": labels, "prediction": pred,
                         "correct": [p == y for p, y in zip(pred, labels)]})  # fmt: skip


WRONG = {"budgetformer": {3, 10}, "dense": {10, 20}, "no-head-scorer": set()}
"""The per-example tables written: no-budget-net and bba have none."""


BUDGETS = [0.25, 0.5, 0.75, 1.0]
"""The budgets :func:`write_sweeps` also times at batch 32."""


MODELS = ("budgetformer", "no-budget-net", "no-head-scorer", "bba")
"""The models :func:`write_sweeps` sweeps, beside dense."""


NOT_TIMED_MODEL = "no-head-scorer"
"""Its rows have no latency: its checkpoint was not on the timing machine."""


def timed_row(model: str, budget: str, b: float, rng: np.random.Generator, dense_ms: float) -> dict:
    timed = model != NOT_TIMED_MODEL
    latency = 2 + 4 * b + rng.uniform(0, 0.5) if timed else np.nan
    batched = latency / 3 if timed and (budget == "own" or b in BUDGETS) else np.nan
    return {
        "dataset": "bbc", "model": model, "variant": "test", "budget": budget, "accuracy": 0.5 + 0.4 * b,
        "macro_f1": 0.5 + 0.4 * b, "n": 426, "mean_s": b, "heads_fraction": b, "attention_cost_estimated": b,
        "flops_ratio": 0.3 + 0.7 * b, "latency_ms": latency, "latency_iqr_ms": 0.1,
        "dense_latency_ms": dense_ms if timed else np.nan,
        "speedup_b1": dense_ms / latency, "latency_b32_ms": batched,
        "dense_latency_b32_ms": dense_ms / 3 if timed else np.nan, "speedup_b32": dense_ms / 3 / batched,
        "dense_model": "dense", "machine": "test",
    }  # fmt: skip


def write_sweeps(path) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    dense_ms = float(rng.uniform(4, 8))
    rows = [timed_row("dense", "own", 1.0, rng, dense_ms)]
    rows[0]["latency_ms"] = rows[0]["dense_latency_ms"] = dense_ms  # the reference is itself
    for model in MODELS:
        rows.append(timed_row(model, "own", 0.4, rng, dense_ms))
        rows += [timed_row(model, f"{b:g}", b, rng, dense_ms) for b in np.round(np.arange(0.05, 1.0001, 0.05), 2)]
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False)
    return frame


def csv_value(frame: pd.DataFrame, model: str, budget: str, column: str) -> float:
    [value] = frame.loc[(frame["model"] == model) & (frame["budget"] == budget), column]
    return value


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The one table on the page with ``column``."""
    [table] = [d.value for d in at.dataframe if column in d.value.columns]
    return table


PER_EXAMPLE = ROOT / "precomputed" / "results" / "per_example"


def shipped(*models: str) -> bool:
    return all(m in available_models() and (PER_EXAMPLE / f"{m}.parquet").is_file() for m in models)


def pick_model(at: AppTest, model: str) -> AppTest:
    dataset = config(model).get("dataset", "unknown")
    at.sidebar.selectbox(key="dataset").set_value(dataset)
    run(at)
    at.sidebar.selectbox(key=f"model_for_{dataset}").set_value(model)
    return run(at)


BBA = "bbc-bba"


requires_default_model = pytest.mark.skipif(
    DEFAULT_MODEL not in available_models(), reason=f"{CHECKPOINTS / DEFAULT_MODEL} is missing"
)
"""Every AppTest needs the default model: without it the app has nothing to show."""

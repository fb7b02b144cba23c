"""What the "Ablations" page compares for the picked model (no Streamlit here).

The picked model first; then its ablations: the models trained without f_θ or without g_φ
beside it where they are shipped (``<dataset>-no-budget-net``, …), otherwise the engine's
inference-time ablations (:data:`budgetformer_core.model.budget.ABLATIONS`) run live on the
model itself, on request (:func:`run_label`); then the dense and BBA models of the same encoder
(``<dataset>-minilm-dense`` for a MiniLM model, ``<dataset>-dense`` for one trained from
scratch). Every row names its checkpoint, and every speed-up is against the model's dense
reference (:func:`budgetformer_core.shipped.dense_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.logic.results import ABLATIONS, RESULT_COLUMNS, backbone_of, own_point
from app.speed import is_number
from budgetformer_core.methods import METHOD_DESCRIPTIONS
from budgetformer_core.shipped import dense_reference, model_name

TRAINED = ("no-budget-net", "no-head-scorer")
"""The ablations shipped as models of their own, trained beside ``<encoder->budgetformer``."""
LIVE = {
    "no-budget-net": "no f_θ, run live",
    "no-head-scorer": "no g_φ, run live",
    "random-heads": "random heads, run live",
}
"""The ablations run live on a BudgetFormer, in the table's words (the engine's names)."""
TABLE_COLUMNS = ["model", "checkpoint", *RESULT_COLUMNS]
"""The table's columns: what the row is, the checkpoint it ran, its results."""


@dataclass(frozen=True)
class Member:
    """One shipped model of the family."""

    key: str
    """Its name in sweeps.csv: the checkpoint's name without the dataset (``minilm-dense``)."""
    label: str
    """What the table calls it."""
    checkpoint: str
    """The checkpoint's full name (``bbc-minilm-dense``)."""


@dataclass(frozen=True)
class Family:
    """The models the page compares with the picked one."""

    picked: Member
    relatives: tuple[Member, ...]
    """The models trained as its ablations (and, for one of those, the full model)."""
    live: tuple[str, ...]
    """The ablations that can run on the picked model itself (keys of :data:`LIVE`)."""
    baselines: tuple[Member, ...]
    """The dense and BBA models of the same encoder."""
    reference: str
    """The full name of its dense reference: every speed-up is against it."""
    note: str = ""
    """What applies to the picked model's method ("" for a BudgetFormer)."""

    @property
    def shipped(self) -> tuple[Member, ...]:
        """Every model of the family that has a checkpoint of its own, the picked one first."""
        return (self.picked, *self.relatives, *self.baselines)

    @property
    def names(self) -> dict[str, str]:
        """sweeps.csv name → the table's name, for every shipped model of the family."""
        return {m.key: m.label for m in self.shipped}

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """The differences worth an interval: the picked model against its dense model, each
        ablation against the picked model, BBA against dense and against the picked model."""
        p = self.picked.key
        dense = [m.key for m in self.baselines if m.checkpoint == self.reference]
        bba = [m.key for m in self.baselines if m.checkpoint != self.reference]
        found = [(p, d) for d in dense] + [(m.key, p) for m in self.relatives]
        found += [(b, d) for b in bba for d in dense] + [(b, p) for b in bba]
        return tuple(dict.fromkeys((a, b) for a, b in found if a != b))


def family(name: str, dataset: str, kind: str, has_f: bool = True, has_g: bool = True) -> Family:
    """The family of model ``name`` (a full name) of ``dataset``, whose method is ``kind``
    (``budgetformer``, ``bba`` or ``dense``; ``has_f`` / ``has_g``: a BudgetFormer with f_θ /
    g_φ). A model not named ``<dataset>-…`` (a folder of one's own) has no shipped relatives."""
    named = name.startswith(f"{dataset}-")
    key = name.removeprefix(f"{dataset}-") if named else name
    prefix = backbone_of(key)
    base = key.removeprefix(prefix)

    def member(k: str) -> Member:
        return Member(k, ABLATIONS.get(k.removeprefix(prefix), k), model_name(dataset, k))

    picked = Member(key, ABLATIONS.get(base, key), name)
    relatives = ()
    if named and kind == "budgetformer" and base in ("budgetformer", *TRAINED):
        relatives = tuple(member(prefix + m) for m in ("budgetformer", *TRAINED) if prefix + m != key)
    reference = dense_reference(dataset, name, full=True)
    baselines = ()
    if named:
        keys = (reference.removeprefix(f"{dataset}-"), f"{prefix}bba")
        baselines = tuple(member(k) for k in keys if k != key)
    live = ()
    if kind == "budgetformer":
        usable = {"no-budget-net": has_f, "no-head-scorer": has_g, "random-heads": True}
        live = tuple(a for a in LIVE if usable[a])
    return Family(picked, relatives, live, baselines, reference, METHOD_DESCRIPTIONS[kind].ablation_note)


def summary_row(summary: dict, reference: str) -> dict:
    """The table's columns of an evaluation's summary (:meth:`budgetformer_core.analysis.infer.Evaluation.summary`,
    or config.json's ``test``): accuracy and cost, not timed (NaN latencies and speed-ups)."""
    def value(k: str) -> float:
        v = summary.get(k)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan

    ratio = value("flops_ratio")
    row = dict.fromkeys(RESULT_COLUMNS, np.nan)
    row |= {"accuracy": value("accuracy"), "macro_f1": value("macro_f1"),
            "heads_fraction": value("mean_heads_fraction"), "mean_s": value("mean_budget"),
            "flops_ratio": ratio, "ideal_speedup": 1.0 / ratio if ratio > 0 else np.nan,
            "reference": reference}  # fmt: skip
    return row


def family_table(
    rows: pd.DataFrame, fam: Family, live: dict[str, dict] | None = None, picked_test: dict | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The page's table and the checkpoints sweeps.csv lacks: a row per model of the family at
    its own operating point — the picked model, its trained ablations, the ablations run live on
    it (``live``: ablation → :meth:`Evaluation.summary`), its dense and BBA models.

    The picked model's row comes from sweeps.csv, else from its config.json's ``test`` results
    (``picked_test``)."""
    records, missing = [], []

    def add(members) -> None:
        for m in members:
            r = own_point(rows, m.key)
            if r is not None:
                records.append({"model": m.label, "checkpoint": m.checkpoint, **r[RESULT_COLUMNS].to_dict()})
            elif m is fam.picked and picked_test:
                records.append({"model": m.label, "checkpoint": m.checkpoint,
                                **summary_row(picked_test, fam.reference)})
            else:
                missing.append(m.checkpoint)

    add((fam.picked, *fam.relatives))
    for ablation, summary in (live or {}).items():
        records.append({"model": LIVE[ablation], "checkpoint": fam.picked.checkpoint,
                        **summary_row(summary, fam.reference)})
    add(fam.baselines)
    return pd.DataFrame(records, columns=TABLE_COLUMNS), missing


def to_run_live(fam: Family, table: pd.DataFrame) -> list[str]:
    """The ablations to run live on the picked model: those with no trained model of their own
    in the table."""
    shown = set(table["checkpoint"])
    trained = {m.key.removeprefix(backbone_of(m.key)) for m in fam.relatives if m.checkpoint in shown}
    return [a for a in fam.live if a not in trained]


def live_seconds(rows: pd.DataFrame, fam: Family, n_texts: int, n_ablations: int) -> float | None:
    """About how long ``n_ablations`` live ablations of the picked model take over ``n_texts``
    texts: its latency per input in sweeps.csv (one thread, the test texts; at batch 32, else at
    batch 1) for each; None when sweeps.csv has not timed it."""
    row = own_point(rows, fam.picked.key)
    timed = [] if row is None else [row.get(c) for c in ("latency_b32_ms", "latency_ms") if is_number(row.get(c))]
    return timed[0] * n_texts * n_ablations / 1000 if timed else None


def run_label(n_texts: int, seconds: float | None) -> str:
    """The live ablations' button: "Run the live ablations on 426 test texts (about 68 s)"."""
    if seconds is None:
        return f"Run the live ablations on {n_texts} test texts"
    about = f"{max(1, round(seconds))} s" if seconds < 90 else f"{round(seconds / 60)} min"
    return f"Run the live ablations on {n_texts} test texts (about {about})"


def live_summary(ckpt, texts: list[str], labels: list[int], ablation: str, seed: int = 0) -> dict:
    """Ablation ``ablation`` (a key of :data:`LIVE`) run on ``ckpt`` over the texts: its
    :meth:`~budgetformer_core.analysis.infer.Evaluation.summary`. "no f_θ" runs every input at
    the model's mean s on its validation split, as the trained ablation does."""
    from budgetformer_core.analysis.infer import evaluate
    from budgetformer_core.io.tokenizer import encode
    from budgetformer_core.model.budget import ablation as control

    ids, _ = encode(ckpt.tokenizer, list(texts), ckpt.config.max_len)
    return evaluate(ckpt.model, ids, list(labels), control(ablation, ckpt.validation_budget, seed)).summary()


def interval_keys(fam: Family, labels: list[str]) -> list[str | None]:
    """The sweeps.csv name of each of the table's rows (by its label); None for a live row."""
    by_label = {m.label: m.key for m in fam.shipped}
    return [by_label.get(label) for label in labels]

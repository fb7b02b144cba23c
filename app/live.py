"""Cached live runs of a model: one input under a setting (Explore, Compare), a file's texts (Batch),
the Atlas's map of a split's inputs and a head's attention profile, and the ablations run on a
sample of the test split (Ablations).

Each cache is keyed by the checkpoint's name and the stamp of its files
(:func:`app.models.stamp`), and bounded (``max_entries``), as the caches of :mod:`app.state`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from app import models, sources, speed, state
from app.logic import explore as logic
from app.logic.explore import explain_input, run_analysis
from app.settings import Settings
from app.speed import LiveSpeed
from budgetformer_core.shipped import dense_reference

if TYPE_CHECKING:
    import pandas as pd

    from budgetformer_core.analysis.infer import Analysis
    from budgetformer_core.io.checkpoint import Checkpoint


def reference_checkpoint(name: str) -> tuple[str, Checkpoint] | None:
    """(name, checkpoint) of the dense reference model ``name`` is timed against
    (:func:`budgetformer_core.shipped.dense_reference`); None for a listed classifier, or when the
    reference is not on this machine or cannot be loaded."""
    ref = dense_reference(models.dataset_of(name), name, full=True)
    if models.is_classifier(name) or ref not in models.shipped_models():
        return None
    try:
        return ref, state.get_checkpoint(ref)
    except ValueError:  # CheckpointError: a broken reference leaves the speed-up out, not the page
        return None


def precomputed_speed(name: str, settings: Settings, symbol: str = "s") -> tuple[pd.Series, str] | None:
    """sweeps.csv's row of ``name`` nearest to what ``settings`` runs, and where it is
    (:func:`app.speed.precomputed_point`); None when there is none or sweeps.csv is unreadable."""
    dataset = models.dataset_of(name)
    try:
        rows = state.sweeps()
        ckpt = state.get_checkpoint(name)
    except ValueError:
        return None
    if rows is None:
        return None
    return speed.precomputed_point(rows[rows["dataset"] == dataset], name.removeprefix(f"{dataset}-"), settings,
                                   ckpt.validation_budget, ckpt.config.n_heads, symbol)


@dataclass
class Result:
    """The analyses the explore page shows for one input and one setting."""

    full: Analysis
    current: Analysis
    control_repr: dict | None


@st.cache_data(max_entries=256, show_spinner=False)
def _full(name: str, version: tuple, text: str) -> Analysis:
    return run_analysis(state.get_checkpoint(name), text)


@st.cache_data(max_entries=256, show_spinner=False)
def _result(name: str, version: tuple, text: str, settings: Settings) -> Result:
    full = _full(name, version, text)
    ckpt = state.get_checkpoint(name)
    control = logic.settings_control(ckpt, settings)
    if control is None:
        return Result(full, full, None)
    return Result(full, run_analysis(ckpt, text, control),
                  {k: v for k, v in vars(control).items() if k != "generator"})


def explore(name: str, text: str, settings: Settings) -> Result:
    """Full-model and chosen-setting analyses of ``text`` (cached).

    Raises:
        ValueError: an unusable text (empty, …) or checkpoint.
    """
    return _result(name, models.stamp(name), text, settings)


@st.cache_data(max_entries=256, show_spinner=False)
def _timing(name: str, version: tuple, text: str, settings: Settings) -> LiveSpeed:
    ckpt = state.get_checkpoint(name)
    return speed.time_input(ckpt, text, logic.settings_control(ckpt, settings), reference_checkpoint(name))


TIMED = "timed_inputs"
"""Session-state key: what this session has had timed (:func:`timing`), a hash per model, text and
setting: shown again, from the cache, whenever the page is back on it."""


def _timed_key(name: str, text, settings: Settings) -> str:
    return hashlib.sha256(repr((name, text, settings)).encode("utf-8")).hexdigest()  # repr: lone surrogates too


def timing(name: str, text: str, settings: Settings) -> LiveSpeed:
    """The latency of ``text`` under ``settings`` and of its dense reference, timed in the same
    rounds on this server (:func:`app.speed.time_input`; cached), and remembered for this session
    (:func:`was_timed`). Seven rounds of two runs cost more than the rest of the page, so the
    explore page times on request, never on a slider's move."""
    measured = _timing(name, models.stamp(name), text, settings)
    st.session_state.setdefault(TIMED, set()).add(_timed_key(name, text, settings))
    return measured


def was_timed(name: str, text: str, settings: Settings) -> bool:
    """Whether this session has had ``text`` under ``settings`` timed on ``name`` (:func:`timing`)."""
    return _timed_key(name, text, settings) in st.session_state.get(TIMED, ())


@st.cache_data(max_entries=32, show_spinner=False)
def _explanation(name: str, version: tuple, text: str, settings: Settings):
    ckpt = state.get_checkpoint(name)
    return explain_input(ckpt, text, logic.settings_control(ckpt, settings))


def explanation(name: str, text: str, settings: Settings):
    """The token attribution of each layer's s (bba: gate margin) for ``text`` under
    ``settings`` (:func:`app.logic.explore.explain_input`; cached: one pass per token is seconds on
    a long text). Raises ValueError for a dense model or an unusable text."""
    return _explanation(name, models.stamp(name), text, settings)


@st.cache_data(max_entries=32, show_spinner=False)
def _head_attention(name: str, version: tuple, text: str, settings: Settings, layer: int, head: int):
    ckpt = state.get_checkpoint(name)
    return logic.head_attention(ckpt, text, logic.settings_control(ckpt, settings), layer)[head]  # (T, T)


def head_attention(name: str, text: str, settings: Settings, layer: int, head: int):
    """(T, T) attention of head ``head`` of ``layer`` on ``text``, all NaN when that head did
    not run (:func:`app.logic.explore.head_attention`; cached, one head per entry: a few MB at most)."""
    return _head_attention(name, models.stamp(name), text, settings, layer, head)


@st.cache_data(max_entries=8, show_spinner="Classifying the file's texts…")
def _batch(name: str, version: tuple, key: str, settings: Settings, _rows: tuple) -> list:
    from budgetformer_core.analysis.infer import predict_rows
    from budgetformer_core.measure.timing import torch_threads

    ckpt = state.get_checkpoint(name)
    with torch_threads(1):  # a shared server: one thread per request, as the Explore page
        return list(predict_rows(ckpt, _rows, logic.settings_control(ckpt, settings)))


def batch_predictions(name: str, rows: list[tuple[int, str]], settings: Settings) -> list:
    """:func:`budgetformer_core.analysis.infer.predict_rows` of numbered texts (what ``budgetformer predict
    --input-file`` prints) under ``settings``; cached per model, texts and setting.

    Raises:
        ValueError: the checkpoint cannot be loaded.
    """
    # the cache's key is the rows' repr: a lone surrogate (bytes that were never UTF-8) in an
    # uploaded text escapes there, where hashing the text itself would fail; predict_rows names it
    key = hashlib.sha256(repr(rows).encode("utf-8")).hexdigest()
    return _batch(name, models.stamp(name), key, settings.canonical(), tuple(rows))


@st.cache_data(max_entries=8, show_spinner=False)
def _input_map(relevance):
    from budgetformer_core.analysis.atlas import input_map

    return input_map(relevance)


def input_map(name: str, budget: float | None = None):
    """:func:`budgetformer_core.analysis.atlas.input_map` of the test split's relevance p
    (:func:`app.state.relevance`: the shipped one at the model's own budget, else one pass of the
    model over the split), cached by its values; None when there is no relevance p here."""
    relevance = state.relevance(name, budget)
    return None if relevance is None else _input_map(relevance)


PROFILE_SAMPLE = 32
"""Inputs (the first of the test split on which the head ran) a head's attention profile averages."""


@st.cache_data(max_entries=32, show_spinner=False)
def _attention_profile(name: str, version: tuple, dataset: str, source: tuple, budget: float | None,
                       layer: int, head: int, rows: tuple):
    from budgetformer_core.analysis.atlas import attention_profile
    from budgetformer_core.model.budget import Control

    texts = sources.read_split(dataset, "test", *source).texts
    control = None if budget is None else Control(budget=budget)
    return attention_profile(state.get_checkpoint(name), [texts[i] for i in rows], layer, head, control)


def attention_profile(name: str, budget: float | None, layer: int, head: int, rows: list[int]):
    """Where ``head`` of ``layer`` attends on the test inputs at positions ``rows``
    (:func:`budgetformer_core.analysis.atlas.attention_profile`, cached); None when the texts are not here."""
    dataset = models.dataset_of(name)
    if state.split_samples(dataset, "test") is None:
        return None
    source = models.data_source(dataset)
    return _attention_profile(name, models.stamp(name), dataset, source, budget, layer, head, tuple(rows))


@st.cache_data(max_entries=16, show_spinner=False)
def _ablation(name: str, version: tuple, dataset: str, source: tuple, ablation: str, n: int) -> dict:
    from app.logic.ablations import live_summary
    from app.logic.results import live_sample

    samples = sources.read_split(dataset, "test", *source)
    texts, labels = live_sample(samples.texts, samples.labels, n)
    return live_summary(state.get_checkpoint(name), texts, labels, ablation)


def ablation(name: str, ablation: str, n: int) -> dict | None:
    """Ablation ``ablation`` run on ``name`` over ``n`` texts of its dataset's test split, a
    stratified sample (:func:`app.logic.results.live_sample`: every text when ``n`` is the split's
    size), as :func:`app.logic.ablations.live_summary` sums it up; once for all sessions. None
    when the texts are not on this machine.

    Raises:
        ValueError: the checkpoint cannot be loaded, or its history has no validation budget.
    """
    dataset = models.dataset_of(name)
    source = models.data_source(dataset)
    if source is None or sources.read_split(dataset, "test", *source) is None:
        return None
    return _ablation(name, models.stamp(name), dataset, source, ablation, n)

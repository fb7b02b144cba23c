"""UI pieces shared by the pages: the sidebar model picker, the test-set sample picker and the
budget slider.

User text is only ever shown through widgets and elements that print it as plain text
(``st.text``, ``st.code``, widget values); markdown gets only our own strings or names passed
through :func:`md_escape`. Nothing here uses ``unsafe_allow_html``; the one HTML element,
:func:`show_table`'s, has every cell and header escaped.
"""

from __future__ import annotations

import logging
import random
import re

import streamlit as st
from pandas.io.formats.style import Styler  # imported with the app, not on a table's first showing

from app.local_copy import LOCAL_COPY_HELP, named_copy
from app.logic.examples import readable
from app.logic.standing import FLAG_POINTS
from app.models import (
    DEFAULT_MODEL,
    MODEL_KEY,
    MODEL_ROOTS_ENV,
    available_models,
    checkpoint_config,
    dataset_of,
    model_method,
    model_standing,
    ranking_note,
    refused_folders,
    unusable_models,
)
from app.sources import DATA_DIRS_KEY, Samples
from budgetformer_core.config import stored_method

TEXT_KEY = "text"
"""Session-state key of the text being explored (the text area's value)."""
SAMPLE_KEY = "sample"
"""Session-state key of the test sample last loaded: (dataset, index)."""

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")


BUDGET_RANGE = (0.05, 1.0, 0.5, 0.05)
"""Every budget slider's lowest value, highest value, first value and step (s, or bba's b)."""


def budget_slider(label: str, key: str, where=st, **options) -> float:
    """The budget slider of every page: 0.05 to 1 in steps of 0.05, at 0.5 until moved; drawn in
    ``where`` (``st`` or a column), ``options`` as ``st.slider`` takes them (``disabled``, ``help``,
    ``format``, …). Its first value is set through Session State only, as a link sets it: a
    widget given a value and a Session State value makes Streamlit log a warning."""
    low, high, first, step = BUDGET_RANGE
    st.session_state.setdefault(key, first)
    return where.slider(label, low, high, step=step, key=key, **options)


def show_chart(where, figure, key: str, **selection):
    """Draw a plotly figure in ``where`` (``st`` or a column) in its own look
    (:data:`app.charts.style.TEMPLATE`), not restyled by Streamlit's theme in the browser;
    ``selection`` (``on_select``, ``selection_mode``) makes it selectable, and the selection event is
    returned."""
    return where.plotly_chart(figure, key=key, theme=None, **selection)


TABLE_STYLE = [
    {"selector": "", "props": "border-collapse: collapse; width: 100%; font-size: 0.95rem; line-height: 1.35;"},
    {"selector": "th", "props": "text-align: left; font-weight: 600; padding: 0.3rem 0.5rem; white-space: nowrap; "
                                "border-bottom: 2px solid rgba(49, 51, 63, 0.25);"},
    {"selector": "td", "props": "padding: 0.3rem 0.5rem; vertical-align: top; font-variant-numeric: tabular-nums; "
                                "border-bottom: 1px solid rgba(49, 51, 63, 0.1);"},
]


def html_table(frame, formats: dict[str, str], key: str, wide: str | None = None) -> str:
    """``frame`` as a static HTML table (pandas' ``Styler``): every cell and header HTML-escaped,
    so markup in a text is shown as text; ``formats`` maps a column to its format (e.g.
    ``"{:.3f}"``), and those columns are right-aligned; column ``wide`` (a text) takes half the
    width. ``key`` names the table's CSS."""
    styles = {c: [{"selector": cell, "props": "text-align: right;"} for cell in ("td", "th")] for c in formats}
    if wide is not None:
        styles[wide] = [{"selector": "td", "props": "width: 50%;"}]
    styler = (
        Styler(frame).format(formats, escape="html", na_rep="—")
        .format_index(escape="html", axis=1)
        .hide(axis="index")
        .set_uuid(key)
        .set_table_styles(TABLE_STYLE)
        .set_table_styles(styles, overwrite=False)
    )
    return styler.to_html()


def show_table(where, frame, formats: dict[str, str], key: str, wide: str | None = None) -> None:
    """A small read-only table drawn as plain HTML (:func:`html_table`): far cheaper for the
    browser than ``st.dataframe``'s grid, for tables that need no sorting or scrolling."""
    where.html(html_table(frame, formats, key, wide))


def md_escape(s: object) -> str:
    """``s`` as literal text inside markdown (every markdown / HTML special character escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", str(s))


def model_picker() -> str | None:
    """Sidebar: dataset, then one of its checkpoints; stores the choice under :data:`MODEL_KEY`."""
    models = available_models()
    for bad, why in unusable_models().items():
        st.sidebar.caption(f"Not offered: the checkpoint {md_escape(bad)} ({md_escape(why)}).")
    for bad, why in refused_folders().items():
        st.sidebar.caption(f"Not offered from {md_escape('$' + MODEL_ROOTS_ENV)}: the folder {md_escape(bad)} "
                           f"({md_escape(why)}).")
    if not models:
        st.sidebar.error(
            "No trained checkpoints under precomputed/checkpoints. Run `make precompute`."
        )
        return None
    default = DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]
    by_dataset: dict[str, list[str]] = {}
    for m in models:
        by_dataset.setdefault(dataset_of(m), []).append(m)
    datasets = sorted(by_dataset)
    current = st.session_state.get(MODEL_KEY, default)
    if MODEL_KEY not in st.session_state:  # a session's first run: a link may name the model and the copy
        from app.links import link_model

        current, note = link_model(st.query_params, models)
        current = current or default
        if note:
            st.warning(md_escape(note))
        copy = named_copy(st.query_params.get("copy"))
        if copy is not None:
            st.session_state.setdefault(DATA_DIRS_KEY, {})[dataset_of(current)] = copy
        elif "copy" in st.query_params:
            st.warning(f"The link's local copy ({md_escape(st.query_params['copy'])}) is not one of this "
                       "machine's: the texts of that dataset are not shown.")
    current = current if current in models else default
    dataset = st.sidebar.selectbox(
        "Dataset",
        datasets,
        index=datasets.index(dataset_of(current)),
        key="dataset",
        help="Datasets the shipped checkpoints were trained on.",
    )
    names = by_dataset[dataset]
    # a dataset picked anew starts at its BudgetFormer model, not the alphabetically first
    first = f"{dataset}-budgetformer" if f"{dataset}-budgetformer" in names else names[0]
    name = st.sidebar.selectbox(
        "Model",
        names,
        index=names.index(current if current in names else first),
        key=f"model_for_{dataset}",
        format_func=lambda m: f"{m} · {mark}" if (mark := model_standing(m).mark) else m,
        help="Checkpoint directories under precomputed/checkpoints, and the classifiers of the folders the "
        f"operator listed in ${MODEL_ROOTS_ENV}; ⚑: a full method more than "
        f"{FLAG_POINTS:g} points of test accuracy below the dataset's dense model.",
    )
    st.session_state[MODEL_KEY] = name
    if st.query_params.get("model") != name:  # every page's address names the model it shows
        st.query_params["model"] = name
    model_card(name)
    standing_note(name)
    data_source_input(dataset)
    return name


def model_card(name: str) -> None:
    """A few facts about the checkpoint under the picker."""
    cfg = checkpoint_config(name)
    if "error" in cfg:  # a listed folder that is not a sequence classifier
        st.sidebar.error(md_escape(cfg["error"]))
        return
    model = cfg.get("model", {})
    test = cfg.get("test") if isinstance(cfg.get("test"), dict) else {}
    test = {k: v for k, v in test.items() if isinstance(v, (int, float))}  # numbers only: they are formatted
    n_layers = model.get("n_layers", "?")
    lines = [
        f"**{md_escape(stored_method(model, '?'))}** · {n_layers} layer{'' if n_layers == 1 else 's'} × "
        f"{model.get('n_heads', '?')} heads"
    ]
    base = cfg.get("backbone")
    if isinstance(cfg.get("classifier"), dict):  # a researcher's own, from the operator's list
        lines.append(f"your **{md_escape(cfg['classifier'].get('architecture', '?'))}**, "
                     f"{md_escape(ranking_note(name))}")
    elif isinstance(base, dict):  # fine-tuned from a pretrained encoder, named by its package or folder
        lines.append(f"backbone **{md_escape(str(base.get('package') or base.get('source', '?')))}** (pretrained)")
    else:
        lines.append("trained from scratch (no pretrained backbone)")
    if "accuracy" in test:
        lines.append(f"test accuracy **{test['accuracy']:.1%}** on {test.get('n', '?')} texts")
    method = model_method(name)
    if method.budgeted and "mean_budget" in test:
        sym = method.symbol  # bba: the requested budget b
        lines.append(
            f"mean budget {sym} **{test['mean_budget']:.2f}**, "
            f"{test.get('mean_heads_fraction', 0):.0%} of heads run"
        )
    st.sidebar.caption("  \n".join(lines))


def standing_note(name: str, where=st) -> None:
    """A flag for a full method that falls short of its dense model; a caption for a model built
    to lose (an ablation, a smaller dense model) — :func:`app.logic.results.standing`."""
    found = model_standing(name)
    if found.kind == "flagged":
        where.warning(f"⚑ {md_escape(name)}: {found.note}")
    elif found.kind == "expected":
        where.caption(f"{md_escape(name)}: {found.note}")


def _load(samples: Samples, dataset: str, index: int) -> None:
    st.session_state[TEXT_KEY] = samples.texts[index]
    st.session_state[SAMPLE_KEY] = (dataset, index)


def _load_random(samples: Samples, dataset: str, label: int | None) -> None:
    pool = [i for i, y in enumerate(samples.labels) if label is None or y == label]
    if pool:
        _load(samples, dataset, random.choice(pool))


def sample_picker(samples: Samples | None, dataset: str) -> None:
    """Widgets that copy a test-split text into the text area (through a callback)."""
    if samples is None or not samples.texts:
        st.info(
            f"The texts of the dataset {dataset!r} are not available on this machine, so there are "
            "no samples to pick. Type your own text on the left."
        )
        return
    n = len(samples.texts)
    how = st.radio(
        f"Pick one of the {n} test texts",
        ["Random", "By class", "By index", "Search"],
        horizontal=True,
        key="pick_how",
        persist_state="session",
    )
    if how == "Random":
        st.button(
            "Random test text",
            on_click=_load_random,
            args=(samples, dataset, None),
            key="pick_random",
        )
    elif how == "By class":
        label = st.selectbox(
            "Class",
            range(len(samples.label_names)),
            format_func=lambda i: samples.label_names[i],
            key="pick_class",
        )
        st.button(
            f"Random text of class “{samples.label_names[label]}”",
            key="pick_class_go",
            on_click=_load_random,
            args=(samples, dataset, label),
        )
    elif how == "By index":
        index = st.number_input(f"Index (0–{n - 1})", 0, n - 1, 0, step=1, key="pick_index")
        st.button(
            "Load this text",
            on_click=_load,
            args=(samples, dataset, int(index)),
            key="pick_index_go",
        )
    else:
        from app.logic.examples import search_texts

        query = st.text_input(
            "Texts containing",
            key="pick_query",
            max_chars=200,
            placeholder="e.g. election, football, album",
        )
        hits = search_texts(samples.texts, query)
        if query.strip() and not hits:
            st.caption("No test text contains that.")
        elif hits:
            choice = st.selectbox(
                f"{len(hits)} match{'es' if len(hits) > 1 else ''}"
                + (" (first 50)" if len(hits) == 50 else ""),
                hits,
                format_func=lambda i: (
                    f"#{i} [{samples.label_names[samples.labels[i]]}] {_one_line(samples.texts[i])}"
                ),
                key="pick_hit",
            )
            st.button(
                "Load this text",
                on_click=_load,
                args=(samples, dataset, int(choice)),
                key="pick_hit_go",
            )


EXPLORE_PAGE = "views/explore.py"


def open_in_explore(dataset: str, index: int, text: str, key: str, label: str | None = None) -> None:
    """A button that opens test text #``index`` of ``dataset`` in "Explore an input" (disabled
    when the text is not on this machine)."""
    if st.button(
        label or f"Open #{index} in “Explore an input” →",
        key=key,
        type="primary",
        disabled=not text,
        help=None if text else "The texts are not on this machine: give a local copy in the sidebar.",
    ):
        st.session_state[TEXT_KEY] = text
        st.session_state[SAMPLE_KEY] = (dataset, index)
        st.switch_page(EXPLORE_PAGE)


def _one_line(text: str, width: int = 80) -> str:
    """The start of ``text`` on one line (an option label)."""
    flat = " ".join(readable(text[: width * 2]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def loaded_sample(samples: Samples | None, dataset: str, text: str) -> tuple[int, str] | None:
    """(index, true label) when ``text`` is still the test sample last loaded, else None."""
    picked = st.session_state.get(SAMPLE_KEY)
    if samples is None or not picked or picked[0] != dataset:
        return None
    index = picked[1]
    if index >= len(samples.texts) or samples.texts[index] != text:
        return None
    return index, samples.label_names[samples.labels[index]]


def foreign_sample(dataset: str, text: str) -> str | None:
    """The dataset of the test text last loaded when ``text`` is still that text and the dataset
    is not ``dataset`` (a text left in the box after switching dataset), else None."""
    from app.state import test_samples

    picked = st.session_state.get(SAMPLE_KEY)
    if not picked or picked[0] == dataset:
        return None
    other = test_samples(picked[0])
    if other is None or picked[1] >= len(other.texts) or other.texts[picked[1]] != text:
        return None
    return picked[0]


def per_example_or_stop(name: str, dataset: str, unavailable: str, budget: float | None = None):
    """The per-example test table of model ``name`` (at ``budget``, see :func:`app.state.per_example`)
    and the split's samples (without texts when
    they are not here: the table's ``text`` is then empty), or a clear message and ``st.stop()``: no
    precomputed table and no texts (``unavailable`` says what the user can do instead), a model
    that cannot be evaluated, or any other failure (never a traceback)."""
    from app.state import per_example, test_samples

    samples = test_samples(dataset)
    try:
        with st.spinner("Running the model over the test texts (once)…"):
            table = per_example(name, "test", budget)
    except ValueError as e:  # CheckpointError or mismatched classes
        st.error(f"The model {md_escape(name)} cannot be evaluated: {md_escape(e)}")
        st.stop()
    except Exception as e:  # never a traceback on the page
        logging.getLogger(__name__).exception("evaluation failed")
        st.error(f"Something went wrong while evaluating the test split ({type(e).__name__}).")
        st.stop()
    if table is None:
        st.info(f"The texts of the dataset {md_escape(dataset)} are not available on this machine. {unavailable}")
        st.stop()
    if samples is None:
        st.caption(
            f"Results precomputed for the {len(table)} test texts of {md_escape(dataset)}; the texts "
            "themselves are not on this machine (give a local copy in the sidebar to see them)."
        )
        label_names = list(checkpoint_config(name).get("label_names", []))
        samples = Samples(label_names, [], table["label"].tolist())  # class names, no texts
    return table, samples


def data_source_input(dataset: str) -> None:
    """Sidebar: where the texts of a dataset that does not ship with the app are."""
    from app.sources import OFFLINE_DATASETS
    from app.state import test_samples

    if dataset in OFFLINE_DATASETS:
        return
    dirs = st.session_state.setdefault(DATA_DIRS_KEY, {})
    value = st.sidebar.text_input(
        f"Local copy of {dataset}",
        value=dirs.get(dataset, ""),
        key=f"data_dir_{dataset}",
        placeholder="e.g. ../shared/data/ag_news",
        help=LOCAL_COPY_HELP,
    ).strip()
    dirs[dataset] = value
    if value and test_samples(dataset) is None:
        st.sidebar.warning(f"No {dataset} test split could be read from that path (it must be a dataset "
                           "folder or file under ../shared/data or a folder the operator allowed).")
    elif not value:
        st.sidebar.caption("Texts not shipped: aggregate results only, unless you give a local copy.")


def sweeps_or_stop(dataset: str):
    """The rows of precomputed/results/sweeps.csv for ``dataset``, or a clear message and
    ``st.stop()``: the file is missing, unreadable, or has no row for the dataset."""
    from app.state import sweeps

    try:
        frame = sweeps()
    except ValueError as e:
        st.error(
            f"precomputed/results/sweeps\\.csv cannot be used: {md_escape(e)}. "
            "Run `make precompute` to rebuild it."
        )
        st.stop()
    if frame is None:
        st.info(
            "No precomputed results yet: precomputed/results/sweeps\\.csv is missing. "
            "Run `make precompute` to make it (it trains and measures every model)."
        )
        st.stop()
    rows = frame[frame["dataset"] == dataset]
    if rows.empty:
        st.info(
            f"precomputed/results/sweeps\\.csv has no results for the dataset "
            f"**{md_escape(dataset)}**. Run `make precompute` to add them."
        )
        st.stop()
    return rows


def csv_download(table, file_name: str, key: str, label: str | None = None) -> None:
    """A button that downloads ``table`` (a DataFrame) as CSV that a spreadsheet opens as data
    (:func:`budgetformer_core.io.inputs.table_csv`: no text runs as a formula)."""
    from budgetformer_core.io.inputs import table_csv

    st.download_button(
        label or f"Download this table ({len(table)} rows, CSV)",
        table_csv(table),
        file_name=file_name,
        mime="text/csv",
        on_click="ignore",
        key=key,
        disabled=table.empty,
    )


def result_column_config(baseline: str | None = None) -> dict:
    """How the result tables of the sweep and ablation pages show their columns; every latency
    and speed-up named after the dense reference it was timed against (``baseline``, when all
    the rows share one; otherwise the table's ``reference`` column names it row by row)."""
    from app.speed import HOW

    number, percent = st.column_config.NumberColumn, dict(format="percent")
    ref = baseline or "dense ref."
    same = f"timed in the same interleaved rounds as {baseline or 'the reference named in the row'}, one thread"
    return {
        "budget_b": number("budget", format="%.2f", help="The budget the model was asked for: s (BudgetFormer) "
                           "or b (BBA)"),
        "accuracy": number("accuracy", **percent),
        "macro_f1": number("macro-F1", format="%.3f"),
        "heads_fraction": number("heads run", **percent, help="Exact fraction of heads run"),
        "mean_s": number("mean budget", format="%.3f", help="Mean s (BudgetFormer) or requested b (BBA)"),
        "flops_ratio": number("FLOPs vs dense", **percent),
        "latency_ms": number("latency (ms)", format="%.2f", help=f"Per input, batch 1, {same}"),
        "dense_latency_ms": number(f"{ref} (ms)", format="%.2f", help=f"The dense reference's latency, {same}"),
        "speedup_b1": number(f"speed-up vs {ref}, batch 1", format="%.2f×",
                             help=f"Speed-up: the reference's latency / this latency ({HOW}, batch 1)"),
        "speedup_b32": number(f"speed-up vs {ref}, batch 32", format="%.2f×",
                              help=f"Speed-up: the reference's latency / this latency ({HOW}, batch 32)"),
        "ideal_speedup": number("FLOP ideal ×", format="%.2f×", help="Ideal speed-up: 1 / FLOPs ratio"),
        # one reference for every row: named in the headers, its column hidden (kept in the CSV)
        "reference": None if baseline else st.column_config.TextColumn("timed against",
                                                                       help="The dense reference, same rounds"),
    }

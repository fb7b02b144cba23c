"""Which models the pages offer and what their config.json says, read without loading them.

The shipped checkpoints (their folder: :data:`budgetformer_core.shipped.CHECKPOINTS`), and the
classifiers and adapters (budgets fitted on a frozen model, ``budgetformer fit-budget``) of the
folders the operator lists (:data:`MODEL_ROOTS_ENV`); per model its
config.json, method, training history, dataset and dense reference, and the model picked in the
sidebar. Caches are keyed by a stamp of the model's files (:func:`stamp`), so a checkpoint
replaced on disk is read again. Loading a model, and the tables made from it: :mod:`app.state`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

from app import sources
from app.logic import standing
from app.method import Method, method_of
from budgetformer_core import shipped
from budgetformer_core.config import ModelConfig, model_config_from_dict

DEFAULT_MODEL = "bbc-minilm-budgetformer"
"""The model a first visit opens: BBC News's most accurate model, whose heads follow difficulty most."""
MODEL_KEY = "model"
"""Session-state key of the model picked in the sidebar."""
MODEL_ROOTS_ENV = "BUDGETFORMER_MODEL_DIRS"
"""Environment variable the operator sets before starting the app: folders (separated by
``os.pathsep``) holding researchers' own sequence classifiers in the Hugging Face layout
(:mod:`budgetformer_core.io.classifier`), or adapters fitted on such a classifier or on one of
ours (:mod:`budgetformer_core.io.adapter`). Each listed folder that is one, and each folder
directly inside a listed one that is one, joins the model list under its folder's name (a name a
shipped checkpoint has is left out). Default: none. A visitor never names a folder."""


def _checkpoint_dirs() -> list[str]:
    if not shipped.CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in shipped.CHECKPOINTS.iterdir() if (p / "config.json").is_file())


def shipped_models() -> list[str]:
    """Checkpoint directories shipped under precomputed/checkpoints whose config.json the pages
    can use (:func:`unusable_models` names the others, and why)."""
    return [name for name in _checkpoint_dirs() if checkpoint_problem(name) is None]


def unusable_models() -> dict[str, str]:
    """Checkpoint directories under precomputed/checkpoints that no page offers: name → why."""
    return {name: why for name in _checkpoint_dirs() if (why := checkpoint_problem(name)) is not None}


def checkpoint_problem(name: str) -> str | None:
    """Why the pages cannot offer checkpoint ``name``, from its config.json (None: they can).

    Loading checks every file (:func:`budgetformer_core.io.loader.load_checkpoint`); this checks
    only what the pages read before loading: a JSON object with the model's shape and a list of
    class names. One damaged checkpoint then drops out of the model list instead of breaking
    every page that lists the models.
    """
    cfg = checkpoint_config(name)
    if not cfg:
        return "its config.json is not a JSON object this app can read"
    model = cfg.get("model")
    shape = [model.get(k) for k in ("n_layers", "n_heads")] if isinstance(model, dict) else [None]
    if not all(type(v) is int and v >= 1 for v in shape):
        return "its config.json has no model shape (n_layers, n_heads)"
    names = cfg.get("label_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return "its config.json's label_names are not a list of class names"
    try:
        model_config_from_dict(model)
    except (TypeError, ValueError) as e:
        return f"its config.json's model section is not one the engine reads ({e})"
    return None


def listed_models() -> dict[str, tuple[str, Path]]:
    """The models of :data:`MODEL_ROOTS_ENV`'s folders, by name (their folder's name): each one's
    kind (``classifier`` or ``adapter``) and folder."""
    return _scan()[0]


def refused_folders() -> dict[str, str]:
    """The folders of :data:`MODEL_ROOTS_ENV` that are not offered, by name (never a path of this
    machine: a visitor reads them), each with why in one line: a listed path that is no folder,
    and a folder that looks like a model (a config.json or weights in it) yet is none this app
    opens, or whose name another model has. A folder of anything else (notes, data) is not named."""
    return _scan()[1]


def _scan() -> tuple[dict[str, tuple[str, Path]], dict[str, str]]:
    listed = [p for p in os.environ.get(MODEL_ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    found: dict[str, tuple[str, Path]] = {}
    refused: dict[str, str] = {}
    if not listed:
        return found, refused
    taken = set(_checkpoint_dirs())  # not shipped_models(): it reads configs, which asks for this list
    for root in (Path(os.path.abspath(p)) for p in listed):
        try:
            folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
        except OSError:  # an unreadable folder offers nothing
            folders = None
        if not folders:
            refused[root.name] = "cannot be read" if folders is None else "is not a folder on this machine"
        named = 0  # the root's folders that are offered or named here
        for folder in folders or []:
            kind, why = _kind(folder)
            if kind is not None and folder.name in taken:
                why = "its name is a shipped model's"
            elif kind is not None and folder.name in found:
                why = "another listed folder has its name"
            elif kind is not None:
                found[folder.name] = (kind, folder)
            if why is not None:
                refused.setdefault(folder.name, why)
            named += kind is not None or why is not None
        if folders and not named:
            refused[root.name] = "holds no classifier or adapter folder"
    return found, refused


MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")
"""A folder holding one of these looks like a model: one that is none is named with its reason."""


def _kind(folder: Path) -> tuple[str | None, str | None]:
    """(``classifier``, ``adapter`` or None; why a folder that looks like a model is none, else None)."""
    from budgetformer_core.io.adapter import is_adapter
    from budgetformer_core.io.loader import hf_layout

    if hf_layout(folder):
        return "classifier", None
    if is_adapter(folder):
        return "adapter", None
    if not any((folder / f).is_file() for f in MODEL_FILES):
        return None, None
    if not (folder / "config.json").is_file():
        return None, "no config.json (a classifier's folder holds config.json, model.safetensors and a tokenizer)"
    return None, ("its config.json is neither a Hugging Face classifier's (model_type, architectures) nor "
                  "an adapter's (budgetformer fit-budget)")


def classifier_models() -> dict[str, Path]:
    """The classifiers of :data:`MODEL_ROOTS_ENV`'s folders, by name (their folder's name)."""
    return {name: folder for name, (kind, folder) in listed_models().items() if kind == "classifier"}


def available_models() -> list[str]:
    """The shipped checkpoints, then the operator's classifiers and adapters (:func:`listed_models`)."""
    return shipped_models() + sorted(listed_models())


def is_classifier(name: str) -> bool:
    """True for a model of the operator's list of classifiers."""
    return name in classifier_models()


def model_dir(name: str) -> Path:
    """The folder of a model of :func:`available_models` (a name that is none: where a shipped
    one would be, which does not exist)."""
    listed = listed_models().get(name)
    return listed[1] if listed is not None else shipped.checkpoint_dir(name)


def stamp(name: str) -> tuple:
    """(size, mtime) of the checkpoint's files: changes when the checkpoint is replaced. A listed
    classifier's also holds where its heads are ranked from in this session
    (:func:`ranking_source`; None: nowhere, it runs every head), so that every cache keyed by the
    stamp holds the model as this session runs it."""
    files = files_stamp(name)
    return (*files, ranking_source(name)) if is_classifier(name) else files


def files_stamp(name: str) -> tuple:
    """(size, mtime) of the checkpoint's files, whatever the session."""
    out = []
    folder = model_dir(name)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "history.json", "vocab.txt"):
        try:
            s = (folder / f).stat()
            out.append((s.st_size, s.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def checkpoint_path(name: str) -> Path:
    """The directory of a shipped checkpoint or a listed classifier; CheckpointError for a name
    that is neither."""
    from budgetformer_core.io.files import CheckpointError

    if name not in available_models():
        raise CheckpointError(
            f"unknown checkpoint {name!r}; shipped: {', '.join(available_models()) or 'none'}"
        )
    return model_dir(name)


@st.cache_data(max_entries=64, show_spinner=False)
def _config(name: str, version: tuple) -> dict:
    if is_classifier(name):
        return _classifier_config(name)
    try:
        config = json.loads((model_dir(name) / "config.json").read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: lists nested thousands deep
        return {}
    if not isinstance(config, dict):
        return {}
    if name in listed_models():  # an operator's adapter: under the dataset of its classes
        labels = config.get("label_names")
        known = _known_datasets()
        if config.get("dataset") not in [d for d, _ in known]:
            config = {**config, "dataset": next((d for d, names in known if names == labels), name)}
    return config


def _classifier_config(name: str) -> dict:
    """What config.json would say of a listed classifier with its heads ranked, and its
    ``dataset``: the first whose classes are its ``id2label`` (a shipped model's dataset, then a
    hub dataset), else its own name. A folder that is not a classifier: ``error``, one line."""
    from budgetformer_core.io.classifier import describe
    from budgetformer_core.io.files import CheckpointError

    try:
        config = describe(model_dir(name))
        unranked = describe(model_dir(name), ranked=False)["model"]
    except CheckpointError as e:
        return {"dataset": name, "error": str(e)}
    labels = config["label_names"]
    dataset = next((d for d, names in _known_datasets() if names == labels), name)
    return {**config, "dataset": dataset, "unranked": unranked}


def _known_datasets() -> list[tuple[str, list[str] | None]]:
    """(dataset, its class names) of the shipped models' datasets, then of the hub's."""
    from budgetformer_core.io.hub import HUB_LABELS

    known = [(dataset_of(m), checkpoint_config(m).get("label_names")) for m in shipped_models()]
    return known + [(key, list(names)) for key, names in HUB_LABELS.items()]


def stored_config(name: str) -> dict:
    """What config.json says, the same in every session (a listed classifier's: with its heads
    ranked, and ``unranked``: its model section as it is)."""
    return _config(name, files_stamp(name))


def checkpoint_config(name: str) -> dict:
    """The checkpoint's config.json as a dict ({} when unreadable). A listed classifier's as this
    session runs it: its heads ranked (bba, b = 1 by default) where there are texts to rank them
    on (:func:`is_ranked`), else as it is (dense: every head, no budget)."""
    config = stored_config(name)
    if "unranked" in config and not is_ranked(name):
        return {**config, "model": config["unranked"]}
    return config


def is_ranked(name: str) -> bool:
    """True for a listed classifier whose heads this session ranks (:func:`ranking_source`)."""
    return is_classifier(name) and ranking_source(name) is not None


def label_names(name: str) -> list[str]:
    """The model's class names (config.json ``label_names``; [] when unreadable)."""
    names = stored_config(name).get("label_names")
    return list(names) if isinstance(names, list) else []


def ranking_note(name: str) -> str:
    """One line on where a listed classifier's heads are ranked, or, when nowhere in this session,
    on the data set the pages that need one want (budgets below 1, the sweep, the pages of the
    test split) and how to give it: the sidebar's local copy of its dataset, or (a near miss of a
    known dataset's classes) the names its config.json's id2label would need."""
    dataset, classes = dataset_of(name), ", ".join(label_names(name))
    if is_ranked(name):
        return f"heads ranked zero-shot on the validation split of {dataset} (no training)"
    needs = "runs every head (b = 1): budgets below 1, the sweep and the test-split pages need its heads ranked on"
    give = f"as “Local copy of {dataset}” in the sidebar"
    if dataset != name:
        return (f"{needs} {dataset}'s texts (its classes: {classes}), which are not on this machine — give a "
                f"copy of them {give}")
    return (f"{needs} texts labelled with its classes ({classes}), which no shipped data set has — give a CSV "
            f"or JSONL file with text and label columns {give}{_near_miss(label_names(name))}")


def _near_miss(labels: list[str]) -> str:
    """The renaming of a few of ``labels`` (at most half) that gives a known dataset's classes, in
    their order: "; or rename sport to sports in its config.json's id2label to use bbc's texts"
    ("" when there is none)."""
    for dataset, names in _known_datasets():
        if names is None or len(names) != len(labels) or names == labels:
            continue
        renamed = [(ours, theirs) for ours, theirs in zip(labels, names, strict=True) if ours != theirs]
        if len(renamed) <= len(labels) // 2:
            pairs = ", ".join(f"{ours} to {theirs}" for ours, theirs in renamed)
            return f"; or rename {pairs} in its config.json's id2label to use {dataset}'s texts"
    return ""


@st.cache_data(max_entries=64, show_spinner=False)
def _model_config(name: str, version: tuple) -> ModelConfig | None:
    model = checkpoint_config(name).get("model")
    try:
        return model_config_from_dict(model) if isinstance(model, dict) else None
    except (TypeError, ValueError):
        return None


def model_config(name: str) -> ModelConfig | None:
    """The "model" section of config.json as the engine reads it
    (:func:`budgetformer_core.config.model_config_from_dict`: its defaults, its checks); None
    when unreadable."""
    return _model_config(name, stamp(name))


def model_method(name: str) -> Method:
    """How the pages name the model's budget, head choice and weights (:class:`app.method.Method`);
    a BudgetFormer's when config.json is unreadable (the page that loads it says why)."""
    cfg = model_config(name)
    return Method() if cfg is None else method_of(cfg)


def train_config(name: str) -> dict:
    """The "train" section of config.json (s_min, s_max, β schedule, …; {} when unreadable)."""
    train = checkpoint_config(name).get("train")
    return train if isinstance(train, dict) else {}


@st.cache_data(max_entries=16, show_spinner=False)
def _history(name: str, version: tuple) -> list[dict]:
    try:
        history = json.loads((model_dir(name) / "history.json").read_text())
    except (OSError, ValueError, RecursionError):
        return []
    return [h for h in history if isinstance(h, dict)] if isinstance(history, list) else []


def checkpoint_history(name: str) -> list[dict]:
    """The checkpoint's per-epoch training history (the same file ``Checkpoint.history`` holds).

    Read straight from history.json, without loading the model: the training-dynamics page then
    needs neither torch nor the dataset. [] when the file is missing or unreadable.
    """
    return _history(name, stamp(name))


def dataset_of(name: str) -> str:
    """The dataset a checkpoint was trained on (config.json "dataset"), or "unknown"."""
    return str(stored_config(name).get("dataset") or "unknown")


def model_standing(name: str) -> standing.Standing:
    """How ``name``'s test accuracy stands against its dense model (:func:`app.logic.standing.standing`);
    a listed classifier, a user's own, has none to stand against."""
    if is_classifier(name):
        return standing.Standing("fine", "")
    dense = shipped.dense_reference(dataset_of(name), name, full=True)
    accuracy = (checkpoint_config(dense).get("test") or {}).get("accuracy") if dense in available_models() else None
    return standing.standing(name, checkpoint_config(name), accuracy if isinstance(accuracy, (int, float)) else None)


def selected_model() -> str:
    """The model picked in the sidebar (the default before the sidebar has run)."""
    return st.session_state.get(MODEL_KEY) or DEFAULT_MODEL


def reference_model(name: str) -> str | None:
    """The dense model of the same dataset and encoder
    (:func:`budgetformer_core.shipped.dense_reference`), whose per-example loss is the difficulty
    the adaptivity figures judge ``name`` by; None when it is not shipped."""
    reference = shipped.dense_reference(dataset_of(name), name, full=True)
    return reference if reference in available_models() else None


def dataset_classes(dataset: str) -> tuple[str, ...] | None:
    """The classes a local copy of ``dataset`` is read with, its labels matched to them by name,
    where the dataset is a listed model's own (its classes are no known data set's: it is named
    after the model); None: a hub dataset's classes, else the copy's own (its labels, sorted)."""
    return tuple(label_names(dataset)) if dataset in listed_models() and dataset_of(dataset) == dataset else None


def data_source(dataset: str) -> tuple[str | None, int, tuple[str, ...] | None] | None:
    """(local copy, split seed, classes) to load ``dataset`` from; None when its texts are not here.

    bbc and synthetic are built in; other datasets need a local copy given in the sidebar, read
    with :func:`dataset_classes`. The split seed is the picked checkpoint's (``split_seed`` in its
    config.json) when it was trained on ``dataset``, else 0 (what every shipped model uses).
    """
    local = sources.data_dir(dataset)
    if dataset not in sources.OFFLINE_DATASETS and local is None:
        return None
    name = selected_model()
    seed = stored_config(name).get("split_seed", 0) if dataset_of(name) == dataset else 0
    return local, int(seed), None if local is None else dataset_classes(dataset)


def ranking_source(name: str) -> tuple[str | None, int, tuple[str, ...] | None] | None:
    """Where this session ranks the heads of listed classifier ``name``: the source
    (:func:`data_source`) of its dataset's validation split, when that split can be read here with its
    classes (the labels of a file matched to them by name); None when it cannot (the texts are not
    on this machine, or a local copy's labels are not its classes): it then runs every head."""
    dataset = dataset_of(name)
    source = data_source(dataset)
    return source if source is not None and sources.readable(dataset, source, tuple(label_names(name))) else None

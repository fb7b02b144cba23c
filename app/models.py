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
    listed = [p for p in os.environ.get(MODEL_ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    if not listed:
        return {}
    from budgetformer_core.io.adapter import is_adapter
    from budgetformer_core.io.loader import hf_layout

    found: dict[str, tuple[str, Path]] = {}
    taken = set(_checkpoint_dirs())  # not shipped_models(): it reads configs, which asks for this list
    for root in (Path(os.path.abspath(p)) for p in listed):
        try:
            folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
        except OSError:  # an unreadable folder offers nothing
            folders = []
        for folder in folders:
            if folder.name in taken or folder.name in found:
                continue
            kind = "classifier" if hf_layout(folder) else "adapter" if is_adapter(folder) else None
            if kind is not None:
                found[folder.name] = (kind, folder)
    return found


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
    """(size, mtime) of the checkpoint's files: changes when the checkpoint is replaced."""
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
    except CheckpointError as e:
        return {"dataset": name, "error": str(e)}
    labels = config["label_names"]
    return {**config, "dataset": next((d for d, names in _known_datasets() if names == labels), name)}


def _known_datasets() -> list[tuple[str, list[str] | None]]:
    """(dataset, its class names) of the shipped models' datasets, then of the hub's."""
    from budgetformer_core.io.hub import HUB_LABELS

    known = [(dataset_of(m), checkpoint_config(m).get("label_names")) for m in shipped_models()]
    return known + [(key, list(names)) for key, names in HUB_LABELS.items()]


def checkpoint_config(name: str) -> dict:
    """The checkpoint's config.json as a dict ({} when unreadable)."""
    return _config(name, stamp(name))


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
    return str(checkpoint_config(name).get("dataset") or "unknown")


def model_standing(name: str) -> standing.Standing:
    """How ``name``'s test accuracy stands against its dense model (:func:`app.logic.standing.standing`)."""
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

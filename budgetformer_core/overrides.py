"""Overrides of the two configs: ``--set key=value`` on the command line, or a recipe's typed
values (``rebuild/recipes.py``), each checked against the field it changes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .config import ModelConfig, TrainConfig, field_name

_MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelConfig))
_TRAIN_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainConfig))


def _settable(key: str, model: ModelConfig, train: TrainConfig) -> Any:
    """The value ``key`` has now; ``ValueError`` for an unknown key or a field the engine sets."""
    if key in _MODEL_FIELDS:
        current = getattr(model, key)
    elif key in _TRAIN_FIELDS:
        current = getattr(train, key)
    else:
        raise ValueError(f"unknown config key {key!r}; known keys: {', '.join(sorted(_MODEL_FIELDS | _TRAIN_FIELDS))}")
    if current is None or isinstance(current, list):
        raise ValueError(f"--set {key}: this field is set by the engine (e.g. by pruning), not on the command line")
    return current


def _convert(value: str, current: Any, key: str) -> Any:
    if isinstance(current, bool):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"--set {key}: expected true/false, got {value!r}")
    try:
        return type(current)(value)
    except ValueError:
        raise ValueError(f"--set {key}: expected {type(current).__name__}, got {value!r}") from None


def parse_overrides(
    overrides: Iterable[str], model: ModelConfig | None = None, train: TrainConfig | None = None
) -> dict[str, Any]:
    """``key=value`` strings as typed values, each converted to its field's type (the type of
    its value in ``model`` / ``train``, by default the defaults'); a key given twice keeps its
    last value. Unknown keys raise ``ValueError``."""
    model, train = model or ModelConfig(), train or TrainConfig()
    changes: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = field_name(key.strip())
        if not sep or not key:
            raise ValueError(f"--set expects key=value, got {item!r}")
        changes[key] = _convert(value, _settable(key, model, train), key)
    return changes


def apply_overrides(
    model: ModelConfig, train: TrainConfig, overrides: Iterable[str] | Mapping[str, Any]
) -> tuple[ModelConfig, TrainConfig]:
    """Apply overrides to the two configs: ``key=value`` strings (``--set``) or a mapping of
    typed values (a recipe). Unknown keys and values of the wrong type raise ``ValueError``."""
    if isinstance(overrides, Mapping):
        changes = {field_name(key): value for key, value in overrides.items()}
        for key in changes:
            _settable(key, model, train)
    else:
        changes = parse_overrides(overrides, model, train)
    m_changes = {k: v for k, v in changes.items() if k in _MODEL_FIELDS}
    t_changes = {k: v for k, v in changes.items() if k not in _MODEL_FIELDS}
    return dataclasses.replace(model, **m_changes), dataclasses.replace(train, **t_changes)

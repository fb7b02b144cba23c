"""The project's small file readers, shared by the checkpoint format and the pretrained
loaders: JSON side files, sha256 of a file, and the error a folder that cannot be loaded gives."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from pathlib import Path
from typing import Any


def file_sha256(path: Path | str) -> str:
    """Hex sha256 of a file (a checkpoint's weights, a result table), read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be loaded, with the reason."""


def existing_parent(path: Path, option: str = "--out") -> Path:
    """The nearest folder above ``path`` that exists (where writing ``path`` creates the rest);
    :class:`CheckpointError` when that is a file, not a folder."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise CheckpointError(f"{option} {path}: {parent} is a file, not a folder")
    return parent


def check_regular_files(folder: Path) -> None:
    """Raise :class:`CheckpointError` when an entry of ``folder`` is neither a file nor a folder
    (a FIFO, socket or device): reading one could wait or run for ever, so a model folder holding
    one is refused before any of its files is opened. Links are followed (a hub cache's snapshot
    links to its blobs); a dangling one is left to the reader of the file it names."""
    try:
        entries = list(os.scandir(folder))
    except OSError:  # not a folder, or unreadable: its reader says so
        return
    for entry in entries:
        try:
            mode = os.stat(entry.path).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise CheckpointError(f"{entry.path} is not a regular file (a FIFO, socket or device); "
                                  "a model folder holds files only")


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, so that it is valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def read_json(path: Path, parse_constant=None) -> Any:
    """The JSON value of a checkpoint's side file (config.json, history.json).

    Raises:
        CheckpointError: the file cannot be read, is not UTF-8 or JSON, or nests lists and
            objects deeper than Python's parser goes (the message names the file).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is not a UTF-8 text file") from None
    try:
        return json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        raise CheckpointError(f"{path} nests lists or objects too deeply to be a checkpoint's file") from None
    except ValueError as e:  # JSONDecodeError, a number over Python's digit limit, NaN in config.json
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None

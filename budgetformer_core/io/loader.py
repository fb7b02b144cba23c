"""Opening a model folder: one place decides what it holds and reads it.

* ours — a checkpoint written by :func:`~budgetformer_core.io.checkpoint.save_checkpoint`
  (trained from scratch, or fine-tuned on a pretrained base whose tensors it reads from that
  base: :mod:`budgetformer_core.io.pretrained`), read by
  :func:`~budgetformer_core.io.checkpoint.read_checkpoint`;
* a Hugging Face sequence classifier's folder (its config.json has a ``model_type`` or
  ``architectures``) of any family of :mod:`budgetformer_core.io.families`, read by
  :func:`~budgetformer_core.io.classifier.load_classifier`;
* an adapter — allocation networks fitted on a frozen model (``budgetformer fit-budget``) —
  whose base is opened as above and checked, then given the adapter's networks
  (:mod:`budgetformer_core.io.adapter`).
"""

from __future__ import annotations

import json
from pathlib import Path

from .adapter import attach, is_adapter, read_adapter
from .checkpoint import Checkpoint, read_checkpoint
from .classifier import load_classifier
from .files import CheckpointError, check_regular_files


def hf_layout(path: Path) -> bool:
    """True when ``path/config.json`` is a Hugging Face model's (it has a ``model_type`` or
    ``architectures``, and no ``format_version`` of ours)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable or nested thousands deep: not a classifier
        return False
    return isinstance(config, dict) and "format_version" not in config and (
        "model_type" in config or "architectures" in config)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load a checkpoint directory written by :func:`save_checkpoint`, or a Hugging Face sequence
    classifier's folder (:func:`budgetformer_core.io.classifier.load_classifier`).

    Raises:
        CheckpointError: a file is missing, damaged or does not match the others, or is not a
            regular file (a FIFO: refused before anything is opened); or the folder was replaced
            while it was read (a run saving over it), which says to try again.
    """
    path = Path(path)
    try:
        folder = _folder_identity(path)
    except OSError:
        folder = None
    try:
        return _read(path)
    except (CheckpointError, OSError):
        try:
            replaced = folder is not None and _folder_identity(path) != folder
        except OSError:  # between a save's two renames, no folder at all
            replaced = folder is not None
        if replaced:
            raise CheckpointError(f"checkpoint {path} was being rewritten (a run saved over it) while it was read: "
                                  "try again") from None
        raise


def _folder_identity(path: Path) -> tuple[int, int, int, int]:
    """What tells a folder from the one a save puts in its place: its inode, and its change and
    modification times (a folder saved twice while a reader reads can get the first one's inode
    number back once that folder is deleted)."""
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns




def _read(path: Path) -> Checkpoint:
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is not a directory")
    check_regular_files(path)  # before any file is opened: a FIFO would never answer
    if is_adapter(path):  # (its base is never an adapter: read_adapter refuses one)
        adapter = read_adapter(path)
        return attach(adapter, _read(adapter.base))
    return load_classifier(path) if hf_layout(path) else read_checkpoint(path)

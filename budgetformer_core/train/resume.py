"""No lost work: the saved state of a training run, and how a run resumes from it.

A run keeps its state in ``<out>.resume/`` beside the checkpoint folder (:func:`resume_dir`) —
``run.json`` (what the run is: command, configs, dataset) and ``tokenizer.json`` when it starts,
``state.pt`` (weights, optimiser, EMA, every random stream, the step that sets the learning rate,
the history, and where in the epoch it stands) after every epoch and on Ctrl-C — and removes it
once the checkpoint is written. Ctrl-C is acted on between two steps (:class:`CtrlC`), so the
state is never half-updated; ``train(..., resume=True)`` (``budgetformer train --resume
<out>.resume``) loads it and runs the same steps the uninterrupted run would have, to the same
final weights.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import ModelConfig, TrainConfig, to_dict
from ..io.files import read_json
from . import distributed

STATE_FILES = ("run.json", "tokenizer.json", "state.pt")
"""What a resume folder holds (see the module docstring)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training, after the state was saved; the message says where and how to resume."""


def resume_dir(out_dir: str | Path) -> Path:
    """The folder where the run writing ``out_dir`` keeps its state: ``<out_dir>.resume`` beside it."""
    out_dir = Path(out_dir)
    return out_dir.parent / f"{out_dir.name}.resume"


def read_run(state_dir: str | Path) -> dict[str, Any]:
    """The ``run.json`` of a resume folder: the command, configs and dataset of the run it continues."""
    state_dir = Path(state_dir)
    if not (state_dir / "run.json").is_file() or not (state_dir / "state.pt").is_file():
        raise ValueError(f"{state_dir} is not the saved state of a training run (it lacks run.json or state.pt; "
                         "a run saves it after its first epoch)")
    run = read_json(state_dir / "run.json")
    if not isinstance(run, dict):
        raise ValueError(f"{state_dir / 'run.json'} is not a run record: not a JSON object")
    for key, kinds in RUN_FIELDS.items():
        if key in run and not isinstance(run[key], kinds):
            raise ValueError(f"{state_dir / 'run.json'}: {key!r} is a {type(run[key]).__name__}, not what a run "
                             "records: start again with --force")
    return run


RUN_FIELDS = {"command": str, "dataset": str, "out": str, "out_resolved": str, "force": bool, "split_seed": int,
              "model": dict, "train": dict, "init": (str, type(None)), "backbone": (str, type(None))}
"""The type of each field :func:`read_run` reads back (a run.json edited by hand is refused in one line)."""


def clear_state_dir(state_dir: Path, force: bool) -> None:
    """Make way for a new run's state; that of an interrupted run is removed only with ``force``."""
    if not state_dir.exists():
        return
    # (a .state-* file is a save cut short by a kill)
    names = {p.name for p in state_dir.iterdir() if not p.name.startswith(".state-")} if state_dir.is_dir() else None
    if names is None or not names <= set(STATE_FILES):
        raise ValueError(f"{state_dir} (where this run keeps its state) holds other files; move them away")
    if "state.pt" in names and not force:
        raise ValueError(f"{state_dir} holds the state of an interrupted run: continue it with "
                         f"`budgetformer train --resume {state_dir}`, or pass --force to start again")
    if distributed.is_main():  # under torchrun rank 0 alone writes
        shutil.rmtree(state_dir)


def rng_state(streams: dict[str, Any]) -> dict[str, Any]:
    """Every random stream training draws from, in a form ``torch.load(weights_only=True)`` reads."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": (name, keys.tolist(), pos, has_gauss, cached),
        **{k: v.get_state() if isinstance(v, torch.Generator) else v.getstate() for k, v in streams.items()},
    }


def set_rng_state(saved: dict[str, Any], streams: dict[str, Any]) -> None:
    torch.set_rng_state(saved["torch"])
    if saved["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda"])
    random.setstate(saved["python"])
    name, keys, pos, has_gauss, cached = saved["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    for k, v in streams.items():
        v.set_state(saved[k]) if isinstance(v, torch.Generator) else v.setstate(saved[k])


def save_state(state_dir: Path, state: dict[str, Any], run: dict[str, Any], tok) -> None:
    """Write ``state.pt`` beside the old one and rename it into place (a kill leaves one whole file);
    the first save writes ``run.json`` and ``tokenizer.json`` too."""
    if not distributed.is_main():  # under torchrun rank 0 alone writes
        return
    if not (state_dir / "run.json").is_file():
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "tokenizer.json").write_text(tok.to_str(pretty=False) + "\n")
        (state_dir / "run.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    tmp = state_dir / f".state-{os.getpid()}.pt"
    torch.save(state, tmp)
    os.replace(tmp, state_dir / "state.pt")


def load_state(state_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The saved state of the run ``run`` describes; a folder of another run is refused."""
    recorded = read_run(state_dir)
    try:
        state = torch.load(state_dir / "state.pt", map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a damaged file
        raise ValueError(f"{state_dir / 'state.pt'} cannot be read ({type(e).__name__}): start again with --force"
                         ) from None
    # a config field added since the run started ran at its default; one removed since is left out
    for key, cls in (("model", ModelConfig), ("train", TrainConfig)):
        if isinstance(recorded.get(key), dict):
            defaults = to_dict(cls())
            recorded[key] = {**defaults, **{k: v for k, v in recorded[key].items() if k in defaults}}
    differ = sorted(k for k in run if k != "force" and recorded.get(k) != run[k]
                    and (k in recorded or k != "out_resolved"))  # a run saved before paths were resolved
    if "out_resolved" in differ:
        raise ValueError(f"{state_dir}: --out {run['out']} now leads to {run['out_resolved']}, not to "
                         f"{recorded['out_resolved']} where the run was writing (a link was changed); "
                         "resume it where it was started")
    if differ:
        raise ValueError(f"{state_dir} holds the state of another run ({', '.join(differ)} differ); "
                         "resume it with the command it records")
    return state


class CtrlC:
    """Notes Ctrl-C (SIGINT) instead of raising at once, so training stops between two steps.
    A second Ctrl-C raises at once. Only the main thread can take signals; elsewhere it does nothing."""

    def __enter__(self) -> CtrlC:
        self.pressed, self._previous = False, None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum, frame) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

"""Checkpoints: a directory with ``model.safetensors``, ``config.json``, ``tokenizer.json`` and
``history.json``. Loading never unpickles anything; a missing, corrupt or mismatched file gives a
:class:`CheckpointError` that says which file and why.

config.json records the sha256 of the weights and of the tokenizer, and loading checks them: a
changed file (a flipped bit, another checkpoint's tokenizer) is refused by name. Checkpoints
written before the hashes were recorded load without that check.

Weights are stored as float16 by default (half the size, plenty for inference); the model is
rounded to float16 before saving, so what is saved is exactly what was evaluated and a
save → load → save cycle is byte-identical.

A model built on a pretrained encoder (:mod:`budgetformer_core.io.pretrained`) names its base in
config.json's ``backbone`` entry (source, package, path, sha256); the tensors it lists under
``tensors`` are the base's own, unchanged by fine-tuning: they are not stored (nor rounded) but
read from the base on loading, which refuses a base whose sha256 differs. The base's tensors
that fine-tuning changed (``delta``) are stored as what fine-tuning added to them, in int8 steps
of a power-of-two size per row (:func:`quantize_delta`): a quarter of their float32 size, and
far finer than float16 for the small changes fine-tuning makes. Such a model's tokenizer, when
it is the base's own unchanged (as a fine-tune of a pretrained encoder keeps it), is not stored
either: config.json says ``"tokenizer": "backbone"``, loading reads the base's and checks it
against the recorded sha256 of the tokenizer.json it stands for.

:func:`read_checkpoint` reads such a folder; :func:`budgetformer_core.io.loader.load_checkpoint`
opens it or a Hugging Face sequence classifier's folder (:mod:`budgetformer_core.io.classifier`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

from ..config import ModelConfig, model_config_from_dict, to_dict
from ..model.encoder import BudgetFormer
from ..model.low_rank import LOW_RANK_A, LOW_RANK_B, merged
from . import stacked
from .files import CheckpointError, existing_parent, file_sha256, json_safe, read_json
from .pretrained import base_tokenizer, load_base
from .tokenizer import load_tokenizer

FORMAT_VERSION = 1
FILES = ("model.safetensors", "config.json", "tokenizer.json")
WRITTEN = (*FILES, "history.json")
"""Every file :func:`save_checkpoint` writes; a folder holding anything else is not replaced."""
HASHED = ("model.safetensors", "tokenizer.json")
"""The files whose sha256 config.json records (key ``sha256``) and :func:`load_checkpoint` checks."""
TOKENIZER_FROM_BASE = "backbone"
"""config.json's ``tokenizer`` for a checkpoint whose tokenizer is its base's own: no
tokenizer.json is written; the sha256 recorded for it is that of the file it would be."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (in eval mode), its tokenizer and metadata."""

    model: BudgetFormer
    tokenizer: Tokenizer
    label_names: list[str]
    meta: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def validation_budget(self) -> float:
        """The model's mean s on its validation split after its last epoch: the constant s of
        the "no f_θ" ablation (``budget.ABLATIONS``). 0.5 when the history does not record it.

        Raises:
            CheckpointError: history.json records something other than a number in (0, 1].
        """
        last = self.history[-1] if self.history else {}
        value = last.get("val_mean_budget", 0.5)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:  # NaN too
            where = self.path / "history.json" if self.path is not None else "history.json"
            raise CheckpointError(f"{where}: the last epoch's val_mean_budget is not a number in (0, 1] "
                                  f"(it is {value!r}); give the budget explicitly (--budget)")
        return float(value)


def round_weights(model: BudgetFormer, dtype: torch.dtype = torch.float16, keep: Collection[str] = ()) -> None:
    """Round every parameter and floating-point buffer but those named in ``keep`` to
    ``dtype``-representable values in place (storage precision)."""
    with torch.no_grad():
        for name, p in itertools.chain(model.named_parameters(), model.named_buffers()):
            if name not in keep and p.is_floating_point():
                p.copy_(p.to(dtype).to(p.dtype))


def from_base(meta: dict[str, Any] | None, key: str = "tensors") -> list[str]:
    """The names of the tensors a checkpoint takes from its base unchanged (``meta["backbone"]["tensors"]``),
    or, with ``key="delta"``, those it stores as changes to the base's."""
    entry = (meta or {}).get("backbone")
    return list(entry.get(key) or []) if isinstance(entry, dict) else []


DELTA_STEPS, DELTA_SCALE = ".delta_int8", ".delta_scale"
"""Suffixes of the two stored tensors that make one changed base tensor (:func:`quantize_delta`)."""


def quantize_delta(weight: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight − base`` as int8 steps ``q`` and one power-of-two step size per row (dim 0), so that
    ``weight ≈ base + q · scale`` (:func:`dequantize_delta`).

    The step is the smallest power of two that puts the row's largest change within ±127 steps,
    and no smaller than 2⁻¹⁶ of the row's largest base weight (below that, float32 cannot hold
    ``base + q · scale`` exactly). Both bounds make the code stable: quantizing a dequantized
    weight gives the same ``q`` and ``scale`` again, so save → load → save writes the same bytes.
    """
    d = weight.float() - base.float()
    rows = d.reshape(d.shape[0] if d.dim() > 1 else 1, -1)  # (R, C): one step size per row
    peak = rows.abs().amax(1) * (1 - 2.0**-10) / 127  # the margin keeps a full row (127 steps) on its step
    floor = base.float().reshape(rows.shape).abs().amax(1).clamp_min(2.0**-60) * 2.0**-16
    scale = torch.exp2(torch.ceil(torch.log2(torch.maximum(peak, floor))))  # (R,)
    q = torch.round(rows / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(d.shape), scale


def dequantize_delta(q: torch.Tensor, scale: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """``base + q · scale`` (float32) for the ``q`` and ``scale`` of :func:`quantize_delta`."""
    rows = q.reshape(scale.shape[0], -1).float() * scale[:, None]  # (R, C)
    return base.float() + rows.reshape(base.shape)


def round_for_storage(model: BudgetFormer, meta: dict[str, Any] | None, dtype: torch.dtype = torch.float16,
                      base: dict[str, torch.Tensor] | None = None) -> None:
    """Round ``model`` in place to exactly what :func:`save_checkpoint` stores: the base's own
    tensors as they are, the changed base tensors to their low-rank factors rounded to ``dtype``
    (:func:`stored_low_rank`) or else to their int8 delta (``base`` holds the base's weights; read
    from ``meta``'s base when None), every other tensor to ``dtype``."""
    changed = {*from_base(meta, "delta"), *from_base(meta, "lowrank")}
    round_weights(model, dtype, keep={*from_base(meta), *changed})
    if not changed:
        return
    base = base if base is not None else _base_weights(meta, model.cfg.max_len)
    factors = stored_low_rank(model, changed, base)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in factors:
                a, b = (f.to(dtype).float() for f in factors[name])
                model.low_rank[name] = (a, b)
                p.copy_(merged(base[name], a, b).to(p.dtype))
            elif name in changed:
                p.copy_(dequantize_delta(*quantize_delta(p, base[name]), base[name]).to(p.dtype))


def stored_low_rank(model: BudgetFormer, names: Collection[str],
                    base: dict[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The changed base tensors among ``names`` that are stored as low-rank factors: those whose
    weight is still ``base + B·A`` of the factors ``model.low_rank`` carries (a low-rank fine-tune,
    :mod:`budgetformer_core.model.low_rank`), to float32 rounding; the others are stored as deltas."""
    state = model.state_dict()
    return {n: f for n, f in model.low_rank.items()
            if n in names and n in state and state[n].shape == (f[1].shape[0], f[0].shape[1])
            and torch.allclose(state[n].float(), merged(base[n], *f), rtol=1e-5, atol=1e-6)}


def is_checkpoint(path: Path) -> bool:
    """True when ``path`` is a folder holding only checkpoint files (at least one of them)."""
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    return bool(names) and names <= set(WRITTEN)


def check_out_dir(path: str | Path, force: bool = False) -> Path:
    """Raise :class:`CheckpointError` unless a checkpoint can be written to ``path``.

    Called before any work (a training run) so that a bad ``--out`` fails in a second: an
    existing file, a folder holding other files, a place that cannot be created or written, or
    (without ``force``) an existing checkpoint are refused.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"--out {path} is an existing file, not a checkpoint folder")
    if path.is_dir() and any(path.iterdir()):
        if not is_checkpoint(path):
            raise CheckpointError(f"--out {path} is a folder holding other files; choose a new or empty folder")
        if not force:
            raise CheckpointError(f"--out {path} already holds a checkpoint; pass --force to replace it")
    parent = existing_parent(path)
    if not os.access(parent, os.W_OK | os.X_OK) or (path.is_dir() and not os.access(path, os.W_OK | os.X_OK)):
        raise CheckpointError(f"--out {path}: {parent if not path.is_dir() else path} is not writable")
    return path


def save_checkpoint(
    path: str | Path,
    model: BudgetFormer,
    tokenizer: Tokenizer,
    label_names: list[str],
    meta: dict[str, Any] | None = None,
    history: list[dict[str, Any]] | None = None,
    dtype: torch.dtype = torch.float16,
) -> Path:
    """Write a checkpoint directory (the model is rounded to ``dtype`` first).

    The tensors ``meta["backbone"]["tensors"]`` names are the base's (:func:`from_base`): neither
    stored nor rounded. The files are written to a temporary folder beside ``path`` and renamed into place, so an
    interrupted save leaves the previous checkpoint (if any) whole. Weights that are not finite
    (a diverged run) are refused, and so is a ``path`` holding files other than a checkpoint's.
    """
    path = Path(path)
    if path.is_symlink():  # a link to a checkpoint folder: the folder is replaced, the link kept
        path = Path(os.path.realpath(path))
    if path.is_dir() and any(path.iterdir()) and not is_checkpoint(path):
        raise CheckpointError(f"{path} holds files other than a checkpoint's; not replacing it")
    taken, changed = set(from_base(meta)), {*from_base(meta, "delta"), *from_base(meta, "lowrank")}
    base = _base_weights(meta, model.cfg.max_len) if changed else {}
    round_for_storage(model, meta, dtype, base)
    low_rank = stored_low_rank(model, changed, base) if changed else {}
    # (stacked on a warm start's factors: only what follows them, :mod:`.stacked`)
    stack, own_factors = stacked.split(model, low_rank, path, dtype)
    if changed:  # config.json lists each changed tensor where it is stored
        meta = {**meta, "backbone": {**meta["backbone"], "delta": sorted(changed - set(low_rank))}}
        meta["backbone"].pop("lowrank", None)
        meta["backbone"].pop(stacked.KEY, None)
        if low_rank:  # absent without factors (the config of a full fine-tune stays as it was)
            meta["backbone"]["lowrank"] = sorted(low_rank)
        if stack is not None:
            meta["backbone"][stacked.KEY] = stack
    tokenizer_text = tokenizer.to_str(pretty=False) + "\n"
    own_tokenizer = not (taken or changed) or tokenizer_text != _base_tokenizer_text(meta)
    state = model.state_dict()
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in state.items() if k not in taken | changed}
    for name in sorted(changed - set(low_rank)):
        q, scale = quantize_delta(state[name].detach().cpu(), base[name])
        tensors[name + DELTA_STEPS], tensors[name + DELTA_SCALE] = q.contiguous(), scale.contiguous()
    for name, (a, b) in sorted(own_factors.items()):
        tensors[name + LOW_RANK_A], tensors[name + LOW_RANK_B] = a.to(dtype).contiguous(), b.to(dtype).contiguous()
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"weight {bad[0]} holds NaN or infinity ({len(bad)} tensors); nothing was written")
    config = {
        "format_version": FORMAT_VERSION,
        "model": to_dict(model.cfg),
        "label_names": list(label_names),
        **{k: v for k, v in (meta or {}).items() if k != "tokenizer"},
        **({} if own_tokenizer else {"tokenizer": TOKENIZER_FROM_BASE}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()  # mode from the umask, as a plain mkdir
    try:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format_version": str(FORMAT_VERSION)})
        (tmp / "history.json").write_text(json.dumps(json_safe(history or []), indent=1) + "\n")
        if own_tokenizer:
            (tmp / "tokenizer.json").write_bytes(tokenizer_text.encode("utf-8"))
        # safetensors creates its file readable by the owner only; the checkpoint's files share one mode
        os.chmod(tmp / "model.safetensors", (tmp / "history.json").stat().st_mode & 0o777)
        config["sha256"] = {"model.safetensors": file_sha256(tmp / "model.safetensors"),
                            "tokenizer.json": _text_sha256(tokenizer_text)}
        (tmp / "config.json").write_text(json.dumps(json_safe(config), indent=2, sort_keys=True) + "\n")
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _text_sha256(text: str) -> str:
    """Hex sha256 of ``text`` as a file holds it (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _base_tokenizer_text(meta: dict[str, Any] | None) -> str | None:
    """What tokenizer.json holds for the tokenizer of the base ``meta``'s ``backbone`` entry
    names; None without a base."""
    entry = (meta or {}).get("backbone")
    return None if entry is None else base_tokenizer(entry).to_str(pretty=False) + "\n"


def _sibling(path: Path, kind: str) -> Path:
    """A fresh hidden name beside ``path`` (same file system, so renames are atomic)."""
    return path.parent / f".{path.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _swap_in(new: Path, path: Path) -> None:
    """Rename the folder ``new`` to ``path``; an existing ``path`` is moved aside first and
    removed only once the new folder is in place (restored if the rename fails)."""
    if not path.exists():
        os.replace(new, path)
        return
    old = _sibling(path, "old")
    os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a config may hold")


def check_hashes(path: Path, recorded: Any, tokenizer_text: str | None = None) -> None:
    """Raise :class:`CheckpointError` unless each file of ``path`` named in ``recorded`` (config.json's
    ``sha256``: file name → hex digest) has that sha256; ``tokenizer_text``: what stands for
    tokenizer.json where the tokenizer is the base's. ``None`` (an older checkpoint) checks nothing."""
    if recorded is None:
        return
    if not isinstance(recorded, dict) or set(recorded) - set(HASHED):
        raise CheckpointError(f"{path / 'config.json'}: sha256 must map {' and '.join(HASHED)} to their hashes")
    if tokenizer_text is not None and recorded.get("tokenizer.json") != _text_sha256(tokenizer_text):
        raise CheckpointError(f"{path}: its base's tokenizer is not the one it was trained with (its sha256 is "
                              "not the one config.json records): another version of the base")
    for name, digest in sorted(recorded.items()):
        if name == "tokenizer.json" and tokenizer_text is not None:
            continue
        if file_sha256(path / name) != digest:
            raise CheckpointError(f"{path / name} has changed since the checkpoint was written: its sha256 is "
                                  "not the one config.json records (a damaged file, or one from another checkpoint)")


def _base_weights(meta: dict[str, Any] | None, max_len: int) -> dict[str, torch.Tensor]:
    """The encoder weights of the base that ``meta``'s ``backbone`` entry names."""
    return load_base(meta["backbone"]).encoder_weights(max_len)


def _base_tensors(path: Path, config: dict[str, Any], max_len: int,
                  tensors: dict[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Complete ``tensors`` (read from ``path``) with what the checkpoint takes from its base
    (config.json's ``backbone``): the unchanged tensors, and the changed ones from their deltas
    or low-rank factors; returns the factors."""
    try:
        weights = _base_weights(config, max_len)
    except CheckpointError as e:
        raise CheckpointError(f"{path}: its base cannot be used: {e}") from None
    names, deltas, low_rank = from_base(config), from_base(config, "delta"), from_base(config, "lowrank")
    missing = [n for n in (*names, *deltas, *low_rank) if n not in weights]
    if missing:
        raise CheckpointError(f"{path}: its base has no tensor {missing[0]}")
    tensors.update({n: weights[n] for n in names})
    factors = {}
    for name in low_rank:
        a, b = tensors.pop(name + LOW_RANK_A, None), tensors.pop(name + LOW_RANK_B, None)
        out, inp = weights[name].shape if weights[name].dim() == 2 else (0, 0)
        if a is None or b is None or not (a.is_floating_point() and b.is_floating_point()) or a.dim() != 2 \
                or b.dim() != 2 or a.shape[0] != b.shape[1] or (b.shape[0], a.shape[1]) != (out, inp) \
                or not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise CheckpointError(f"{path / 'model.safetensors'}: the low-rank change to {name} is missing "
                                  "or malformed")
        factors[name] = (a.float(), b.float())
    factors = stacked.join(path, config["backbone"], factors)  # after a warm start's, where they stack on it
    for name, (a, b) in factors.items():
        tensors[name] = merged(weights[name], a, b)
    for name in deltas:
        q, scale = tensors.pop(name + DELTA_STEPS, None), tensors.pop(name + DELTA_SCALE, None)
        if q is None or scale is None or q.dtype != torch.int8 or q.shape != weights[name].shape \
                or scale.shape != (q.shape[0] if q.dim() > 1 else 1,):
            raise CheckpointError(f"{path / 'model.safetensors'}: the change to {name} is missing or malformed")
        tensors[name] = dequantize_delta(q, scale.float(), weights[name])
    return factors


def _check_values(file: Path, tensors: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Raise :class:`CheckpointError` naming the first weight that is not floating-point where the
    model's is (an integer or complex tensor would be cast silently) or holds NaN or infinity (a
    model that predicts one class whatever it reads): save_checkpoint writes neither."""
    for name, value in tensors.items():
        if not expected[name].is_floating_point():
            continue
        if not value.is_floating_point():
            raise CheckpointError(f"{file}: weight {name} is {str(value.dtype).removeprefix('torch.')}; "
                                  "weights must be floating-point")
        if not bool(torch.isfinite(value).all()):
            raise CheckpointError(f"{file}: weight {name} holds NaN or infinity")


def _shares_tokenizer(path: Path) -> bool:
    """True when ``path/config.json`` says the tokenizer is the base's (:data:`TOKENIZER_FROM_BASE`)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and config.get("tokenizer") == TOKENIZER_FROM_BASE


def read_checkpoint(path: Path) -> Checkpoint:
    """The checkpoint folder ``path`` written by :func:`save_checkpoint`.

    Raises:
        CheckpointError: a file is missing, damaged or does not match the others.
    """
    missing = [f for f in FILES if not (path / f).is_file()]
    if missing and (missing != ["tokenizer.json"] or not _shares_tokenizer(path)):
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    config = read_json(path / "config.json", parse_constant=_no_constant)
    if not isinstance(config, dict):
        raise CheckpointError(f"{path / 'config.json'} is not a valid checkpoint config: not a JSON object")
    shared_tokenizer = config.get("tokenizer") == TOKENIZER_FROM_BASE
    if "tokenizer" in config and not shared_tokenizer:
        raise CheckpointError(f"{path / 'config.json'}: tokenizer must be {TOKENIZER_FROM_BASE!r} (the base's) "
                              "or absent (tokenizer.json)")
    try:
        cfg = model_config_from_dict(config["model"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path / 'config.json'} is not a valid checkpoint config: {e}") from None
    label_names = config.get("label_names")
    if not isinstance(label_names, list) or not all(isinstance(n, str) for n in label_names):
        raise CheckpointError(f"{path / 'config.json'}: label_names must be a list of strings (class names)")
    if config.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path} has format version {config.get('format_version')}, expected {FORMAT_VERSION}")
    if len(label_names) != cfg.n_classes:
        raise CheckpointError(f"{path}: {len(label_names)} label names for {cfg.n_classes} classes")
    tokenizer_text = None
    try:
        if shared_tokenizer:
            tokenizer_text = _base_tokenizer_text(config)
            if tokenizer_text is None:
                raise CheckpointError("config.json names no base (backbone)")
            tokenizer = Tokenizer.from_str(tokenizer_text)
        else:
            tokenizer = load_tokenizer(path / "tokenizer.json")
    except CheckpointError as e:
        raise CheckpointError(f"{path}: its tokenizer is its base's, which cannot be read: {e}") from None
    except Exception as e:  # the tokenizers library raises plain Exception subclasses
        raise CheckpointError(f"{path / 'tokenizer.json'} cannot be read: {e}") from None
    if "classifier" in config:  # made from a Hugging Face classifier (pruned): it cuts as transformers does
        tokenizer.enable_truncation(cfg.max_len)  # (as io.classifier.load_classifier's: the special tokens stay)
    try:
        tensors = load_file(str(path / "model.safetensors"))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:  # (a file gone mid-read: RuntimeError)
        raise CheckpointError(f"{path / 'model.safetensors'} is corrupt or truncated: {e}") from None
    check_hashes(path, config.get("sha256"), tokenizer_text)
    factors = {}
    if from_base(config) or from_base(config, "delta") or from_base(config, "lowrank"):
        factors = _base_tensors(path, config, cfg.max_len, tensors)
    if tokenizer.get_vocab_size() > cfg.vocab_size:
        raise CheckpointError(
            f"{path}: tokenizer has {tokenizer.get_vocab_size()} tokens, model only {cfg.vocab_size}"
        )
    model = BudgetFormer(cfg)
    expected = model.state_dict()
    if set(tensors) != set(expected):
        extra, lacking = sorted(set(tensors) - set(expected)), sorted(set(expected) - set(tensors))
        raise CheckpointError(f"{path}: weights do not match config.json (extra {extra[:3]}, missing {lacking[:3]})")
    bad = [k for k, v in tensors.items() if v.shape != expected[k].shape]
    if bad:
        k = bad[0]
        raise CheckpointError(
            f"{path}: weight {k} has shape {tuple(tensors[k].shape)}, config.json implies {tuple(expected[k].shape)}"
        )
    _check_values(path / "model.safetensors", tensors, expected)
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in tensors.items()})
    model.low_rank = factors  # what a save stores again, byte for byte
    backbone = config.get("backbone")
    stack = backbone.get(stacked.KEY) if isinstance(backbone, dict) else None
    model.low_rank_from = Path(os.path.abspath(path / stack["path"])) if stack else None
    model.eval()
    history_path = path / "history.json"
    history = read_json(history_path) if history_path.is_file() else []
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise CheckpointError(f"{history_path} must be a list of per-epoch records (JSON objects)")
    meta = {k: v for k, v in config.items() if k not in ("model", "label_names", "format_version", "sha256",
                                                       "tokenizer")}
    return Checkpoint(model, tokenizer, label_names, meta, history, path)

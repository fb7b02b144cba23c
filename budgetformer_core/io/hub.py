"""Datasets from files: named sets from the Hugging Face hub or from local copies in their
published layouts, and any local CSV / TSV / JSONL / Parquet file or folder of them.

``ag_news``, ``dbpedia`` (alias ``dbpedia_14``), ``imdb``, ``yelp_polarity``, ``sst2``, ``snli``
come from a local folder (``data_dir``) in their published layouts, or from the hub through
``datasets`` when the user has network; any local CSV / TSV / JSONL / Parquet file, or folder of
``train`` / ``validation`` / ``test`` files or laid out like a hub dataset
(``data/train-00000-of-00001.parquet``, …), with ``text`` and ``label`` columns. Every file is
read by ``datasets.load_dataset(<format>, data_files=...)``, offline, with its cache in a
temporary folder. :mod:`budgetformer_core.io.data` picks the source a name stands for.

Rules shared by every file source:

* Text comes from ``text`` / ``sentence`` / ``content``, or from ``title`` + ``description`` or
  ``content`` joined by a space (the hub's AG News style). Two text columns (:data:`PAIR_COLUMNS`:
  ``premise`` / ``hypothesis``, ``sentence1`` / ``sentence2``, ``question`` / ``sentence``,
  ``text`` / ``text_pair``) make a pair task: every text is a pair ``(first, second)``, the
  dataset records the two columns (``TextDataset.pair_columns``), and a labelled row with either
  text empty or missing is an error naming the row.
* Labels may be ints or strings; string labels of a file without known classes become the
  sorted unique names. Label ``-1`` (the hub's "unlabelled") and unknown SNLI labels are dropped.
* Missing splits are made deterministically: no validation -> a stratified 10% of train;
  no labelled test -> validation becomes test and validation is carved from train; one pool
  only (SNLI dev, the DBpedia sample, a single file) -> deduplicated stratified 70/10/20 split,
  pairs by their first text; a training row that is also a validation or test text is dropped.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import math
import os
import tempfile
import threading
from pathlib import Path

import pandas as pd

from .splits import PAIR_COLUMNS, SPLITS, Split, TextDataset, stratified_splits

HUB_LABELS = {
    "ag_news": ["World", "Sports", "Business", "Sci/Tech"],
    "dbpedia": [
        "Company", "EducationalInstitution", "Artist", "Athlete", "OfficeHolder",
        "MeanOfTransportation", "Building", "NaturalPlace", "Village", "Animal", "Plant",
        "Album", "Film", "WrittenWork",
    ],
    "imdb": ["negative", "positive"],
    "yelp_polarity": ["negative", "positive"],
    "sst2": ["negative", "positive"],
    "snli": ["entailment", "neutral", "contradiction"],
}
ALIASES = {"dbpedia_14": "dbpedia"}
# Hub ids to try in order (the short canonical ids now redirect to namespaced ones).
HUB_IDS = {
    "ag_news": [("ag_news",), ("fancyzhx/ag_news",)],
    "dbpedia": [("dbpedia_14",), ("fancyzhx/dbpedia_14",)],
    "imdb": [("imdb",), ("stanfordnlp/imdb",)],
    "yelp_polarity": [("yelp_polarity",), ("fancyzhx/yelp_polarity",)],
    "sst2": [("glue", "sst2"), ("stanfordnlp/sst2",)],
    "snli": [("snli",), ("stanfordnlp/snli",)],
}
FOLDERS = {name: name for name in HUB_IDS}  # each set's folder among local copies (hints; a data_dir one up)
# Published file names, tried before the generic hub-export names (train.csv, dev.tsv, …).
LAYOUTS = {
    "ag_news": {"train": ["train_pool.csv"]},
    "dbpedia": {"train": ["train.csv", "train_sample_5k.csv"]},
    "sst2": {"train": ["glue_train.tsv", "train.tsv", "sentence_train.tsv"]},
    "snli": {s: [f"snli_1.0_{f}.jsonl"] for s, f in [("train", "train"), ("validation", "dev"),
                                                     ("test", "test")]},
}
SPLIT_FILES = {"train": ["train"], "validation": ["validation", "valid", "dev"], "test": ["test"]}
EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json", ".parquet")
FORMATS = {".csv": "csv", ".tsv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
OFFLINE_ENV = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
_DATASETS_LOCK = threading.RLock()
TEXT_COLUMNS = ("text", "sentence", "content")
BODY_COLUMNS = ("description", "content")
LABEL_COLUMNS = ("label", "gold_label")
NAME_COLUMNS = ("label_name", "label_text")


def _pick(split: Split, ids) -> Split:
    return split.take(sorted(ids))


def _dedupe(split: Split) -> Split:
    first = {t: i for i, t in reversed(list(enumerate(split.texts)))}
    return _pick(split, first.values())


def _complete(splits: dict[str, Split], seed: int) -> dict[str, Split]:
    """Fill in missing validation / test splits deterministically (see the module docstring)."""
    if "train" not in splits or not ({"validation", "test"} & set(splits)):
        pool = Split(
            [t for s in splits.values() for t in s.texts],
            [y for s in splits.values() for y in s.labels],
        )
        pool = _dedupe(pool)
        return stratified_splits(pool.texts, pool.labels, seed)
    splits = dict(splits)
    if "test" not in splits:
        splits["test"] = splits.pop("validation")
    held_out = {t for name in ("validation", "test") if name in splits for t in splits[name].texts}  # never tested
    splits["train"] = _pick(splits["train"], [i for i, t in enumerate(splits["train"].texts) if t not in held_out])
    if "validation" not in splits:
        from sklearn.model_selection import train_test_split

        train = _dedupe(splits["train"])
        keep, val = train_test_split(
            list(range(len(train))), test_size=0.1, stratify=train.labels, random_state=seed
        )
        splits["train"], splits["validation"] = _pick(train, keep), _pick(train, val)
    return {name: splits[name] for name in SPLITS}


@contextlib.contextmanager
def _local_datasets():
    """The ``datasets`` module set to work offline, its cache in a temporary folder.

    Local files need no network, and nothing they produce is kept: the Arrow tables ``datasets``
    builds go to a folder removed on exit instead of ``~/.cache``. The offline switches (read by
    ``datasets`` and ``huggingface_hub`` at import) are set in the environment and in the
    modules, and restored afterwards so that a later hub load still reaches the network.
    """
    try:
        import datasets
        import huggingface_hub.constants as hub_constants
    except ImportError as e:
        raise RuntimeError("reading dataset files needs the 'datasets' package (pip install datasets)") from e
    flags = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE"),
             (hub_constants, "HF_HUB_OFFLINE")]
    flags = [(mod, name) for mod, name in flags if hasattr(mod, name)]  # names differ by version
    with _DATASETS_LOCK:  # the switches are process-wide: one local read at a time
        env = {k: os.environ.get(k) for k in OFFLINE_ENV}
        saved = [getattr(mod, name) for mod, name in flags]
        bars, verbosity = datasets.utils.are_progress_bars_disabled(), datasets.logging.get_verbosity()
        os.environ.update(dict.fromkeys(OFFLINE_ENV, "1"))
        for mod, name in flags:
            setattr(mod, name, True)
        datasets.disable_progress_bars()
        datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # our errors name the file
        try:
            with tempfile.TemporaryDirectory(prefix="budgetformer-datasets-") as cache:
                yield datasets, cache
        finally:
            for (mod, name), value in zip(flags, saved):
                setattr(mod, name, value)
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            datasets.logging.set_verbosity(verbosity)
            if not bars:
                datasets.enable_progress_bars()


def _csv_options(path: Path) -> dict:
    """``datasets`` CSV options for one file: every column read as a string, as in the file.

    A CSV whose first row is 2 or 3 cells starting with an integer has no header: it is the
    original Zhang et al. (2015) layout of AG News, DBpedia (``class`` from 1, ``title``,
    ``body``) and Yelp polarity (``class``, ``text``).
    """
    opts: dict = {"sep": "\t", "quoting": csv.QUOTE_NONE} if path.suffix.lower() == ".tsv" else {}
    opts["keep_default_na"] = False  # "null", "NA", "nan" are texts, not missing values
    columns = [str(c) for c in pd.read_csv(path, nrows=0, **opts).columns]
    if len(columns) in (2, 3) and columns[0].strip().isdigit():
        columns = ["class", "title", "description"][: len(columns)] if len(columns) == 3 else ["class", "text"]
        opts.update(header=None, column_names=columns)
    return {**opts, "features_of": columns}


def _read_group(paths: list[Path], datasets, cache: str) -> pd.DataFrame:
    """Files of one format (shards of one split), read by ``datasets`` into one table."""
    builder, opts = FORMATS[paths[0].suffix.lower()], {}
    try:
        if builder == "csv":  # shards share the first file's header layout
            opts = _csv_options(paths[0])
            columns = opts.pop("features_of")
            opts["features"] = datasets.Features({c: datasets.Value("string") for c in columns})
        files = [str(p) for p in paths]
        df = datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache, **opts).to_pandas()
    except Exception as e:  # pandas / pyarrow parse errors, often wrapped by the builder
        cause = e.__cause__ or e
        raise ValueError(f"cannot read {paths[0]}: {type(cause).__name__}: {cause}") from e
    if "class" not in df.columns:
        return df
    classes = pd.to_numeric(df["class"], errors="coerce")
    layout = "class,title,body" if "title" in df.columns else "class,text"
    if classes.isna().any():
        raise ValueError(f"{paths[0]}: the first column of a {layout} CSV must be integers")
    return df.drop(columns="class").assign(label=classes.astype(int) - 1)


def _read(*paths: Path) -> pd.DataFrame:
    """One table from CSV / TSV / JSONL / Parquet files (shards of one split), through ``datasets``.

    Columns are as in the files (CSV cells as strings); runs of files of one format are read
    together, and the tables stacked in the order given.
    """
    for path in paths:
        ext = path.suffix.lower()
        if ext not in EXTENSIONS:
            raise ValueError(f"{path}: unsupported file type {ext!r}; use one of {list(EXTENSIONS)}")
        if not path.is_file():
            raise FileNotFoundError(f"data file {path} does not exist")
    groups = [list(g) for _, g in itertools.groupby(paths, key=lambda p: p.suffix.lower())]
    with _local_datasets() as (datasets, cache):
        tables = [_read_group(group, datasets, cache) for group in groups]
    return tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)


def _text_label(df: pd.DataFrame, where: str) -> tuple[pd.Series, pd.Series | None, tuple[str, str] | None]:
    """The text column (pairs ``(first, second)``, or title + body joined, if needed), the label
    column and a pair task's two text columns (None for single texts)."""
    cols = set(df.columns)
    pair = next((p for p in PAIR_COLUMNS if set(p) <= cols), None)
    body = next((c for c in BODY_COLUMNS if c in cols), None)
    single = next((c for c in TEXT_COLUMNS if c in cols), None)
    part = lambda c: _text_cells(df[c], c, where)  # noqa: E731
    if pair:
        text = pd.Series(list(zip(part(pair[0]), part(pair[1]))), index=df.index, dtype=object)
    elif "title" in cols and body and "text" not in cols:  # AG News / DBpedia columns
        text = part("title") + " " + part(body)
    elif single:
        text = part(single)
    else:
        half = next((p for p in PAIR_COLUMNS if len(set(p) & cols) == 1), None)
        if half is not None:
            have, lacking = (half[0], half[1]) if half[0] in cols else (half[1], half[0])
            raise ValueError(f"{where}: a {have!r} column but no {lacking!r} column: a pair task needs both texts")
        raise ValueError(
            f"{where}: no text column; expected one of {list(TEXT_COLUMNS)}, title + "
            f"description/content, or two of a pair {[list(p) for p in PAIR_COLUMNS]}; found {sorted(map(str, cols))}"
        )
    label = next((c for c in LABEL_COLUMNS if c in cols), None)
    return text, (df[label] if label else None), pair


def _text_cells(column: pd.Series, name: str, where: str) -> pd.Series:
    """A text column's cells, stripped; an empty or null cell is "". A number, list, object or
    truth value (JSONL, Parquet) is refused naming its rows, never turned into text."""
    def bad(value) -> bool:
        return not (value is None or isinstance(value, str) or (isinstance(value, float) and math.isnan(value)))

    wrong = column.map(bad)
    if wrong.any():
        kinds = {bool: "a true/false value", int: "a number", float: "a number", dict: "an object", list: "a list"}
        shown = [f"{kinds.get(type(v), type(v).__name__)} (data row {int(i) + 1})"
                 for i, v in column[wrong][:5].items()]
        more = " …" if int(wrong.sum()) > len(shown) else ""
        raise ValueError(f"{where}: column {name!r} holds what is not text: {', '.join(shown)}{more}; "
                         "every cell must be a text")
    return column.map(lambda v: v.strip() if isinstance(v, str) else "")


def _check_pairs(texts: pd.Series, columns: tuple[str, str], where: str) -> None:
    """Raise ``ValueError`` naming the first row (1-based data row) whose pair lacks a text."""
    for index, pair in texts.items():
        for column, value in zip(columns, pair, strict=True):
            if not value:
                raise ValueError(f"{where}: data row {index + 1} has no {column!r} text (the cell is empty or "
                                 f"missing); every row of a pair task needs both {columns[0]!r} and {columns[1]!r}")


def _infer_names(parts: dict[str, pd.DataFrame]) -> list[str]:
    """Label names of a file without known classes: sorted strings, or 0..max for ints."""
    rows = pd.concat(parts.values())
    numbers = pd.to_numeric(rows["label"], errors="coerce")
    if numbers.isna().any():
        return sorted(rows["label"].astype(str).str.strip().unique())
    lookup = {}
    if "name" in rows:  # a label_name / label_text column next to int labels
        lookup = dict(zip(numbers.astype(int), rows["name"].astype(str)))
    return [lookup.get(i, str(i)) for i in range(int(numbers.max()) + 1)]


def _encode(labels: pd.Series, names: list[str], where: str, strict: bool = False) -> pd.Series:
    """Integer labels; -1 where a row is unlabelled (hub ``-1``, SNLI ``-``).

    ``strict`` (the classes are a checkpoint's): every label must be one of ``names`` or an
    index into them; anything else is an error naming the labels, not a dropped row.
    """
    index = {name: i for i, name in enumerate(names)}
    text = labels.astype(str).str.strip()
    if strict and text.isin(index).all():  # names first: "10" is a class name before it is an index
        return text.map(index).astype(int)
    numbers = pd.to_numeric(labels, errors="coerce")
    if numbers.isna().any():
        encoded = text.map(index).fillna(-1).astype(int)
        if strict and (encoded < 0).any():
            unknown = text[encoded < 0]
            shown = ", ".join(repr(v) for v in unknown.unique()[:5])
            raise ValueError(
                f"{where}: {len(unknown)} rows have labels the model does not know ({shown}); "
                f"its classes are {names}"
            )
        return encoded
    if (numbers != numbers.round()).any():
        raise ValueError(f"{where}: labels must be integers or names, found {numbers.iloc[0]!r}")
    numbers = numbers.astype(int)
    if numbers.max() >= len(names) or numbers.min() < (0 if strict else -1):
        raise ValueError(
            f"{where}: labels must lie in [0, {len(names)}) for classes {names}; "
            f"found {numbers.min()}..{numbers.max()}"
        )
    return numbers


def check_classes(name: str, own: list[str], classes: list[str] | None) -> None:
    """Raise ``ValueError`` unless a dataset whose classes are ``own`` is the task of ``classes``
    (a checkpoint's label names; None: nothing to check)."""
    if classes is not None and list(own) != list(classes):
        raise ValueError(
            f"dataset {name!r} has classes {list(own)}, the model {list(classes)}: a different task "
            "(a file with some of the model's classes is mapped by name)"
        )


class NoLabels(ValueError):
    """A file or split without a label column (its texts may still be read, unlabelled)."""


def _build(
    name: str, tables: dict[str, tuple[pd.DataFrame, str]], label_names: list[str] | None, seed: int,
    classes: list[str] | None = None, whole: bool = False,
) -> TextDataset:
    """Tables per split (with a description of their source) -> a complete :class:`TextDataset`.

    ``classes`` (a checkpoint's label names) replace the names found: labels are mapped to them
    and must all be known (see :func:`load_dataset`). ``whole``: one split ``all`` of every
    labelled row in the order read, no split made.
    """
    strict = classes is not None
    if label_names is not None:
        check_classes(name, label_names, classes)
    parts: dict[str, pd.DataFrame] = {}
    no_rows = ValueError(f"dataset {name!r}: no labelled rows in {[w for _, w in tables.values()]}")
    kinds: dict[str, tuple[str, str] | None] = {}
    for split, (df, where) in tables.items():
        text, label, kinds[split] = _text_label(df, where)
        if label is None:
            if split == "test":  # an unlabelled test set (GLUE): validation stands in for it
                continue
            raise NoLabels(f"{where}: no label column; expected one of {list(LABEL_COLUMNS)}")
        part = pd.DataFrame({"text": text, "label": label})
        if names_col := next((c for c in NAME_COLUMNS if c in df.columns), None):
            part["name"] = df[names_col]
        labelled = label.notna() & (label.astype(str).str.strip() != "")
        if strict and not labelled.all():
            first = int(labelled.reset_index(drop=True).idxmin()) + 1
            raise ValueError(f"{where}: {int((~labelled).sum())} rows have an empty label (the first is data row "
                             f"{first}); give every row one of the model's classes {classes}")
        if strict and name in HUB_LABELS:  # the hub's own "unlabelled" marks stay dropped
            labelled &= ~label.astype(str).str.strip().isin(["-1", "-"])
        empty = labelled & (text == "")  # (a pair is never ""; checked below)
        if strict and empty.any():  # "all N labelled rows" is then the truth
            rows = [int(i) + 1 for i in text.index[empty.to_numpy()][:5]]
            raise ValueError(f"{where}: {int(empty.sum())} labelled rows have no text (an empty or null cell; "
                             f"data row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))}"
                             f"{' …' if int(empty.sum()) > len(rows) else ''}); give every row a text")
        parts[split] = part[labelled & ~empty]
    pair = _pair_columns(name, kinds)
    if not parts:
        raise no_rows
    label_names = classes or label_names or _infer_names(parts)
    splits = {}
    for split, part in parts.items():
        labels = _encode(part["label"], label_names, tables[split][1], strict)
        keep = labels >= 0
        if pair is not None:
            _check_pairs(part["text"][keep], kinds[split], tables[split][1])
        if keep.any():
            splits[split] = Split(part["text"][keep].tolist(), labels[keep].tolist())
    if not splits:
        raise no_rows
    if whole:
        return TextDataset(name, list(label_names), {"all": concat_splits(splits.values())}, pair_columns=pair)
    return TextDataset(name, list(label_names), _complete(splits, seed), pair_columns=pair)


def _pair_columns(name: str, kinds: dict[str, tuple[str, str] | None]) -> tuple[str, str] | None:
    """The dataset's pair columns (those of its first split), when every split holds pairs;
    None when none does. Raises ``ValueError`` for a mix of single texts and pairs."""
    if len({k is None for k in kinds.values()}) > 1:
        shown = ", ".join(f"{split}: {'single texts' if k is None else ' + '.join(k)}" for split, k in kinds.items())
        raise ValueError(f"dataset {name!r}: some splits hold text pairs, others single texts ({shown})")
    return next(iter(kinds.values()), None)


def concat_splits(splits) -> Split:
    splits = list(splits)
    needs = None if any(s.needed_heads is None for s in splits) else [n for s in splits for n in s.needed_heads]
    return Split([t for s in splits for t in s.texts], [y for s in splits for y in s.labels], needs)


def _find_files(folder: Path, key: str | None) -> tuple[dict[str, Path], dict[str, list[str]]]:
    """The file of each split in ``folder``, and the names looked for."""
    expected = {
        split: LAYOUTS.get(key, {}).get(split, []) + [s + e for s in stems for e in EXTENSIONS]
        for split, stems in SPLIT_FILES.items()
    }
    found = {}
    for split, names in expected.items():
        path = next((folder / n for n in names if (folder / n).is_file()), None)
        if path is not None:
            found[split] = path
    return found, expected


def _hub_layout(folder: Path) -> dict[str, list[Path]]:
    """The files of each split of a folder laid out like a hub dataset, as ``datasets`` finds them.

    ``data/train-00000-of-00001.parquet``, ``train/shard_0.csv``, ``my_test.jsonl``, …; a folder
    with no split names is one ``train`` pool. Only our file types count.
    """
    with _local_datasets() as (datasets, _):
        from datasets.data_files import DataFilesDict, get_data_patterns

        try:
            files = DataFilesDict.from_patterns(get_data_patterns(str(folder)), base_path=str(folder))
        except FileNotFoundError:  # no data files at all (EmptyDatasetError)
            return {}
    found = {}
    for split, paths in files.items():
        paths = sorted(Path(p) for p in paths if Path(p).suffix.lower() in EXTENSIONS)
        if split in SPLITS and paths:
            found[split] = paths
    return found


def load_folder(
    folder: str | Path, key: str | None = None, seed: int = 0, classes: list[str] | None = None, whole: bool = False
) -> TextDataset:
    """A folder of split files: a published layout of ``key``, a hub-style export or hub layout.

    Our file names (the published ones, then ``train.csv``, ``dev.tsv``, …) come first; else the
    files ``datasets`` would take for each split of a hub dataset repository.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"data directory {folder} does not exist")
    found, expected = _find_files(folder, key)
    sub = folder / FOLDERS.get(key, "?")
    if not found and key and sub.is_dir():  # the folder holding the copies was given
        return load_folder(sub, key, seed, classes, whole)
    files = {split: [path] for split, path in found.items()} or _hub_layout(folder)
    if not files:
        wanted = "; ".join(f"{s}: {', '.join(n[:4])}, …" for s, n in expected.items())
        have = sorted(p.name for p in folder.iterdir())
        raise ValueError(
            f"no {key or 'dataset'} files in {folder}. Expected (first match per split) {wanted}; "
            f"or a hub layout such as data/train-00000-of-00001.parquet. Found: {have or 'nothing'}"
        )
    names = HUB_LABELS.get(key)
    if (folder / "classes.txt").is_file():
        names = [n.strip() for n in (folder / "classes.txt").read_text().splitlines() if n.strip()]
    where = lambda paths: str(paths[0]) + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else "")  # noqa: E731
    tables = {split: (_read(*paths), where(paths)) for split, paths in files.items()}
    return _build(key or folder.name, tables, names, seed, classes, whole)


def load_file(path: str | Path, seed: int = 0, classes: list[str] | None = None, whole: bool = False) -> TextDataset:
    """One CSV / TSV / JSONL / Parquet file, split 70/10/20 (stratified, deterministic), or
    whole (one split ``all``)."""
    path = Path(path)
    return _build(path.stem, {"train": (_read(path), str(path))}, None, seed, classes, whole)


def load_hub(key: str, seed: int = 0, classes: list[str] | None = None, whole: bool = False) -> TextDataset:
    """A named dataset from the Hugging Face hub (needs ``datasets`` and network)."""
    check_classes(key, HUB_LABELS[key], classes)  # before any download
    hint = f"or pass a local copy, e.g. --data-dir data/{FOLDERS[key]}"
    try:
        import datasets
    except ImportError as e:
        raise RuntimeError(
            f"loading {key!r} from the hub needs the 'datasets' package "
            f"(pip install datasets) and network; {hint}"
        ) from e
    errors = []
    for hub_id in HUB_IDS[key]:
        try:
            parts = datasets.load_dataset(*hub_id)
            break
        except Exception as e:  # offline, moved, renamed: try the next id
            errors.append(f"{'/'.join(hub_id)}: {type(e).__name__}: {e}")
    else:
        raise RuntimeError(f"could not load {key!r} from the hub ({'; '.join(errors)}); {hint}")
    rename = {stem: split for split, stems in SPLIT_FILES.items() for stem in stems}
    tables = {
        rename[s]: (parts[s].to_pandas(), f"hub {'/'.join(hub_id)} [{s}]")
        for s in parts
        if s in rename
    }
    return _build(key, tables, HUB_LABELS[key], seed, classes, whole)

"""Dataset loaders: built-in sets, the shared local copies, generic files, and clear errors."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from budgetformer_core.io.data import load_bbc, load_dataset
from budgetformer_core.io.splits import SPLITS, TextDataset
from budgetformer_core.io.synthetic import load_synthetic, load_synthetic_var, make_synthetic, make_synthetic_var

SHARED = Path(__file__).parents[3] / "shared" / "data"


def check_valid(ds: TextDataset) -> None:
    """Every split present, texts non-empty str (pairs of them), labels ints in [0, n_classes)."""
    assert set(ds.splits) == set(SPLITS)
    for split in ds.splits.values():
        assert len(split) > 0
        assert all(isinstance(t, str) and t or ds.pair_columns and all(isinstance(p, str) and p for p in t)
                   for t in split.texts)  # a pair task's: both texts of each pair
        assert all(type(y) is int and 0 <= y < ds.n_classes for y in split.labels)


def proportions(labels: list[int], n: int) -> list[float]:
    counts = Counter(labels)
    return [counts[i] / len(labels) for i in range(n)]


# --------------------------------------------------------------------------- built in

@pytest.fixture(scope="module")
def bbc() -> TextDataset:
    return load_bbc(seed=0)


def test_bbc_has_five_classes_and_no_duplicates(bbc):
    check_valid(bbc)
    assert bbc.n_classes == 5
    assert bbc.label_names == sorted(bbc.label_names)
    texts = [t for s in bbc.splits.values() for t in s.texts]
    assert 2000 < len(texts) <= 2225
    assert len(set(texts)) == len(texts)  # none within a split, none across splits


def test_bbc_split_is_deterministic_and_stratified(bbc):
    again = load_dataset("bbc", seed=0)
    for name in SPLITS:
        assert again.split(name).texts == bbc.split(name).texts
        assert again.split(name).labels == bbc.split(name).labels
    overall = proportions([y for s in bbc.splits.values() for y in s.labels], 5)
    for split in bbc.splits.values():
        assert proportions(split.labels, 5) == pytest.approx(overall, abs=0.02)
    sizes = {k: len(v) / sum(map(len, bbc.splits.values())) for k, v in bbc.splits.items()}
    assert sizes == pytest.approx({"train": 0.7, "validation": 0.1, "test": 0.2}, abs=0.01)


def test_synthetic_is_deterministic():
    a = load_synthetic(seed=1, n_train=200, n_val=50, n_test=50)
    b = load_synthetic(seed=1, n_train=200, n_val=50, n_test=50)
    check_valid(a)
    assert a.n_classes == 4
    assert a.split("train").texts == b.split("train").texts
    assert a.split("test").labels == b.split("test").labels
    assert load_synthetic(seed=2, n_train=200).split("train").texts != a.split("train").texts
    default = load_synthetic().split("train").texts[:5]
    assert load_dataset("synthetic").split("train").texts[:5] == default


def test_synthetic_label_is_the_value_at_each_cue_offset():
    """Cue i's value is the word i + 1 after marker m{i}; the other value words are distractors."""
    split = make_synthetic(300, seed=7, n_cues=3, length=30)
    distractor_disagrees = 0
    for text, label in zip(split.texts, split.labels):
        words = text.split()
        assert len(words) == 30
        for i in range(3):
            assert words.count(f"m{i}") == 1
            at = words.index(f"m{i}")
            assert words[at + 1 : at + 4] and set(words[at + 1 : at + 4]) <= {"a", "b"}
            assert (label >> i) & 1 == (words[at + 1 + i] == "b")
            others = [w for j, w in enumerate(words[at + 1 : at + 4]) if j != i]
            distractor_disagrees += any((w == "b") != ((label >> i) & 1) for w in others)
    assert distractor_disagrees > 300  # distractors often contradict the value: offsets matter
    with pytest.raises(ValueError, match="too short"):
        make_synthetic(1, seed=0, n_cues=4, length=12)


def read_slots(text: str, n_cues: int = 4, slot_len: int = 15) -> tuple[str, list[list[str]]]:
    """(mask, slots) of a synthetic_var text: the anchor q{mask} first, then n_cues slots of slot_len letters."""
    anchor, *letters = text.split()
    assert anchor.startswith("q") and len(letters) == n_cues * slot_len  # one layout whatever the need
    return anchor[1:], [letters[j * slot_len : (j + 1) * slot_len] for j in range(n_cues)]


def test_synthetic_var_is_deterministic_and_carries_needed_heads():
    a = load_synthetic_var(seed=1, n_train=200, n_val=50, n_test=50)
    b = load_synthetic_var(seed=1, n_train=200, n_val=50, n_test=50)
    check_valid(a)
    assert a.name == "synthetic_var" and a.n_classes == 16 and a.has_needed_heads
    assert a.label_names[1] == "1000"  # cue 0's bit first, as in synthetic
    for name in SPLITS:
        assert a.split(name).texts == b.split(name).texts
        assert a.split(name).labels == b.split(name).labels
        assert a.split(name).needed_heads == b.split(name).needed_heads
        assert len(a.split(name).needed_heads) == len(a.split(name))
    assert load_synthetic_var(seed=2, n_train=200).split("train").texts != a.split("train").texts
    assert load_dataset("synthetic_var").split("test").needed_heads[:20] == (
        load_synthetic_var().split("test").needed_heads[:20]
    )
    # subsets keep every example's need beside its text
    train = a.split("train")
    assert train.head(7).needed_heads == train.needed_heads[:7]
    assert train.take([5, 2]).needed_heads == [train.needed_heads[5], train.needed_heads[2]]
    assert load_synthetic(seed=0, n_train=10, n_val=5, n_test=5).split("test").needed_heads == [2] * 5
    with pytest.raises(ValueError, match="needed_heads"):
        type(train)(["x"], [0], [1, 2])


def test_synthetic_var_needs_vary_and_labels_match_the_slots():
    split = make_synthetic_var(4000, seed=5)
    counts = Counter(split.needed_heads)
    assert set(counts) == {1, 2, 3, 4}
    assert all(abs(c / 4000 - 0.25) < 0.03 for c in counts.values())  # n uniform on 1 … 4
    masks, unused_b = Counter(), Counter()
    for text, label, need in zip(split.texts, split.labels, split.needed_heads):
        mask, slots = read_slots(text)
        assert all(set(slot) <= {"a", "b"} for slot in slots)  # every slot filled, used or not: no `_`
        assert mask.count("1") == need  # the anchor names the slots in use
        bits = [int(m == "1" and slot.count("b") > 7) for m, slot in zip(mask, slots)]
        assert label == sum(bit << j for j, bit in enumerate(bits))  # slot 0 least significant
        masks[mask] += 1
        unused_b.update(slot.count("b") > 7 for m, slot in zip(mask, slots) if m == "0")
    assert len(masks) == 15  # every non-empty subset of the 4 slots occurs
    # the same need comes from different slot sets: which heads are needed varies too
    assert min(masks[m] for m in ("1000", "0100", "0010", "0001")) > 150
    # an unused slot's majority is as often b as a, and its bit is 0 either way: only the anchor tells
    assert abs(unused_b[True] / sum(unused_b.values()) - 0.5) < 0.03
    with pytest.raises(ValueError, match="odd"):
        make_synthetic_var(1, seed=0, slot_len=4)


# --------------------------------------------------------------------------- shared copies

def shared(folder: str) -> Path:
    path = SHARED / folder
    if not path.is_dir():
        pytest.skip(f"no shared copy at {path}")
    return path


def test_shared_ag_news():
    ds = load_dataset("ag_news", data_dir=shared("ag_news"))
    check_valid(ds)
    assert ds.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    test = ds.split("test")
    assert len(test) == 7600 and Counter(test.labels) == {i: 1900 for i in range(4)}
    train, val = ds.split("train"), ds.split("validation")
    assert len(train) + len(val) == 22269  # all of train_pool.csv
    assert len(val) == pytest.approx(2227, abs=1)
    assert not set(val.texts) & set(train.texts)
    # the headerless class,title,description file is joined like the pool's hub-style text
    assert test.texts[0].startswith("Fears for T N pension after talks Unions representing")
    assert test.labels[0] == 2  # class "3" (Business) in the file
    again = load_dataset("ag_news", data_dir=shared("ag_news"))
    assert again.split("validation").texts == val.texts


def test_shared_dbpedia_alias_and_parent_folder():
    ds = load_dataset("dbpedia", data_dir=shared("dbpedia"))
    check_valid(ds)
    assert ds.name == "dbpedia" and ds.n_classes == 14 and ds.label_names[0] == "Company"
    assert sum(map(len, ds.splits.values())) == 5000
    assert proportions(ds.split("test").labels, 14) == pytest.approx(
        proportions(ds.split("train").labels, 14), abs=0.01
    )
    # ../shared/data itself works too: the loader steps into the set's folder
    parent = load_dataset("dbpedia_14", data_dir=SHARED)
    assert parent.split("test").texts == ds.split("test").texts


def test_shared_sst2():
    ds = load_dataset("sst2", data_dir=shared("sst2"))
    check_valid(ds)
    assert ds.label_names == ["negative", "positive"]
    assert {k: len(v) for k, v in ds.splits.items()} == {
        "train": 67348, "validation": 872, "test": 1821,  # GLUE's 67,349 less the one test sentence it holds
    }
    assert not set(ds.split("train").texts) & set(ds.split("test").texts)
    assert sum(Counter(ds.split("train").labels).values()) == 67348
    assert not any(t.endswith("\r") for t in ds.split("train").texts[:100])  # CRLF file


def test_shared_snli():
    ds = load_dataset("snli", data_dir=shared("snli"))
    check_valid(ds)
    assert ds.label_names == ["entailment", "neutral", "contradiction"]
    texts = [t for s in ds.splits.values() for t in s.texts]
    assert len(texts) == len(set(texts)) == 9840  # 9,842 pairs less 2 exact duplicates
    assert ds.pair_columns in (("premise", "hypothesis"), ("sentence1", "sentence2"))
    assert all(isinstance(t, tuple) for t in texts)
    # split by premise: each premise's three hypotheses lie on one side (sizes as docs/pretrained.md states)
    premises = {name: {t[0] for t in s.texts} for name, s in ds.splits.items()}
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 6885, "validation": 985, "test": 1970}
    assert not premises["train"] & premises["test"] and not premises["train"] & premises["validation"]
    assert not premises["validation"] & premises["test"]


# --------------------------------------------------------------------------- generic files

def frame(n: int = 60) -> pd.DataFrame:
    names = ["cat", "dog", "emu"]
    texts = [f"example number {i}" for i in range(n)]
    return pd.DataFrame({"text": texts, "label": [names[i % 3] for i in range(n)]})


def write(df: pd.DataFrame, path: Path) -> Path:
    ext = path.suffix
    if ext == ".parquet":
        df.to_parquet(path)
    elif ext == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False, sep="\t" if ext == ".tsv" else ",")
    return path


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("int_labels", [False, True])
def test_generic_file_round_trips(tmp_path, ext, int_labels):
    df = frame()
    if int_labels:
        df["label"] = df["label"].map({"cat": 0, "dog": 1, "emu": 2})
    ds = load_dataset(str(write(df, tmp_path / f"mine{ext}")))
    check_valid(ds)
    assert ds.label_names == (["0", "1", "2"] if int_labels else ["cat", "dog", "emu"])
    got = {t: y for s in ds.splits.values() for t, y in zip(s.texts, s.labels)}
    assert got == dict(zip(df["text"], [i % 3 for i in range(60)]))
    again = load_dataset(str(tmp_path / f"mine{ext}"))
    assert again.split("test").texts == ds.split("test").texts


def test_generic_file_keeps_na_like_texts_and_label_names(tmp_path):
    df = frame(62)
    df.loc[0, "text"], df.loc[1, "text"] = "NA", "null"
    df.loc[60, "text"], df.loc[61, "label"] = "", ""  # rows without text or label are dropped
    df["label_name"] = df["label"]
    df["label"] = df["label"].map({"cat": 0, "dog": 1, "emu": 2})
    ds = load_dataset("mine.csv", data_dir=write(df, tmp_path / "mine.csv").parent)
    assert ds.label_names == ["cat", "dog", "emu"]
    texts = {t for s in ds.splits.values() for t in s.texts}
    assert {"NA", "null"} <= texts and len(texts) == 60


def test_hub_style_folder(tmp_path):
    df = frame(90)
    write(df[:60], tmp_path / "train.parquet")
    write(df[60:75], tmp_path / "validation.jsonl")
    write(df[75:], tmp_path / "test.csv")
    ds = load_dataset(str(tmp_path))
    check_valid(ds)
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 60, "validation": 15, "test": 15}
    assert ds.split("test").texts == df["text"][75:].tolist()


@pytest.fixture
def through_datasets(monkeypatch):
    """Every call data.py makes to ``datasets.load_dataset``, with the network cut off."""
    import socket

    import datasets

    calls = []
    real = datasets.load_dataset

    def spy(path, *args, **kwargs):
        assert os.environ["HF_DATASETS_OFFLINE"] == os.environ["HF_HUB_OFFLINE"] == "1"
        assert datasets.config.HF_HUB_OFFLINE
        calls.append({"builder": path, "files": kwargs.get("data_files"), "cache": kwargs.get("cache_dir")})
        return real(path, *args, **kwargs)

    def no_network(*args, **kwargs):
        raise AssertionError("a local dataset file tried to reach the network")

    monkeypatch.setattr(datasets, "load_dataset", spy)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield calls
    assert "HF_DATASETS_OFFLINE" not in os.environ and "HF_HUB_OFFLINE" not in os.environ  # restored
    assert not any(Path(c["cache"]).exists() for c in calls)  # nothing kept in a cache
    assert not any(str(Path.home() / ".cache") in c["cache"] for c in calls)


def test_hub_layout_parquet_folder_loads_offline(tmp_path, through_datasets):
    df = frame(90)
    data = tmp_path / "data"
    data.mkdir()
    write(df[:40], data / "train-00000-of-00002.parquet")
    write(df[40:70], data / "train-00001-of-00002.parquet")
    write(df[70:80], data / "validation-00000-of-00001.parquet")
    write(df[80:], data / "test-00000-of-00001.parquet")
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n")
    ds = load_dataset(str(tmp_path))
    check_valid(ds)
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 70, "validation": 10, "test": 10}
    assert ds.split("train").texts == df["text"][:70].tolist()  # both shards, in order
    assert ds.label_names == ["cat", "dog", "emu"]
    assert {c["builder"] for c in through_datasets} == {"parquet"}
    assert sorted(len(c["files"]) for c in through_datasets) == [1, 1, 2]


def test_hub_names_imdb_and_yelp_from_local_copies(tmp_path, through_datasets):
    imdb = tmp_path / "imdb" / "plain_text"
    imdb.mkdir(parents=True)
    reviews = pd.DataFrame({"text": [f"review {i}" for i in range(60)], "label": [i % 2 for i in range(60)]})
    write(reviews[:40], imdb / "train-00000-of-00001.parquet")
    write(reviews[40:], imdb / "test-00000-of-00001.parquet")
    write(reviews.assign(label=-1), imdb / "unsupervised-00000-of-00001.parquet")  # not a split of ours
    ds = load_dataset("imdb", data_dir=imdb)
    check_valid(ds)
    assert ds.name == "imdb" and ds.label_names == ["negative", "positive"]
    assert ds.split("test").texts == reviews["text"][40:].tolist()
    yelp = tmp_path / "yelp_polarity"
    yelp.mkdir()
    rows = [f'"{1 + i % 2}","Review {i}, with a comma."' for i in range(40)]
    (yelp / "train.csv").write_text("\n".join(rows) + "\n")  # the original headerless class,text layout
    (yelp / "test.csv").write_text("\n".join(rows[:10]) + "\n")
    ds = load_dataset("yelp_polarity", data_dir=tmp_path)  # the parent folder works too
    assert ds.split("test").texts[:2] == ["Review 0, with a comma.", "Review 1, with a comma."]
    assert ds.split("test").labels[:2] == [0, 1]
    assert {c["builder"] for c in through_datasets} == {"parquet", "csv"}


def test_csv_and_jsonl_files_load_through_datasets(tmp_path, through_datasets):
    df = frame(60)
    for ext in (".csv", ".jsonl"):
        ds = load_dataset(str(write(df, tmp_path / f"mine{ext}")))
        check_valid(ds)
        assert sorted(t for s in ds.splits.values() for t in s.texts) == sorted(df["text"])
    assert [c["builder"] for c in through_datasets] == ["csv", "json"]


def test_folder_fills_missing_splits(tmp_path):
    df = frame(90).assign(label=[i % 3 for i in range(90)])
    write(df[:60], tmp_path / "train.csv")
    write(df[60:].assign(label=-1), tmp_path / "test.csv")  # hub-style unlabelled test
    write(df[60:], tmp_path / "dev.csv")
    ds = load_dataset(str(tmp_path))
    assert ds.split("test").texts == df["text"][60:].tolist()  # dev stands in for test
    assert len(ds.split("validation")) == 6 and len(ds.split("train")) == 54
    (tmp_path / "dev.csv").unlink()
    (tmp_path / "test.csv").unlink()
    write(df[60:], tmp_path / "test.csv")
    ds = load_dataset(str(tmp_path))
    assert len(ds.split("test")) == 30 and len(ds.split("validation")) == 6


def test_a_pool_of_pairs_is_split_by_its_first_text(tmp_path):
    premises = [f"premise number {i}" for i in range(60)]
    rows = [{"premise": p, "hypothesis": f"hypothesis {j} of {p}", "label": j} for p in premises for j in range(3)]
    pd.DataFrame(rows).to_json(tmp_path / "pairs.jsonl", orient="records", lines=True)
    ds = load_dataset(str(tmp_path / "pairs.jsonl"))
    sides = {name: {t[0] for t in s.texts} for name, s in ds.splits.items()}
    assert sum(map(len, sides.values())) == 60  # no premise on two sides
    assert {k: len(v) for k, v in sides.items()} == {"train": 42, "validation": 6, "test": 12}
    assert all(Counter(s.labels) == Counter({0: len(s) // 3, 1: len(s) // 3, 2: len(s) // 3})
               for s in ds.splits.values())  # still stratified: whole premises carry all three labels
    assert load_dataset(str(tmp_path / "pairs.jsonl")).split("test").texts == ds.split("test").texts


def test_a_training_row_that_is_also_a_test_row_is_dropped_from_training(tmp_path):
    df = frame(90).assign(label=[i % 3 for i in range(90)])
    write(pd.concat([df[:60], df[75:77]]), tmp_path / "train.csv")  # two test rows leaked into train
    write(df[60:75], tmp_path / "dev.csv")
    write(df[75:], tmp_path / "test.csv")
    ds = load_dataset(str(tmp_path))
    assert ds.split("train").texts == df["text"][:60].tolist()
    assert len(ds.split("test")) == 15 and len(ds.split("validation")) == 15


def test_published_layouts_in_tmp(tmp_path):
    ag = tmp_path / "ag"
    ag.mkdir()
    rows = [f'"{1 + i % 4}","Title {i}","Body {i}."' for i in range(40)]
    (ag / "test.csv").write_text("\n".join(rows) + "\n")
    (ag / "train.csv").write_text("\n".join(rows).replace("Title", "Other") + "\n")
    ds = load_dataset("ag_news", data_dir=ag)
    assert ds.split("test").texts[0] == "Title 0 Body 0."
    assert ds.split("test").labels[:4] == [0, 1, 2, 3]
    assert ds.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    snli = tmp_path / "snli"
    snli.mkdir()
    pairs = pd.DataFrame(
        {
            "premise": [f"p{i}" for i in range(40)],
            "hypothesis": [f"h{i}" for i in range(40)],
            "label": ["entailment", "neutral", "contradiction", "-"] * 10,
        }
    )
    write(pairs, snli / "dev.jsonl")
    ds = load_dataset("snli", data_dir=snli)
    texts = [t for s in ds.splits.values() for t in s.texts]
    assert len(texts) == 30 and ("p0", "h0") in texts  # the "-" rows are dropped
    assert ds.pair_columns == ("premise", "hypothesis")


# --------------------------------------------------------------------------- errors

def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown dataset 'imdbx'.*ag_news.*bbc"):
        load_dataset("imdbx")


def test_missing_paths_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        load_dataset(str(tmp_path / "nope.csv"))
    with pytest.raises(FileNotFoundError, match="data directory"):
        load_dataset("ag_news", data_dir=tmp_path / "missing")


def test_folder_without_known_files_lists_expected_and_found(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match=r"(?s)train_pool\.csv.*Found: \['notes\.txt'\]"):
        load_dataset("ag_news", data_dir=tmp_path)


@pytest.mark.parametrize(
    "content, message",
    [
        ("foo,bar\n1,2\n", "no text column"),
        ('"1","title","body"\nx,"title","body"\n', "first column of a class,title,body"),
        ("text,other\nhello,1\n", "no label column"),
        ("words,label\nhello,1\n", "no text column"),
        ("text,label\nhello,0.5\nbye,1\n", "labels must be integers"),
        ("", "cannot read"),
    ],
)
def test_bad_csv_gives_clear_value_error(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_dataset(str(path))


def test_bad_parquet_and_out_of_range_labels(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not a parquet file")
    with pytest.raises(ValueError, match="cannot read"):
        load_dataset(str(tmp_path / "bad.parquet"))
    (tmp_path / "test.csv").write_text('"7","title","body"\n"1","title","body"\n')
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 4\)"):
        load_dataset("ag_news", data_dir=tmp_path)


def test_hub_without_datasets_package_says_use_data_dir(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(RuntimeError, match=r"datasets.*--data-dir data/dbpedia"):
        load_dataset("dbpedia")


# --------------------------------------------------------------------------- a model's classes

def test_a_models_classes_map_a_file_by_name_or_index_and_whole_keeps_every_row(tmp_path):
    df = frame(30)  # labels cat / dog / emu, row i has i % 3
    df = pd.concat([df, df.iloc[:3]], ignore_index=True)  # duplicates are rows given, and scored
    classes = ["ant", "cat", "dog", "emu"]
    ds = load_dataset(str(write(df, tmp_path / "mine.csv")), classes=classes, whole=True)
    assert ds.label_names == classes and list(ds.splits) == ["all"]
    assert ds.split("all").texts == df["text"].tolist()
    assert ds.split("all").labels == [1 + i % 3 for i in range(30)] + [1, 2, 3]
    df["label"] = [i % 4 for i in range(len(df))]
    assert load_dataset(str(write(df, tmp_path / "ints.csv")), classes=classes, whole=True).split("all").labels \
        == df["label"].tolist()


@pytest.mark.parametrize("label, message", [
    ("yak", "labels the model does not know"),
    ("NaN", r"does not know \('NaN'\)"),
    ("", "empty label"),
    (9, r"labels must lie in \[0, 4\)"),
])
def test_a_models_classes_refuse_unknown_labels(tmp_path, label, message):
    df = frame(30)
    df["label"] = df["label"].astype(object)
    df.loc[5, "label"] = label
    if isinstance(label, int):
        df["label"] = [i % 4 for i in range(30)]
        df.loc[5, "label"] = label
    with pytest.raises(ValueError, match=message):
        load_dataset(str(write(df, tmp_path / "mine.csv")), classes=["ant", "cat", "dog", "emu"])


def test_a_task_with_other_class_names_is_refused():
    with pytest.raises(ValueError, match="a different task"):
        load_dataset("synthetic", classes=["business", "entertainment", "politics", "sport", "tech"])
    with pytest.raises(ValueError, match="a different task"):
        load_dataset("ag_news", classes=["negative", "positive"])  # before any download
    assert load_dataset("synthetic", classes=["00", "10", "01", "11"], whole=True).split("all").labels[:3]

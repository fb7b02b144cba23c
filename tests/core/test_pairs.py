"""Text pairs end to end: encoded as ``transformers`` encodes them, read from files, classified,
explained, trained on and predicted by the command."""

from __future__ import annotations

import json
import threading

import pandas as pd
import pytest
import torch

from budgetformer_core.analysis.atlas import allocate, attention_profile
from budgetformer_core.analysis.explain import explain
from budgetformer_core.analysis.infer import analyze, evaluate_split, pair_columns, predict_rows
from budgetformer_core.cli import main
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.inputs import read_text_table
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.synthetic import PAIR_LABELS, make_synthetic_pairs
from budgetformer_core.io.tokenizer import (
    SEP,
    encode,
    encode_batch,
    reading_prefix,
    train_tokenizer,
    with_pair_template,
)

LONG = " ".join(["the market shares film music"] * 20)  # 100 tokens
WORD = "abcdefghijklmnopqrstuvwxyz" * 2  # one word of 52 pieces: never cut by reading_prefix
PAIRS = [
    ("the market rose", "shares fell"),
    (LONG, "goal"),  # the first longer than max_len
    ("vote", LONG),  # the second
    (LONG, LONG + " won"),  # both, the second the longer
    (LONG + " won", LONG),  # both, the first the longer
    ("a b c d e", "f g h i j"),
    ("", "x"),  # empty-ish
    ("   ", "goal"),
    ("café naïve 日本語 👍", "ÉLECTION über <b>x</b>"),  # Unicode, accents, markup
]


@pytest.fixture(scope="module")
def hf(hf_classifier):
    """Our checkpoint of the BERT classifier folder, and transformers' tokenizer and model of it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    return (load_checkpoint(hf_classifier), AutoTokenizer.from_pretrained(hf_classifier),
            AutoModelForSequenceClassification.from_pretrained(hf_classifier).eval())


# --------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("max_len", [7, 8, 9, 16, 64])
def test_pairs_encode_as_transformers_encodes_them(hf, max_len):
    ckpt, theirs, _ = hf
    before = ckpt.tokenizer.to_str()
    ids, n_tokens = encode(ckpt.tokenizer, PAIRS, max_len)
    for (a, b), x, n in zip(PAIRS, ids, n_tokens, strict=True):
        expected = theirs(a, b, truncation="longest_first", max_length=max_len)
        assert list(x) == expected["input_ids"], (a[:20], b[:20])
        assert x.types == expected["token_type_ids"], (a[:20], b[:20])
        assert n == len(theirs(a, b)["input_ids"])  # the full length: truncated says so
    batch = encode_batch(ckpt.tokenizer, PAIRS, max_len)
    assert batch.types is not None and batch.types.shape == batch.ids.shape
    assert batch.truncated == [n > max_len for n in n_tokens] and batch.truncated[1]
    assert ckpt.tokenizer.to_str() == before  # the shared tokenizer is left as it was


@pytest.mark.parametrize("max_len", [21, 22, 40])
def test_a_pair_cut_to_what_the_model_reads_encodes_as_the_whole_pair(hf, max_len):
    """reading_prefix cuts a long text of a pair without changing a token the model reads, even
    where longest_first gives the odd token to the longer text (odd room left by the specials)."""
    ckpt, theirs, _ = hf
    tok = ckpt.tokenizer
    for pair in [*PAIRS, (LONG, WORD), (WORD, LONG), (LONG, WORD + " x"), (" ".join("abcdefghij"), LONG)]:
        cut = reading_prefix(tok, pair, max_len, start=16)
        assert all(c == t[: len(c)] for c, t in zip(cut, pair, strict=True))
        [x], _ = encode(tok, [cut], max_len)
        expected = theirs(*pair, truncation="longest_first", max_length=max_len)
        assert (list(x), x.types) == (expected["input_ids"], expected["token_type_ids"]), pair
    assert reading_prefix(tok, (LONG, "goal"), 22, start=16)[0] != LONG  # it does cut


def test_pairs_encode_the_same_from_many_threads(hf):
    ckpt, theirs, _ = hf
    expected = [theirs(a, b, truncation="longest_first", max_length=12)["input_ids"] for a, b in PAIRS]
    got, errors = [], []

    def work():
        try:
            got.append([list(x) for x in encode(ckpt.tokenizer, PAIRS, 12)[0]])
        except Exception as e:  # noqa: BLE001 - any failure in a thread fails the test
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [expected] * 8


def test_our_pair_template_joins_with_sep_and_leaves_single_texts_as_they_were():
    tok = train_tokenizer(["the cat sat", "a dog ran", "cats and dogs"], vocab_size=60, min_frequency=1)
    paired = with_pair_template(tok)
    assert tok.post_processor is None  # a copy: the tokenizer given is not changed
    assert paired.encode("the cat sat").ids == tok.encode("the cat sat").ids
    [x], _ = encode(paired, [("the cat", "a dog")], 40)
    assert [paired.id_to_token(i) for i in x] == ["the", "cat", SEP, "a", "dog"] and x.types == [0, 0, 0, 1, 1]
    assert encode(paired, ["the cat sat"], 40) == encode(tok, ["the cat sat"], 40)
    assert encode_batch(paired, ["the cat sat"], 40).types is None


# --------------------------------------------------------------------------- a Hugging Face classifier


def test_a_bert_classifier_on_pairs_gives_transformers_logits(hf):
    ckpt, theirs, model = hf
    pairs = [p for p in PAIRS if p[0].strip()]
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    inputs = theirs(first, second, truncation="longest_first", max_length=64, padding=True, return_tensors="pt")
    batch = encode_batch(ckpt.tokenizer, pairs, 64)
    assert torch.equal(batch.types, inputs["token_type_ids"])
    with torch.no_grad():
        expected = model(**inputs).logits
        ours = ckpt.model(batch.ids, batch.mask, types=batch.types).logits
        typeless = ckpt.model(batch.ids, batch.mask).logits
    assert torch.allclose(ours, expected, atol=1e-4)
    assert (typeless - expected).abs().amax(-1).max() > 1e-2  # the segments change its answers
    probs = torch.tensor([a.probs for a in analyze(ckpt, pairs)])
    assert torch.allclose(probs, torch.softmax(expected, -1), atol=1e-4)
    assert pair_columns(ckpt) == ("text", "text_pair")


# --------------------------------------------------------------------------- data


def test_the_synthetic_pair_task_is_deterministic_and_balanced():
    a, b = make_synthetic_pairs(300, seed=4), make_synthetic_pairs(300, seed=4)
    assert a.texts == b.texts and a.labels == b.labels and a.texts != make_synthetic_pairs(300, seed=5).texts
    assert all(isinstance(t, tuple) and len(t) == 2 for t in a.texts)
    assert {a.labels.count(k) for k in range(3)} <= set(range(80, 121))
    for (first, second), label in zip(a.texts, a.labels, strict=True):
        [topic] = [w for w in first.split() if w[0] == "t"]
        named = [w for w in second.split() if w[0] == "t"]
        assert PAIR_LABELS[label] == ("none" if not named else "same" if named == [topic] else "other")
    data = load_dataset("synthetic_pairs")
    assert data.pair_columns == ("premise", "hypothesis") and data.label_names == PAIR_LABELS


def pair_frame(n: int = 60) -> pd.DataFrame:
    return pd.DataFrame({"premise": [f"the market rose {i}" for i in range(n)],
                         "hypothesis": [f"shares fell {i}" for i in range(n)],
                         "label": ["rose", "fell", "flat"] * (n // 3)})


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_file_with_two_text_columns_is_a_pair_task(tmp_path, suffix):
    path = tmp_path / f"pairs{suffix}"
    df = pair_frame()
    {".csv": lambda: df.to_csv(path, index=False), ".parquet": lambda: df.to_parquet(path),
     ".jsonl": lambda: df.to_json(path, orient="records", lines=True)}[suffix]()
    data = load_dataset(str(path), whole=True)
    assert data.pair_columns == ("premise", "hypothesis")
    assert data.split("all").texts[:2] == [("the market rose 0", "shares fell 0"),
                                           ("the market rose 1", "shares fell 1")]
    split = load_dataset(str(path)).split("test")
    assert all(isinstance(t, tuple) for t in split.texts)

    df.loc[6, "hypothesis"] = None if suffix != ".csv" else ""
    {".csv": lambda: df.to_csv(path, index=False), ".parquet": lambda: df.to_parquet(path),
     ".jsonl": lambda: df.to_json(path, orient="records", lines=True)}[suffix]()
    with pytest.raises(ValueError, match=r"data row 7 has no 'hypothesis' text"):
        load_dataset(str(path))
    df.drop(columns="hypothesis").to_csv(tmp_path / "half.csv", index=False)
    with pytest.raises(ValueError, match=r"a 'premise' column but no 'hypothesis' column"):
        load_dataset(str(tmp_path / "half.csv"))


@pytest.mark.parametrize("columns", [("sentence1", "sentence2"), ("question", "sentence"), ("text", "text_pair")])
def test_every_pair_of_columns_is_read_as_a_pair(tmp_path, columns):
    df = pair_frame().rename(columns=dict(zip(("premise", "hypothesis"), columns)))
    df.to_csv(tmp_path / "p.csv", index=False)
    assert load_dataset(str(tmp_path / "p.csv")).pair_columns == columns
    rows = read_text_table((tmp_path / "p.csv").read_bytes(), "p.csv")
    assert rows[0] == (1, ("the market rose 0", "shares fell 0"))


def test_input_files_of_pairs_and_their_bad_rows():
    csv = b"Premise,Hypothesis,label\nthe market rose,shares fell,x\nthe vote,,y\n"
    assert read_text_table(csv, "in.csv") == [(1, ("the market rose", "shares fell")), (2, ("the vote", ""))]
    jsonl = b'{"premise": "a", "hypothesis": "b"}\n\n{"premise": "c", "hypothesis": "d"}\n'
    assert read_text_table(jsonl, "in.jsonl") == [(1, ("a", "b")), (3, ("c", "d"))]
    with pytest.raises(ValueError, match=r"in.csv: row 2 has 1 field\(s\), no 'hypothesis' field"):
        read_text_table(b"premise,hypothesis\na,b\nc\n", "in.csv")
    with pytest.raises(ValueError, match=r'in.jsonl: line 2 has no "hypothesis" string'):
        read_text_table(b'{"premise": "a", "hypothesis": "b"}\n{"premise": "c"}\n', "in.jsonl")
    assert read_text_table(b"text\nsingle\n", "in.csv") == [(1, "single")]  # one text column: as before


# --------------------------------------------------------------------------- our pair model


def test_a_model_trained_on_pairs_records_them_and_reads_them(pair_checkpoint):
    config = json.loads((pair_checkpoint / "config.json").read_text())
    assert config["pair_columns"] == ["premise", "hypothesis"] and config["model"]["type_vocab_size"] == 2
    tokenizer = json.loads((pair_checkpoint / "tokenizer.json").read_text())
    assert tokenizer["post_processor"]["type"] == "TemplateProcessing"  # the pair template, reloaded with it
    ckpt = load_checkpoint(pair_checkpoint)
    assert pair_columns(ckpt) == ("premise", "hypothesis")
    split = load_dataset("synthetic_pairs").split("test").head(60)
    evaluation = evaluate_split(ckpt, split)
    analyses = analyze(ckpt, split.texts)
    assert [a.label_id for a in analyses] == evaluation.predictions.tolist()  # one path, with the segments
    assert torch.allclose(torch.tensor([a.probs for a in analyses]), torch.from_numpy(evaluation.probs), atol=1e-5)
    assert evaluation.accuracy > 0.4  # above a third (chance): it learnt something of the task
    batch = encode_batch(ckpt.tokenizer, split.texts, ckpt.config.max_len)
    with torch.no_grad():
        typed = ckpt.model(batch.ids, batch.mask, types=batch.types).logits
        typeless = ckpt.model(batch.ids, batch.mask).logits
    assert not torch.allclose(typed, typeless, atol=1e-4)
    with pytest.raises(ValueError, match=r"input 0 is one text, but this model reads pairs of texts \(premise and "):
        analyze(ckpt, ["w1 t2 w3"])
    with pytest.raises(ValueError, match=r"input 0 has an empty second text"):
        analyze(ckpt, [("w1 t2", " ")])


def test_a_model_of_single_texts_refuses_pairs(tiny_checkpoint):
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert "pair_columns" not in config and config["model"]["type_vocab_size"] == 0  # as before pairs
    ckpt = load_checkpoint(tiny_checkpoint)
    assert pair_columns(ckpt) is None and ckpt.tokenizer.post_processor is None
    with pytest.raises(ValueError, match=r"input 0 is a pair of texts, but this model reads single texts \(it was "
                                         r"trained on synthetic\)"):
        analyze(ckpt, [("w1 m0 a", "w2")])
    rows = predict_rows(ckpt, [(1, "w1 m0 a"), (2, ("w1", "w2"))])
    assert next(rows).row is not None
    with pytest.raises(ValueError, match="row 2 is a pair of texts"):
        next(rows)


def test_explain_and_the_atlas_read_each_tokens_segment(pair_checkpoint):
    ckpt = load_checkpoint(pair_checkpoint)
    [e] = explain(ckpt, [("w1 t2 w3", "w4 t2 w5 w6")])
    assert e.tokens == ["w1", "t2", "w3", SEP, "w4", "t2", "w5", "w6"]
    assert e.segments == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(len(row) == len(e.tokens) for row in e.budget_attribution)
    split = load_dataset("synthetic_pairs").split("test").head(20)
    allocation = allocate(ckpt, split)
    assert allocation.frame["correct"].tolist() == (evaluate_split(ckpt, split).predictions
                                                    == split.labels).tolist()
    profile = attention_profile(ckpt, split.texts[:4], 0, 0)
    assert profile.queries > 0 or profile.inputs == 0


# --------------------------------------------------------------------------- the command


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_pairs_given_and_from_files(capsys, pair_checkpoint, tmp_path):
    ckpt = load_checkpoint(pair_checkpoint)
    pairs = [("w1 t2 w3", "w4 t2 w5"), ("w7 t1", "w8 w9 t3")]
    code, out, _ = run(capsys, "predict", "--checkpoint", str(pair_checkpoint), "--json",
                       *(arg for p in pairs for arg in ("--pair", *p)))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [(r["text"], r["text_pair"]) for r in rows] == pairs
    assert [r["label"] for r in rows] == [a.label for a in analyze(ckpt, pairs)]

    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"premise": a, "hypothesis": b}) + "\n" for a, b in pairs))
    pd.DataFrame({"premise": [a for a, _ in pairs], "hypothesis": [b for _, b in pairs]}).to_csv(
        tmp_path / "in.csv", index=False)
    for name in ("in.jsonl", "in.csv"):
        code, out, _ = run(capsys, "predict", "--checkpoint", str(pair_checkpoint), "--json",
                           "--input-file", str(tmp_path / name))
        assert code == 0 and [json.loads(line)["label"] for line in out.splitlines()] == [r["label"] for r in rows]

    (tmp_path / "gap.csv").write_text("premise,hypothesis\nw1 t2,w3 t2\nw4 t1,\n")
    code, out, err = run(capsys, "predict", "--checkpoint", str(pair_checkpoint), "--input-file",
                         str(tmp_path / "gap.csv"))
    assert code == 2 and "2: error: the line has an empty second text" in out
    (tmp_path / "short.csv").write_text("premise,hypothesis\nw1 t2,w3 t2\nw4 t1\n")
    code, _, err = run(capsys, "predict", "--checkpoint", str(pair_checkpoint), "--input-file",
                       str(tmp_path / "short.csv"))
    assert code == 2 and "row 2 has 1 field(s), no 'hypothesis' field" in err


def test_pair_refusals_are_one_line(capsys, pair_checkpoint, tiny_checkpoint):
    code, out, err = run(capsys, "predict", "--checkpoint", str(tiny_checkpoint), "--pair", "w1 m0", "w2 m1")
    assert code == 2 and not out and err.count("\n") == 1
    assert "--pair: this model reads single texts (it was trained on synthetic)" in err
    code, _, err = run(capsys, "predict", "--checkpoint", str(pair_checkpoint), "w1 t2 w3")
    assert code == 2 and err.count("\n") == 1 and "reads pairs of texts (premise and hypothesis)" in err


def test_a_hugging_face_classifier_takes_pairs(capsys, hf):
    ckpt, _, _ = hf
    code, out, _ = run(capsys, "predict", "--checkpoint", str(ckpt.path), "--json", "--pair", "the vote", "won")
    assert code == 0 and json.loads(out)["label"] == analyze(ckpt, [("the vote", "won")])[0].label


def test_eval_on_a_pair_file(capsys, pair_checkpoint, tmp_path):
    ckpt = load_checkpoint(pair_checkpoint)
    split = load_dataset("synthetic_pairs").split("test").head(90)
    frame = pd.DataFrame({"premise": [a for a, _ in split.texts], "hypothesis": [b for _, b in split.texts],
                          "label": [PAIR_LABELS[y] for y in split.labels]})
    frame.to_csv(tmp_path / "pairs.csv", index=False)
    code, out, _ = run(capsys, "eval", "--checkpoint", str(pair_checkpoint), "--dataset", str(tmp_path / "pairs.csv"),
                       "--json")
    assert code == 0 and json.loads(out)["n"] == 90
    assert json.loads(out)["accuracy"] == pytest.approx(evaluate_split(ckpt, split).accuracy)
    frame.loc[41, "hypothesis"] = ""
    frame.to_csv(tmp_path / "gap.csv", index=False)
    code, _, err = run(capsys, "eval", "--checkpoint", str(pair_checkpoint), "--dataset", str(tmp_path / "gap.csv"))
    assert code == 2 and "data row 42 has no 'hypothesis' text" in err and err.count("\n") == 1


def test_train_on_the_synthetic_pairs_then_predict(capsys, tmp_path):
    out_dir = tmp_path / "pairs"
    quick = ["--set", "d_model=32", "--set", "n_heads=4", "--set", "n_layers=1", "--set", "d_ff=64",
             "--set", "max_len=32", "--set", "vocab_size=200", "--set", "epochs=1", "--set", "max_train=256"]
    code, out, _ = run(capsys, "train", "--dataset", "synthetic_pairs", "--out", str(out_dir), "--quiet", *quick)
    assert code == 0 and json.loads(out)["n"] == 1000
    assert json.loads((out_dir / "config.json").read_text())["pair_columns"] == ["premise", "hypothesis"]
    code, out, _ = run(capsys, "predict", "--checkpoint", str(out_dir), "--json", "--pair", "w1 t2", "w3 t2")
    assert code == 0 and json.loads(out)["label"] in PAIR_LABELS


def test_explain_takes_pairs_given(capsys, pair_checkpoint):
    ckpt = load_checkpoint(pair_checkpoint)
    pair = ("w1 t2 w3", "w4 t2 w5")
    [e] = explain(ckpt, [pair])
    code, out, err = run(capsys, "explain", "--checkpoint", str(pair_checkpoint), "--json", "--pair", *pair)
    [row] = [json.loads(line) for line in out.splitlines()]
    assert code == 0, err
    assert (row["text"], row["text_pair"]) == pair and row["tokens"] == e.tokens
    assert row["segments"] == e.segments == [0, 0, 0, 0, 1, 1, 1]
    assert torch.allclose(torch.tensor(row["budget_attribution"]), torch.tensor(e.budget_attribution), atol=1e-6)
    code, out, _ = run(capsys, "explain", "--checkpoint", str(pair_checkpoint), "--pair", *pair)
    assert code == 0 and out.startswith("'w1 t2 w3' | 'w4 t2 w5' (7 tokens")
    named = {t for line in out.splitlines()[1:] for t in line.split("'")[1::2]}  # the tokens each layer names
    assert named <= {*e.tokens[:4], "²w4", "²t2", "²w5"} and any(t.startswith("²") for t in named)


def test_a_report_on_a_pair_shows_both_texts_and_marks_the_second(capsys, pair_checkpoint, tmp_path):
    ckpt = load_checkpoint(pair_checkpoint)
    pair = ("w1 t2 <b>w3</b>", "w4 t2 w5")
    code, _, err = run(capsys, "report", "--checkpoint", str(pair_checkpoint), "--no-timing", "--head", "0", "0",
                       "--out", str(tmp_path / "r.html"), "--pair", *pair)
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert '<h3>First text: premise</h3>\n<pre class="text">w1 t2 &lt;b&gt;w3&lt;/b&gt;</pre>' in page
    assert '<h3>Second text: hypothesis</h3>\n<pre class="text">w4 t2 w5</pre>' in page
    [a], [e] = analyze(ckpt, [pair]), explain(ckpt, [pair])
    assert f"<p><b>{a.label}</b>" in page
    spans = page.count("<span data-a=")  # the why-this-budget tokens, every layer
    assert spans == len(e.tokens) * ckpt.config.n_layers and sum(e.segments) == 3
    assert page.count('title="²') == sum(e.segments) * ckpt.config.n_layers  # only the second text's marked
    assert "Tokens marked ² belong to the second text (hypothesis)" in page


def test_explain_and_report_refuse_pairs_a_model_cannot_read(capsys, pair_checkpoint, tiny_checkpoint, tmp_path):
    code, out, err = run(capsys, "explain", "--checkpoint", str(tiny_checkpoint), "--pair", "w1 m0", "w2 m1")
    assert code == 2 and not out and err.count("\n") == 1 and "--pair: this model reads single texts" in err
    code, _, err = run(capsys, "explain", "--checkpoint", str(pair_checkpoint), "w1 t2 w3")
    assert code == 2 and err.count("\n") == 1 and "reads pairs of texts (premise and hypothesis)" in err
    report = ["report", "--checkpoint", str(tiny_checkpoint), "--no-timing", "--out", str(tmp_path / "r.html")]
    for extra, said in ((["--pair", "w1 m0", "w2"], "--pair: this model reads single texts"),
                        (["w1 m0", "--pair", "w1", "w2"], "give the TEXT to analyse or --pair FIRST SECOND"),
                        ([], "give the TEXT to analyse or --pair FIRST SECOND")):
        code, _, err = run(capsys, *report, *extra)
        assert code == 2 and err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "r.html").exists()

"""What an error message echoes of the user's input stays one line, printable and short: a path
with control characters, an out-of-range seed, a link's model value, a label set's keys."""

from __future__ import annotations

import json

import pytest

from app.links import link_model
from budgetformer_core.cli import main


@pytest.mark.parametrize("path", ["/tmp/a\x1b[31mred\nline", "/tmp/tab\there\r", "/tmp/bell\x07\x85"])
def test_a_path_with_control_characters_is_escaped_in_one_line(capsys, path):
    assert main(["predict", "--checkpoint", path, "hi"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "\x1b" not in err and "\r" not in err and "\x07" not in err, err
    assert "\\x1b" in err or "\\t" in err or "\\x07" in err


@pytest.mark.parametrize("argv", [
    ["train", "--dataset", "bbc", "--out", "{tmp}/x", "--split-seed", str(2**64)],
    ["eval", "--checkpoint", "bbc-dense", "--ablation", "random-heads", "--seed", "-1"],
    ["bench", "--seed", str(2**40)],
])
def test_a_seed_out_of_range_names_the_option(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "seed" in err.splitlines()[-1] and "Traceback" not in err, err
    assert "4294967295" in err


def test_a_links_model_value_is_cut_in_the_message():
    name, note = link_model({"model": "x" * 5000}, ["bbc-dense"])
    assert name is None and len(note) < 200 and "…" in note


def test_a_huge_id2label_key_is_cut(tmp_path, capsys, hf_classifier):
    import shutil

    folder = shutil.copytree(hf_classifier, tmp_path / "clf")
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"k" * 10_000: "a", "1": "b"}
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["predict", "--checkpoint", str(folder), "hi"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 600, err[:300]


# --------------------------------------------------------------------------- texts that are not text


def test_a_latin1_byte_in_argv_is_refused_in_one_line(capsys):
    text = b"caf\xe9 prices".decode("utf-8", "surrogateescape")  # what Python makes of such an argument
    assert main(["predict", "--checkpoint", "bbc-dense", text]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "U+DCE9" in err and "UTF-8" in err, err


@pytest.mark.parametrize("text, cause", [
    ('"a \\ud800 b"', "U+D800"),
    ('"\\u200b\\u200e\\u0301"', "invisible"),
    ('"\\u2060\\ufeff "', "invisible"),
])
def test_a_jsonl_row_says_why_it_was_not_classified(tmp_path, capsys, text, cause):
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "the market rose"}\n{"text": ' + text + "}\n")
    assert main(["predict", "--checkpoint", "bbc-dense", "--input-file", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("1: ") and "error" not in lines[0]
    assert lines[1].startswith("2: error") and cause in lines[1], out
    assert "Traceback" not in err


@pytest.mark.parametrize("rows, message", [
    ('{"text": null, "label": "tech"}', "no text (an empty or null cell; data row 2)"),
    ('{"text": 5, "label": "tech"}', "a number (data row 2)"),
    ('{"text": {"a": 1}, "label": "tech"}', "an object (data row 2)"),
    ('{"text": ["x"], "label": "tech"}', "a list (data row 2)"),
])
def test_eval_names_rows_whose_text_is_not_text(tmp_path, capsys, rows, message):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "shares rose", "label": "business"}\n' + rows + "\n")
    assert main(["eval", "--checkpoint", "bbc-dense", "--dataset", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err


def test_eval_counts_every_labelled_row(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text("text,label\nshares rose,business\n12345,tech\n")
    assert main(["eval", "--checkpoint", "bbc-dense", "--dataset", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 2 and result["rows"].startswith("all 2 labelled rows")

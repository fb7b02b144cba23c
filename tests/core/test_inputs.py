"""Files of texts (budgetformer_core.io.inputs): CSV, JSONL and plain lines, and their errors."""

from __future__ import annotations

import json

import pytest

from budgetformer_core.io.inputs import read_text_table


def test_csv_jsonl_and_lines_give_numbered_texts():
    csv = b'id,Text\n1,"a, quoted\nline"\n\n2,<b>x</b>\n'
    assert read_text_table(csv, "in.csv") == [(1, "a, quoted\nline"), (2, "<b>x</b>")]
    assert read_text_table(b"only\nfirst\nsecond\n", "one-column.csv") == [(1, "first"), (2, "second")]
    jsonl = '{"text": "héllo"}\n\n"bare string"\n'.encode()
    assert read_text_table(jsonl, "in.jsonl") == [(1, "héllo"), (3, "bare string")]
    assert read_text_table("\ufeffone\r\ntwo\n".encode(), "in.txt") == [(1, "one"), (2, "two")]


@pytest.mark.parametrize(("data", "name", "message"), [
    (b"", "e.csv", "is empty"),
    (b"  \n\n", "e.jsonl", "is empty"),
    (b"text\n", "h.csv", "header but no rows"),
    (b"id,label\n1,2\n", "c.csv", "no 'text' column"),
    (b'id,text\n1,"unclosed\n', "q.csv", None),
    (b'{"text": "ok"}\n{"text": \n', "j.jsonl", "line 2 is not JSON"),
    (b'{"label": 1}\n', "k.jsonl", 'line 1 has no "text" string'),
    (b"ok\n\xff\xfe\n", "u.txt", "line 2 is not valid UTF-8"),
    (b"a\0b", "n.csv", "NUL bytes"),
    (b"x" * 101, "big.txt", "101 bytes; the limit is 100"),
    (b"text\n" + b"a\n" * 11, "rows.csv", "11 texts; the limit is 10"),
])  # fmt: skip
def test_bad_files_say_what_is_wrong(data, name, message):
    if message is None:  # an unclosed quote: csv reads to the end, so the text is the rest of the file
        assert read_text_table(data, name) == [(1, "unclosed\n")]
        return
    with pytest.raises(ValueError, match=message):
        read_text_table(data, name, max_bytes=100, max_rows=10)


def test_predict_reads_a_csv_or_jsonl_input_file(capsys, tiny_checkpoint, tmp_path):
    from budgetformer_core import cli

    (tmp_path / "in.csv").write_text('label,text\n0,w1 m0 a\n1,"  "\n')
    (tmp_path / "in.jsonl").write_text('{"text": "w1 m0 a"}\n{"text": "w2 m1 b"}\n')
    assert cli.main(["predict", "--checkpoint", str(tiny_checkpoint), "--json", "--input-file",
                     str(tmp_path / "in.csv")]) == 2
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["line"] == 1 and "label" in rows[0] and rows[1] == {"line": 2, "error": "blank line"}
    assert cli.main(["predict", "--checkpoint", str(tiny_checkpoint), "--json", "--input-file",
                     str(tmp_path / "in.jsonl")]) == 0
    assert [json.loads(line)["line"] for line in capsys.readouterr().out.splitlines()] == [1, 2]


def test_read_labels_numbers_rows_as_the_texts_are():
    from budgetformer_core.io.inputs import read_labels, read_text_table

    csv_file = b'Text,Label\n"a, b",World\n\n"c", 2 \nd\n'
    assert [n for n, _ in read_text_table(csv_file, "f.csv")] == [1, 2, 3]
    assert read_labels(csv_file, "f.csv") == {1: "World", 2: "2"}  # row 3 has no label field
    jsonl = b'{"text": "a", "label": 1}\n\n{"text": "b"}\n"c"\n'
    assert read_labels(jsonl, "f.jsonl") == {1: "1"}
    assert read_labels(b"text\nx\n", "f.csv") == {} and read_labels(b"x\n", "f.txt") == {}
    assert read_labels(b'{"text": ', "f.jsonl") == {} and read_labels(b"\xff", "f.csv") == {}

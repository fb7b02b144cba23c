"""Files of texts to classify: one text per line, or a CSV / JSONL table with a text column, or
with two (a pair of texts per row).

``budgetformer predict --input-file F`` and the app's "Batch analysis" page read their inputs
here and classify them with :func:`budgetformer_core.analysis.infer.predict_rows`: a numbered input in,
a row out, the same for both.

* ``.csv``: a header row, then a row per text; the texts are the column named ``text`` (any
  case), or the only column. Rows are numbered from 1 (the header is not a row). Two text
  columns of :data:`~budgetformer_core.io.splits.PAIR_COLUMNS` (``premise`` and ``hypothesis``,
  …, any case) make every row a pair ``(first, second)``.
* ``.jsonl``: a JSON value per line, an object with a ``"text"`` string or a bare string;
  blank lines are skipped; rows are numbered by line. When the first object has both keys of a
  pair (``"premise"`` and ``"hypothesis"``, …), every line is a pair of those two strings.
* anything else: one text per line (``\\n`` ends a line; numbered by line), read as it goes.

Every problem is a ``ValueError`` whose message names the file and, where it helps, the line
(a pair's missing text names its row and column; an empty one is the row's own error, as a blank
text is, when it is classified).

Tables of texts go out as CSV through :func:`table_csv`, which keeps a spreadsheet from running
a text as a formula.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .splits import PAIR_COLUMNS

if TYPE_CHECKING:
    from .tokenizer import Text

TABLE_SUFFIXES = (".csv", ".jsonl")

MAX_CHARS = 100_000
"""The longest text accepted: :func:`~budgetformer_core.analysis.infer.analyze` (and so the CLI)
refuses longer ones, the app cuts them with a note. The model reads only its first ``max_len``
tokens anyway."""

MAX_TABLE_BYTES = 256 * 2**20
"""The largest CSV or JSONL file :func:`input_rows` reads (it is read whole)."""


def input_lines(path: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) for each line of ``path``, read as it goes.

    Lines end at ``\\n`` only (a ``\\r`` before it is dropped; U+2028 and NEL stay inside a
    line); bytes that are not UTF-8, or a line longer than any text the model may read (over
    4 bytes a character of :data:`MAX_CHARS`, e.g. ``/dev/zero``'s one
    endless line), stop the reading with an error naming the line: no line is read whole first.
    """
    max_line = 4 * MAX_CHARS + 2  # UTF-8's widest characters, and the line end
    try:
        f = open(path, "rb")
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    with f:
        # a binary file's lines end at b"\n" only
        for number, raw in enumerate(iter(lambda: f.readline(max_line + 1), b""), 1):
            if len(raw) > max_line:
                raise ValueError(f"{path}: line {number} runs over {max_line:,} bytes without a line end; "
                                 f"a text may have at most {MAX_CHARS:,} characters")
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: line {number} is not valid UTF-8 (byte {e.start + 1} of the line)") from None
            yield number, text


def _pair_columns(names: list[str]) -> tuple[str, str] | None:
    """The first pair of :data:`PAIR_COLUMNS` among ``names`` (lower-cased), or None."""
    return next((p for p in PAIR_COLUMNS if set(p) <= set(names)), None)


def _text_column(header: list[str], name: str) -> int:
    lowered = [h.strip().lower() for h in header]
    if "text" in lowered:
        return lowered.index("text")
    if len(header) == 1:
        return 0
    shown = ", ".join(repr(h) for h in header[:10])
    raise ValueError(f"{name}: no 'text' column (its columns: {shown}); name the column of texts 'text'")


def _csv_rows(text: str, name: str) -> list[tuple[int, Text]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise ValueError(f"{name}: the first line should be a header naming the 'text' column")
        lowered = [h.strip().lower() for h in header]
        pair = _pair_columns(lowered)
        columns = [lowered.index(c) for c in pair] if pair else [_text_column(header, name)]
        fields = pair or ("text",)
        rows = []
        for row in reader:
            if not row:  # a blank line between rows is not a row
                continue
            number = len(rows) + 1
            for column, field in zip(columns, fields, strict=True):
                if column >= len(row):
                    raise ValueError(f"{name}: row {number} has {len(row)} field(s), no {field!r} field")
            rows.append((number, tuple(row[c] for c in columns) if pair else row[columns[0]]))
    except csv.Error as e:
        raise ValueError(f"{name}: not a readable CSV file (line {reader.line_num}: {e})") from None
    return rows


def _jsonl_rows(text: str, name: str) -> list[tuple[int, Text]]:
    rows: list[tuple[int, Text]] = []
    pair: tuple[str, str] | None = None
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except RecursionError:
            raise ValueError(f"{name}: line {number} is not JSON (lists or objects nested too deeply)") from None
        except ValueError as e:  # JSONDecodeError, or a number over Python's digit limit
            raise ValueError(f"{name}: line {number} is not JSON ({getattr(e, 'msg', e)})") from None
        if not rows and isinstance(value, dict):  # the first row says whether the file holds pairs
            pair = _pair_columns(list(value))
        if pair:
            missing = next((k for k in pair if not isinstance(value, dict) or not isinstance(value.get(k), str)), None)
            if missing is not None:
                raise ValueError(f"{name}: line {number} has no \"{missing}\" string (each line is a pair: "
                                 f"\"{pair[0]}\" and \"{pair[1]}\")")
            rows.append((number, (value[pair[0]], value[pair[1]])))
            continue
        if isinstance(value, dict):
            value = value.get("text")
        if not isinstance(value, str):
            raise ValueError(f"{name}: line {number} has no \"text\" string")
        rows.append((number, value))
    return rows


def read_text_table(
    data: bytes, name: str, max_bytes: int | None = None, max_rows: int | None = None
) -> list[tuple[int, Text]]:
    """(row number, text) for each text of a file's bytes: CSV, JSONL or one text per line, by
    the suffix of ``name`` (see the module docstring); a text is a pair ``(first, second)`` in a
    table with two text columns.

    Raises:
        ValueError: empty, over ``max_bytes`` or ``max_rows``, not UTF-8, a broken CSV or JSON
            line, or no text column; the message says which and where.
    """
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{name} has {len(data):,} bytes; the limit is {max_bytes:,}: split the file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ValueError(f"{name}: line {line} is not valid UTF-8 (save the file as UTF-8)") from None
    if "\0" in text:
        raise ValueError(f"{name} holds NUL bytes: it is not a text file")
    if not text.strip():
        raise ValueError(f"{name} is empty: it holds no texts")
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(text, name)
    elif suffix == ".jsonl":
        rows = _jsonl_rows(text, name)
    else:
        rows = [(n, line.removesuffix("\r")) for n, line in enumerate(text.removesuffix("\n").split("\n"), 1)]
    if not rows:
        raise ValueError(f"{name} has a header but no rows of text")
    if max_rows is not None and len(rows) > max_rows:
        raise ValueError(f"{name} has {len(rows):,} texts; the limit is {max_rows:,}: split the file")
    return rows


def input_rows(path: str) -> Iterator[tuple[int, Text]]:
    """The numbered texts of ``budgetformer predict --input-file``: a CSV or JSONL table read
    whole (:func:`read_text_table`), any other file line by line as it goes (:func:`input_lines`)."""
    if Path(path).suffix.lower() not in TABLE_SUFFIXES:
        yield from input_lines(path)
        return
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TABLE_BYTES + 1)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    yield from read_text_table(data, path, max_bytes=MAX_TABLE_BYTES)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV injection")."""


def table_csv(frame) -> str:
    """``frame`` (a DataFrame) as CSV text that a spreadsheet opens as data: a text cell starting
    with one of :data:`FORMULA_STARTS` gets a ``'`` in front (numbers are left alone), and rows
    end in CRLF, so that a cell holding a bare carriage return is quoted and stays one cell."""
    def neutral(value):
        return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    texts = frame.select_dtypes(include=["object", "string"]).columns
    safe = frame.assign(**{c: frame[c].map(neutral) for c in texts})
    safe.columns = [neutral(str(c)) for c in frame.columns]
    return safe.to_csv(index=False, lineterminator="\r\n")


def read_labels(data: bytes, name: str) -> dict[int, str]:
    """The ``label`` of each row of a CSV or JSONL table (numbered as :func:`read_text_table`
    numbers its texts), for files that carry the true class; {} when the file has no label
    column, is not a table, or cannot be read (:func:`read_text_table` says why)."""
    suffix = Path(name).suffix.lower()
    try:
        text = data.decode("utf-8-sig")
        if suffix == ".csv":
            reader = csv.reader(io.StringIO(text, newline=""))
            header = [h.strip().lower() for h in next(reader, [])]
            if "label" not in header:
                return {}
            column, rows = header.index("label"), [row for row in reader if row]
            return {n: row[column].strip() for n, row in enumerate(rows, 1) if column < len(row)}
        if suffix == ".jsonl":
            values = {n: json.loads(line) for n, line in enumerate(text.split("\n"), 1) if line.strip()}
            return {n: str(v["label"]).strip() for n, v in values.items()
                    if isinstance(v, dict) and v.get("label") is not None}
    except (UnicodeDecodeError, csv.Error, ValueError):
        return {}
    return {}

"""Text pairs on the pages (no Streamlit here): which models read two texts and what their boxes
are called, the input a page's boxes make, and each token's segment marked for the charts.

A model of ours trained on a pair task names its two columns in config.json (``pair_columns``,
e.g. premise and hypothesis) and reads pairs only; a Hugging Face classifier reads one text or
two (its tokenizer joins them as ``transformers`` does), so its second box may stay empty. The
second text's tokens are marked as the offline report marks them (``SECOND_MARK``, ``marked``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from budgetformer_core.analysis.report import SECOND_MARK, marked  # noqa: F401 (marked: re-exported)

if TYPE_CHECKING:
    from budgetformer_core.io.checkpoint import Checkpoint
    from budgetformer_core.io.tokenizer import Text

PAIR_KEY = "text_pair"
"""Session-state key of Explore's second text box."""

DEFAULT_PAIR = ("A man is playing a guitar on a stage.", "Someone is making music.")
"""The pair a session on a pair model starts from when its dataset's texts are not here."""


@dataclass(frozen=True)
class PairBoxes:
    """Explore's two boxes for a model that reads pairs."""

    first: str
    """The first box's label: the first column's name."""
    second: str
    """The second box's label."""
    required: bool
    """True: the model reads pairs only; False: the second text is optional (a classifier)."""


def pair_boxes(config: dict) -> PairBoxes | None:
    """The boxes of a model whose config.json is ``config`` (as :func:`app.models.checkpoint_config`
    reads it); None for a model of single texts."""
    columns = config.get("pair_columns")
    if isinstance(columns, list) and len(columns) == 2 and all(isinstance(c, str) for c in columns):
        return PairBoxes(f"{columns[0]} (first text)", f"{columns[1]} (second text)", True)
    if "classifier" in config:
        return PairBoxes("Text to classify", "text_pair (optional: a second text, read with the first as a pair)",
                         False)
    return None


def second_part(boxes: PairBoxes | None, second: str | None) -> str | None:
    """The second text the boxes give (``second``: what the second box holds): None for a single
    text — no second box, or an optional one left empty."""
    if boxes is None:
        return None
    if boxes.required:
        return second or ""
    return second if second and second.strip() else None


def box_input(boxes: PairBoxes | None, first: str | None, second: str | None) -> Text:
    """What the boxes hold as one input: the first text, or the pair (:func:`second_part`)."""
    part = second_part(boxes, second)
    return first or "" if part is None else (first or "", part)


def empty_note(boxes: PairBoxes | None) -> str:
    """What the page says while there is nothing to classify."""
    if boxes is not None and boxes.required:
        return ("A text is empty: this model reads pairs, so type both texts on the left to see what it does "
                "with them.")
    return ("The text is empty (or holds only invisible characters). Type something on the left, or pick a "
            "test text, to see what the model does with it.")


def is_empty(text: Text) -> bool:
    """True when there is nothing to classify: no text, or a pair with a blank text (blank: only
    spaces or invisible characters, :func:`budgetformer_core.analysis.infer.is_blank`)."""
    from budgetformer_core.analysis.infer import is_blank

    return any(is_blank(part) for part in (text if isinstance(text, tuple) else (text,)))


def input_texts(text: Text, segments: list[int] | None) -> dict:
    """An input's texts as the Explore export holds them: ``text``, and a pair's second text
    ``text_pair`` with each token's segment (``segments``)."""
    if isinstance(text, tuple):
        return {"text": text[0], "text_pair": text[1], "segments": segments}
    return {"text": text}


def split_pair(value: object) -> tuple[str, str] | None:
    """A pair put in the first box (a test sample of a pair dataset), as its two texts; None for text."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    return None


def tokens_and_segments(ckpt: Checkpoint, text: Text) -> tuple[list[str], list[int]]:
    """The tokens the model reads of ``text`` (its first ``max_len``) and each one's segment
    (0, or 1 for the second text of a pair)."""
    from budgetformer_core.io.tokenizer import read_tokens, reading_prefix

    max_len = ckpt.config.max_len
    return read_tokens(ckpt.tokenizer, reading_prefix(ckpt.tokenizer, text, max_len), max_len)


def segments_caption(boxes: PairBoxes | None, segments: list[int]) -> str | None:
    """The line that says how the second text's tokens are marked; None for a single text."""
    if not any(segments):
        return None
    second = boxes.second.split(" (")[0] if boxes is not None else "the second text"
    return f"Tokens marked {SECOND_MARK} belong to the second text ({second}); the others to the first."

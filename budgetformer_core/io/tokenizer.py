"""WordPiece tokenizers through the ``tokenizers`` library: trained on a training split, or a
pretrained checkpoint's own.

Ours: lower-cased, accents stripped, CJK characters split one per token, punctuation split off
(BERT-style normalisation), saved as ``tokenizer.json`` beside the weights. A pretrained BERT's:
its ``tokenizer.json`` (:func:`load_tokenizer`), or built from its ``vocab.txt``
(:func:`wordpiece_from_vocab`); it adds ``[CLS]`` and ``[SEP]`` around each text. Either kind
goes through :func:`encode` and :func:`pad` (padding id 0, which is ``[PAD]`` in both).

**Pairs.** An input is a :data:`Text`: one string, or a pair ``(first, second)`` (premise and
hypothesis, question and sentence). A pair is encoded as ``transformers`` encodes it with the
same tokenizer: the separators and segment ids of the tokenizer's post-processor (BERT's
``[CLS] a [SEP] b [SEP]``, segments 0 then 1), cut to ``max_len`` by the ``tokenizers``
library's own ``longest_first`` truncation, which keeps the special tokens. Our tokenizers have
no post-processor; one trained for a pair task gets :data:`PAIR_TEMPLATE` (``a [SEP] b``,
:func:`with_pair_template`), saved in its tokenizer.json. A pair's ids come as :class:`PairIds`,
which carry each token's segment into :class:`Batch`'s ``types``. Single texts are encoded as
they always were.

:func:`reading_prefix` cuts a long text (each text of a pair) to the part the model reads
before it is tokenised.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Encoding, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from torch import Tensor

PAD, UNK, SEP = "[PAD]", "[UNK]", "[SEP]"
SPECIAL_TOKENS = [PAD, UNK, SEP]

Text = str | tuple[str, str]
"""One input: a text, or a pair of texts ``(first, second)`` read together."""

PAIR_TEMPLATE = "$A [SEP] $B:1"
"""How a tokenizer of ours joins a pair (:func:`with_pair_template`): the first text, ``[SEP]``
(both segment 0), the second text (segment 1). A single text stays as it is."""


def is_pair(text: object) -> bool:
    """True for a pair of texts (a tuple), False for one text."""
    return isinstance(text, tuple)


def flatten(texts: list[Text]) -> list[str]:
    """Every text of ``texts``, a pair's two in order (what a vocabulary is trained on)."""
    return [part for t in texts for part in (t if is_pair(t) else (t,))]


def train_tokenizer(texts: list[str], vocab_size: int = 8000, min_frequency: int = 2) -> Tokenizer:
    """Train a WordPiece vocabulary of at most ``vocab_size`` entries on ``texts``."""
    tok = bert_pipeline(models.WordPiece(unk_token=UNK, max_input_chars_per_word=50), lowercase=True)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    # the trainer numbers tokens of equal frequency in hash-map order, which changes from run to
    # run: renumber them canonically (specials, then sorted) so the same texts give the same ids
    tok.model = models.WordPiece(dict(zip(canonical_order(tok), range(vocab_size))), unk_token=UNK,
                                 max_input_chars_per_word=50)
    return tok


def canonical_order(tok: Tokenizer) -> list[str]:
    """The tokens of ``tok`` in canonical id order: the special tokens, then the rest sorted."""
    return SPECIAL_TOKENS + sorted(set(tok.get_vocab()) - set(SPECIAL_TOKENS))


def is_canonical(tok: Tokenizer) -> bool:
    """True when ``tok``'s ids are in :func:`canonical_order` (see :func:`train_tokenizer`)."""
    vocab = tok.get_vocab()
    return all(vocab[t] == i for i, t in enumerate(canonical_order(tok)))


def bert_pipeline(model: models.WordPiece, lowercase: bool) -> Tokenizer:
    """A tokenizer around ``model`` that normalises and splits text as BERT does (accents
    stripped when lower-casing)."""
    tok = Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase,
                                                handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def wordpiece_from_vocab(path: str | Path, lowercase: bool = True) -> Tokenizer:
    """A pretrained BERT's tokenizer from its ``vocab.txt`` (one token a line, the line number
    its id): BERT's normalisation, ``[CLS] text [SEP]`` (a pair: ``[CLS] a [SEP] b [SEP]``)."""
    tok = bert_pipeline(models.WordPiece.from_file(str(path), unk_token=UNK), lowercase)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id(SEP)
    if cls is None or sep is None:
        raise ValueError(f"{path}: has no [CLS] or [SEP] token; not a BERT vocabulary")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), (SEP, sep)]
    )
    return tok


def with_pair_template(tok: Tokenizer) -> Tokenizer:
    """``tok`` able to join a pair: itself when it has a post-processor (a pretrained BERT's
    ``[CLS] a [SEP] b [SEP]``), else a copy with :data:`PAIR_TEMPLATE`. Single texts encode as
    before either way; the template is saved with the tokenizer, so a reloaded model joins
    pairs the same way."""
    if tok.post_processor is not None:
        return tok
    copy = Tokenizer.from_str(tok.to_str())
    copy.post_processor = processors.TemplateProcessing(
        single="$A", pair=PAIR_TEMPLATE, special_tokens=[(SEP, tok.token_to_id(SEP))]
    )
    return copy


def load_tokenizer(path: str | Path) -> Tokenizer:
    """A ``tokenizer.json`` (ours, or a pretrained checkpoint's), with any padding or truncation
    it was saved with turned off: :func:`encode` truncates and :func:`pad` pads."""
    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.no_truncation()
    return tok


@dataclass
class Batch:
    """Token ids of a batch, padded to its longest member."""

    ids: Tensor
    """(B, T) token ids, ``[PAD]`` (id 0) after the end."""
    mask: Tensor
    """(B, T) bool, True for real tokens."""
    n_tokens: list[int]
    """Tokens per input before truncation."""
    types: Tensor | None = None
    """(B, T) each token's segment (0: the first text of a pair, 1: the second, 0 after the end);
    None for single texts (every token of type 0)."""

    @property
    def truncated(self) -> list[bool]:
        return [n > self.ids.shape[1] for n in self.n_tokens]


class PairIds(list):
    """The token ids of an encoded pair, with each token's segment (0 or 1) in ``types``.

    A list of ids like a single text's, so whatever takes id lists takes it (evaluation, head
    ranking, timing); :func:`pad` puts its segments in :attr:`Batch.types`, and a slice keeps
    them (a crop of the first ``max_len`` tokens is still a pair).
    """

    def __init__(self, ids: list[int], types: list[int]):
        super().__init__(ids)
        self.types = list(types)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return PairIds(super().__getitem__(index), self.types[index])
        return super().__getitem__(index)


def keep_positions(ids: list[int], positions: list[int]) -> list[int]:
    """The tokens of ``ids`` at ``positions`` (a pair's with their segments)."""
    kept = [ids[i] for i in positions]
    return PairIds(kept, [ids.types[i] for i in positions]) if isinstance(ids, PairIds) else kept


_COPIES: dict[tuple[int, int], tuple[Tokenizer, Tokenizer, Tokenizer]] = {}
_COPIES_LOCK = threading.Lock()


def _copies(tok: Tokenizer, max_len: int) -> tuple[Tokenizer, Tokenizer]:
    """Two copies of ``tok``: one that cuts at ``max_len`` (:func:`truncating`), one that cuts
    nothing (a pair's full length). ``tok`` itself is never changed: the app encodes with one
    tokenizer from several threads. Each copy is made once and only read afterwards; the cache
    holds ``tok`` too, so its id cannot be taken by another tokenizer while the entry lives."""
    key = (id(tok), max_len)
    with _COPIES_LOCK:
        entry = _COPIES.get(key)
        if entry is None or entry[0] is not tok:
            cut, whole = Tokenizer.from_str(tok.to_str()), Tokenizer.from_str(tok.to_str())
            for copy in (cut, whole):
                copy.no_padding()
                copy.no_truncation()
            cut.enable_truncation(max_len, strategy="longest_first")
            if len(_COPIES) >= 32:  # a few models at a time: drop the oldest
                _COPIES.pop(next(iter(_COPIES)))
            entry = _COPIES[key] = (tok, cut, whole)
    return entry[1], entry[2]


def truncating(tok: Tokenizer, max_len: int) -> Tokenizer:
    """A copy of ``tok`` that cuts what it encodes to ``max_len`` tokens with the library's
    ``longest_first`` truncation (tokens come off the longer text of a pair, the special tokens
    stay), as ``transformers`` does with ``truncation="longest_first"`` (``tok`` is left as it is)."""
    return _copies(tok, max_len)[0]


def _encode_pairs(tok: Tokenizer, pairs: list[tuple[str, str]], max_len: int) -> tuple[list[PairIds], list[int]]:
    """Pairs as ``transformers`` encodes them (see the module docstring), and their full lengths."""
    truncated, whole = _copies(tok, max_len)
    cut, full = truncated.encode_batch(pairs), whole.encode_batch(pairs)
    unk = tok.token_to_id(UNK)
    # (a max_len too short for the template's special tokens is left uncut by the library: cut here)
    ids = [PairIds(e.ids, e.type_ids)[:max_len] if e.ids else PairIds([unk], [0]) for e in cut]
    return ids, [len(e.ids) for e in full]


def text_length(tok: Tokenizer, enc: Encoding) -> int:
    """The tokens a single text's encoding ``enc`` has before truncation. A tokenizer that
    truncates itself (an imported classifier's, which cuts as ``transformers`` does, keeping the
    special tokens) hands back the rest as overflowing pieces, each with its special tokens."""
    if not enc.overflowing:
        return len(enc.ids)
    specials = tok.post_processor.num_special_tokens_to_add(False) if tok.post_processor else 0
    return len(enc.ids) + sum(len(piece.ids) - specials for piece in enc.overflowing)


def encode(tok: Tokenizer, texts: list[Text], max_len: int) -> tuple[list[list[int]], list[int]]:
    """Token ids per input cut to ``max_len`` (no tokens becomes ``[UNK]``), and full lengths.

    A single text's first ``max_len`` ids; a pair's ids (:class:`PairIds`) with the tokenizer's
    separators, truncated ``longest_first`` (see the module docstring)."""
    pairs = [i for i, t in enumerate(texts) if is_pair(t)]
    if not pairs:
        encs = tok.encode_batch(texts)
        unk = tok.token_to_id(UNK)
        return [e.ids[:max_len] or [unk] for e in encs], [text_length(tok, e) for e in encs]
    ids: list[list[int]] = [[] for _ in texts]
    n_tokens = [0] * len(texts)
    singles = [i for i, t in enumerate(texts) if not is_pair(t)]
    for rows, (got, lengths) in ((singles, encode(tok, [texts[i] for i in singles], max_len)),
                                 (pairs, _encode_pairs(tok, [texts[i] for i in pairs], max_len))):
        for i, x, n in zip(rows, got, lengths, strict=True):
            ids[i], n_tokens[i] = x, n
    return ids, n_tokens


def pad(ids: list[list[int]], n_tokens: list[int] | None = None) -> Batch:
    """Pad id lists to a (B, T) batch with a mask (and the segments of any pair, :class:`PairIds`)."""
    T = max(len(x) for x in ids)
    out = torch.zeros(len(ids), T, dtype=torch.long)
    mask = torch.zeros(len(ids), T, dtype=torch.bool)
    types = torch.zeros(len(ids), T, dtype=torch.long) if any(isinstance(x, PairIds) for x in ids) else None
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = True
        if isinstance(x, PairIds):
            types[i, : len(x)] = torch.tensor(x.types, dtype=torch.long)
    return Batch(out, mask, n_tokens or [len(x) for x in ids], types)


def encode_batch(tok: Tokenizer, texts: list[Text], max_len: int) -> Batch:
    """Tokenise, truncate to ``max_len`` and pad a list of texts or pairs."""
    return pad(*encode(tok, texts, max_len))


def read_tokens(tok: Tokenizer, text: Text, max_len: int) -> tuple[list[str], list[int]]:
    """The tokens the model reads of ``text`` (as :func:`encode` cuts it) and each one's segment
    (0, or 1 for the second text of a pair)."""
    if is_pair(text):
        e = truncating(tok, max_len).encode(*text)
        return (e.tokens[:max_len], e.type_ids[:max_len]) if e.ids else ([UNK], [0])
    tokens = tok.encode(text).tokens[:max_len] or [UNK]  # encode's empty case
    return tokens, [0] * len(tokens)


def reading_prefix(tok: Tokenizer, text: Text, max_len: int, start: int = 4096) -> Text:
    """The shortest cheap prefix of ``text`` whose first ``max_len`` tokens are the text's own
    (of each text of a pair).

    The model reads only ``max_len`` tokens, but tokenising 100,000 characters takes tens of
    milliseconds. A prefix cut at whitespace tokenises exactly like the same words inside the
    full text (the normaliser works per character, the pre-tokeniser splits at whitespace), so
    once a prefix yields more than ``max_len`` tokens the rest of the text cannot change what
    the model reads. Prefixes grow ×4 from ``start`` characters; a short text is returned whole.
    A pair is cut in one text at most: ``longest_first`` truncation reads the lengths only up to
    ``max_len`` and which text is the longer (the odd token of an even split goes to it), so the
    cut text keeps more tokens than the other has; when both texts are long, both stay whole.
    """
    if is_pair(text):
        cut = [reading_prefix(tok, t, max_len, start) for t in text]
        if cut[0] != text[0] and cut[1] != text[1]:
            return text
        for i in (0, 1):
            if cut[i] != text[i]:  # longer than the other text, as the whole text is
                other = len(_copies(tok, max_len)[1].encode(text[1 - i]).ids)
                cut[i] = reading_prefix(tok, text[i], max(max_len, other), start)
        return tuple(cut)
    size = start
    while size < len(text):
        cut = text.rfind(" ", 0, size)
        cut = max(cut, text.rfind("\n", 0, size))
        if cut > 0 and text_length(tok, tok.encode(text[:cut])) > max_len:
            return text[:cut]
        size *= 4
    return text

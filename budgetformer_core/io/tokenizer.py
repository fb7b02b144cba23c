"""WordPiece tokenizers through the ``tokenizers`` library: trained on a training split, or a
pretrained checkpoint's own.

Ours: lower-cased, accents stripped, CJK characters split one per token, punctuation split off
(BERT-style normalisation), saved as ``tokenizer.json`` beside the weights. A pretrained BERT's:
its ``tokenizer.json`` (:func:`load_tokenizer`), or built from its ``vocab.txt``
(:func:`wordpiece_from_vocab`); it adds ``[CLS]`` and ``[SEP]`` around each text. Either kind
goes through :func:`encode` and :func:`pad` (padding id 0, which is ``[PAD]`` in both).

:func:`reading_prefix` cuts a long text to the part the model reads before it is tokenised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from torch import Tensor

PAD, UNK, SEP = "[PAD]", "[UNK]", "[SEP]"
SPECIAL_TOKENS = [PAD, UNK, SEP]


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


def encode(tok: Tokenizer, texts: list[str], max_len: int) -> tuple[list[list[int]], list[int]]:
    """Token ids per text cut to ``max_len`` (no tokens becomes ``[UNK]``), and full lengths."""
    encs = tok.encode_batch(texts)
    unk = tok.token_to_id(UNK)
    return [e.ids[:max_len] or [unk] for e in encs], [len(e.ids) for e in encs]


def pad(ids: list[list[int]], n_tokens: list[int] | None = None) -> Batch:
    """Pad id lists to a (B, T) batch with a mask."""
    T = max(len(x) for x in ids)
    out = torch.zeros(len(ids), T, dtype=torch.long)
    mask = torch.zeros(len(ids), T, dtype=torch.bool)
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = True
    return Batch(out, mask, n_tokens or [len(x) for x in ids])


def encode_batch(tok: Tokenizer, texts: list[str], max_len: int) -> Batch:
    """Tokenise, truncate to ``max_len`` and pad a list of texts."""
    return pad(*encode(tok, texts, max_len))


def reading_prefix(tok: Tokenizer, text: str, max_len: int, start: int = 4096) -> str:
    """The shortest cheap prefix of ``text`` whose first ``max_len`` tokens are the text's own.

    The model reads only ``max_len`` tokens, but tokenising 100,000 characters takes tens of
    milliseconds. A prefix cut at whitespace tokenises exactly like the same words inside the
    full text (the normaliser works per character, the pre-tokeniser splits at whitespace), so
    once a prefix yields more than ``max_len`` tokens the rest of the text cannot change what
    the model reads. Prefixes grow ×4 from ``start`` characters; a short text is returned whole.
    """
    size = start
    while size < len(text):
        cut = text.rfind(" ", 0, size)
        cut = max(cut, text.rfind("\n", 0, size))
        if cut > 0 and len(tok.encode(text[:cut]).ids) > max_len:
            return text[:cut]
        size *= 4
    return text

"""Sequence tasks generated in code, whose every input needs a known number of heads.

* ``synthetic`` — a cue-counting task that needs exactly ``n_cues`` heads (:func:`make_synthetic`);
* ``synthetic_var`` — a cue task needing 1 … 4 heads per sequence (an anchor word and the slots
  after it), each split carrying every example's need in ``needed_heads``
  (:func:`make_synthetic_var`);
* ``synthetic_pairs`` — a text-pair task: does the second text mention the first's topic word
  (:func:`make_synthetic_pairs`), for training a pair model in seconds.
"""

from __future__ import annotations

import functools
import random

from .splits import LazySplits, Split, TextDataset

SYNTH_CUES = 2
SYNTH_VOCAB = 40
SYNTH_VAR_CUES = 4  # cue types of synthetic_var; each sequence plants 1 … 4 of them
PAIR_LABELS = ["same", "other", "none"]
"""synthetic_pairs' classes: the second text names the first's topic, another topic, or none."""
PAIR_COLUMNS = ("premise", "hypothesis")
"""synthetic_pairs' two texts, named as a pair file's columns."""
PAIR_TOPICS = 6


def _plant(
    rng: random.Random, cues: list[int], bits: list[int], n_values: int, length: int, noise_vocab: int
) -> list[str]:
    """``length`` words: noise with the spans of ``cues`` planted in this order at random gaps.

    Cue i's span is the marker ``m{i}`` and ``n_values`` value words ``a`` / ``b``: the one at
    offset ``i + 1`` after the marker spells ``bits[i]``, the others are random distractors.
    """
    free = length - len(cues) * (n_values + 1)  # noise words around the cues
    # random gaps between the spans (stars and bars)
    cuts = sorted(rng.randrange(free + 1) for _ in cues)
    gaps = [b - a for a, b in zip([0, *cuts], [*cuts, free])]
    words: list[str] = []
    for gap, cue in zip(gaps, cues):
        words += [f"w{rng.randrange(noise_vocab)}" for _ in range(gap)]
        values = [rng.choice("ab") for _ in range(n_values)]
        values[cue] = "b" if bits[cue] else "a"
        words += [f"m{cue}", *values]
    words += [f"w{rng.randrange(noise_vocab)}" for _ in range(gaps[-1])]
    return words


def _bits_label(bits: list[int]) -> int:
    return sum(bit << i for i, bit in enumerate(bits))  # cue 0 is the least significant bit


def make_synthetic(
    n: int, seed: int, n_cues: int = SYNTH_CUES, length: int = 32, noise_vocab: int = SYNTH_VOCAB
) -> Split:
    """A sequence task that needs exactly ``n_cues`` attention heads (one per cue) to solve.

    Each sequence is ``length`` noise words (``w0`` … ``w{noise_vocab-1}``) into which ``n_cues``
    cues are planted at random, non-overlapping places. Cue i is the marker ``m{i}`` followed by
    ``n_cues`` value words ``a`` / ``b``: the one at offset ``i + 1`` after the marker is the
    cue's value, the others are random distractors. The label is the binary number spelt by the
    cue values (cue 0 is the least significant bit), so there are ``2 ** n_cues`` classes.

    Reading cue i means looking exactly ``i + 1`` words back from a value word (or forward from
    the marker). One head of a one-layer model reads one relative offset sharply; a head that
    spreads over two offsets sees a distractor as often as a value. So a one-layer model with
    ``h`` heads reads at most ``h`` cues and is at best ``2 ** -(n_cues - h)`` accurate: the
    number of heads the task needs is ``n_cues``, known and controllable. Bag-of-words models
    fail (every cue uses the same value words).
    """
    if length < n_cues * (n_cues + 1):
        raise ValueError(f"length {length} is too short for {n_cues} cues")
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        bits = [rng.randrange(2) for _ in range(n_cues)]
        order = rng.sample(range(n_cues), n_cues)  # the cues' places in the sequence
        texts.append(" ".join(_plant(rng, order, bits, n_cues, length, noise_vocab)))
        labels.append(_bits_label(bits))
    return Split(texts, labels, [n_cues] * n)


def make_synthetic_var(n: int, seed: int, n_cues: int = SYNTH_VAR_CUES, slot_len: int = 15) -> Split:
    """A cue task whose every sequence needs its own, known number of heads, 1 … ``n_cues``.

    Each sequence draws its need k uniformly from 1 … ``n_cues`` and a random k of the
    ``n_cues`` slots. It starts with an *anchor* word ``q{mask}`` (``mask`` the slots in use, e.g.
    ``q0110``), followed by the ``n_cues`` slots, each ``slot_len`` words of ``a`` / ``b`` drawn
    at random, slot j at positions ``1 + j·slot_len`` … ``(j + 1)·slot_len``. Every slot is
    filled whether it is in use or not, so every sequence has the same ``1 + n_cues·slot_len``
    words, the same layout and the same mix of words; only the anchor tells which slots count.
    Bit j of the label is 1 when slot j is in use and holds more ``b`` than ``a`` (``slot_len``
    is odd, so there is always a majority); slot 0 is the least significant bit, so there are
    ``2 ** n_cues`` classes.

    Meant for one-layer models with heads of width 1 that classify the first token
    (``--set head_dim=1 --set pooling=first``): the anchor's query reaches the classifier
    alone, a head passes on one number, and reading a slot's majority means averaging its
    ``slot_len`` letters — one head reads one slot. So a model with h heads reads at most h slots
    (dense models with fewer heads than k fail on those inputs: docs/results.md),
    an input with k slots in use needs k heads, and *which* heads follows from its mask, which the
    anchor alone tells the budget networks. The split's ``needed_heads`` holds every k.
    Every slot is filled whether in use or not, so the length, layout and mix of words are the
    same for every k: only the anchor tells the need.
    """
    if slot_len < 1 or slot_len % 2 == 0:
        raise ValueError(f"slot_len must be odd (a slot's bit is its majority letter), got {slot_len}")
    rng = random.Random(seed)
    texts, labels, needs = [], [], []
    for _ in range(n):
        k = rng.randint(1, n_cues)
        used = set(rng.sample(range(n_cues), k))
        slots = [[rng.choice("ab") for _ in range(slot_len)] for _ in range(n_cues)]
        mask = "".join("1" if j in used else "0" for j in range(n_cues))
        texts.append(" ".join([f"q{mask}", *(word for slot in slots for word in slot)]))
        labels.append(_bits_label([int(j in used and slot.count("b") > slot_len // 2) for j, slot in enumerate(slots)]))
        needs.append(k)
    return Split(texts, labels, needs)


def make_synthetic_pairs(n: int, seed: int, topics: int = PAIR_TOPICS, noise_vocab: int = 20) -> Split:
    """A text-pair task: does the second text mention the first's topic word?

    The first text is 4 … 8 noise words (``w0`` … ``w{noise_vocab-1}``) with one topic word
    ``t{i}`` (of ``topics``) among them; the second is 4 … 8 noise words with the same topic word
    (label ``same``), another one (``other``) or none (``none``), each a third of the time. A
    model must compare the two texts, and know which text a topic word is in (the second text's
    has to be found): what the segment of each token tells it. Deterministic by ``seed``.
    """
    rng = random.Random(seed)

    def text(topic: int | None) -> str:
        words = [f"w{rng.randrange(noise_vocab)}" for _ in range(rng.randint(4, 8))]
        if topic is not None:
            words.insert(rng.randrange(len(words) + 1), f"t{topic}")
        return " ".join(words)

    texts, labels = [], []
    for _ in range(n):
        topic, label = rng.randrange(topics), rng.randrange(len(PAIR_LABELS))
        other = (topic + rng.randrange(1, topics)) % topics
        texts.append((text(topic), text([topic, other, None][label])))
        labels.append(label)
    return Split(texts, labels)


def load_synthetic_pairs(seed: int = 0, n_train: int = 4000, n_val: int = 500, n_test: int = 1000) -> TextDataset:
    """The synthetic pair task (:func:`make_synthetic_pairs`) with fixed seeds per split."""
    sizes = {"train": n_train, "validation": n_val, "test": n_test}
    makers = {split: functools.partial(make_synthetic_pairs, n, seed * 3 + k + 1)
              for k, (split, n) in enumerate(sizes.items())}
    return TextDataset("synthetic_pairs", list(PAIR_LABELS), LazySplits(makers), pair_columns=PAIR_COLUMNS)


def _cue_dataset(name: str, make, n_cues: int, seed: int, sizes: dict[str, int]) -> TextDataset:
    """A generated cue task, split k made with seed ``seed * 3 + k + 1``; labels named by their bits."""
    names = [format(i, f"0{n_cues}b")[::-1] for i in range(2**n_cues)]  # cue 0's bit first
    makers = {split: functools.partial(make, n, seed * 3 + k + 1) for k, (split, n) in enumerate(sizes.items())}
    return TextDataset(name, names, LazySplits(makers))


def load_synthetic(seed: int = 0, n_train: int = 32000, n_val: int = 1000, n_test: int = 2000) -> TextDataset:
    """The synthetic cue task with fixed seeds per split."""
    sizes = {"train": n_train, "validation": n_val, "test": n_test}
    return _cue_dataset("synthetic", make_synthetic, SYNTH_CUES, seed, sizes)


def load_synthetic_var(
    seed: int = 0, n_train: int = 32000, n_val: int = 1000, n_test: int = 2000
) -> TextDataset:
    """The variable-need cue task (:func:`make_synthetic_var`) with fixed seeds per split."""
    sizes = {"train": n_train, "validation": n_val, "test": n_test}
    return _cue_dataset("synthetic_var", make_synthetic_var, SYNTH_VAR_CUES, seed, sizes)

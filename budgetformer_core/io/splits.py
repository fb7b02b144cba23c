"""A classification dataset as the engine sees it: label names and train / validation / test
splits of texts (strings, or pairs of strings for a pair task) and integer labels
(:class:`TextDataset`, :class:`Split`), whatever the source (:mod:`budgetformer_core.io.data`
for BBC News and any dataset by name, :mod:`budgetformer_core.io.hub` for files and the hub,
:mod:`budgetformer_core.io.synthetic` for the generated tasks)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tokenizer import Text

SEP = "[SEP]"
SPLITS = ("train", "validation", "test")
PAIR_COLUMNS = (("premise", "hypothesis"), ("sentence1", "sentence2"), ("question", "sentence"),
                ("text", "text_pair"))
"""The two text columns of a pair task, first and second, in the order a file's columns are
looked for them (:mod:`budgetformer_core.io.hub`, :mod:`budgetformer_core.io.inputs`)."""


@dataclass
class Split:
    """One split: parallel lists of texts (or pairs of texts) and integer labels."""

    texts: list[Text]
    labels: list[int]
    needed_heads: list[int] | None = None
    """Heads each example is built to need (a synthetic task with known needs), else ``None``."""

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")
        if self.needed_heads is not None and len(self.needed_heads) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.needed_heads)} needed_heads")

    def __len__(self) -> int:
        return len(self.texts)

    def take(self, ids) -> Split:
        """The rows ``ids``, in that order, every per-example field kept."""
        ids = list(ids)
        needs = None if self.needed_heads is None else [self.needed_heads[i] for i in ids]
        return Split([self.texts[i] for i in ids], [self.labels[i] for i in ids], needs)

    def head(self, n: int) -> Split:
        """The first ``n`` rows (for quick runs and tests)."""
        return self.take(range(min(n, len(self))))


@dataclass
class TextDataset:
    """A classification dataset: label names and its splits.

    A task whose per-input needs are known (``synthetic_var``) gives every split a
    ``needed_heads`` list; :attr:`has_needed_heads` tells whether this dataset does.
    """

    name: str
    label_names: list[str]
    splits: Mapping[str, Split] = field(default_factory=dict)
    split_seed: int = 0
    """Seed of the train/validation/test split (recorded with checkpoints)."""
    pair_columns: tuple[str, str] | None = None
    """A pair task's two text columns (e.g. premise, hypothesis): every text is a pair
    ``(first, second)``. None: single texts."""

    @property
    def n_classes(self) -> int:
        return len(self.label_names)

    @property
    def has_needed_heads(self) -> bool:
        return bool(self.splits) and all(s.needed_heads is not None for s in self.splits.values())

    def split(self, name: str) -> Split:
        if name not in self.splits:
            raise ValueError(
                f"dataset {self.name!r} has no split {name!r}; it has {sorted(self.splits)}"
            )
        return self.splits[name]


class LazySplits(Mapping[str, Split]):
    """Splits made on first use, each by its own maker: a generated task's test split without
    its 32,000 training sequences (each split has its own seed, so none needs another made)."""

    def __init__(self, makers: dict[str, Callable[[], Split]]):
        self._makers, self._made = makers, {}

    def __getitem__(self, name: str) -> Split:
        if name not in self._made:
            self._made[name] = self._makers[name]()  # KeyError for a split it does not have
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def stratified_splits(
    texts: list[Text], labels: list[int], seed: int, val_frac: float = 0.1, test_frac: float = 0.2
) -> dict[str, Split]:
    """Deterministic stratified train/validation/test split.

    Pairs are split by their first text: every pair of one premise lands on the same side (SNLI
    repeats each premise with three hypotheses; a premise seen in training must not be tested
    on). Grouped splits are made by scikit-learn's ``StratifiedGroupKFold``: one fold of
    ``round(1 / test_frac)`` is the test split, then one fold of the rest is validation, so the
    fractions are met as nearly as whole groups allow.
    """
    from sklearn.model_selection import StratifiedGroupKFold, train_test_split  # slow import, only when splitting

    idx = list(range(len(texts)))
    whole = Split(texts, labels)
    if texts and all(isinstance(t, tuple) for t in texts):
        def fold(rows: list[int], frac: float) -> tuple[list[int], list[int]]:
            folds = StratifiedGroupKFold(n_splits=round(1 / frac), shuffle=True, random_state=seed)
            keep, out = next(folds.split(rows, [labels[i] for i in rows], [texts[i][0] for i in rows]))
            return [rows[i] for i in keep], [rows[i] for i in out]

        rest, test = fold(idx, test_frac)
        train, val = fold(rest, val_frac / (1 - test_frac))
    else:
        rest, test = train_test_split(idx, test_size=test_frac, stratify=labels, random_state=seed)
        rest_labels = [labels[i] for i in rest]
        train, val = train_test_split(
            rest, test_size=val_frac / (1 - test_frac), stratify=rest_labels, random_state=seed
        )
    return {"train": whole.take(sorted(train)), "validation": whole.take(sorted(val)),
            "test": whole.take(sorted(test))}


def stratified_sample(labels: Sequence[int], n: int, seed: int = 0) -> list[int]:
    """Indices of ``n`` rows drawn in each label's share of ``labels``, in the rows' order.

    A split kept in label order (BBC's test split: its first 50 rows are all business) is why its
    first rows are no sample. Each label gets ⌊n · its share⌋ rows and the rows left over go to
    the largest remainders (ties to the lower label), so the sample has exactly
    ``min(n, len(labels))`` rows whatever the labels (a label with one row, fewer rows asked than
    there are labels); within a label the rows are a random choice made by ``seed``, the same rows
    for the same seed.
    """
    n = max(0, min(n, len(labels)))
    rows: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        rows.setdefault(label, []).append(i)
    share = {label: len(rows[label]) * n / len(labels) for label in sorted(rows)}
    quota = {label: int(s) for label, s in share.items()}
    for label in sorted(share, key=lambda c: quota[c] - share[c])[: n - sum(quota.values())]:
        quota[label] += 1  # largest remainders first; sorted() is stable: ties go to the lower label
    rng = random.Random(seed)
    return sorted(i for label in sorted(rows) for i in rng.sample(rows[label], quota[label]))

"""A stratified sample of a split's rows (:func:`budgetformer_core.io.splits.stratified_sample`):
each label in its share, exactly the size asked for, the same rows for the same seed."""

from __future__ import annotations

from collections import Counter

from budgetformer_core.io.splits import stratified_sample

IN_CLASS_ORDER = [0] * 50 + [1] * 30 + [2] * 20
"""A split kept in label order, as BBC's test split is: its first rows are all one class."""


def test_a_sample_takes_every_label_in_its_share():
    picked = stratified_sample(IN_CLASS_ORDER, 10, seed=0)
    assert Counter(IN_CLASS_ORDER[i] for i in picked) == {0: 5, 1: 3, 2: 2}
    assert picked == sorted(set(picked))  # distinct rows, in the split's order
    # shares that do not divide evenly: the rows left over go to the largest remainders
    assert Counter(IN_CLASS_ORDER[i] for i in stratified_sample(IN_CLASS_ORDER, 7, seed=0)) == {0: 4, 1: 2, 2: 1}


def test_a_sample_is_the_same_for_a_seed_and_another_for_another_seed():
    assert stratified_sample(IN_CLASS_ORDER, 10, seed=3) == stratified_sample(IN_CLASS_ORDER, 10, seed=3)
    assert stratified_sample(IN_CLASS_ORDER, 10, seed=3) != stratified_sample(IN_CLASS_ORDER, 10, seed=4)


def test_a_sample_is_as_large_as_asked_whatever_the_labels():
    assert stratified_sample(IN_CLASS_ORDER, 500) == list(range(100))  # more than there are: all rows
    assert len(stratified_sample(IN_CLASS_ORDER, 2)) == 2  # fewer than the labels: the largest shares
    assert Counter(IN_CLASS_ORDER[i] for i in stratified_sample(IN_CLASS_ORDER, 2)) == {0: 1, 1: 1}
    rare = [0] * 9 + [1]  # a label with a single row still gets its share
    assert Counter(rare[i] for i in stratified_sample(rare, 5)) == {0: 5}
    assert Counter(rare[i] for i in stratified_sample(rare, 9)) == {0: 8, 1: 1}
    assert stratified_sample(IN_CLASS_ORDER, 0) == [] and stratified_sample([], 5) == []

"""The Head atlas's logic without a server: the shipped relevance read back, and the slices the
usage tab opens on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app.logic.atlas import Slice, default_slices, read_relevance


def frame(labels: list[int], correct: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"label": labels, "correct": correct})


def test_the_slices_open_on_right_against_wrong_or_on_two_classes():
    assert default_slices(frame([0, 1, 2], [True, False, True])) == (Slice(outcome="right"), Slice(outcome="wrong"))
    # none wrong (synthetic_var's 100 %): the two largest classes, the smaller index first
    assert default_slices(frame([2, 2, 0, 1, 1, 1], [True] * 6)) == (Slice(label=1), Slice(label=2))
    assert default_slices(frame([3, 3], [False, False])) == (Slice(), Slice())  # one class, all wrong: no contrast


def test_the_shipped_relevance_is_read_back_and_checked(tmp_path):
    p = np.random.default_rng(0).dirichlet(np.ones(8), size=(5, 2)).astype(np.float16)  # (N, L, H)
    np.savez_compressed(tmp_path / "p.npz", relevance=p)
    read = read_relevance(tmp_path / "p.npz")
    assert read.dtype == np.float32 and read.shape == (5, 2, 8)
    np.testing.assert_array_equal(read, p.astype(np.float32))
    np.savez_compressed(tmp_path / "flat.npz", relevance=p.reshape(5, 16))
    with pytest.raises(ValueError, match="not \\(inputs, layers, heads\\)"):
        read_relevance(tmp_path / "flat.npz")
    np.savez_compressed(tmp_path / "big.npz", relevance=p * 3)
    with pytest.raises(ValueError, match="outside"):
        read_relevance(tmp_path / "big.npz")
    np.savez_compressed(tmp_path / "other.npz", weights=p)
    np.save(tmp_path / "plain.npy", p)
    (tmp_path / "junk.npz").write_bytes(b"not an array")
    cut = (tmp_path / "p.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(cut[: len(cut) // 2])
    for bad in ("other.npz", "plain.npy", "junk.npz", "cut.npz", "missing.npz"):
        with pytest.raises(ValueError, match="not a readable"):
            read_relevance(tmp_path / bad)

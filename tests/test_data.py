"""The digits data set, mini-batches and the train/test split."""

from __future__ import annotations

import numpy as np
import pytest

from leanpass import data
from leanpass.datasets import DIGITS_PATH, load_digits


def test_digits_are_the_real_uci_set():
    x, y = load_digits()
    assert x.shape == (1797, 64) and x.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 == x.min() and x.max() == 1.0
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    raw, _ = load_digits(dtype=np.uint8, scale=False, flatten=False)
    assert raw.shape == (1797, 8, 8) and raw.max() == 16
    # the first image is a zero, as in the UCI file
    assert raw[0].tolist()[1] == [0, 0, 13, 15, 10, 15, 5, 0] and y[0] == 0
    x[0, 0] = 99.0  # the caller's copy: the next load is unaffected
    assert load_digits()[0][0, 0] == 0.0
    with pytest.raises(ValueError, match="scale=True needs a float dtype"):
        load_digits(dtype=np.uint8)


def test_the_data_file_and_its_licence_ship_with_the_package():
    assert DIGITS_PATH.stat().st_size < 100_000
    licence = (DIGITS_PATH.parent / "DIGITS_LICENSE.txt").read_text()
    assert "Alpaydin" in licence and "Kaynak" in licence and "CC BY 4.0" in licence
    with np.load(DIGITS_PATH, allow_pickle=False) as f:
        assert sorted(f.files) == ["images", "labels"]


def test_batches_cover_every_row_once_and_keep_rows_aligned():
    x = np.arange(23)
    y = x * 10
    seen = []
    for xb, yb in data.batches(x, y, batch_size=5, rng=np.random.default_rng(0)):
        np.testing.assert_array_equal(yb, xb * 10)
        seen += xb.tolist()
    assert sorted(seen) == list(range(23)) and seen != list(range(23))
    assert [len(b) for (b,) in data.batches(x, batch_size=5, drop_last=True)] == [5, 5, 5, 5]
    assert data.num_batches(23, 5) == 5 and data.num_batches(23, 5, drop_last=True) == 4


def test_batches_are_deterministic_by_seed_and_differ_between_epochs():
    x = np.arange(50)

    def order(rng):
        return np.concatenate([b for (b,) in data.batches(x, batch_size=7, rng=rng)])

    np.testing.assert_array_equal(order(np.random.default_rng(3)), order(np.random.default_rng(3)))
    rng = np.random.default_rng(3)
    assert not np.array_equal(order(rng), order(rng))


def test_split_sizes_determinism_stratification_and_no_overlap():
    x = np.arange(100)
    y = np.repeat([0, 1, 2, 3], 25)
    a = data.train_test_split(x, y, test_size=0.2, rng=7, stratify=y)
    b = data.train_test_split(x, y, test_size=0.2, rng=np.random.default_rng(7), stratify=y)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    x_train, x_test, y_train, y_test = a
    assert len(x_test) == 20 and len(x_train) == 80
    assert np.bincount(y_test).tolist() == [5, 5, 5, 5]
    assert not set(x_train) & set(x_test)
    np.testing.assert_array_equal(y_train, y[x_train])


def test_clear_errors():
    with pytest.raises(ValueError, match="same number of examples"):
        data.train_test_split(np.zeros(3), np.zeros(4), rng=0)
    with pytest.raises(ValueError, match="both parts need"):
        data.train_test_split(np.zeros(3), test_size=3, rng=0)
    with pytest.raises(TypeError, match="np.random.Generator"):
        data.train_test_split(np.zeros(3), rng=None)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        list(data.batches(np.zeros(3), batch_size=0))

"""Produce ``leanpass/datasets/digits.npz`` from the copy of the UCI digits that scikit-learn bundles.

Run once, by a maintainer, with scikit-learn installed (``pip install scikit-learn``):

    python scripts/make_digits.py

The file holds two arrays and nothing else (loadable with ``allow_pickle=False``):
``images``, uint8 of shape (1797, 8, 8) with pixel counts 0..16, and ``labels``, uint8 of
shape (1797,) with the digit 0..9. LeanPass itself never imports scikit-learn.

Source: the test set of "Optical Recognition of Handwritten Digits", UCI Machine Learning
Repository, E. Alpaydin and C. Kaynak (1998), CC BY 4.0; see leanpass/datasets/DIGITS_LICENSE.txt.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "leanpass" / "datasets" / "digits.npz"


def main() -> None:
    from sklearn.datasets import load_digits  # only this script needs scikit-learn

    bunch = load_digits()
    pixels = np.asarray(bunch.data)
    if pixels.shape != (1797, 64) or pixels.min() < 0 or pixels.max() > 16:
        raise SystemExit(f"unexpected data from scikit-learn: shape {pixels.shape}")
    if not np.array_equal(pixels, np.round(pixels)):
        raise SystemExit("unexpected non-integer pixels from scikit-learn")
    images = pixels.astype(np.uint8).reshape(-1, 8, 8)
    labels = np.asarray(bunch.target).astype(np.uint8)
    np.savez_compressed(OUT, images=images, labels=labels)
    digest = hashlib.sha256(OUT.read_bytes()).hexdigest()
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes, sha256 {digest})")
    print("class counts:", np.bincount(labels).tolist())


if __name__ == "__main__":
    main()

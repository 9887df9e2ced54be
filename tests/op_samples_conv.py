"""Sample inputs for the convolution, pooling, padding and normalisation ops, for tests that walk
``functional.OPS``: the same form as ``tests/op_samples.py``.

``SAMPLES[name](rng)`` returns the positional arguments of ``functional.OPS[name]``: float64 arrays
(the differentiable inputs), then the op's constant parameters (strides, paddings, groups, ...).
They are ``leanpass.testing.CONV_SAMPLES``, whose inputs are fixed (``rng`` is not used).

>>> import numpy as np
>>> from leanpass import functional as F
>>> F.OPS["max_pool2d"](*SAMPLES["max_pool2d"](np.random.default_rng(0)))[0].shape
(2, 3, 6, 5)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from leanpass.testing import CONV_SAMPLES


def _ignoring_rng(make: Callable[[], tuple[Any, ...]]) -> Callable[[np.random.Generator], tuple[Any, ...]]:
    return lambda rng: make()


SAMPLES: dict[str, Callable[[np.random.Generator], tuple[Any, ...]]] = {
    **{name: _ignoring_rng(make) for name, make in CONV_SAMPLES.items()},
    # more cases of the same ops: windows that tile the input, constant padding, no affine parameters
    "max_pool2d/tiled": lambda rng: (rng.standard_normal((2, 3, 6, 5)), 2),
    "max_pool2d/padded": lambda rng: (rng.standard_normal((2, 2, 5, 5)), 3, 2, 1, 1),
    "pad/constant": lambda rng: (rng.standard_normal((3, 4)), ((1, 2), (0, 1)), "constant", 2.0),
    "batch_norm/plain": lambda rng: (rng.standard_normal((4, 3, 2)), None, None, 1, 1e-5),
    "layer_norm/plain": lambda rng: (rng.standard_normal((2, 3, 4)), None, None, (3, 4), 1e-5),
    "layer_norm/no_bias": lambda rng: (rng.standard_normal((5, 3)), rng.standard_normal(3), None, (3,), 1e-5),
}

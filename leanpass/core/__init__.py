"""The core: ``Tensor`` and its recording (tensor.py), the reverse pass (engine.py), pytrees (tree.py), the
graph shown and checked (graph.py)."""

from . import engine as _engine  # noqa: F401 (loads the reverse pass, which Tensor.backward runs: set_backward)

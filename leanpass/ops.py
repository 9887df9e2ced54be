"""The ops that plugins and ``register_op`` registered, by name: ``lp.ops.<name>(...)``.

Each is a function of Tensors, arrays and numbers that works under every transform (see
``leanpass.plugin_registry``). The first use loads the plugins (entry-point group ``leanpass.ops``).

>>> import numpy as np, leanpass as lp
>>> _ = lp.plugin_registry.register_op("doc_triple", lambda x: 3 * x)
>>> lp.ops.doc_triple(lp.Tensor([1.0, 2.0]))
Tensor([3., 6.])
>>> "doc_triple" in dir(lp.ops)
True
>>> _ = lp.plugin_registry.unregister_op("doc_triple")
"""

from __future__ import annotations

from typing import Any

from .plugin_registry import get_op, registered_ops


def __getattr__(name: str) -> Any:
    if name == "__all__":  # (the ops registered so far, so that `from leanpass.ops import *` takes them)
        return sorted(registered_ops())
    if name.startswith("_") or name == "pytest_plugins":  # (what import machinery and tools look for)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return get_op(name)
    except KeyError as e:
        raise AttributeError(e.args[0]) from None


def __dir__() -> list[str]:
    return sorted(registered_ops())

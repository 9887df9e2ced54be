"""Error messages the core raises that name functions of the layers above it.

When SciPy code converts a Tensor (``scipy.special.gammaln(t)``, ``scipy.stats.norm.logpdf(t)``), the
message names the SciPy function the user called and the LeanPass function to call instead. These
functions only read the call stack and look names up through ``lp``'s public names (on the error path
only), so the core imports nothing above it.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _leanpass_name(package: str, obj: str | None, func: str) -> str | None:
    """``lp.special.gammaln`` for ``("scipy.special", None, "gammaln")``, if LeanPass has it: looked up as
    the user would, through the public names of ``leanpass`` (which load their module on first use)."""
    module = package.split(".")[1] if package.count(".") >= 1 else ""
    if module not in ("special", "stats", "linalg"):
        return None
    mod = getattr(sys.modules["leanpass"], module)
    target: Any = getattr(mod, obj, None) if obj else mod
    if target is None or not callable(getattr(target, func, None)):
        return None
    return f"lp.{module}.{obj + '.' if obj else ''}{func}"


def _scipy_message(package: str, obj: str | None, func: str) -> str:
    name = f"{package}.{obj + '.' if obj else ''}{func}"
    ours = _leanpass_name(package, obj, func)
    if ours is None:
        return (f"{name} is not differentiable in LeanPass: it cannot see through a Tensor (SciPy turns "
                "it into a constant, and the gradient would silently be 0), and LeanPass has no version of it. "
                "Write it with NumPy operations on the Tensor, or convert after the gradient is taken.")
    return (f"{name} is not differentiable in LeanPass: it cannot see through a Tensor (the gradient "
            f"would silently be 0); use {ours}")


def scipy_ufunc_hint(ufunc: Any) -> str | None:
    """The message for a SciPy ufunc (``scipy.special.gammaln``) called on a Tensor, else None.

    >>> import scipy.special
    >>> print(scipy_ufunc_hint(scipy.special.gammaln))  # doctest: +NORMALIZE_WHITESPACE
    scipy.special.gammaln is not differentiable in LeanPass: it cannot see through a Tensor
    (the gradient would silently be 0); use lp.special.gammaln
    >>> scipy_ufunc_hint(np.exp) is None
    True
    """
    name = getattr(ufunc, "__name__", None)
    if name is None or getattr(np, name, None) is ufunc:
        return None
    scipy_special = sys.modules.get("scipy.special")
    if scipy_special is None or getattr(scipy_special, name, None) is not ufunc:
        return None
    return _scipy_message("scipy.special", None, name)


def _scipy_hint() -> str | None:
    """When SciPy code is converting a Tensor (``np.asarray(t)`` inside ``scipy.stats.norm.logpdf``),
    the message naming the SciPy function the user called and the LeanPass one to call instead.

    For ``Tensor.__array__``'s error path: it looks up the call stack for the SciPy code nearest
    the conversion and takes the outermost frame of that run of ``scipy`` (and NumPy) frames: the
    SciPy function the user's code called, not one further out that called the user's code (an
    objective passed to ``scipy.optimize.minimize``). It returns None when there is none.

    >>> _scipy_hint() is None
    True
    """
    frame: Any = sys._getframe(2)  # (above the caller: the converting __array__, when it is not LeanPass's)
    outer = None
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("scipy."):
            outer = frame
        elif not module.startswith(("numpy", "leanpass")):  # the code that called SciPy (or no SciPy)
            break
        frame = frame.f_back
    if outer is None:
        return None
    module = str(outer.f_globals["__name__"])
    package = ".".join(module.split(".")[:2])  # scipy.stats._distn_infrastructure -> scipy.stats
    func = outer.f_code.co_name
    owner = outer.f_locals.get("self")
    obj = None
    if owner is not None:
        obj = getattr(owner, "name", None) if isinstance(getattr(owner, "name", None), str) else None
        if obj is None:
            cls = type(owner).__name__
            obj = cls.removesuffix("_gen").removesuffix("_frozen")
    return _scipy_message(package, obj, func)

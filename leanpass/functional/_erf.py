"""The error function and the normal cdf in NumPy: ``erf``, ``erfc`` and the exact GELU's ``x Φ(x)`` with
its slope, each in a fixed number of passes over the array (no branch by value), float32 computed in
float32 (but for float32 ``erfc``'s tail, rounded once from float64) and everything else in float64.

The approximations (coefficients fitted for LeanPass by ``benchmarks/erf_fit.py``: least squares against a
60-digit reference on Chebyshev nodes, reweighted towards the minimax fit; their fit errors are below):

- ``|x| < 1/2``: ``erf(x) = x + x S(x**2)``, ``S`` of degree 8 (relative error 4e-18) in float64, 4 (1.4e-9)
  in float32 (the larger term ``x`` exact).
- ``erf``, ``|x| >= 1/2``: ``1 - exp(-x**2) P(x) / Q(x)`` up to 6 (float64; degrees 6 and 7) or 4 (float32;
  2 and 3), where ``erfc`` drops below half an ulp of 1; fitted for the error of ``erf`` (``erfc`` absolute:
  4.8e-19 and 6e-9), all coefficients positive, so that Horner's rule loses nothing to cancellation.
- ``erfc``, float64: ``c + R(|x| - 1) / S(|x| - 1)`` for ``|x|`` in [1/2, 5/4] (degrees 8 and 7, relative error
  2e-18; ``c`` is ``erfc(1)`` rounded, so that the rational is a correction and its rounding errors are damped);
  beyond, ``exp(-h**2 - K) exp((h - |x|) (h + |x|) + R(1/x**2) / S(1/x**2)) / |x|`` (degrees 9 and 9, absolute
  error 8e-18 in the exponent), ``h`` a multiple of 2**-20 next to ``|x|`` and ``K = 9/16``, so that the large
  part of the exponent, ``h**2 + K``, is exact and the fitted part costs only its absolute error (relative
  precision down to the subnormals; ``erfc(x / sqrt(2))`` takes its ``-x**2 / 2`` from ``x`` itself, and its
  ``x / sqrt(2) - 1`` in the middle part to a rounding of its own).
  float32: ``exp(-x**2) P(x) / Q(x)`` (degrees 3 and 4, relative error 7.1e-8) evaluated in float64, where
  ``x**2`` is exact, and rounded to float32 once.
- ``log_erfc_tail``: ``-x**2 + log(t R(t))`` with ``t = 1 / (1 + p x)``, which maps the whole tail into (0, 1):
  ``R`` of degree 22 and ``p = 0.3`` (relative error 5e-18) in float64; in float32 ``R`` of degree 9 with
  ``p = 0.5`` (relative error 1.4e-8).
- The GELU's ``Φ(-|x|) = erfc(|x| / sqrt(2)) / 2`` by the tail's form over the whole line: ``p = 0.3`` and
  degree 24 (relative error 4e-18) in float64; ``p = 0.4`` and degree 6 in float32, fitted for absolute
  error (3.8e-9 in ``Φ``: as PyTorch's float32 GELU, it is accurate to the float32 rounding of ``x Φ(x)``
  near 0 and loses relative precision far in the left tail).

Accuracy (against ``math.erf``/``math.erfc`` in float64, SciPy in float32, over the whole line): ``erf``
within 3 ulps in float64 and 2.2 in float32; ``erfc`` within 3 ulps of the exact value in float64 (4 of
``math.erfc``) and 1.7 in float32.

Both parts run on every element, each on inputs clamped into its own range, and are blended with
0/1 weights (exact: one of the two terms is 0); a masked select would be several times slower. float64
``erfc``'s three parts are the exception: on a plain array the two outer ones run only on their own values
(gathered and scattered by index; the stand-ins of jit and vmap blend them as above, with the same bits).
Temporaries are updated in place, a large array in slices that keep them in the cache.

>>> erf_values(np.array([0.0, 0.5, 3.0]))
array([0.        , 0.52049988, 0.99997791])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._scratch import buffer

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

# erf(x) / x - 1 as a polynomial in x*x for |x| < 1/2 (lowest power first)
_S64 = (0.12837916709551256, -0.37612638903183465, 0.11283791670924812, -0.026866170632715337,
        0.005223977370319446, -0.0008548297523813417, 0.0001205332428644171, -1.484558307451849e-05,
        1.472320876285074e-06)
_S32 = (0.12837916556717452, -0.37612608570696193, 0.11282822767321261, -0.026757181560879247,
        0.00471798467604301)
# erfc(x) exp(x*x) / t as a polynomial in t = 1 / (1 + p x), for x >= 1/2 (log_erfc_tail: x up to inf)
_P64 = 0.3
_R64 = (0.16925687506432688, 0.16925687506432582, 0.16164031568664278, 0.14640719691405185, 0.1245857550019323,
        0.0982324414494795, 0.07020095593478705, 0.04367447926334096, 0.02159377217136097, 0.005657408871035784,
        -0.002028484656427949, -0.008564763767645018, 0.0036855401644426823, -0.014232577388590068,
        0.010115116687995066, 0.02491230133226942, -0.0880548591111933, 0.16093398544832002, -0.18629226228555476,
        0.13747451927952725, -0.06311277827972539, 0.016575969056490558, -0.001917781948067471)
# float64 erfc for x in [1/2, 5/4]: erfc(x) = C + R(x - 1) / S(x - 1) (lowest power first)
_MC64 = 0.15729920705028513
_MR64 = (-2.9229004211432428e-18, -0.4151074974205947, 0.28117705299916385, -0.1709246639193016, 0.025372747780243104,
         -0.001255523719337958, 0.0013667525423060886, -0.0011596946257219803, 0.0002523941080187309)
_MS64 = (1.0, 0.3226403889441919, 0.4010670574932451, 0.06573027600303719, 0.04795910025351914, -0.001425741040875151,
         0.0011782472425305368, -0.0007199632104472248)
# float64 erfc for x >= 5/4: log(x erfcx(x)) + K = R(1/x**2) / S(1/x**2), K exactly 9/16
_K64 = 0.5625
_TR64 = (-0.009864942924700094, -0.8592829548874927, -22.568965197240896, -265.29862482281027, -1575.5621732368602,
         -4858.152644555834, -7544.671451846263, -5390.289723133554, -1461.9029658014665, -93.84731506830076)
_TS64 = (1.0, 36.420175730356995, 505.2109647353716, 3437.8390105530107, 12343.444408196921, 23475.72951022634,
         22588.179642167026, 9877.834415201993, 1569.7588978909791, 50.8801035345538)
_P32 = 0.5
_R32 = (0.2820947879360022, 0.2820955801442248, 0.24680761222634462, 0.1765794665752253, 0.08292420651631033,
        -0.008791491718128907, -0.014387525670929763, -0.19187624909453524, 0.20892373120237226,
        -0.0644435451656145)
# float32's erfc(x) exp(x*x) = P(x) / Q(x) for x in [1/2, 10.1], evaluated in float64
_PC32 = (0.9998404643751175, 1.1013255269685398, 0.5474724988800965, 0.12518460680406385)
_QC32 = (1.0, 2.228385539932038, 2.0668433032031697, 0.9700852770351486, 0.22189270825181265)
# the same for erf, which needs erfc only to the absolute precision of erf and only up to where it is below half
# an ulp of 1 (6 in float64, 4 in float32)
_PE64 = (1.000000000051345, 1.494597926211158, 1.1149928783167609, 0.4988862244482275, 0.13939785009403963,
         0.022996605046355163, 0.0017662776124644085)
_QE64 = (1.0, 2.6229770941857082, 3.0747055801158205, 2.097595665189504, 0.9047172010591367, 0.24863368960441756,
         0.04076089932906119, 0.003130631471505727)
_PE32 = (1.000116348677134, 0.6883489826621216, 0.20021339597422264)
_QE32 = (1.0, 1.817806838961564, 1.2469545018480177, 0.3523370460869351)
# the same form from x = 0 (the GELU's Φ): float64 relative, float32 absolute
_G64 = (0.16925687506432688, 0.16925687506432788, 0.1616403156862104, 0.14640719695010598, 0.1245857534077781,
        0.09823248468558918, 0.07020017097937574, 0.04368458362316205, 0.02149777867088297, 0.006350165246081626,
        -0.00590729898539228, 0.008547061381090418, -0.05645061029870991, 0.15534426544568825, -0.3750955950680238,
        0.7303408255870277, -1.1267855088937693, 1.3829386030079591, -1.3222176591968235, 0.9574126377618571,
        -0.510617323484971, 0.19372683429913043, -0.049399000285836894, 0.007577406780269416,
        -0.0005268374273364346)
_PG32 = 0.4
_G32 = (0.24054592375570008, 0.09701520978499006, 0.6698850181858129, -0.7033105360426769, 1.0155626784363696,
        -0.35003128630382185, 0.030332984639710917)


class _Table:
    """The constants of one float dtype, as NumPy scalars of that dtype (so no NumPy widens an operand)."""

    def __init__(self, dtype: Any, s: tuple[float, ...], p: float, r: tuple[float, ...], erf: tuple[Any, ...],
                 far_erf: float, pg: float, g: tuple[float, ...], far: float,
                 erfc: tuple[Any, ...] = ((), (), 0.0)) -> None:
        self.dtype = c = np.dtype(dtype).type
        self.s = tuple(c(v) for v in reversed(s))  # (highest power first, for Horner)
        self.r = tuple(c(v) for v in reversed(r))
        # erf's tail: -P (see _erf_kernel) and Q, up to far_erf; float32's erfc tail: P and Q in float64
        self.pe, self.qe = tuple(c(-v) for v in reversed(erf[0])), tuple(c(v) for v in reversed(erf[1]))
        self.far_erf = c(far_erf)
        self.pc = tuple(np.float64(v) for v in reversed(erfc[0]))
        self.qc = tuple(np.float64(v) for v in reversed(erfc[1]))
        self.far_c, self.wide = c(erfc[2]), bool(erfc[0])
        self.g = tuple(c(v * math.sqrt(math.pi / 2)) for v in reversed(g))  # (times sqrt(2 pi) / 2: see gelu_values)
        self.p, self.pg = c(p), c(pg * _SQRT_HALF)
        self.half, self.one, self.two = c(0.5), c(1.0), c(2.0)
        self.gfar = c(far / _SQRT_HALF)  # the GELU's x where Φ(x) is 0 or 1 exactly
        self.log_inv_sqrt_2pi, self.sqrt_half = c(math.log(_INV_SQRT_2PI)), c(_SQRT_HALF)


_M64 = tuple(np.float64(v) for v in reversed(_MR64)), tuple(np.float64(v) for v in reversed(_MS64))
_T64 = tuple(np.float64(v) for v in reversed(_TR64)), tuple(np.float64(v) for v in reversed(_TS64))
_FAR64 = 28.0  # erfc has underflowed to 0 beyond this
_SQRT_HALF_HI = 0.7071067839860916  # (26 bits: its product with 26 bits is exact)
_SQRT_HALF_LO = -2.799544089368687e-09  # (sqrt(1/2) - _SQRT_HALF_HI)
_F64 = _Table(np.float64, _S64, _P64, _R64, (_PE64, _QE64), 6.0, _P64, _G64, 28.0)
_F32 = _Table(np.float32, _S32, _P32, _R32, (_PE32, _QE32), 4.0, _PG32, _G32, 11.0, (_PC32, _QC32, 10.1))
_CHUNK_BYTES = 1 << 18  # the size of a slice of a large array (see _chunked)


def _table(x: Any) -> tuple[Any, _Table, Any]:
    """``x`` as an array with axes of the dtype it is computed in (the updates in place need one), that
    dtype's table, and the dtype to return (None: the same)."""
    if getattr(x, "dtype", None) is None:  # (a Python number)
        x = np.asarray(x, np.float64)
    if x.ndim == 0:
        x = x.reshape(1)
    dtype = x.dtype
    if dtype == np.float32:
        return x, _F32, None
    if dtype.kind == "f" and dtype.itemsize < 4:
        return x.astype(np.float32), _F32, dtype
    if dtype != np.float64:
        return x.astype(np.float64), _F64, None
    return x, _F64, None


def _done(out: Any, back: Any, x: Any) -> Any:
    """``out`` in the dtype and shape of the caller's ``x`` (a NumPy scalar for a number or a scalar)."""
    if back is not None:
        out = out.astype(back)
    if getattr(x, "dtype", None) is None or isinstance(x, np.generic):
        return out[0]
    return out if x.ndim else out.reshape(())


def _horner(t: Any, coefs: tuple[Any, ...], out: Any) -> Any:
    """``coefs`` (highest power first) at ``t``, into ``out`` (None: a fresh array)."""
    r = np.multiply(t, coefs[0], out=out)
    r += coefs[1]
    for c in coefs[2:]:
        r *= t
        r += c
    return r


class _Scratch:
    """Temporaries of ``x``'s shape and dtype: reused buffers for a plain array (``_scratch.buffer``: a fresh
    array of this size would start with page faults), None (a fresh array from each NumPy call) for the
    stand-ins of jit and vmap."""

    def __init__(self, x: Any) -> None:
        self.plain = type(x) is np.ndarray
        self.shape, self.dtype = x.shape, x.dtype

    def __call__(self, tag: str, dtype: Any = None) -> Any:
        if not self.plain:
            return None
        return buffer("erf." + tag, self.shape, self.dtype if dtype is None else dtype)


def _inner(x: Any, k: _Table, tmp: _Scratch, out: Any, scale: Any = None) -> tuple[Any, Any]:
    """``erf(v)`` for ``|v| < 1/2``, ``v = scale * x`` (finite for every ``x``: computed at ``v`` clamped into
    [-1/2, 1/2]), and that clamped ``v``."""
    c = np.clip(x if scale is None else np.multiply(x, scale, out=tmp("c")), -k.half, k.half, out=tmp("c"))
    z = np.multiply(c, c, out=tmp("z"))
    s = _horner(z, k.s, out)
    s *= c
    s += c  # (v + v S(v**2): the larger term exact)
    return s, c


def _scaled_tail(a: Any, k: _Table, tmp: _Scratch, coefs: tuple[Any, ...], far: Any, scaled: bool) -> tuple[Any, Any]:
    """``(t R(t), b)``: ``erfc(v) exp(v**2)`` for ``v = a`` (``a / sqrt(2)`` if ``scaled``) at least 1/2, with
    ``a`` clamped to ``b`` (``v`` into [1/2, far]), in scratch arrays."""
    lo, hi = (k.half, far) if not scaled else (k.half / k.sqrt_half, far / k.sqrt_half)
    b = np.clip(a, lo, hi, out=tmp("b"))
    t = np.multiply(b, k.p if not scaled else k.p * k.sqrt_half, out=tmp("t"))
    t += k.one
    np.divide(k.one, t, out=t)
    r = _horner(t, coefs, tmp("r"))
    r *= t
    return r, b


def _middle(a: Any, scaled: bool, new: _Scratch) -> Any:
    """float64 ``erfc(v)`` for ``v = a`` (``a / sqrt(2)`` if ``scaled``) in [1/2, 5/4]: ``c + R(y) / S(y)``,
    ``y = v - 1`` (the rational a correction to ``c``, near ``erfc(1)``, so that its rounding errors are damped);
    scratch from ``new``."""
    if not scaled:
        y = np.subtract(a, 1.0, out=new("y"))  # (exact)
    else:  # a / sqrt(2) - 1 to a rounding of its own (not v's rounding, which would cost up to 3 ulps)
        hi = np.multiply(a, 2.0**27 + 1, out=new("y"))  # (a = hi + lo, 26 bits each: Veltkamp's split)
        lo = np.subtract(hi, a, out=new("q"))
        np.subtract(hi, lo, out=hi)
        np.subtract(a, hi, out=lo)
        lo *= _SQRT_HALF
        y = np.multiply(hi, _SQRT_HALF_LO, out=new("e"))
        y += lo
        hi *= _SQRT_HALF_HI  # (exact)
        hi -= 1.0
        y += hi
    q = _horner(y, _M64[1], new("q"))
    r = _horner(y, _M64[0], new("r"))
    r /= q
    r += _MC64
    return r


def _far(a: Any, scaled: bool, new: _Scratch) -> Any:
    """float64 ``erfc(v)`` for ``v = a`` (``a / sqrt(2)`` if ``scaled``) from 5/4 to where it underflows:
    ``exp(-h**2 - K) exp((h - a) (h + a) + R(1/v**2) / S(1/v**2)) / v``, ``h`` a multiple of 2**-20 next to ``a``
    (``h**2 + K`` exact: the large part of the exponent is not rounded); the small part costs only its absolute
    error (halved where ``scaled``, whose exponent is ``-a**2 / 2``)."""
    a = np.clip(a, 1.0, _FAR64 if not scaled else _FAR64 / _SQRT_HALF, out=new("a"))
    z = np.multiply(a, a, out=new("y"))
    np.divide(1.0 if not scaled else 2.0, z, out=z)  # 1 / v**2
    q = _horner(z, _T64[1], new("q"))
    r = _horner(z, _T64[0], new("r"))
    r /= q  # log(v erfcx(v)) + K
    h = np.multiply(a, 2.0**20, out=z)
    np.floor(h, out=h)
    h *= 2.0**-20
    d = np.subtract(h, a, out=q)  # (exact)
    e = np.add(h, a, out=new("e"))
    e *= d
    if scaled:
        e *= 0.5
    r += e
    np.exp(r, out=r)
    np.square(h, out=h)  # (exact)
    if scaled:
        h *= 0.5
    np.subtract(-_K64, h, out=h)  # -h**2 - K, exact
    np.exp(h, out=h)
    if scaled:
        a *= _SQRT_HALF
    r /= a
    r *= h  # (the smallest factor last: a subnormal result is rounded once)
    return r


def _erfc64_parts(x: Any, k: _Table, tmp: _Scratch, out: Any, scale: float) -> Any:
    """float64 ``erfc(scale x)`` of a plain array: each of the three parts (``1 - erf`` inside, ``_middle``,
    ``_far``) computed only on its own values, gathered and scattered by index."""
    scaled = scale != 1.0
    v = np.abs(x, out=tmp("a"))
    if scaled:
        v *= _SQRT_HALF  # (|scale x|, as the inner part rounds it)
    outside = np.greater_equal(v, 0.5, out=tmp("outside", np.bool_))
    far = np.greater_equal(v, 1.25, out=tmp("far", np.bool_))
    mid = np.greater(outside, far, out=tmp("mid", np.bool_))
    inside = np.logical_not(outside, out=outside)  # (NaN included)
    s = np.empty(x.shape) if out is None else out
    flat = s.reshape(-1)  # (C-contiguous: a view)
    for part, where in ((0, inside), (1, mid), (2, far)):
        idx = np.flatnonzero(where)
        if not idx.size:
            continue
        new = _Prefix(tmp, idx.size)
        xs = np.take(x, idx, out=new("x"))
        if part == 0:
            u, _ = _inner(xs, k, new, new("s"), None if not scaled else k.sqrt_half if scale > 0 else -k.sqrt_half)
            np.subtract(k.one, u, out=u)  # 1 - erf(v)
        else:
            vs = np.abs(xs, out=new("v"))
            u = (_middle if part == 1 else _far)(vs, scaled, new)
            neg = (np.less if scale > 0 else np.greater)(xs, 0, out=new("neg", np.bool_))
            np.subtract(2.0, u, out=u, where=neg)  # erfc(-v) = 2 - erfc(v)
        flat[idx] = u  # (faster than put)
    return s


def _erfc64_blend(x: Any, s: Any, c: Any, tmp: _Scratch, scale: float) -> Any:
    """float64 ``erfc`` for the stand-ins of jit and vmap, from ``s = 1 - erf`` (inside) and the inner part's
    clamped ``c``: all parts on every value (clamped) and blended with 0/1 weights, the bits of
    ``_erfc64_parts``."""
    scaled = scale != 1.0
    v = np.abs(x)
    if scaled:
        v *= _SQRT_HALF
    w = _weights(s, c, tmp)  # (+-1 outside, s zeroed there)
    u = _middle(np.clip(np.abs(x), 0.25, 2.2), scaled, tmp)
    u *= np.less(v, 1.25)
    t = _far(np.abs(x), scaled, tmp)
    t *= np.greater_equal(v, 1.25)
    u += t
    u *= w  # erfc(|v|) for v > 0, and 2 - erfc(|v|) for v < 0, 0 inside:
    two = np.abs(w)
    two -= w
    u += two
    s += u
    return s


class _Prefix(_Scratch):
    """The first ``n`` values of ``tmp``'s buffers (of the whole array's size), as scratch for a gathered part."""

    def __init__(self, tmp: _Scratch, n: int) -> None:
        self.tmp, self.n, self.plain = tmp, n, True

    def __call__(self, tag: str, dtype: Any = None) -> Any:
        return self.tmp("part." + tag, dtype).reshape(-1)[:self.n]


def _wide_tail(a: Any, k: _Table, tmp: _Scratch, scaled: bool) -> Any:
    """``erfc(v)`` in float64 for float32 ``a`` (``v`` as in ``_erfc_kernel``), so that it is rounded once."""
    lo, hi = (k.half, k.far_c) if not scaled else (k.half / k.sqrt_half, k.far_c / k.sqrt_half)
    b = np.clip(a, lo, hi, out=tmp("b", np.float64), dtype=np.float64)
    v = b if not scaled else np.multiply(b, _SQRT_HALF, out=tmp("v", np.float64))
    e = np.square(b, out=tmp("e", np.float64))  # (exact)
    if scaled:
        e *= 0.5
    np.exp(e, out=e)  # (at most exp(102): no overflow)
    q = _horner(v, k.qc, tmp("q", np.float64))
    q *= e
    r = _horner(v, k.pc, tmp("r", np.float64))
    r /= q  # P / (Q exp(b**2))
    return r


def _chunked(kernel: Any, x: Any, k: _Table, *args: Any) -> Any:
    """``kernel(x, k, tmp, out, *args)`` over ``x``: a large plain array in slices of ``_CHUNK_BYTES``, written
    into one output (the temporaries of a slice stay in the cache: 1.3-1.5x faster at half a million values;
    the bits are those of one pass), anything else in one call."""
    step = _CHUNK_BYTES // x.dtype.itemsize
    if type(x) is not np.ndarray or x.size <= step:
        return kernel(x, k, _Scratch(x), None, *args)
    out = np.empty(x.shape, x.dtype)
    flat, dest = x.reshape(-1), out.reshape(-1)
    for i in range(0, x.size, step):
        part = flat[i:i + step]
        kernel(part, k, _Scratch(part), dest[i:i + step], *args)
    return out


def erf_values(x: Any) -> Any:
    """``erf(x)`` (see the module docstring); float32 in float32, other inputs in float64.

    >>> erf_values(np.array([-np.inf, -0.0, np.nan], np.float32))
    array([-1., -0., nan], dtype=float32)
    """
    x0 = x
    x, k, back = _table(x)
    return _done(_chunked(_erf_kernel, x, k), back, x0)


def _erf_kernel(x: Any, k: _Table, tmp: _Scratch, out: Any) -> Any:
    s, c = _inner(x, k, tmp, out)
    w = _weights(s, c, tmp)
    b = np.clip(np.abs(x, out=tmp("b")), k.half, k.far_erf, out=tmp("b"))
    e = np.square(b, out=tmp("e"))  # (the rounding of b**2 is below erf's: erfc is small where it counts)
    np.exp(e, out=e)  # (at most exp(36))
    q = _horner(b, k.qe, tmp("q"))
    q *= e
    u = _horner(b, k.pe, tmp("r"))
    u /= q  # -erfc(b) = -P / (Q exp(b**2))
    u += k.one  # erf(|x|) from the tail's erfc,
    u *= w  # with the sign of x, and 0 inside
    s += u
    return s


def _weights(s: Any, c: Any, tmp: _Scratch) -> Any:
    """The tail's weight ``w = trunc(2 c)`` from the clamped ``c``: +-1 on the tail, +-0 inside; ``s`` (the inner
    part) zeroed on the tail, in place. (Float weights: cheaper than masks and copysign.)"""
    w = np.add(c, c, out=tmp("w"))
    np.trunc(w, out=w)
    s *= np.equal(w, 0, out=tmp("near", np.bool_))
    return w


def erfc_values(x: Any, scale: float = 1.0) -> Any:
    """``erfc(scale * x) = 1 - erf(scale * x)``, to its own relative precision also where it is tiny;
    ``scale`` is 1, or ``+-1 / sqrt(2)`` (the normal distribution's tails, where ``exp(-x**2 / 2)`` is then
    taken from ``x`` itself: the rounding of ``x / sqrt(2)`` would cost ``x**2`` ulps).

    >>> erfc_values(np.array([-1.0, 0.0, 10.0]))
    array([1.84270079e+00, 1.00000000e+00, 2.08848758e-45])
    """
    x0 = x
    x, k, back = _table(x)
    if scale != 1.0 and abs(abs(scale) - _SQRT_HALF) > 1e-15:
        raise ValueError(f"erfc_values: scale must be 1 or +-1/sqrt(2), got {scale}")
    return _done(_chunked(_erfc_kernel, x, k, scale), back, x0)


def _erfc_kernel(x: Any, k: _Table, tmp: _Scratch, out: Any, scale: float) -> Any:
    scaled = scale != 1.0
    if not k.wide and tmp.plain:
        return _erfc64_parts(x, k, tmp, out, scale)
    s, c = _inner(x, k, tmp, out, None if not scaled else k.sqrt_half if scale > 0 else -k.sqrt_half)
    np.subtract(k.one, s, out=s)  # 1 - erf(v)
    if not k.wide:
        return _erfc64_blend(x, s, c, tmp, scale)
    w = _weights(s, c, tmp)
    a = np.abs(x, out=tmp("a"))
    wide, u = _wide_tail(a, k, tmp, scaled), tmp("u")
    if u is None:  # (the stand-ins of jit and vmap record ufuncs)
        u = np.positive(wide, dtype=k.dtype)
    else:
        np.copyto(u, wide)
    u *= w  # erfc(|v|) for v > 0, and 2 - erfc(|v|) for v < 0, 0 inside:
    two = np.abs(w, out=tmp("two"))
    two -= w
    u += two
    s += u
    return s


def log_erfc_tail(x: Any) -> Any:
    """``log(erfc(x))`` for ``x >= 1/2``: ``-x**2 + log(t R(t))``, finite where ``erfc`` underflows.

    >>> log_erfc_tail(np.array([30.0]))
    array([-903.97411711])
    """
    x0 = x
    x, k, back = _table(x)
    tmp = _Scratch(x)
    r, _ = _scaled_tail(x, k, tmp, k.r, k.dtype(np.inf), False)
    with np.errstate(over="ignore", divide="ignore"):
        return _done(np.log(r) - np.square(x), back, x0)


def gelu_values(x: Any) -> tuple[Any, Any]:
    """``(x Φ(x), Φ(x) + x φ(x))``: the exact GELU and its slope, sharing ``exp(-x**2 / 2)``.

    At ``-inf`` the values are their limits 0 and 0; at ``inf``, ``inf`` and 1.

    >>> gelu_values(np.array([-1.0, 0.0, 1.0]))[0]
    array([-0.15865525,  0.        ,  0.84134475])
    """
    x0 = x
    x, k, back = _table(x)
    tmp = _Scratch(x)
    xc = np.clip(x, -k.gfar, k.gfar, out=tmp("xc"))
    t = np.abs(xc, out=tmp("t"))
    t *= k.pg
    t += k.one
    np.divide(k.one, t, out=t)  # t = 1 / (1 + p |x| / sqrt(2))
    q = _horner(t, k.g, tmp("q"))
    q *= t
    e = np.multiply(xc, xc)  # (fresh: it becomes the slope)
    e *= -k.half
    e += k.log_inv_sqrt_2pi
    np.exp(e, out=e)  # φ(x)
    q *= e  # Φ(-|x|) (the coefficients hold the factor sqrt(2 pi) / 2)
    # Φ(x) = q for x < 0, 1 - q for x >= 0 (the 0/1 weight keeps the left tail's q exact)
    phi = np.multiply(q, -k.two)
    phi += k.one
    phi *= np.greater_equal(x, 0, out=tmp("pos", np.bool_))
    phi += q
    e *= xc
    e += phi  # the slope Φ(x) + x φ(x)
    xl = np.clip(x, -k.gfar, None, out=tmp("xc"))  # (below, Φ is 0: x Φ(x) is 0 there, -inf included)
    phi *= xl
    return _done(phi, back, x0), _done(e, back, x0)

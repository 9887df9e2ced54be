"""``jit``: trace a function once per argument signature, then replay it as straight-line NumPy.

Every computation in LeanPass (the forward pass, the reverse pass of ``grad``, losses, ``optim``)
ends in NumPy calls on raw arrays. On the first call for a signature, ``jit`` runs the function
for real with each array argument (and each Tensor's array) replaced by a stand-in, a
``TracedArray``, that holds the real value and implements NumPy's protocols. Every NumPy call
made on a stand-in is carried out and appended to a program. The program is then pruned (calls
whose results are never used are dropped), given a few rewrites that cannot change a bit (an
elementwise result written into an intermediate that dies at that call, Python floats turned
into 0-d arrays of the operand's dtype once) and written out as one Python function of NumPy
calls. Later calls with the same signature run only that function.

Values that leave the trace (``bool()``, ``float()``, ``int()``, ``.item()``, ``.tolist()``,
``np.asarray``) become guards, re-checked at every replay: when one fails, the function is traced
again, so a result is never stale (``strict=True`` raises instead). Shapes that depend on values
(boolean masks, ``nonzero``) are checked too. A ``np.random.Generator`` argument draws its
numbers at every replay, the same numbers the function draws when it is not jitted.

See docs/jit.md for what is traced, what retraces and the sharp edges.

The parts, by job: ``recording`` (the stand-in array and the recording of NumPy calls),
``program`` (a recording made into a replayable program), ``signature`` (what identifies a call,
and its written-out check) and ``jitted`` (``jit``, its cache and its warnings).
"""

from .jitted import Jitted, jit
from .recording import ConcretizationError, TracedArray

__all__ = ["jit", "Jitted", "ConcretizationError", "TracedArray"]

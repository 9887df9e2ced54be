"""A picture of the graph behind a Tensor: ``to_dot`` writes Graphviz DOT text, ``draw_graph`` renders it.

Each op is a box with its ``op`` name and output shape, each leaf an ellipse with its shape;
parameters (leaves that require grad) are filled, constants are dashed. The walk is a loop, not
a recursion, so a graph of a million nodes is drawn as easily as one of ten.

>>> import leanpass as lp
>>> w = lp.Tensor([1.0, 2.0], requires_grad=True)
>>> print(lp.to_dot((w * 3.0).sum(), names={"w": w}))
digraph leanpass {
  rankdir=BT;
  node [fontname="Helvetica", fontsize=10];
  n0 [label="sum\\n()", shape=box];
  n1 [label="*\\n(2,)", shape=box];
  n2 [label="w\\n(2,)", shape=ellipse, style=filled, fillcolor="#cfe2ff"];
  n1 -> n0;
  n2 -> n1;
}
<BLANKLINE>
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.tensor import Tensor, _Absent

__all__ = ["to_dot", "draw_graph"]


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x._data if type(x) is Tensor else x))


def to_dot(tensor: Tensor, names: Mapping[str, Tensor] | None = None, constants: bool = True) -> str:
    """The graph that computed ``tensor``, as Graphviz DOT text (arrows point from inputs to results).

    ``names`` labels Tensors you know by name (``{"w": w}``; for a model,
    ``dict(zip(paths, leaves))``). ``constants=False`` leaves out the arrays an op was given
    that are not Tensors (a batch, a mask). Render the text with ``draw_graph`` or ``dot -Tsvg``.

    >>> x = Tensor(2.0, requires_grad=True)
    >>> "exp" in to_dot((x * x).exp())
    True
    """
    if type(tensor) is not Tensor:
        raise TypeError(f"to_dot: expected a Tensor, got {type(tensor).__name__}")
    named = {id(t): name for name, t in (names or {}).items() if type(t) is Tensor}
    ids: dict[int, str] = {id(tensor): "n0"}
    lines = ["digraph leanpass {", "  rankdir=BT;", '  node [fontname="Helvetica", fontsize=10];']
    edges: list[str] = []
    stack: list[Any] = [tensor]
    labels: dict[str, str] = {}  # op name -> its escaped label
    shapes: dict[Any, str] = {}  # shape -> its text
    while stack:  # (a loop with the slots read directly: a million nodes take seconds, not minutes)
        node = stack.pop()
        me = ids[id(node)]
        if type(node) is not Tensor:  # a constant array an op took
            lines.append(f'  {me} [label="constant\\n{_shape(node)}", shape=ellipse, style=dashed];')
            continue
        data = node._data
        shape = getattr(data, "shape", None)
        shape = _shape(data) if shape is None else shape
        text = shapes.get(shape)
        if text is None:
            text = shapes[shape] = str(tuple(shape))
        title = labels.get(node._op) if not named or id(node) not in named else _label(named[id(node)])
        if title is None:
            title = labels[node._op] = _label(node._op)
        if node._vjp is not None:  # an op
            lines.append(f'  {me} [label="{title}\\n{text}", shape=box];')
            parents: tuple[Any, ...] = (node._a,) if type(node._b) is _Absent else (node._a, node._b, *node._rest)
        else:
            style = 'style=filled, fillcolor="#cfe2ff"' if node._marks else "style=dashed"  # parameter / constant
            lines.append(f'  {me} [label="{title}\\n{text}", shape=ellipse, {style}];')
            parents = ()
        for parent in parents:
            if type(parent) is not Tensor and not (constants and isinstance(parent, np.ndarray)):
                continue  # an op's settings (an axis, a shape) are not nodes
            key = id(parent)
            ref = ids.get(key)
            if ref is None:
                ref = ids[key] = f"n{len(ids)}"
                stack.append(parent)
            edges.append(f"  {ref} -> {me};")
    return "\n".join(lines + edges + ["}"]) + "\n"


def draw_graph(tensor: Tensor, path: str | os.PathLike[str], names: Mapping[str, Tensor] | None = None,
               constants: bool = True) -> None:
    """Render ``to_dot(tensor)`` to ``path``; the format is the file's suffix (``.svg``, ``.png``, ``.pdf``).

    Needs the ``graphviz`` package (``pip install graphviz``, the ``graph`` extra) and the Graphviz programs
    (``apt install graphviz``, ``brew install graphviz``, ...). Without them, ``to_dot`` still
    gives the text, for ``dot -Tsvg graph.dot -o graph.svg`` or an online viewer.

    >>> import os, tempfile
    >>> x = Tensor([1.0], requires_grad=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "graph.svg")
    >>> try:
    ...     draw_graph(x * 2.0, path)
    ... except RuntimeError as e:  # no Graphviz here: the message says what to install
    ...     assert "graphviz" in str(e)
    ... else:
    ...     with open(path) as f:
    ...         assert f.read().lstrip().startswith("<?xml")
    """
    target = os.fspath(path)
    fmt = os.path.splitext(target)[1].lstrip(".").lower()
    if not fmt:
        raise ValueError(f"draw_graph: give the file a suffix that names the format (graph.svg, .png), got {target!r}")
    text = to_dot(tensor, names, constants)
    try:
        import graphviz  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        raise RuntimeError(
            "draw_graph needs the graphviz package: pip install graphviz (and the Graphviz programs: "
            "apt install graphviz, brew install graphviz, ...). Without them, leanpass.to_dot(t) gives the DOT "
            "text: save it and run dot -Tsvg graph.dot -o graph.svg."
        ) from None
    try:
        data = graphviz.Source(text).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RuntimeError(
            "draw_graph: the graphviz package is installed but the Graphviz programs are not (no 'dot' on the "
            "PATH): apt install graphviz, brew install graphviz, or see https://graphviz.org/download/."
        ) from None
    except (graphviz.CalledProcessError, ValueError) as e:
        raise ValueError(f"draw_graph: Graphviz cannot write {fmt!r} files ({e})") from None
    with open(target, "wb") as fh:
        fh.write(data)

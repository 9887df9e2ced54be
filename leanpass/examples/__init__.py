"""Runnable examples: ``python -m leanpass.examples.<name>``.

What an example writes (a trained model) goes to its ``--output`` path; by default into
``output_dir()``, a folder of the user's cache (``~/.cache/leanpass/examples``, or
``$XDG_CACHE_HOME/leanpass/examples``), never into the current directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["output_dir", "default_output"]


def output_dir() -> Path:
    """The folder the examples write to by default: ``$XDG_CACHE_HOME/leanpass/examples``, or
    ``~/.cache/leanpass/examples`` when ``XDG_CACHE_HOME`` is not set (or not an absolute path).

    >>> output_dir().parts[-2:]
    ('leanpass', 'examples')
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "leanpass" / "examples"


def default_output(name: str) -> str:
    """The default ``--output`` of an example: ``output_dir() / name``, its folder created.

    >>> import os, tempfile
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp()):
    ...     path = default_output("model.npz")
    >>> os.path.isdir(os.path.dirname(path)), path.endswith(os.path.join("leanpass", "examples", "model.npz"))
    (True, True)
    """
    folder = output_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder / name)

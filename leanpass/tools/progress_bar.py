"""A progress bar for long loops: ``lp.progress(iterable)``, tqdm's when it is installed
(``pip install tqdm``), a plain one otherwise.

>>> import io
>>> import leanpass as lp
>>> out = io.StringIO()
>>> total = 0
>>> for step in lp.progress(range(3), desc="train", file=out, use_tqdm=False):
...     total += step
>>> out.getvalue().splitlines()[-1].split(" [")[0]
'train: 3/3'
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["progress"]


def progress(iterable: Iterable[Any] | None = None, total: int | None = None, desc: str | None = None, *,
             use_tqdm: bool | None = None, file: IO[str] | None = None, mininterval: float = 0.1,
             **tqdm_kwargs: Any) -> Any:
    """Wrap ``iterable`` in a progress bar that shows the count, the rate and the time left.

    With tqdm installed (``pip install tqdm``) this is ``tqdm.auto.tqdm`` (a widget
    in a notebook), given ``total``, ``desc``, ``file``, ``mininterval`` and any other of tqdm's
    keyword arguments; without it, a plain bar with tqdm's everyday methods: ``update(n)``,
    ``set_postfix(**values)``, ``set_description(text)`` and ``close()``, usable as a context
    manager. ``use_tqdm=False`` asks for the plain bar, ``True`` requires tqdm. In a terminal the
    plain bar redraws one line (at most every ``mininterval`` seconds); written to a file or a
    pipe it prints a line at each tenth of the way and at the end.

    >>> import io
    >>> out = io.StringIO()
    >>> with progress(total=4, desc="epochs", file=out, use_tqdm=False) as bar:
    ...     for epoch in range(4):
    ...         bar.set_postfix(loss=1.0 / (epoch + 1))
    ...         bar.update()
    >>> out.getvalue().splitlines()[-1].startswith("epochs: 4/4 [##############################]")
    True
    """
    if use_tqdm is not False:
        try:
            from tqdm.auto import tqdm  # type: ignore[import-untyped, import-not-found, unused-ignore]
        except ImportError:
            if use_tqdm:
                raise ImportError('progress(use_tqdm=True) needs tqdm: pip install tqdm') from None
        else:
            return tqdm(iterable, total=total, desc=desc, file=file, mininterval=mininterval, **tqdm_kwargs)
    if tqdm_kwargs:
        raise TypeError(f"progress: {sorted(tqdm_kwargs)} are tqdm's options, and tqdm is not installed "
                        '(pip install tqdm)')
    return Progress(iterable, total, desc, file, mininterval)


class Progress:
    """The plain progress bar (see ``progress``).

    >>> import io
    >>> bar = Progress(None, total=2, desc="x", file=io.StringIO())
    >>> bar.update(2); bar.close(); bar.n
    2
    """

    width = 30

    def __init__(self, iterable: Iterable[Any] | None = None, total: int | None = None, desc: str | None = None,
                 file: IO[str] | None = None, mininterval: float = 0.1) -> None:
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.iterable, self.total, self.desc = iterable, total, desc
        self.file = sys.stderr if file is None else file
        self.mininterval = mininterval
        self.n = 0
        self.postfix = ""
        self._start = self._last = time.perf_counter()
        self._tty = bool(getattr(self.file, "isatty", lambda: False)())
        self._printed_tenth = 0
        self._printed_n = -1  # (the count on the last line written to a file)
        self._closed = False

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("progress: nothing to iterate; pass an iterable, or call update() yourself")
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __len__(self) -> int:
        if self.total is None:
            raise TypeError("progress: this bar has no total")
        return self.total

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps (and redraw when it is time)."""
        self.n += n
        now = time.perf_counter()
        if self._tty:
            if now - self._last >= self.mininterval or self.n == self.total:
                self._last = now
                self.file.write("\r" + self._line(now))
                self.file.flush()
        elif self.total:
            tenth = 10 * self.n // self.total
            if tenth > self._printed_tenth and (tenth < 10 or self.n == self.total):
                self._printed_tenth, self._printed_n = tenth, self.n
                self.file.write(self._line(now) + "\n")

    def set_postfix(self, **values: Any) -> None:
        """Show ``name=value`` pairs after the bar (numbers with 4 significant digits)."""
        self.postfix = ", ".join(f"{k}={v:.4g}" if isinstance(v, (int, float)) else f"{k}={v}"
                                 for k, v in values.items())

    def set_description(self, desc: str | None = None) -> None:
        """Change the text before the count."""
        self.desc = desc

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self._closed:
            return
        self._closed = True
        now = time.perf_counter()
        if self._tty:
            self.file.write("\r" + self._line(now) + "\n")
        elif self._printed_n != self.n:
            self.file.write(self._line(now) + "\n")
        self.file.flush()

    def _line(self, now: float) -> str:
        elapsed = now - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            filled = min(self.width, self.width * self.n // self.total)
            left = (self.total - self.n) / rate if rate > 0 else 0.0
            text = (f"{head}{self.n}/{self.total} [{'#' * filled}{'.' * (self.width - filled)}] "
                    f"{_clock(elapsed)}<{_clock(left)}, {rate:.3g} it/s")
        else:
            text = f"{head}{self.n} it, {_clock(elapsed)}, {rate:.3g} it/s"
        return f"{text}, {self.postfix}" if self.postfix else text


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"

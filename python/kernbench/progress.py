"""Progress bars: one tqdm bar on stderr, shown only on a terminal.

Used by bench runs (``kernbench.runner``: finished result rows,
``ctx.progress``) and sweeps (``kernbench.sweeps``: finished points); it
lives here so neither of those modules imports the other for it.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

__all__ = ["progress_bar"]


def progress_bar(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str | None = None,
                 enabled: bool | None = None, unit: str = "it"):
    """A tqdm bar on stderr; ``enabled=None``: only when stderr is a terminal."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency; a bare environment still runs
        return iterable if iterable is not None else _NoBar()
    return tqdm(iterable, total=total, desc=desc, disable=not enabled, file=sys.stderr, leave=False, unit=unit)


class _NoBar:
    """What ``progress_bar`` returns without tqdm and without an iterable: updates do nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

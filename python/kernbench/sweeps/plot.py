"""The ``--plot X Y`` figure of a sweep: a metric against a grid column, one line per other combination."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from kernbench import atomic_output as kio
from kernbench._core import ConfigError
from kernbench.sweeps.grid import STATUS_COLUMNS


def plot_sweep(df, x: str, y: str, path: str | os.PathLike[str], *, grid_keys: Sequence[str] = (),
               title: str | None = None) -> Path:
    """Draw column ``y`` against ``x`` (a column, or a grid key whose column was renamed) as a PNG.

    One line per combination of the other grid columns (``grid_keys``: the grid's columns), the mean
    where a point gave several rows; failed points are left out. Written atomically.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    cols = list(df.columns)
    renamed = {c.split(" [", 1)[0]: c for c in cols if c.endswith("]") and " [" in c}
    xc = x if x in cols else renamed.get(x)
    yc = y if y in cols else renamed.get(y)
    for given, col in ((x, xc), (y, yc)):
        if col is None:
            shown = ", ".join(c for c in cols if c not in STATUS_COLUMNS)
            raise ConfigError(f"--plot: no column {given!r} in the sweep's rows (columns: {shown})")
    ok = df[df["status"] != "failed"] if "status" in df.columns else df
    for col in (xc, yc):
        if pd.to_numeric(ok[col], errors="coerce").isna().all():
            raise ConfigError(f"--plot: column {col!r} holds no numbers (plot a numeric column)")
    others = [c for c in grid_keys if c in cols and c != xc]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = ok.groupby(others, sort=True, dropna=False) if others else [((), ok)]
    for label, sub in groups:
        pts = pd.DataFrame({"x": pd.to_numeric(sub[xc], errors="coerce"),
                            "y": pd.to_numeric(sub[yc], errors="coerce")}).dropna().groupby("x", sort=True)["y"].mean()
        if pts.empty:
            continue
        label = label if isinstance(label, tuple) else (label,)
        text = ", ".join(f"{c}={v}" for c, v in zip(others, label)) or yc
        ax.plot(list(pts.index), list(pts.values), marker="o", label=text)
    several = "point" in ok.columns and ok["point"].duplicated().any()
    ax.set_xlabel(xc)
    ax.set_ylabel(f"{yc} (mean of each point's rows)" if several else yc)
    ax.set_title(title or f"{yc} vs {xc}")
    ax.grid(True, alpha=0.3)
    if others:
        ax.legend(fontsize=8)
    fig.tight_layout()
    written = kio.save_figure(fig, Path(path))
    plt.close(fig)
    return written


def plot_name(x: str, y: str) -> str:
    """The PNG name of ``--plot X Y``: ``Y-vs-X.png`` with path-unsafe characters replaced."""
    import re

    def safe(t: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", t).strip("_") or "column"

    return f"{safe(y)}-vs-{safe(x)}.png"

"""Atomic output: a file is either its old self or complete, never half-written.

Every file kernbench writes (sweep.json, CSVs, figures, traces, goldens,
checkpoints) goes through here: written to a temporary file in the same
folder, flushed, synced, then renamed over the target.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping


def _atomic_write_bytes(path: Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; numpy scalars and arrays converted; NaN/inf refused by name."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return to_jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"refusing to write a non-finite number ({obj}) to JSON; use None for 'no value'")
    return obj


def write_json(path: Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"
    return _atomic_write_bytes(Path(path), text.encode())


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write rows (dicts) as CSV with the union of their keys as header, atomically."""
    rows = list(rows)
    header: list[str] = []
    for r in rows:
        header.extend(k for k in r if k not in header)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in header})
    return _atomic_write_bytes(Path(path), buf.getvalue().encode())


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure atomically (rendered to memory first)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=dpi, bbox_inches="tight")
    return _atomic_write_bytes(Path(path), buf.getvalue())

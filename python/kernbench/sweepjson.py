"""The one versioned format of ``sweep.json`` (and the ``sweep.csv`` beside it).

Every bench run (``kernbench run``) and every sweep (``kernbench sweep``,
``kernbench.sweep(..., out=DIR)``) writes ``sweep.json`` through
``write_sweep``: the fields of ``SCHEMA_NAME`` version ``SCHEMA_VERSION``
(documented in docs/sweep-json.md; the JSON Schema is
``kernbench/sweep.schema.json``) plus whatever a bench adds, and
``sweep.csv``, the ``results`` rows as a table (nested values as JSON text).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from kernbench import atomic_output as kio

SCHEMA_NAME = "kernbench.sweep"
SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).resolve().parent / "sweep.schema.json"

# The fields every sweep.json has, in the order they are written.
REQUIRED = (
    "schema", "schema_version", "kind", "kernbench_version", "bench", "params", "seed",
    "config", "config_overrides", "config_hash", "results", "failures", "wall_s",
)


def _include_files(path: Path, seen: set[Path]) -> list[Path]:
    """``path`` and, recursively, the files its ``include:`` names (best effort: the loader checks them)."""
    path = path.resolve()
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out = [path]
    try:
        import yaml

        doc = yaml.safe_load(path.read_text())
    except Exception:  # the C++ loader reports a bad file; a hash needs no more
        return out
    inc = doc.get("include") if isinstance(doc, dict) else None
    for name in [inc] if isinstance(inc, str) else (inc if isinstance(inc, list) else []):
        if isinstance(name, str):
            out += _include_files(path.parent / name, seen)
    return out


def config_hash(config: str | os.PathLike[str] | None, overrides: Mapping[str, Any] | None = None) -> str | None:
    """``sha256:...`` of the config file, the files it includes and the overrides; None without a config.

    Two runs with the same hash simulated the same machine (same bytes in,
    same overrides on top), whatever the file was called.
    """
    if config is None:
        return None
    h = hashlib.sha256()
    for f in _include_files(Path(config), set()):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(json.dumps({str(k): str(v) for k, v in (overrides or {}).items()}, sort_keys=True).encode())
    return "sha256:" + h.hexdigest()


def header(kind: str, bench: str, *, description: str = "", params: Mapping[str, Any] | None = None,
           seed: int = 1, config: str | os.PathLike[str] | None = None,
           config_overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The leading fields of a sweep.json (results, failures and wall_s are filled in later)."""
    from kernbench.version import __version__

    overrides = {str(k): str(v) for k, v in (config_overrides or {}).items()}
    return {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "kernbench_version": __version__,
        "bench": bench,
        "description": description,
        "params": dict(params or {}),
        "seed": seed,
        "config": str(config) if config is not None else None,
        "config_overrides": overrides,
        "config_hash": config_hash(config, overrides),
        "results": [],
        "failures": [],
        "wall_s": 0.0,
    }


def _cell(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(kio.to_jsonable(v), sort_keys=True)
    return v


def null_non_finite(doc: dict[str, Any], keys: Any = None) -> list[str]:
    """The documented rule for NaN and infinities: each one in ``doc`` (in its ``keys``; default all) is
    replaced by null (None), in place; returns where they were with their values
    (``results[0].latency_ns = nan``). JSON has no NaN, so sweep.json holds null and the caller says so in
    ``failures``."""
    import math

    bad: list[str] = []

    def clean(obj, where):
        if isinstance(obj, float) and not math.isfinite(obj):
            bad.append(f"{where} = {obj}")
            return None
        if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy values
            return clean(obj.tolist(), where)
        if isinstance(obj, Mapping):
            return {k: clean(v, f"{where}.{k}") for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [clean(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj

    for k in list(keys if keys is not None else doc):
        if k in doc:
            doc[k] = clean(doc[k], k)
    return bad


def non_finite_failure(where: list[str], whose: str) -> dict[str, Any]:
    """The ``failures`` entry saying which non-finite numbers ``null_non_finite`` wrote as null."""
    more = f" and {len(where) - 10} more" if len(where) > 10 else ""
    return {"name": "non-finite values",
            "error": f"{whose} gave non-finite numbers, written as null: {', '.join(where[:10])}{more}"}


def write_sweep(out_dir: Path | str, sweep: dict[str, Any], csv_name: str = "sweep.csv") -> Path:
    """Write ``sweep.json`` (and ``sweep.csv`` when there are results) into ``out_dir``, together or not at all.

    Both texts are made first (a value JSON cannot hold is a ValueError before anything is written), then
    written with ``kio.write_together``; a sweep.csv left from an earlier run into the folder is removed when
    this one has no results. ``files`` lists what the folder holds; a sweep missing a required field
    is refused (a writer bug, not a user error).
    """
    missing = [k for k in REQUIRED if k not in sweep]
    if missing:
        raise ValueError(f"sweep.json would lack {', '.join(missing)}")
    out_dir = Path(out_dir)
    files = [f for f in sweep.get("files", []) if f not in ("sweep.json", csv_name)]
    texts: dict[Path, bytes] = {}
    if sweep["results"]:
        texts[out_dir / csv_name] = kio.csv_bytes([{k: _cell(v) for k, v in r.items()} for r in sweep["results"]])
        files.insert(0, csv_name)
    sweep["files"] = ["sweep.json", *files]
    texts[out_dir / "sweep.json"] = kio.json_bytes(sweep)
    kio.write_together(texts)
    stale = out_dir / csv_name
    if not sweep["results"] and stale.is_file() and not stale.is_symlink():
        stale.unlink(missing_ok=True)
    return out_dir / "sweep.json"


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of sweep.json."""
    return json.loads(SCHEMA_FILE.read_text())


def validate_sweep(sweep: Mapping[str, Any]) -> None:
    """Check a sweep.json dict against the JSON Schema (needs the ``jsonschema`` package)."""
    import jsonschema

    jsonschema.validate(dict(sweep), load_schema())

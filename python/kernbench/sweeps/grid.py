"""The grid of a sweep: its values, its points and their keys, and the numeric columns of quantity axes.

A grid is a dict of value lists (their product) or an explicit list of dicts
(``expand_grid``); ``parse_grid`` reads the CLI's ``--grid KEY=V1,V2``. A value
is passed on as ``--set`` text (``value_text``), records hold plain Python values only
(``plain``), and a point's key (``point_key``) is its values as text, which is
what a checkpoint matches on. An axis whose values are all quantities with a unit
(``"32 GB/s"``) becomes the result column ``"KEY [UNIT]"`` holding numbers
(``grid_columns``). ``STATUS_COLUMNS`` are the columns every result row ends with.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from kernbench._core import ConfigError
from kernbench.units import parse_quantity, to_base

STATUS_COLUMNS = ("status", "error", "wall_s")


def value_text(value: Any) -> str:
    """A grid value as --set text: lists as a,b,c; booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(value_text(v) for v in value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        return value_text(value.item())
    return str(value)


def plain(obj: Any) -> Any:
    """Python scalars, lists and dicts only (numpy values converted), so records are the same from every executor."""
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return plain(obj.tolist())
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    return str(obj)  # anything else (an enum, a custom object) as its text, so it can be checkpointed


def parse_grid(items: Iterable[str], list_params: Iterable[str] = ()) -> dict[str, list[str]]:
    """``["system.sips.w=1,2", "bench.meshes=cube-4x2;mesh-8x8"]`` -> a grid of value texts.

    Values are separated by ``,``; for ``list_params`` (bench parameters
    whose value is itself a list) by ``;``, each value then being a
    comma-separated list.
    """
    grid: dict[str, list[str]] = {}
    lists = set(list_params)
    for text in items:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ConfigError(f"--grid {text!r}: expected KEY=V1,V2,..., e.g. system.sips.w=1,2,4")
        if key in grid:
            raise ConfigError(f"--grid {key}: given twice")
        sepchar = ";" if key in lists else ","
        vals = [v.strip() for v in values.split(sepchar) if v.strip()]
        if not vals:
            raise ConfigError(f"--grid {text!r}: no values")
        grid[key] = vals
    return grid


def expand_grid(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The points of a grid: the product of a dict of value lists, or an explicit list of dicts."""
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            vals = grid[k]
            if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
                raise ConfigError(f"grid[{k!r}]: expected a list of values, got {vals!r}")
            if len(list(vals)) == 0:
                raise ConfigError(f"grid[{k!r}]: no values")
        return [dict(zip(keys, combo)) for combo in itertools.product(*(list(grid[k]) for k in keys))]
    points = [dict(p) for p in grid]
    if not points:
        raise ConfigError("grid: no points")
    return points


def grid_columns(points: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Any]]:
    """Grid key -> (DataFrame column, value -> cell) for the axes whose values are quantities.

    Every value of the axis must be a number with a known unit; one unit for all keeps it
    (``KEY [GB/s]``), mixed units of one dimension convert to its base unit (``KEY [B/s]``).
    Axes of plain numbers or other text are left as they are (absent from the result).
    """
    keys: list[str] = []
    for p in points:
        keys += [k for k in p if k not in keys]
    out: dict[str, tuple[str, Any]] = {}
    for k in keys:
        vals = [p[k] for p in points if k in p]
        parsed = [parse_quantity(v) if isinstance(v, str) else None for v in vals]
        if not parsed or any(q is None for q in parsed):
            continue
        units = {u for _, u in parsed}
        bases = {to_base(1.0, u)[1] for u in units}
        if len(bases) != 1:
            continue  # quantities of different dimensions: keep the text
        if len(units) == 1:
            unit = units.pop()

            def cell(v, _u=unit):
                return _number(parse_quantity(v)[0])
        else:
            unit = bases.pop()

            def cell(v):
                return _number(to_base(*parse_quantity(v))[0])
        out[k] = (f"{k} [{unit}]", cell)
    return out


def _number(x: float) -> int | float:
    """An integral value as an int (64 KiB -> 65536 B), others as floats."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def point_key(params: Mapping[str, Any]) -> str:
    """A point's key: its values as --set text, as sorted JSON (what a checkpoint's records match on)."""
    return json.dumps({k: value_text(v) for k, v in params.items()}, sort_keys=True)

"""The measured-data file (YAML or CSV): one row per measured figure and the model call that reproduces it.

YAML::

    groups: {gemm-square: {tolerance: 5 %}}          # optional: per-group tolerance
    defaults: {source: k200-measured.md}              # optional: fields every row gets
    rows:
      - id: gemm-fp32-2048
        group: gemm-square
        call: k200.gemm m=2048 n=2048 k=2048 precision=fp32     # or function: + params: {...}
        metric: gflops
        value: 7800
        unit: GFLOPS
        source: k200-measured.md, GEMM table

CSV: a header with ``id,group,call,metric,value,unit,source`` (and optionally ``tolerance``, ``weight``,
``config``, ``note``); lines starting with ``#`` are comments. In a ``call`` text a key with a dot
(``k200.driver.kl1_bounce_pipe=0``) is a config override of that row (YAML: ``set: {...}``).

Every error names the file, the line and the row id (``CalibrationError``).
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from yaml.nodes import ScalarNode, SequenceNode

from kernbench.calibrate.registry import REGISTRY, CalibrationError, Registry, raised_at
from kernbench.calibrate.safe_read import load_yaml, read_text
from kernbench.units import UNITS as _BASE_UNITS, split_quantity

__all__ = ["Row", "Dataset", "load_data", "unit_factor", "convert", "parse_tolerance", "schema_key", "UNITS"]

#: unit -> (dimension, factor to the dimension's base): kernbench.units (the C++ table's times, sizes and
#: bandwidths, bit rates included, and its Python-only sizes and frequencies) plus rates of work and counts.
UNITS: dict[str, tuple[str, float]] = dict(_BASE_UNITS)
UNITS.update({
    "FLOPS": ("FLOP/s", 1), "KFLOPS": ("FLOP/s", 1e3), "MFLOPS": ("FLOP/s", 1e6), "GFLOPS": ("FLOP/s", 1e9),
    "TFLOPS": ("FLOP/s", 1e12), "PFLOPS": ("FLOP/s", 1e15), "FLOP/s": ("FLOP/s", 1), "GFLOP/s": ("FLOP/s", 1e9),
    "TFLOP/s": ("FLOP/s", 1e12),
    "1/s": ("1/s", 1), "/s": ("1/s", 1), "samples/s": ("1/s", 1), "items/s": ("1/s", 1),
    "launches/s": ("1/s", 1), "ops/s": ("1/s", 1),
    "tokens/s": ("1/s", 1), "token/s": ("1/s", 1), "tok/s": ("1/s", 1), "requests/s": ("1/s", 1),
    "1": ("1", 1), "count": ("1", 1), "x": ("1", 1), "ratio": ("1", 1), "%": ("1", 0.01), "cycles": ("1", 1),
})

ROW_KEYS = ("id", "group", "call", "function", "params", "set", "metric", "value", "unit", "source",
            "tolerance", "weight", "config", "note")
CSV_REQUIRED = ("id", "group", "call", "value", "unit")
TOP_KEYS = ("rows", "groups", "defaults")
#: Largest row weight: a residual is weight x log(model / measured), and the fit squares it.
MAX_WEIGHT = 1e6


def _short(v: Any) -> str:
    """A value for a message: its repr, cut at 60 characters."""
    text = repr(v)
    return text if len(text) <= 60 else text[:50] + "..." + text[-6:]


def unit_factor(unit: str) -> tuple[str, float]:
    """(dimension, factor to its base) of a unit; ValueError lists the known ones."""
    try:
        return UNITS[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r} (known: {', '.join(UNITS)})") from None


def convert(value: float, unit: str, to: str) -> float:
    """``value`` in ``unit`` expressed in ``to``; ValueError when the two measure different things."""
    d1, f1 = unit_factor(unit)
    d2, f2 = unit_factor(to)
    if d1 != d2:
        raise ValueError(f"unit {unit!r} ({d1}) does not convert to {to!r} ({d2})")
    return value * (f1 / f2)  # the factor first: 1e308 ns in us does not overflow on the way


def parse_tolerance(v: Any) -> float:
    """0.05, '5 %', '5%' -> 0.05 (a fraction >= 0); ValueError otherwise."""
    if isinstance(v, bool):
        raise ValueError(f"tolerance {v!r}: expected a fraction (0.05) or a percentage (5 %)")
    text = str(v).strip()
    scale = 1.0
    if text.endswith("%"):
        text, scale = text[:-1].strip(), 0.01
    try:
        x = float(text) * scale
    except ValueError:
        raise ValueError(f"tolerance {v!r}: expected a fraction (0.05) or a percentage (5 %)") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"tolerance {v!r}: must be a finite number >= 0")
    return x


@functools.lru_cache(maxsize=1)
def _schema_keys() -> dict[str, Any]:
    from kernbench.config import schema

    return schema().get("keys", {})


def schema_key(path: str) -> dict[str, Any] | None:
    """The schema entry of a config path (``k200.compute.fc_overhead``; list items by index), or None.

    A placeholder key of the schema (``<class>`` in ``links.<class>.bandwidth``) stands for any name the
    section does not list: ``links.nvlink.bandwidth`` is found (the loader checks the class itself).
    """
    node: dict[str, Any] = {"keys": _schema_keys()}
    for part in path.split("."):
        if node.get("type") == "list" and isinstance(node.get("items"), dict):
            if not part.isdigit():
                return None
            node = node["items"]
            continue
        keys = node.get("keys")
        if not isinstance(keys, dict) or not part:
            return None
        if part not in keys or part.startswith("<"):
            part = next((k for k in keys if k.startswith("<") and k.endswith(">")), None)
            if part is None:
                return None
        node = keys[part]
    return node


@dataclass
class Row:
    """One measured figure: where it came from, the model call and what it is compared with."""

    id: str
    group: str
    function: str
    params: dict[str, Any]
    metric: str
    value: float            # as measured, in ``unit``
    unit: str
    source: str = ""
    tolerance: float | None = None
    weight: float = 1.0
    set: dict[str, str] = field(default_factory=dict)
    config: Any = None
    note: str = ""
    line: int = 0
    file: str = ""
    call: str = ""
    model_unit: str = ""    # the function's unit for this metric
    measured: float = 0.0   # ``value`` in ``model_unit``

    def where(self) -> str:
        return f"{self.file}:{self.line}: row {self.id!r}"

    def param(self, name: str) -> Any:
        """A field or a parameter of the call (for --cv-by): ``group``, ``batch``, ..."""
        if name in ("id", "group", "function", "metric", "unit", "source"):
            return getattr(self, name)
        return self.params.get(name, self.set.get(name))


@dataclass
class Dataset:
    path: str
    rows: list[Row]
    groups: dict[str, dict[str, Any]]

    def group_names(self) -> list[str]:
        out: list[str] = []
        for r in self.rows:
            if r.group not in out:
                out.append(r.group)
        return out

    def by_id(self) -> dict[str, Row]:
        return {r.id: r for r in self.rows}


def _scalar(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_call(text: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    """``"k200.copy kind=pinned bytes=64MiB k200.driver.kl1_bounce_pipe=0"`` -> (function, params, set)."""
    try:
        tokens = shlex.split(str(text))
    except ValueError as e:
        raise ValueError(f"call {text!r}: {e}") from None
    if not tokens:
        raise ValueError("call: empty (expected FUNCTION key=value ...)")
    fn, params, sets = tokens[0], {}, {}
    for tok in tokens[1:]:
        key, sep, value = tok.partition("=")
        if not sep or not key:
            raise ValueError(f"call {text!r}: {tok!r} is not key=value")
        if key in params or key in sets:  # the last would silently win
            raise ValueError(f"call {text!r}: parameter {key!r} given twice")
        if "." in key:
            sets[key] = value
        else:
            params[key] = _scalar(value)
    return fn, params, sets


def _yaml_rows(path: Path, text: str) -> tuple[list[tuple[int, Any]], dict, dict]:
    data, node = load_yaml(text, path, error=CalibrationError)
    seq = node
    if isinstance(data, dict):
        unknown = [k for k in data if k not in TOP_KEYS]
        if unknown:
            raise CalibrationError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(TOP_KEYS)})")
        if "rows" not in data or not isinstance(data["rows"], list):
            raise CalibrationError(f"{path}: rows: a list of measured rows is required")
        # the rows' node (None when they come through a merge key: every row then gets the map's line)
        seq = next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == "rows"), None)
        rows, groups, defaults = data["rows"], data.get("groups") or {}, data.get("defaults") or {}
    elif isinstance(data, list):
        rows, groups, defaults = data, {}, {}
    else:
        raise CalibrationError(f"{path}: expected a list of rows or a map with rows: (got {type(data).__name__})")
    if not isinstance(groups, dict) or not isinstance(defaults, dict):
        raise CalibrationError(f"{path}: groups and defaults are maps")
    if isinstance(seq, SequenceNode) and len(seq.value) == len(rows):
        lines = [item.start_mark.line + 1 for item in seq.value]
    else:
        lines = [node.start_mark.line + 1] * len(rows)
    return list(zip(lines, rows)), groups, defaults


def _csv_lines(text: str) -> list[tuple[str, str]]:
    """(line, its end) of each physical line, a comment (``#`` first, outside a quoted cell) made blank. Lines end
    at CSV's own line ends only (str.splitlines also breaks at U+2028, a form feed, ...: a cell's text), and each
    keeps its own end (a quoted cell's \\r stays \\r)."""
    parts = re.split(r"(\r\n|\r|\n)", text)
    out: list[tuple[str, str]] = []
    inside = False  # in a quoted cell that goes on past this line
    for i in range(0, len(parts), 2):
        line, end = parts[i], (parts[i + 1] if i + 1 < len(parts) else "")
        if not inside and line.lstrip().startswith("#"):
            line = ""
        else:
            inside = _ends_in_quotes(line, inside)
        out.append((line, end))
    return out


def _ends_in_quotes(line: str, inside: bool) -> bool:
    """Whether a quoted cell is still open at the end of ``line`` (``inside``: open at its start), as csv reads
    it: a quote opens a cell only as its first character (``5" screen`` is plain text), ``""`` inside is one."""
    at_start, i = not inside, 0
    while i < len(line):
        c = line[i]
        if inside:
            if c == '"':
                if line.startswith('""', i):
                    i += 1
                else:
                    inside = False
        elif c == '"' and at_start:
            inside = True
        at_start = not inside and c == ","
        i += 1
    return inside


def _csv_rows(path: Path, text: str) -> list[tuple[int, Any]]:
    physical = _csv_lines(text)
    lines = [ln for ln, _ in physical]
    skip = next((i for i, ln in enumerate(lines) if ln.strip()), len(lines))  # comments above the header
    reader = csv.DictReader(io.StringIO("".join(ln + end for ln, end in physical[skip:]), newline=""))
    try:
        return _csv_records(path, reader, lines, skip)
    except csv.Error as e:
        raise CalibrationError(f"{path}:{reader.reader.line_num + skip}: not valid CSV: {e}") from None


def _csv_records(path: Path, reader: csv.DictReader, lines: list[str], skip: int) -> list[tuple[int, Any]]:
    if reader.fieldnames is None:
        raise CalibrationError(f"{path}: empty CSV (expected a header: {', '.join(CSV_REQUIRED)}, ...)")
    header = [h.strip() for h in reader.fieldnames]
    reader.fieldnames = header
    line0 = skip + 1  # the header's line
    for j, h in enumerate(header):
        if h in header[:j]:
            raise CalibrationError(f"{path}:{line0}: column {h!r} given twice (columns {header.index(h) + 1} and "
                                   f"{j + 1}); give it once")
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise CalibrationError(f"{path}:{line0}: missing column {missing[0]!r} (the header needs "
                               f"{', '.join(CSV_REQUIRED)})")
    unknown = [c for c in header if c not in ROW_KEYS]
    if unknown:
        raise CalibrationError(f"{path}:{line0}: unknown column {unknown[0]!r} (known: {', '.join(ROW_KEYS)})")
    out = []
    prev = reader.line_num + skip
    for rec in reader:
        start = prev + 1
        while start <= len(lines) and not lines[start - 1].strip():
            start += 1
        prev = reader.line_num + skip
        if None in rec:
            raise CalibrationError(f"{path}:{start}: more cells than columns")
        out.append((start, {k: v.strip() for k, v in rec.items() if v is not None and v.strip() != ""}))
    return out


def _row(path: Path, line: int, raw: Any, defaults: Mapping[str, Any], groups: Mapping[str, Any],
         registry: Registry, known_keys: dict[str, bool]) -> Row:
    where = f"{path}:{line}"
    if not isinstance(raw, dict):
        raise CalibrationError(f"{where}: a row is a map (id, group, call, metric, value, unit, source)")
    rid = raw.get("id")
    if rid is None or str(rid).strip() == "":
        raise CalibrationError(f"{where}: row without an id")
    rid = str(rid)
    where = f"{where}: row {rid!r}"
    d = {**defaults, **raw}
    for k in d:
        if k not in ROW_KEYS:
            raise CalibrationError(f"{where}: {k}: unknown field (known: {', '.join(ROW_KEYS)})")

    def bad(msg: str) -> CalibrationError:
        return CalibrationError(f"{where}: {msg}")

    group = str(d.get("group", "")).strip()
    if not group:
        raise bad("group: required")
    sets: dict[str, str] = {}
    if "call" in d and ("function" in d or "params" in d):
        raise bad("give call: (a text) or function: + params:, not both")
    if "call" in d:
        try:
            fname, params, sets = parse_call(d["call"])
        except ValueError as e:
            raise bad(str(e)) from None
        call = str(d["call"])
    elif "function" in d:
        fname, params = str(d["function"]), d.get("params") or {}
        if not isinstance(params, dict):
            raise bad("params: a map of parameter -> value")
        odd = [k for k in params if not isinstance(k, str)]
        if odd:
            raise bad(f"params: parameter name {odd[0]!r} is not a text")
        call = fname + "".join(f" {k}={v}" for k, v in params.items())
    else:
        raise bad("call: required (e.g. call: k200.gemm m=32 n=2048 k=2048 precision=fp16)")
    extra = d.get("set") or {}
    if not isinstance(extra, dict):
        raise bad("set: a map of config path -> value")
    sets.update({str(k): ("true" if v is True else "false" if v is False else str(v)) for k, v in extra.items()})
    for key in sets:
        if key not in known_keys:
            known_keys[key] = schema_key(key) is not None
        if not known_keys[key]:
            raise bad(f"set {key}: unknown config path (see `kernbench schema --markdown`)")
    try:
        m = registry.get(fname)
    except KeyError as e:
        raise bad(str(e.args[0])) from None
    try:
        params = m.typed_params(params)
    except ValueError as e:
        raise bad(str(e)) from None
    metric = str(d.get("metric") or m.default_metric)
    try:
        model_unit = m.unit_of(metric)
    except Exception as e:  # a --functions file's metric_unit that raises
        raise bad(f"metric {metric!r}: {fname}'s metric_unit raised {type(e).__name__}: "
                  f"{raised_at(e, m.metric_unit)}{e}") from None
    if model_unit is None:
        raise bad(f"metric {metric!r}: {fname} has no such metric (known: {', '.join(m.metrics) or 'see its doc'})")
    value, unit = d.get("value"), d.get("unit")
    if isinstance(value, str):
        q = split_quantity(value)
        if q:
            if unit is not None and str(unit) != q[1]:
                raise bad(f"value {value!r} and unit {unit!r} disagree")
            value, unit = q
    if value is None:
        raise bad("value: required")
    if isinstance(value, bool):
        raise bad(f"value {d.get('value')!r}: not a number")
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise bad(f"value {_short(d.get('value'))}: not a number") from None
    if not math.isfinite(value):
        raise bad(f"value {_short(d.get('value'))}: not a finite number")
    if value <= 0:
        raise bad(f"value {value:g}: must be > 0 (errors are relative, on a log scale)")
    if model_unit == "":  # a ratio (model.training's mfu): no unit (or 1), or a percentage
        unit = "" if unit is None else str(unit).strip()
        if unit not in ("", "1", "%"):
            raise bad(f"unit {unit!r}: {fname} {metric} is a ratio without a unit: give no unit (0.45) or % (45 %)")
        measured = value / 100 if unit == "%" else value
    elif unit is None or str(unit).strip() == "":
        raise bad(f"unit: required ({fname} {metric} is in {model_unit})")
    else:
        unit = str(unit).strip()
        try:
            measured = convert(value, unit, model_unit)
        except ValueError as e:
            raise bad(f"unit {unit!r}: {e}; {fname} {metric} is in {model_unit}") from None
    if not (math.isfinite(measured) and measured > 0):
        raise bad(f"value {_short(d.get('value'))} is {measured:g} {model_unit} (the unit of {fname} {metric}): "
                  "outside the range of a float; give a finite number > 0 in a unit near it")
    tol = d.get("tolerance", (groups.get(group) or {}).get("tolerance") if isinstance(groups.get(group), dict)
                else None)
    try:
        tol = None if tol is None else parse_tolerance(tol)
    except ValueError as e:
        raise bad(str(e)) from None
    try:
        if isinstance(d.get("weight"), bool):
            raise TypeError
        weight = float(d.get("weight", 1.0))
    except (TypeError, ValueError, OverflowError):
        raise bad(f"weight {_short(d.get('weight'))}: not a number") from None
    if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
        raise bad(f"weight {weight:g}: must be a number > 0 and <= {MAX_WEIGHT:g}")
    config = d.get("config")
    if config is not None and not isinstance(config, str):
        raise bad(f"config {_short(config)}: a config name or path (a text)")
    return Row(id=rid, group=group, function=fname, params=params, metric=metric, value=value, unit=unit,
               source=str(d.get("source", "")), tolerance=tol, weight=weight, set=sets, config=config,
               note=str(d.get("note", "")), line=line, file=str(path), call=call, model_unit=model_unit,
               measured=measured)


def load_data(path: str | Path, registry: Registry | None = None) -> Dataset:
    """Read and check a measured-data file (``.yaml``/``.yml`` or ``.csv``); CalibrationError on bad input."""
    p = Path(path)
    reg = registry or REGISTRY
    if p.suffix.lower() not in (".csv", ".yaml", ".yml"):
        raise CalibrationError(f"--data {p}: expected a .yaml, .yml or .csv file")
    text = read_text(p, "--data", CalibrationError)
    if p.suffix.lower() == ".csv":
        items, groups, defaults = _csv_rows(p, text), {}, {}
    else:
        items, groups, defaults = _yaml_rows(p, text)
    for g, spec in groups.items():
        if not isinstance(spec, dict):
            raise CalibrationError(f"{p}: groups.{g}: a map with tolerance and doc")
        for k in spec:
            if k not in ("tolerance", "doc"):
                raise CalibrationError(f"{p}: groups.{g}.{k}: unknown key (known: tolerance, doc)")
        if "tolerance" in spec:
            try:
                parse_tolerance(spec["tolerance"])
            except ValueError as e:
                raise CalibrationError(f"{p}: groups.{g}: {e}") from None
    rows: list[Row] = []
    seen: dict[str, int] = {}
    known: dict[str, bool] = {}
    for line, raw in items:
        r = _row(p, line, raw, defaults, groups, reg, known)
        if r.id in seen:
            raise CalibrationError(f"{p}:{line}: row {r.id!r}: duplicate id (first on line {seen[r.id]})")
        seen[r.id] = line
        rows.append(r)
    if not rows:
        raise CalibrationError(f"{p}: no rows")
    return Dataset(str(p), rows, {str(k): dict(v) for k, v in groups.items()})

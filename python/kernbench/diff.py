"""What moved between two runs: ``kernbench diff A B``.

A and B are each a ``sweep.json`` (or the folder of a bench run holding
one), or a machine config (YAML): then one bench (``bench``; default: the
bench of the other side when that is a stored run, else ``DEFAULT_BENCH``)
runs on each config and the two outputs are diffed::

    kernbench diff out/a/sweep.json out/b/sweep.json
    kernbench diff configs/topology.yaml mine.yaml --bench pe-dma-perf --smoke
    kernbench diff A B --json --rtol 1e-6

Rows are matched by their key: the bench's golden key when it has one,
plus a sweep's grid columns; otherwise the rows' text and boolean fields
(``scenario``, ``name``, ``panel``...), numbered when they repeat. Every
other number of a row is a metric (nested objects are flattened with
dots: ``critical_path.share.engine:gemm``, ``energy.by.static:pe``); timing
of the host (``wall_s`` and the like) is ignored. Reported:

- ``metrics``: each metric whose A and B differ by more than ``rtol`` (of
  the larger magnitude), with delta and ratio; headline metrics first (the
  bench's declared primary metrics, then any latency or throughput),
  each group sorted by |log ratio| (a metric that appears or goes to zero
  first), so a small critical-path share never hides the latency;
- ``critical_path``: the critical-path shares (``critical_path.share.*``)
  that moved, in points of share;
- ``resources``: the links and engines whose busy time, bytes or occupancy
  moved most (metrics named ``busy``, ``bytes_<class>``, ``occupancy_*``,
  ``utilization``, ``link_bytes.*``, ``energy.by.*``...);
- ``text``: text fields that changed (e.g. the bound resource);
- rows only in A or only in B, failures only in A or only in B (or whose
  error changed), and the header fields that differ (params, config hash,
  seed, bench).

``metrics=[PATTERN, ...]`` (``kernbench diff --metric``) keeps only the
metrics whose name matches one pattern: a glob when it holds ``*``, ``?``
or ``[`` (``*latency*``, ``critical_path.share.*``), else a substring.

Identical inputs give ``changed == False`` and every delta 0.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from kernbench._core import ConfigError

DEFAULT_BENCH = "pe-dma-perf"
DEFAULT_RTOL = 1e-9

#: Header fields compared between the two runs.
HEADER = ("bench", "kind", "params", "seed", "config_hash", "config_overrides", "kernbench_version")
#: Top-level fields that are not results (never diffed as extra fields).
_NOT_EXTRA = {"schema", "schema_version", "kind", "kernbench_version", "bench", "description", "params", "seed",
              "config", "config_overrides", "config_hash", "results", "failures", "wall_s", "files", "verify",
              "trace", "grid", "grid_columns", "points", "executor"}
#: Breakdowns whose labels appear only where they are not zero.
_ZERO_WHEN_ABSENT = ("critical_path.share.", "energy.by.")
#: Metric names that are headline figures whatever the bench (after its declared primary metrics).
_HEADLINE = re.compile(r"(^|[._])(latency|throughput)", re.I)
_RESOURCE = re.compile(r"(^|[._])(busy|busiest|occupancy|utilization|link_bytes|bytes_|engine_|energy\.by)", re.I)


# ---- loading ----------------------------------------------------------------------------

def load_sweep(path: str | Path) -> dict[str, Any]:
    """A sweep.json (or a folder holding one), checked enough to diff; errors name the file."""
    p = Path(path)
    if p.is_dir():
        p = p / "sweep.json"
    if not p.exists():
        raise ConfigError(f"{path}: no such file or folder (expected a sweep.json, a bench output folder "
                          "or a machine config)")
    try:
        data = json.loads(p.read_text())
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not a text file ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a JSON object (a sweep.json), got {type(data).__name__}")
    if data.get("schema") != "kernbench.sweep":
        raise ConfigError(f"{p}: not a kernbench sweep.json (schema is {data.get('schema')!r}, "
                          "expected 'kernbench.sweep')")
    for key, typ in (("results", list), ("failures", list)):
        if not isinstance(data.get(key), typ):
            raise ConfigError(f"{p}: {key}: expected a list, got {type(data.get(key)).__name__}")
    for i, r in enumerate(data["results"]):
        if not isinstance(r, dict):
            raise ConfigError(f"{p}: results[{i}]: expected an object, got {type(r).__name__}")
    for i, f in enumerate(data["failures"]):
        if not isinstance(f, dict) or "name" not in f:
            raise ConfigError(f"{p}: failures[{i}]: expected an object with a name")
    data["_source"] = str(p)
    return data


def _is_config(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def load_side(path: str | Path, *, bench: str | None = None, sets: Iterable[str] = (), smoke: bool = False,
              out: str | Path | None = None, seed: int = 1) -> dict[str, Any]:
    """One side of a diff: a sweep.json / run folder as it is, or a config run through ``bench``."""
    p = Path(path)
    if not _is_config(p):
        return load_sweep(p)
    from kernbench.registry import get_bench
    from kernbench.runner import run_bench
    from kernbench.system import config_path

    try:
        cfg = config_path(p)
    except Exception as e:
        raise ConfigError(f"{path}: {e}") from None
    b = get_bench(bench or DEFAULT_BENCH)
    if not b.uses_config:
        raise ConfigError(f"{path}: bench {b.name!r} models no machine config; pick one that does with --bench")
    all_sets = list(sets)
    if smoke:
        from kernbench.goldens import smoke_sets

        all_sets = smoke_sets(b) + all_sets
    out_dir = Path(out) if out is not None else Path("out") / "diff" / f"{b.name}-{p.stem}-{p.parent.name or 'config'}"
    sweep = run_bench(b.name, out=out_dir, sets=all_sets, seed=seed, config=cfg, quiet=True)
    sweep["_source"] = f"{path} (bench {b.name}, {out_dir}/sweep.json)"
    return sweep


# ---- matching rows ------------------------------------------------------------------------

def _ignored(name: str) -> bool:
    return name.endswith("wall_s") or name.startswith("_")


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects flattened with dots; lists kept as JSON text (compared as text)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        name = f"{prefix}{k}"
        if _ignored(str(k)):
            continue
        if isinstance(v, Mapping):
            out.update(flatten(v, name + "."))
        elif isinstance(v, (list, tuple)):
            out[name] = json.dumps(v, sort_keys=True)
        else:
            out[name] = v
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def key_columns(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The columns that name a row: golden key + grid columns, else the text/bool columns."""
    cols: list[str] = []
    if a.get("bench") == b.get("bench"):
        try:
            from kernbench.registry import get_bench

            golden = get_bench(a["bench"]).golden
        except Exception:  # not a registered bench (a sweep of a function): no golden key
            golden = None
        if golden:
            key = golden["key"]
            cols += [key] if isinstance(key, str) else list(key)
    for side in (a, b):
        renamed = side.get("grid_columns") or {}  # a quantity axis: its column holds numbers, KEY [UNIT]
        for g in (side.get("grid") or {}):
            g = renamed.get(g, g)
            if g not in cols:
                cols.append(g)
    rows = list(a["results"]) + list(b["results"])
    if cols and all(all(c in r for c in cols) for r in rows):
        return cols
    names: list[str] = []
    for r in rows:
        for k, v in r.items():
            if isinstance(v, (str, bool)) and k not in names and not _ignored(k):
                names.append(k)
    names = [k for k in names if all(k in r for r in rows)]

    def unique(c: list[str]) -> bool:
        return all(len({_row_key(r, c) for r in side["results"]}) == len(side["results"]) for side in (a, b))

    # The fewest text columns that tell the rows apart (a text field that is a result,
    # e.g. the bound resource, must not become part of the key): one column if one does, else a prefix.
    for k in names:
        if unique([k]):
            return [k]
    for n in range(2, len(names) + 1):
        if unique(names[:n]):
            return names[:n]
    return names


def _row_key(row: Mapping[str, Any], cols: list[str]) -> str:
    return ", ".join(f"{c}={row.get(c)}" for c in cols) if cols else ""


def keyed(rows: Iterable[Mapping[str, Any]], cols: list[str]) -> dict[str, dict[str, Any]]:
    """Rows by key; a key seen again is numbered (#2, #3...) in order."""
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, int] = {}
    for i, r in enumerate(rows):
        k = _row_key(r, cols) or f"row {i}"
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > 1:
            k = f"{k} #{seen[k]}"
        out[k] = dict(r)
    return out


# ---- the diff ------------------------------------------------------------------------------------

def _changed(x: float, y: float, rtol: float) -> bool:
    if x == y:
        return False
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return False
    return abs(y - x) > rtol * max(abs(x), abs(y))


def _ratio(x: float, y: float) -> float | None:
    if x == 0:
        return None if y != 0 else 1.0
    return y / x


def _order(entry: Mapping[str, Any]) -> float:
    r = entry["ratio"]
    if r is None or r <= 0:
        return math.inf
    return abs(math.log(r))


def metric_filter(patterns: Iterable[str]):
    """A predicate on metric names: any pattern matches (a glob with * ? [, else a substring); None: all."""
    pats = [p for p in patterns if p is not None]
    for p in pats:
        if not str(p).strip():
            raise ConfigError("--metric: empty pattern (give a glob such as '*latency*' or a substring)")
        if _unclosed_set(str(p)):  # fnmatch would read it as a literal '[' and match nothing, without a word
            raise ConfigError(f"--metric {p!r}: a [ opens a set of characters that no ] closes (a glob: [ab] matches a "
                              "or b; [[] matches a [ itself)")
    if not pats:
        return None

    def match(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) if any(c in p for c in "*?[") else p in name for p in pats)

    return match


def _unclosed_set(pattern: str) -> bool:
    """Whether a glob has a ``[`` with no ``]`` after it (fnmatch's rule: a ] right after [ or [! is a member)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            close = pattern.find("]", j)
            if close < 0:
                return True
            i = close
        i += 1
    return False


def primary_metrics(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """The bench's declared headline metrics (``@bench(primary=...)``), when both sides ran one bench."""
    if a.get("bench") != b.get("bench"):
        return ()
    try:
        from kernbench.registry import get_bench

        return tuple(get_bench(a["bench"]).primary)
    except Exception:  # a sweep of a function, or a bench not installed here
        return ()


def headline_rank(metric: str, primary: tuple[str, ...]) -> int:
    """0.. for the declared primary metrics (in order), then latency / throughput, then the rest."""
    if metric in primary:
        return primary.index(metric)
    if metric.startswith("critical_path.") or not _HEADLINE.search(metric):
        return len(primary) + 1
    return len(primary)


def diff_sweeps(a: Mapping[str, Any], b: Mapping[str, Any], *, rtol: float = DEFAULT_RTOL,
                top: int = 10, metrics: Iterable[str] = ()) -> dict[str, Any]:
    """Compare two sweep dicts; returns the structure documented in the module docstring.

    ``metrics``: patterns; only the metrics matching one of them are compared and reported."""
    if rtol < 0 or not math.isfinite(rtol):
        raise ConfigError(f"--rtol: expected a finite number >= 0, got {rtol}")
    if top < 0:
        raise ConfigError(f"--top: expected a count >= 0 (0: all), got {top}")
    patterns = list(metrics)
    wanted = metric_filter(patterns)
    primary = primary_metrics(a, b)
    cols = key_columns(a, b)
    ra, rb = keyed(a["results"], cols), keyed(b["results"], cols)
    extra_a = {k: v for k, v in a.items() if k not in _NOT_EXTRA and not _ignored(k)}
    extra_b = {k: v for k, v in b.items() if k not in _NOT_EXTRA and not _ignored(k)}
    if extra_a or extra_b:
        ra["(sweep)"], rb["(sweep)"] = extra_a, extra_b
    metrics, text, compared = [], [], 0
    for key in [k for k in ra if k in rb]:
        fa, fb = flatten(ra[key]), flatten(rb[key])
        for name in list(dict.fromkeys([*fa, *fb])):
            # A sweep's point index names a row; it measures nothing.
            if name in cols or (name == "point" and a.get("kind") == "sweep"):
                continue
            if wanted is not None and not wanted(name):
                continue
            x, y = fa.get(name), fb.get(name)
            if name.startswith(_ZERO_WHEN_ABSENT):  # a share or energy label absent on one side is 0
                x = 0.0 if x is None and _is_number(y) else x
                y = 0.0 if y is None and _is_number(x) else y
            if _is_number(x) and _is_number(y):
                compared += 1
                if _changed(float(x), float(y), rtol):
                    metrics.append({"row": key, "metric": name, "a": x, "b": y, "delta": y - x,
                                    "ratio": _ratio(float(x), float(y))})
            elif _is_number(x) or _is_number(y):
                compared += 1
                metrics.append({"row": key, "metric": name, "a": x, "b": y, "delta": None, "ratio": None})
            elif x != y:
                text.append({"row": key, "metric": name, "a": x, "b": y})
    for m in metrics:
        m["headline"] = headline_rank(m["metric"], primary) <= len(primary)
    metrics.sort(key=lambda e: (headline_rank(e["metric"], primary), -_order(e), e["row"], e["metric"]))
    share = [m for m in metrics if ".share." in f".{m['metric']}" and m["metric"].startswith("critical_path.")]
    share = [dict(m, label=m["metric"][len("critical_path.share."):]) for m in share]
    for m in share:
        m["points"] = None if m["delta"] is None else 100.0 * m["delta"]
    share.sort(key=lambda m: -abs(m["points"] or math.inf))
    resources = [m for m in metrics if _RESOURCE.search(m["metric"]) and not m["metric"].startswith("critical_path.")]
    resources.sort(key=lambda m: (-_order(m), -abs(m["delta"] or 0)))
    fa_, fb_ = {f["name"]: f for f in a["failures"]}, {f["name"]: f for f in b["failures"]}
    failures = {
        "only_a": [{"name": n, "error": fa_[n].get("error", "")} for n in fa_ if n not in fb_],
        "only_b": [{"name": n, "error": fb_[n].get("error", "")} for n in fb_ if n not in fa_],
        "changed": [{"name": n, "a": fa_[n].get("error", ""), "b": fb_[n].get("error", "")}
                    for n in fa_ if n in fb_ and fa_[n].get("error") != fb_[n].get("error")],
    }
    header = [{"field": h, "a": a.get(h), "b": b.get(h)} for h in HEADER if a.get(h) != b.get(h)]
    only_a = [k for k in ra if k not in rb]
    only_b = [k for k in rb if k not in ra]
    changed = bool(metrics or text or only_a or only_b or any(failures.values()))
    return {
        "a": a.get("_source", "A"), "b": b.get("_source", "B"), "rtol": rtol, "key": cols,
        "metric_filter": patterns, "primary": list(primary),
        "rows_a": len(a["results"]), "rows_b": len(b["results"]),
        "matched": len([k for k in ra if k in rb and k != "(sweep)"]),
        "compared": compared, "changed": changed, "header": header, "metrics": metrics,
        "critical_path": share, "resources": resources[:top] if top else resources, "text": text,
        "rows_only_a": only_a, "rows_only_b": only_b, "failures": failures,
    }


def diff_paths(a: str | Path, b: str | Path, *, bench: str | None = None, sets: Iterable[str] = (),
               smoke: bool = False, rtol: float = DEFAULT_RTOL, top: int = 10, seed: int = 1,
               out: str | Path | None = None, metrics: Iterable[str] = ()) -> dict[str, Any]:
    """``kernbench diff A B`` without the printing: load (or run) both sides and diff them."""
    if rtol < 0 or not math.isfinite(rtol):
        raise ConfigError(f"--rtol: expected a finite number >= 0, got {rtol}")
    metrics = list(metrics)
    metric_filter(metrics)  # a bad pattern is refused before anything runs
    sets = list(sets)
    pa, pb = Path(a), Path(b)
    if not _is_config(pa) and not _is_config(pb) and (bench is not None or smoke or sets):
        raise ConfigError(f"{a}, {b}: --bench, --smoke and --set apply to machine configs (YAML), "
                          "not to sweep.json files")
    stored = {k: load_sweep(p) for k, p in (("a", pa), ("b", pb)) if not _is_config(p)}
    if bench is None and stored:
        # A config beside a stored run: run the bench that produced the run (if it is one).
        from kernbench.registry import list_benches

        name = next(iter(stored.values())).get("bench")
        bench = name if name in {x.name for x in list_benches()} else None
    base = Path(out) if out is not None else None
    sa = stored.get("a") or load_side(pa, bench=bench, sets=sets, smoke=smoke, seed=seed,
                                      out=base / "a" if base else None)
    sb = stored.get("b") or load_side(pb, bench=bench, sets=sets, smoke=smoke, seed=seed,
                                      out=base / "b" if base else None)
    return diff_sweeps(sa, sb, rtol=rtol, top=top, metrics=metrics)


# ---- text -----------------------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None:
        return "--"
    if _is_number(v):
        return f"{v:.6g}"
    s = str(v)
    return s if len(s) <= 40 else s[:37] + "..."


def format_diff(d: Mapping[str, Any], limit: int = 40) -> str:
    """The diff as text: a header, then the tables that are not empty."""
    lines = [f"A: {d['a']}", f"B: {d['b']}",
             f"rows: {d['rows_a']} in A, {d['rows_b']} in B, {d['matched']} matched by "
             f"[{', '.join(d['key']) or 'position'}]; {d['compared']} numbers compared (rtol {d['rtol']:g})"
             + (f"; metrics matching {' or '.join(d['metric_filter'])}" if d.get("metric_filter") else "")]
    for h in d["header"]:
        lines.append(f"  header {h['field']}: {_fmt(h['a'])} -> {_fmt(h['b'])}")
    if not d["changed"]:
        lines.append("no change: every matched metric is equal within rtol, same rows, same failures")
        return "\n".join(lines)

    def table(title, entries, cols):
        if not entries:
            return
        lines.append("")
        lines.append(f"{title} ({len(entries)}{', first ' + str(limit) if len(entries) > limit else ''}):")
        shown = entries[:limit]
        widths = [max(len(c), *(len(_fmt(e.get(k))) for e in shown)) for c, k in cols]
        lines.append("  " + "  ".join(c.ljust(w) for (c, _), w in zip(cols, widths)))
        for e in shown:
            lines.append("  " + "  ".join(_fmt(e.get(k)).ljust(w) for (_, k), w in zip(cols, widths)))

    mcols = [("row", "row"), ("metric", "metric"), ("A", "a"), ("B", "b"), ("delta", "delta"), ("B/A", "ratio")]
    table("metrics that moved (headline first, then by |log B/A|)", d["metrics"], mcols)
    table("critical-path share that moved (points of %)", d["critical_path"],
          [("row", "row"), ("label", "label"), ("A", "a"), ("B", "b"), ("points", "points")])
    table("links and engines whose busy time / bytes moved most", d["resources"], mcols)
    table("text that changed", d["text"], [("row", "row"), ("field", "metric"), ("A", "a"), ("B", "b")])
    for side, rows in (("A", d["rows_only_a"]), ("B", d["rows_only_b"])):
        if rows:
            lines.append("")
            lines.append(f"rows only in {side} ({len(rows)}): " + "; ".join(rows[:limit]))
    f = d["failures"]
    for side, key in (("A", "only_a"), ("B", "only_b")):
        for e in f[key][:limit]:
            lines.append(f"failed only in {side}: {e['name']}: {e['error']}")
    for e in f["changed"][:limit]:
        lines.append(f"failure changed: {e['name']}: {e['a']} -> {e['b']}")
    return "\n".join(lines)

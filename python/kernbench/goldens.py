"""Golden regression over bench outputs: smoke runs compared with checked-in summaries.

Every bench that declares ``smoke=`` and ``golden=`` in ``@bench`` has a file
``tests/goldens/<bench>.json``: the key metrics of its smoke run, per result
row, with a tolerance per metric (exact for counts, relative for times).
``kernbench goldens`` re-runs the smoke sizes and compares; ``kernbench
goldens --update [--bench NAME]`` rewrites the files and prints what moved,
so a model change that shifts results arrives as a reviewed diff.

    from kernbench.goldens import compare, load_golden, run_smoke, summarize
    diffs = compare(load_golden(path, bench), summarize(bench, run_smoke(bench, tmp)))

A golden file is validated whole when it is read (``load_golden``; ``kernbench goldens`` reads every
selected one before any smoke run): a JSON object with exactly the fields ``summarize`` writes, of their
types -- ``golden_version`` this kernbench's, ``bench`` the bench's own name, ``key`` the bench's golden
key, every tolerance ``exact``, ``rel=X`` or ``abs=X`` with X finite and >= 0, ``rows`` an object of rows,
each holding exactly the bench's golden metrics, every number finite. A field that is not is a ConfigError
naming the file and the field (``rows.NAME.METRIC``). JSON's duplicate keys, NaN/Infinity, nesting past
100 and files over 16 MiB are refused too.
"""

from __future__ import annotations

import json
import os
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from kernbench import atomic_output as kio
from kernbench._core import ConfigError

DEFAULT_REL = 1e-6
GOLDEN_VERSION = 1
MAX_GOLDEN_BYTES = 16 << 20  # a golden is a few KiB; a larger file is not one
MAX_GOLDEN_DEPTH = 100       # JSON nesting (a golden needs 4)
FIELDS = ("golden_version", "bench", "smoke", "seed", "key", "tolerances", "rows")


def default_folder() -> Path:
    """tests/goldens of the source tree (from the current folder, else beside the package's source)."""
    here = Path("tests/goldens")
    if here.is_dir():
        return here
    src = Path(__file__).resolve().parent.parent.parent / "tests" / "goldens"
    return src if src.is_dir() else here


# ---- tolerances ------------------------------------------------------------------------------

def parse_tolerance(spec: str) -> tuple[str, float]:
    """``"exact"`` -> ("exact", 0); ``"rel=1e-3"`` -> ("rel", 0.001); ``"abs=0.5"`` -> ("abs", 0.5)."""
    spec = str(spec).strip()
    if spec == "exact":
        return ("exact", 0.0)
    kind, sep, value = spec.partition("=")
    if sep and kind in ("rel", "abs"):
        try:
            x = float(value)
        except ValueError:
            x = -1.0
        if math.isfinite(x) and x >= 0:
            return (kind, x)
    raise ConfigError(f"tolerance {spec!r}: expected exact, rel=X or abs=X with X >= 0")


def default_tolerance(value: Any) -> str:
    """Counts, names and flags are exact; other numbers relative (1e-6)."""
    if isinstance(value, float):
        return f"rel={DEFAULT_REL:g}"
    return "exact"


def within(old: Any, new: Any, spec: str) -> bool:
    """Whether ``new`` is within ``spec`` of ``old``."""
    kind, tol = parse_tolerance(spec)
    if old is None or new is None or kind == "exact" or isinstance(old, (str, bool)) or isinstance(new, (str, bool)):
        return old == new
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return old == new
    if kind == "abs":
        return abs(new - old) <= tol
    return abs(new - old) <= tol * abs(old) if old != 0 else new == 0


# ---- smoke runs and summaries -------------------------------------------------------------

def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(_text(x) for x in v)
    return str(v)


def smoke_sets(bench) -> list[str]:
    """The bench's smoke size as ``--set`` strings; ConfigError if it declares none."""
    if bench.smoke is None:
        raise ConfigError(f"bench {bench.name!r} declares no smoke size (add smoke={{...}} to its @bench)")
    return [f"{k}={_text(v)}" for k, v in bench.smoke.items()]


def run_smoke(bench, out: Path | str, seed: int = 1) -> dict[str, Any]:
    """Run the bench at its smoke size into ``out``; its sweep dict."""
    from kernbench.runner import run_bench

    return run_bench(bench.name, out=out, sets=smoke_sets(bench), seed=seed, quiet=True)


def _spec(bench) -> tuple[list[str], dict[str, str | None]]:
    g = bench.golden or {}
    key = g.get("key")
    keys = [key] if isinstance(key, str) else list(key or [])
    if not keys:
        raise ConfigError(f"bench {bench.name!r}: golden needs a 'key' (the result column(s) naming a row)")
    metrics = g.get("metrics")
    if isinstance(metrics, Mapping):
        m = {str(k): (str(v) if v is not None else None) for k, v in metrics.items()}
    else:
        m = {str(k): None for k in (metrics or [])}
    if not m:
        raise ConfigError(f"bench {bench.name!r}: golden needs 'metrics'")
    for spec in m.values():
        if spec is not None:
            parse_tolerance(spec)
    return keys, m


def summarize(bench, sweep: Mapping[str, Any]) -> dict[str, Any]:
    """The golden summary of a smoke run: the declared metrics of every result row, by key."""
    keys, metrics = _spec(bench)
    if sweep["failures"]:
        msgs = "; ".join(f"{f['name']}: {f['error']}" for f in sweep["failures"][:5])
        raise ConfigError(f"bench {bench.name!r}: the smoke run failed ({msgs})")
    rows: dict[str, dict[str, Any]] = {}
    tolerances: dict[str, str] = {}
    for r in sweep["results"]:
        if not any(k in r for k in keys):
            raise ConfigError(f"bench {bench.name!r}: no golden key column ({', '.join(keys)}) in a result row")
        name = " / ".join(_text(r.get(k)) for k in keys)  # a column a row lacks reads "None"
        if name in rows:
            raise ConfigError(f"bench {bench.name!r}: golden key {keys} does not name rows uniquely ({name!r} twice)")
        row = {}
        for m, spec in metrics.items():
            if m not in r:
                raise ConfigError(f"bench {bench.name!r}: golden metric {m!r} is not in result row {name!r}")
            row[m] = r[m]
            if m not in tolerances:
                tolerances[m] = spec or default_tolerance(r[m])
        rows[name] = row
    return {
        "golden_version": GOLDEN_VERSION,
        "bench": bench.name,
        "smoke": {k: v for k, v in bench.smoke.items()},
        "seed": sweep["seed"],
        "key": keys,
        "tolerances": tolerances,
        "rows": rows,
    }


@dataclass
class Diff:
    """One golden metric that moved (``ok``: still within its tolerance)."""

    row: str
    metric: str
    old: Any
    new: Any
    tolerance: str
    ok: bool

    def __str__(self) -> str:
        if self.old is _MISSING:
            return f"{self.row}: new row"
        if self.new is _MISSING:
            return f"{self.row}: row is gone" if self.metric == "" else f"{self.row}: {self.metric} is gone"
        change = ""
        if isinstance(self.old, (int, float)) and isinstance(self.new, (int, float)) and \
                not isinstance(self.old, bool) and self.old:
            change = f" ({(self.new - self.old) / abs(self.old):+.3g})"
        verdict = "within" if self.ok else "OUTSIDE"
        return f"{self.row}: {self.metric} {self.old!r} -> {self.new!r}{change}, {verdict} {self.tolerance}"


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


def compare(golden: Mapping[str, Any], current: Mapping[str, Any]) -> list[Diff]:
    """Every metric that differs from the golden (rows added or gone count as failures)."""
    diffs: list[Diff] = []
    tol = golden.get("tolerances", {})
    old_rows, new_rows = golden["rows"], current["rows"]
    for name, old in old_rows.items():
        new = new_rows.get(name)
        if new is None:
            diffs.append(Diff(name, "", old, _MISSING, "", False))
            continue
        for m, ov in old.items():
            nv = new.get(m, _MISSING)
            if nv is _MISSING:
                diffs.append(Diff(name, m, ov, _MISSING, tol.get(m, "exact"), False))
            elif nv != ov:
                spec = tol.get(m) or default_tolerance(ov)
                diffs.append(Diff(name, m, ov, nv, spec, within(ov, nv, spec)))
    for name in new_rows:
        if name not in old_rows:
            diffs.append(Diff(name, "", _MISSING, new_rows[name], "", False))
    if golden.get("smoke") != current.get("smoke") or golden.get("seed") != current.get("seed"):
        diffs.append(Diff("(smoke size)", "smoke", [golden.get("smoke"), golden.get("seed")],
                          [current.get("smoke"), current.get("seed")], "exact", False))
    return diffs


def without_wall_clock(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep.json dict without its wall-clock fields: what two runs with one seed must agree on byte for byte.

    Dropped: the top-level ``wall_s``, ``wall_s`` of each result row, and every field matched by a
    pattern of the file's ``wall_clock_fields`` (``results[].events_per_s``, ``scaling``; ``[]``
    walks a list, ``*`` in the last name is a glob), which benches measuring the host itself declare
    (docs/sweep-json.md).
    """
    import copy
    import fnmatch

    doc = copy.deepcopy(dict(sweep))
    patterns = list(doc.get("wall_clock_fields") or []) + ["wall_s", "results[].wall_s"]

    def drop(obj: Any, parts: list[str]) -> None:
        head, rest = parts[0], parts[1:]
        each = head.endswith("[]")
        name = head[:-2] if each else head
        if not isinstance(obj, dict):
            return
        for key in [k for k in obj if fnmatch.fnmatchcase(k, name)]:
            if not rest:
                if not each:
                    del obj[key]
                continue
            items = obj[key] if each and isinstance(obj[key], list) else [obj[key]]
            for item in items:
                drop(item, rest)

    for pattern in patterns:
        drop(doc, str(pattern).split("."))
    return doc


def golden_path(bench_name: str, folder: Path | str | None = None) -> Path:
    """``<folder>/<bench>.json`` (folder default: tests/goldens)."""
    return (Path(folder) if folder is not None else default_folder()) / f"{bench_name}.json"


def _damaged(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path}: {why}: the golden file is damaged (restore it from git, or `kernbench goldens "
                       f"--update --bench {path.stem}`)")


class _Object(dict):
    """A JSON object as read: ``twice`` is the first key given twice in it (None: none), found by ``_flaw``."""

    twice: str | None = None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = _Object()
    for k, v in pairs:
        if k in out and out.twice is None:
            out.twice = k
        out[k] = v
    return out


class _Constant:
    """NaN, Infinity or -Infinity as written in the file (JSON has no such numbers): refused at its field."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _flaw(obj: Any, where: str = "") -> str | None:
    """The first key given twice or NaN/Infinity in the parsed file, with its field; None when there is none."""
    if isinstance(obj, _Constant):
        return f"{where or 'the top level'}: {obj.name} is not a number (JSON has no NaN or Infinity)"
    if isinstance(obj, dict):
        if getattr(obj, "twice", None) is not None:
            return f"{where + '.' if where else ''}{obj.twice}: the key is given twice (one would be lost)"
        for k, v in obj.items():
            found = _flaw(v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            found = _flaw(v, f"{where}[{i}]")
            if found:
                return found
    return None


def _depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON text (brackets inside strings skipped)."""
    depth = most = 0
    in_str = esc = False
    for c in text:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            most = max(most, depth)
        elif c in "]}":
            depth -= 1
    return most


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_value(path: Path, where: str, v: Any) -> None:
    """A golden value: null, true/false, a string, a finite number, or a list of those."""
    if isinstance(v, list):
        for i, x in enumerate(v):
            _check_value(path, f"{where}[{i}]", x)
    elif isinstance(v, float) and not math.isfinite(v):
        raise _damaged(path, f"{where}: {v} is not a finite number")
    elif not (v is None or isinstance(v, (bool, int, float, str))):
        raise _damaged(path, f"{where}: expected a number, string, true/false or null, got "
                             f"{'an object' if isinstance(v, dict) else type(v).__name__}")


def validate_golden(golden: Any, path: Path | str, bench=None) -> dict[str, Any]:
    """Check a parsed golden field by field (the module doc's rules); ``bench`` (a registry Bench, optional):
    the bench it must belong to -- its name, golden key and metrics. ConfigError naming the file and the field."""
    path = Path(path)
    if not isinstance(golden, dict):
        raise _damaged(path, f"not a golden file (expected a JSON object with {', '.join(FIELDS)}; got "
                             f"{'a list' if isinstance(golden, list) else type(golden).__name__})")
    unknown = [k for k in golden if k not in FIELDS]
    if unknown:
        raise _damaged(path, f"unknown field {unknown[0][:60]!r} (a golden has {', '.join(FIELDS)})")
    missing = [k for k in FIELDS if k not in golden]
    if missing:
        raise _damaged(path, f"field {missing[0]!r} is missing (a golden has {', '.join(FIELDS)})")
    version = golden["golden_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version != GOLDEN_VERSION:
        raise _damaged(path, f"golden_version {version!r}: this kernbench reads golden_version {GOLDEN_VERSION}")
    name = golden["bench"]
    if not isinstance(name, str) or not name:
        raise _damaged(path, f"bench {name!r}: expected the bench's name")
    spec_keys: list[str] | None = None
    spec_metrics: dict[str, str | None] | None = None
    if bench is not None:
        if name != bench.name:
            raise _damaged(path, f"bench {name!r}: the file is the golden of another bench, not of {bench.name!r}")
        spec_keys, spec_metrics = _spec(bench)
    if not isinstance(golden["smoke"], dict):
        raise _damaged(path, f"smoke: expected an object of --set values, got {type(golden['smoke']).__name__}")
    for k, v in golden["smoke"].items():
        _check_value(path, f"smoke.{k}", v)
    seed = golden["seed"]
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _damaged(path, f"seed {seed!r}: expected a whole number")
    key = golden["key"]
    if not isinstance(key, list) or not key or not all(isinstance(k, str) and k for k in key):
        raise _damaged(path, f"key {key!r}: expected a list of the result columns naming a row")
    if spec_keys is not None and key != spec_keys:
        raise _damaged(path, f"key {key!r}: bench {name!r} names its rows by {spec_keys!r} (its @bench golden key)")
    tolerances = golden["tolerances"]
    if not isinstance(tolerances, dict):
        raise _damaged(path, f"tolerances: expected an object of metric: tolerance, got "
                             f"{type(tolerances).__name__}")
    for m, spec in tolerances.items():
        if spec_metrics is not None and m not in spec_metrics:
            raise _damaged(path, f"tolerances.{m}: not a golden metric of bench {name!r} "
                                 f"(its metrics: {', '.join(spec_metrics)})")
        if not isinstance(spec, str):
            raise _damaged(path, f"tolerances.{m}: {spec!r}: expected exact, rel=X or abs=X")
        try:
            parse_tolerance(spec)
        except ConfigError as e:
            raise _damaged(path, f"tolerances.{m}: {e}") from None
    rows = golden["rows"]
    if not isinstance(rows, dict):
        raise _damaged(path, f"rows: expected an object of row name: metrics, got "
                             f"{'a list' if isinstance(rows, list) else type(rows).__name__}")
    for row, values in rows.items():
        if not isinstance(values, dict):
            raise _damaged(path, f"rows.{row}: expected an object of metric: value, got "
                                 f"{'a list' if isinstance(values, list) else type(values).__name__}")
        if spec_metrics is not None:
            extra = [m for m in values if m not in spec_metrics]
            if extra:
                raise _damaged(path, f"rows.{row}.{extra[0]}: not a golden metric of bench {name!r} "
                                     f"(its metrics: {', '.join(spec_metrics)})")
            lacking = [m for m in spec_metrics if m not in values]
            if lacking:
                raise _damaged(path, f"rows.{row}: lacks the golden metric {lacking[0]!r} of bench {name!r}")
        for m, v in values.items():
            _check_value(path, f"rows.{row}.{m}", v)
    return golden


def load_golden(path: Path | str, bench=None) -> dict[str, Any]:
    """Read and validate a golden file (``validate_golden``; ``bench``: the bench it must belong to).
    ConfigError naming the file and what is wrong, with the field."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no golden file: run `kernbench goldens --update --bench {path.stem}`")
    if not path.is_file():
        raise ConfigError(f"{path}: not a golden file (it is not a regular file)")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_GOLDEN_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the golden file: {e.strerror or e}") from None
    if len(raw) > MAX_GOLDEN_BYTES:
        raise _damaged(path, f"more than {MAX_GOLDEN_BYTES >> 20} MiB, not a golden file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _damaged(path, f"not UTF-8 text (byte {e.start})") from None
    if _depth(text) > MAX_GOLDEN_DEPTH:
        raise _damaged(path, f"nested more than {MAX_GOLDEN_DEPTH} deep, not a golden file")
    try:
        golden = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_Constant)
    except (ValueError, RecursionError) as e:
        raise _damaged(path, f"not valid JSON ({e})") from None
    flaw = _flaw(golden)
    if flaw:
        raise _damaged(path, flaw)
    return validate_golden(golden, path, bench)


def write_golden(path: Path | str, golden: Mapping[str, Any]) -> Path:
    return kio.write_json(Path(path), golden)


# ---- the command ----------------------------------------------------------------------------

def _selected(names: Iterable[str]):
    from kernbench.registry import get_bench, list_benches

    names = list(names)
    if names:
        benches = [get_bench(n) for n in names]
        for b in benches:
            if b.golden is None:
                raise ConfigError(f"bench {b.name!r} has no golden spec (add smoke= and golden= to its @bench)")
        return benches
    return [b for b in list_benches() if b.golden is not None]


def main(benches: Iterable[str] = (), update: bool = False, folder: str | Path | None = None) -> int:
    """``kernbench goldens [--update] [--bench NAME]...``: 0 when every golden holds (or was rewritten)."""
    import time

    from kernbench.registry import list_benches

    from kernbench.atomic_output import check_output_dir, check_output_file

    selected = _selected(benches)
    for b in selected:  # each bench's own golden spec, before any run
        _spec(b)
    # Every golden read (and, for --update, every path checked) before any smoke run.
    if folder is not None:
        if str(folder).strip() == "":
            raise ConfigError("--dir: empty path (give the golden folder)")
        if not update and not Path(folder).is_dir():
            raise ConfigError(f"--dir {folder}: " + ("not a folder" if os.path.lexists(folder) else "no such folder"))
    if update:
        check_output_dir(Path(folder) if folder is not None else default_folder(), "--dir")
    olds: dict[str, Any] = {}
    for b in selected:
        path = golden_path(b.name, folder)
        try:
            olds[b.name] = load_golden(path, b) if os.path.lexists(path) else None
        except ConfigError:
            if not update:
                raise
            olds[b.name] = None  # --update rewrites a damaged golden
        if update:
            check_output_file(path, "golden")
    bad = 0
    for b in selected:
        path = golden_path(b.name, folder)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"kernbench-golden-{b.name}-") as tmp:
            current = summarize(b, run_smoke(b, tmp))
        wall = time.perf_counter() - t0
        old = olds[b.name]
        diffs = compare(old, current) if old is not None else []
        if update:
            write_golden(path, current)
            if old is None:
                print(f"{b.name}: wrote {path} ({len(current['rows'])} rows, smoke run {wall:.1f} s)")
            elif diffs:
                print(f"{b.name}: updated {path}; {len(diffs)} value(s) moved:")
                for d in diffs:
                    print(f"    {d}")
            else:
                print(f"{b.name}: unchanged ({len(current['rows'])} rows, smoke run {wall:.1f} s)")
            continue
        if old is None:
            print(f"{b.name}: no golden at {path}: run `kernbench goldens --update --bench {b.name}`")
            bad += 1
            continue
        failing = [d for d in diffs if not d.ok]
        status = "FAIL" if failing else "ok"
        print(f"{b.name}: {status} ({len(current['rows'])} rows, {len(diffs)} moved within tolerance"
              if not failing else f"{b.name}: FAIL ({len(failing)} outside tolerance", end="")
        print(f", smoke run {wall:.1f} s)")
        for d in diffs:
            print(f"    {d}")
        bad += bool(failing)
    missing = [b.name for b in list_benches() if b.golden is None]
    if missing and not list(benches):
        print(f"benches without a smoke size/golden: {', '.join(missing)}")
    return 1 if bad else 0

"""Parameter sweeps: a grid of config and bench values, on one core, all cores or a Dask cluster.

    import kernbench
    df = kernbench.sweep("noc-load-latency",
                         grid={"system.routers.w": [2, 4], "bench.packet_bytes": [64, 256]},
                         executor="process", checkpoint="out/noc-sweep/checkpoint.jsonl")

or with a function of one point::

    def latency(point):
        system = point.load_system()          # the config with this point's overrides
        system.dma("read", "sip0.cube0.pe0", "sip0.cube1.hbm_ctrl.pe3", point.bench["bytes"])
        system.run()
        return {"latency_ns": float(system.dma_df()["latency_ps"][0]) / 1e3}

    df = kernbench.sweep(latency, grid={"fabric.model": ["packet", "flow"], "bench.bytes": [4096, 65536]})

Grid keys are config YAML paths (``system.sips.w``) or ``bench.<param>``;
every value is checked before anything runs, with the config loader's own
messages (a bad value names its path). The result is a pandas DataFrame,
one row per result row of each point (a function returning one dict gives
one row per point): ``point``, the grid values, the metrics, ``status``
("ok", "partial": the bench reported failures beside results, "failed"),
``error`` and ``wall_s``. A failing point is recorded and never stops the
others. Points are independent runs with the same seed, so every executor
gives the same numbers.

Executors: ``"serial"``; ``"process"`` (default; ``workers`` processes,
default all cores); ``"dask"`` (a LocalCluster of ``workers`` processes);
a ``dask.distributed.Client`` or a scheduler address (``"tcp://host:8786"``);
or any ``concurrent.futures.Executor``.

Checkpoints: with ``checkpoint=PATH`` (or ``out=DIR``: DIR/checkpoint.jsonl)
each finished point is appended to a JSON-lines file as it arrives (one
write of one line, flushed and synced); ``resume=True`` reads it back and
runs only the points it lacks (``retry_failed=True`` also re-runs failed
ones). A line cut short by a crash is dropped.

Grid columns are numbers: an axis whose values are quantities with a unit
(``"32 GB/s"``, ``"2 ns"``) becomes the column ``"KEY [UNIT]"`` holding
the numbers (``links.pe.bandwidth [GB/s]``: 32), in the unit written
when every value uses one, else in the dimension's base unit (B, B/s, ps,
Hz); sweep.json's ``grid_columns`` maps each renamed key to its column.
``plot=(X, Y)`` draws Y against X (a grid key or column, and a metric) into
``out`` as a PNG, one line per combination of the other grid columns.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from kernbench import atomic_output as kio
from kernbench import sweepjson
from kernbench._core import ConfigError, UsageError
from kernbench.overrides import BENCH_PREFIX, apply_bench_overrides
from kernbench.progress import progress_bar
from kernbench.runner import run_bench
from kernbench.units import parse_quantity, to_base

__all__ = ["Point", "sweep", "parse_grid", "progress_bar", "expand_grid"]  # progress_bar: kernbench.progress

CHECKPOINT_FORMAT = "kernbench.sweep.checkpoint"
CHECKPOINT_VERSION = 1
STATUS_COLUMNS = ("status", "error", "wall_s")


# ---- values and grids -------------------------------------------------------------

def _text(value: Any) -> str:
    """A grid value as --set text: lists as a,b,c; booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        return _text(value.item())
    return str(value)


def _plain(obj: Any) -> Any:
    """Python scalars, lists and dicts only (numpy values converted), so records are the same from every executor."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _plain(obj.tolist())
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


@dataclass
class Point:
    """One point of a sweep of a function: what ``fn(point)`` receives."""

    index: int
    params: dict[str, Any]                 # the grid values of this point, by grid key
    config: str | None                     # machine config file
    config_overrides: dict[str, str]       # fixed overrides, then this point's config values
    bench: dict[str, Any] = field(default_factory=dict)  # the ``bench.`` values, prefix stripped
    seed: int = 1

    def load_system(self, extra: Mapping[str, Any] | None = None):
        """The machine of this point (``kernbench.System``), with ``extra`` overrides on top."""
        from kernbench.system import System

        sets = dict(self.config_overrides)
        sets.update(extra or {})
        return System.load(self.config, set=sets, seed=self.seed)


# ---- the worker side (runs in any process) -------------------------------------------

def _load_fn(blob: bytes):
    import pickle

    try:
        import cloudpickle  # noqa: F401  (functions defined in notebooks and __main__)
    except ImportError:
        pass
    return pickle.loads(blob)


def _run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Run one point; never raises: an error is the point's record."""
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"key": task["key"], "point": task["index"], "params": task["params"],
                           "status": "ok", "error": "", "rows": []}
    try:
        if task.get("bench_paths"):  # plugin benches: the worker finds them where the caller did
            from kernbench.registry import add_bench_path

            add_bench_path(*task["bench_paths"])
        if task["kind"] == "bench":
            tmp = None
            out = task["out"]
            if out is None:
                tmp = tempfile.TemporaryDirectory(prefix="kernbench-sweep-")
                out = tmp.name
            try:
                res = run_bench(task["bench"], out=out, sets=task["sets"], seed=task["seed"],
                                config=task["config"], quiet=True)
            finally:
                if tmp is not None:
                    tmp.cleanup()
            rec["rows"] = _plain(res["results"])
            fails = res["failures"]
            if fails:
                rec["status"] = "partial" if rec["rows"] else "failed"
                rec["error"] = "; ".join(f"{f.get('name', '?')}: {f.get('error', '')}" for f in fails)
        else:
            fn = _load_fn(task["fn"])
            point = Point(index=task["index"], params=task["params"], config=task["config"],
                          config_overrides=task["config_overrides"], bench=task["bench_params"], seed=task["seed"])
            got = fn(point)
            if got is None:
                rows = []
            elif isinstance(got, Mapping):
                rows = [dict(got)]
            elif isinstance(got, (list, tuple)) and all(isinstance(r, Mapping) for r in got):
                rows = [dict(r) for r in got]
            else:
                raise UsageError(f"sweep function returned {type(got).__name__}: return a dict of metrics "
                                 "or a list of dicts")
            rec["rows"] = _plain(rows)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 -- a failing point never stops the sweep
        rec["status"] = "failed"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        rec["rows"] = []
    rec["wall_s"] = round(time.perf_counter() - t0, 6)
    return rec


# ---- checkpoints -------------------------------------------------------------------------

def _point_key(params: Mapping[str, Any]) -> str:
    return json.dumps({k: _text(v) for k, v in params.items()}, sort_keys=True)


class _Checkpoint:
    """A JSON-lines file: one header line, then one line per finished point."""

    def __init__(self, path: Path, identity: dict[str, Any]):
        self.path = path
        self.identity = identity

    def read(self) -> dict[str, dict[str, Any]]:
        """Finished points by key; a line cut short by a crash is dropped (and cut off the file)."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good: list[bytes] = []
        records: dict[str, dict[str, Any]] = {}
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                if i == len(lines) - 1:  # the last line, half-written when the sweep died
                    break
                raise ConfigError(f"{self.path}: line {i + 1} is not JSON: the checkpoint is damaged "
                                  "(delete it, or run without resume)") from None
            if not good:
                if obj.get("format") != CHECKPOINT_FORMAT:
                    raise ConfigError(f"{self.path}: not a kernbench sweep checkpoint")
                if obj.get("identity") != self.identity:
                    theirs = obj.get("identity", {})
                    diff = [k for k in sorted(set(theirs) | set(self.identity)) if theirs.get(k) != self.identity.get(k)]
                    raise ConfigError(
                        f"{self.path}: written by a different sweep ({', '.join(diff)} differ: "
                        + "; ".join(f"{k}: checkpoint {theirs.get(k)!r}, now {self.identity.get(k)!r}" for k in diff)
                        + "); use another checkpoint or run without resume")
            else:
                records[obj["key"]] = obj
            good.append(line)
        fixed = b"\n".join(good) + (b"\n" if good else b"")
        if fixed != raw:
            kio._atomic_write_bytes(self.path, fixed)
        return records

    def start(self, keep: Iterable[dict[str, Any]]) -> None:
        """Rewrite the file: header and the records kept from before."""
        lines = [json.dumps({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "identity": self.identity})]
        lines += [json.dumps(r) for r in keep]
        kio._atomic_write_bytes(self.path, ("\n".join(lines) + "\n").encode())

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)  # one write of one line: a crash leaves at most a cut last line
            os.fsync(fd)
        finally:
            os.close(fd)


# ---- executors -----------------------------------------------------------------------

def _is_dask_client(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "distributed" and hasattr(obj, "submit")


def _executor_name(executor: Any) -> str:
    if isinstance(executor, str):
        return "dask" if "://" in executor else executor
    if _is_dask_client(executor):
        return "dask"
    return type(executor).__name__


def _run_serial(tasks, on_done):
    for t in tasks:
        on_done(_run_task(t))


def _run_futures(pool, tasks, on_done):
    import concurrent.futures as cf

    futures = [pool.submit(_run_task, t) for t in tasks]
    try:
        for f in cf.as_completed(futures):
            on_done(f.result())
    except BaseException:
        for f in futures:
            f.cancel()
        raise


def _run_process(tasks, on_done, workers):
    import concurrent.futures as cf
    import multiprocessing as mp

    n = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    # forkserver: a clean child per worker, safe even when this process has threads.
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context(method)) as pool:
        _run_futures(pool, tasks, on_done)


def _run_dask(tasks, on_done, client):
    from distributed import as_completed

    futures = [client.submit(_run_task, t, pure=False) for t in tasks]
    try:
        for f in as_completed(futures):
            on_done(f.result())
    except BaseException:
        client.cancel(futures)
        raise


def _dispatch(executor, tasks, on_done, workers):
    if not tasks:
        return
    if isinstance(executor, str):
        if executor == "serial":
            return _run_serial(tasks, on_done)
        if executor == "process":
            return _run_process(tasks, on_done, workers)
        if executor == "dask" or "://" in executor:
            try:
                from distributed import Client, LocalCluster
            except ImportError:
                raise UsageError("executor 'dask' needs dask.distributed: pip install 'dask[distributed]'") from None
            if executor == "dask":
                n = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
                with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, Client(cluster) as client:
                    return _run_dask(tasks, on_done, client)
            with Client(executor) as client:
                return _run_dask(tasks, on_done, client)
        raise UsageError(f"unknown executor {executor!r} (known: serial, process, dask, a scheduler address "
                         "like tcp://host:8786, a dask Client or a concurrent.futures Executor)")
    if _is_dask_client(executor):
        return _run_dask(tasks, on_done, executor)
    if hasattr(executor, "submit"):
        return _run_futures(executor, tasks, on_done)
    raise UsageError(f"executor {executor!r}: expected 'serial', 'process', 'dask', an address, a Client "
                     "or an Executor")


# ---- the sweep ----------------------------------------------------------------------------

def _check_values(bench, points, fixed_sets, config) -> None:
    """Every grid value (and fixed override) checked alone, before anything runs."""
    from kernbench._core import load_config_summary

    if fixed_sets and config is not None:
        load_config_summary(str(config), list(fixed_sets))
    seen: set[tuple[str, str]] = set()
    for p in points:
        for k, v in p.items():
            if (k, _text(v)) in seen:
                continue
            seen.add((k, _text(v)))
            assignment = f"{k}={_text(v)}"
            if k.startswith(BENCH_PREFIX):
                if bench is not None:
                    apply_bench_overrides(bench.name, bench.params, [assignment])
                continue
            if bench is not None and not bench.uses_config:
                known = ", ".join(BENCH_PREFIX + n for n in bench.params) or "none"
                raise ConfigError(f"grid {assignment}: unknown key {k!r}: bench {bench.name!r} models no "
                                  f"machine config (its parameters: {known})")
            load_config_summary(str(config), [*fixed_sets, (k, _text(v))])


def sweep(
    target: Any,
    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
    executor: Any = "process",
    *,
    workers: int | None = None,
    sets: Mapping[str, Any] | Iterable[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    seed: int = 1,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    out: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    plot: tuple[str, str] | None = None,
):
    """Run ``target`` (a bench, by name or ``Bench``, or a function of a Point) at every point of ``grid``.

    Returns a pandas DataFrame (see the module doc for its columns).

    ``sets``: overrides fixed for every point (config paths and ``bench.``
    parameters). ``out``: write sweep.json, sweep.csv and the checkpoint
    there (and, for a bench, each point's own outputs under ``points/``).
    ``plot=(X, Y)``: also draw Y against X into ``out`` (see ``plot_sweep``;
    its file is listed in sweep.json's ``files``).
    Raises ConfigError for a bad grid key or value before running anything.
    """
    import pandas as pd

    from kernbench.registry import get_bench
    from kernbench.system import config_path

    t0 = time.perf_counter()
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"workers={workers!r}: expected a positive number of processes")
    if isinstance(executor, str) and executor not in ("serial", "process", "dask") and "://" not in executor:
        raise UsageError(f"unknown executor {executor!r} (known: serial, process, dask, a scheduler address "
                         "like tcp://host:8786, a dask Client or a concurrent.futures Executor)")
    points = expand_grid(grid)
    if plot is not None:
        if out is None:
            raise UsageError("plot=(X, Y) needs out=DIR (where the PNG goes)")
        if len(plot) != 2:
            raise UsageError(f"plot={plot!r}: expected (X, Y), two column names")
    columns = grid_columns(points)
    raw: dict[str, Any] = {}
    if isinstance(sets, Mapping):
        fixed = [(str(k), _text(v)) for k, v in sets.items()]
        raw = {str(k): v for k, v in sets.items()}
    else:
        fixed = []
        for text in sets or ():
            k, sep, v = str(text).partition("=")
            if not sep or not k.strip():
                raise ConfigError(f"--set {text!r}: expected PATH=VALUE, e.g. system.sips.w=4")
            fixed.append((k.strip(), v.strip()))
    fixed_config = [(k, v) for k, v in fixed if not k.startswith(BENCH_PREFIX)]
    fixed_bench = [(k, v) for k, v in fixed if k.startswith(BENCH_PREFIX)]

    from kernbench.registry import Bench

    if isinstance(target, Bench):
        target = target.name
    if isinstance(target, str):
        bench = get_bench(target)
        name, description = bench.name, bench.description
        params, _ = apply_bench_overrides(bench.name, bench.params, [f"{k}={v}" for k, v in fixed_bench])
        blob = None
    elif callable(target):
        bench = None
        name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"
        description = (target.__doc__ or "").strip().split("\n")[0]
        params = {k[len(BENCH_PREFIX):]: raw.get(k, v) for k, v in fixed_bench}
        try:
            import cloudpickle as pickler
        except ImportError:
            import pickle as pickler
        blob = pickler.dumps(target)
    else:
        raise UsageError(f"sweep target {target!r}: expected a bench name or a function of a Point")

    uses_config = bench is None or bench.uses_config
    cfg = config_path(config) if uses_config else None
    if bench is not None and not bench.uses_config and (config is not None or fixed_config):
        raise ConfigError(f"bench {bench.name!r} models no machine config: no --config or config --set")
    _check_values(bench, points, fixed_config, cfg)

    out_dir = Path(out) if out is not None else None
    ckpt_path = Path(checkpoint) if checkpoint is not None else (out_dir / "checkpoint.jsonl" if out_dir else None)
    if resume and ckpt_path is None:
        raise UsageError("resume=True needs a checkpoint (checkpoint=PATH or out=DIR)")
    identity = {"target": name, "seed": seed,
                "config_hash": sweepjson.config_hash(cfg, dict(fixed_config)) if cfg else None,
                "sets": [f"{k}={v}" for k, v in fixed]}
    done: dict[str, dict[str, Any]] = {}
    ck = None
    if ckpt_path is not None:
        ckpt_path.parent.mkdir(parents=True, exist_ok=True)
        ck = _Checkpoint(ckpt_path, identity)
        if resume:
            done = ck.read()
            if retry_failed:
                done = {k: r for k, r in done.items() if r["status"] != "failed"}
        ck.start(done.values())

    from kernbench.registry import bench_paths

    plugin_paths = [str(d) for d in bench_paths()]
    tasks = []
    for i, p in enumerate(points):
        key = _point_key(p)
        if key in done:
            done[key]["point"] = i
            continue
        task = {"key": key, "index": i, "params": _plain(p), "seed": seed,
                "config": str(cfg) if cfg else None, "bench_paths": plugin_paths}
        if bench is not None:
            task.update(kind="bench", bench=bench.name,
                        sets=[f"{k}={v}" for k, v in fixed] + [f"{k}={_text(v)}" for k, v in p.items()],
                        out=str(out_dir / "points" / f"p{i:04d}") if out_dir else None)
        else:
            task.update(kind="fn", fn=blob,
                        config_overrides={**dict(fixed_config),
                                          **{k: _text(v) for k, v in p.items() if not k.startswith(BENCH_PREFIX)}},
                        bench_params={**params, **{k[len(BENCH_PREFIX):]: v for k, v in p.items()
                                                   if k.startswith(BENCH_PREFIX)}})
        tasks.append(task)

    records: dict[str, dict[str, Any]] = dict(done)
    bar = progress_bar(total=len(points), desc=f"sweep {name}", enabled=progress, unit="point")
    bar.update(len(points) - len(tasks))

    def on_done(rec: dict[str, Any]) -> None:
        records[rec["key"]] = rec
        if ck is not None:
            ck.append(rec)
        bar.update(1)

    try:
        _dispatch(executor, tasks, on_done, workers)
    finally:
        bar.close()

    rows: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for i, p in enumerate(points):
        rec = records[_point_key(p)]
        base = {"point": i, **{columns[k][0] if k in columns else k: columns[k][1](v) if k in columns else v
                               for k, v in p.items()}}
        tail = {"status": rec["status"], "error": rec["error"], "wall_s": rec["wall_s"]}
        if rec["status"] != "ok":
            label = ", ".join(f"{k}={_text(v)}" for k, v in p.items())
            failures.append({"name": f"point {i} ({label})", "error": rec["error"], "point": i, "params": p})
        for r in rec["rows"] or [{}]:
            rows.append({**base, **{k: v for k, v in r.items() if k not in base and k not in tail}, **tail})
    df = pd.DataFrame(rows)
    df.attrs.update({"bench": name, "failures": failures, "points": len(points),
                     "computed": len(tasks), "wall_s": round(time.perf_counter() - t0, 3)})

    if out_dir is not None:
        doc = sweepjson.header("sweep", name, description=description, params=params, seed=seed, config=cfg,
                               config_overrides=dict(fixed_config))
        doc.update({"grid": {k: [_plain(v) for v in vals] for k, vals in grid.items()}
                    if isinstance(grid, Mapping) else {"points": _plain(points)},
                    "points": len(points), "executor": _executor_name(executor)})
        doc["results"] = _plain(rows)
        doc["failures"] = _plain(failures)
        doc["wall_s"] = df.attrs["wall_s"]
        if columns:
            doc["grid_columns"] = {k: col for k, (col, _) in columns.items()}
        doc["files"] = ["checkpoint.jsonl"] if ckpt_path == out_dir / "checkpoint.jsonl" else []
        plot_error = None
        if plot is not None:
            name_png = plot_name(*plot)
            grid_cols = [columns[k][0] if k in columns else k for k in (points[0] if points else {})]
            try:
                plot_sweep(df, plot[0], plot[1], out_dir / name_png, grid_keys=grid_cols,
                           title=f"{name}: {plot[1]} vs {plot[0]}")
                doc["files"].append(name_png)
                df.attrs["plot"] = str(out_dir / name_png)
            except ConfigError as e:
                plot_error = e
        _write_sweep_lenient(out_dir, doc)
        if plot_error is not None:  # sweep.json is written; the bad plot request is still an error
            raise plot_error
    return df


def _write_sweep_lenient(out_dir: Path, doc: dict[str, Any]) -> None:
    """sweep.json refuses NaN/inf: a function's non-finite metric is written as null, said in failures."""
    import math

    bad = []

    def clean(obj, where):
        if isinstance(obj, float) and not math.isfinite(obj):
            bad.append(where)
            return None
        if isinstance(obj, dict):
            return {k: clean(v, f"{where}.{k}") for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj

    doc["results"] = clean(doc["results"], "results")
    if bad:
        doc["failures"].append({"name": "non-finite values", "error": f"written as null: {', '.join(bad[:10])}"})
    sweepjson.write_sweep(out_dir, doc)

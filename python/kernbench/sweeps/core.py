"""The core of ``kernbench.sweeps``: ``sweep`` and ``Point`` (the package exports both; see its doc), and what
one point runs in any process (``_run_task``, the entry point the executors call: process and Dask workers
import it by its module path, ``kernbench.sweeps.core``)."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import contextlib

from kernbench import atomic_output as kio
from kernbench import sweepjson
from kernbench._core import ConfigError, UsageError
from kernbench.overrides import BENCH_PREFIX, apply_bench_overrides, check_params
from kernbench.progress import progress_bar
from kernbench.runner import check_seed, interrupt_reason, run_bench
from kernbench.sweeps import executors
from kernbench.sweeps.checkpoint import Checkpoint
from kernbench.sweeps.grid import expand_grid, grid_columns, plain, point_key, value_text
from kernbench.sweeps.plot import plot_name, plot_sweep

__all__ = ["Point", "sweep"]


# ---- a point, run in any process -------------------------------------------------------

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
                with kio.allow_inside_held(task.get("held")):  # the sweep's own locked folder
                    res = run_bench(task["bench"], out=out, sets=task["sets"], seed=task["seed"],
                                    config=task["config"], quiet=True)
            finally:
                if tmp is not None:
                    tmp.cleanup()
            rec["rows"] = plain(res["results"])
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
            rec["rows"] = plain(rows)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 -- a failing point never stops the sweep
        rec["status"] = "failed"
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        rec["rows"] = []
    rec["wall_s"] = round(time.perf_counter() - t0, 6)
    return rec


def _dispatch(executor, tasks, on_done, workers):
    """Run the points' tasks on ``executor`` (see kernbench.sweeps.executors), ``on_done`` for each record."""
    return executors.dispatch(executor, _run_task, tasks, on_done, workers)


# ---- the sweep ----------------------------------------------------------------------------

def _check_values(bench, points, fixed_sets, config) -> None:
    """Every grid value (and fixed override) checked alone, before anything runs."""
    from kernbench._core import load_config_summary

    if fixed_sets and config is not None:
        load_config_summary(str(config), list(fixed_sets))
    seen: set[tuple[str, str]] = set()
    for p in points:
        for k, v in p.items():
            if (k, value_text(v)) in seen:
                continue
            seen.add((k, value_text(v)))
            assignment = f"{k}={value_text(v)}"
            if k.startswith(BENCH_PREFIX):
                if bench is not None:
                    apply_bench_overrides(bench.name, bench.params, [assignment])
                continue
            if bench is not None and not bench.uses_config:
                known = ", ".join(BENCH_PREFIX + n for n in bench.params) or "none"
                raise ConfigError(f"grid {assignment}: unknown key {k!r}: bench {bench.name!r} models no "
                                  f"machine config (its parameters: {known})")
            load_config_summary(str(config), [*fixed_sets, (k, value_text(v))])


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

    Returns a pandas DataFrame (see the doc of ``kernbench.sweeps`` for its columns).

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
    check_seed(seed, "seed")
    if out is not None:
        kio.check_output_dir(out, "--out")
        for fname in ("sweep.json", "sweep.csv", "checkpoint.jsonl"):
            kio.check_output_file(Path(out) / fname, "--out")
    if checkpoint is not None:
        kio.check_output_file(checkpoint, "checkpoint")
        kio.check_not_inside_held(checkpoint, "checkpoint")
        if out is not None:  # one file for two outputs would garble both
            kio.check_distinct([*((f"--out's {n}", Path(out) / n) for n in ("sweep.json", "sweep.csv", kio.LOCK_NAME)),
                                ("checkpoint", checkpoint)])
            points_dir = Path(os.path.realpath(Path(out) / "points"))
            if points_dir in Path(os.path.realpath(checkpoint)).parents:
                raise UsageError(f"checkpoint {checkpoint}: inside {Path(out) / 'points'}, where the points' own "
                                 "outputs go (give a path outside it)")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"workers={workers!r}: expected a positive number of processes")
    if isinstance(executor, str) and executor not in ("serial", "process", "dask") and "://" not in executor:
        raise UsageError(f"unknown executor {executor!r} (known: serial, process, dask, a scheduler address "
                         "like tcp://host:8786, a dask Client or a concurrent.futures Executor)")
    if isinstance(executor, str) and "://" in executor:  # fail fast: no scheduler there is an error now, not in 30 s
        executors.check_scheduler(executor)
    points = expand_grid(grid)
    if plot is not None:
        if out is None:
            raise UsageError("plot=(X, Y) needs out=DIR (where the PNG goes)")
        if len(plot) != 2:
            raise UsageError(f"plot={plot!r}: expected (X, Y), two column names")
        kio.check_figure_file(Path(out) / plot_name(*plot), "--plot")  # before the points run
    columns = grid_columns(points)
    raw: dict[str, Any] = {}
    if isinstance(sets, Mapping):
        fixed = [(str(k), value_text(v)) for k, v in sets.items()]
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
    if bench is not None:  # the bench's own Param/checks over each point's full parameters, before any runs
        for p in points:
            every = [f"{k}={v}" for k, v in fixed_bench] + [f"{k}={value_text(v)}" for k, v in p.items()
                                                            if k.startswith(BENCH_PREFIX)]
            check_params(bench.name, apply_bench_overrides(bench.name, bench.params, every)[0],
                         bench.param_specs, bench.checks)

    out_dir = Path(out) if out is not None else None
    ckpt_path = Path(checkpoint) if checkpoint is not None else (out_dir / "checkpoint.jsonl" if out_dir else None)
    if resume and ckpt_path is None:
        raise UsageError("resume=True needs a checkpoint (checkpoint=PATH or out=DIR)")
    identity = {"target": name, "seed": seed,
                "config_hash": sweepjson.config_hash(cfg, dict(fixed_config)) if cfg else None,
                "sets": [f"{k}={v}" for k, v in fixed]}
    with kio.lock_output_dir(out_dir, "--out") if out_dir is not None else contextlib.nullcontext():
        done: dict[str, dict[str, Any]] = {}
        ck = None
        if ckpt_path is not None:
            ckpt_path.parent.mkdir(parents=True, exist_ok=True)
            ck = Checkpoint(ckpt_path, identity)
            if resume:
                done = ck.read()
                if retry_failed:
                    done = {k: r for k, r in done.items() if r["status"] != "failed"}
            ck.start(done.values())

        from kernbench.registry import bench_paths

        plugin_paths = [str(d) for d in bench_paths()]
        tasks = []
        for i, p in enumerate(points):
            key = point_key(p)
            if key in done:
                done[key]["point"] = i
                continue
            task = {"key": key, "index": i, "params": plain(p), "seed": seed,
                    "config": str(cfg) if cfg else None, "bench_paths": plugin_paths}
            if bench is not None:
                task.update(kind="bench", bench=bench.name,
                            sets=[f"{k}={v}" for k, v in fixed] + [f"{k}={value_text(v)}" for k, v in p.items()],
                            out=str(out_dir / "points" / f"p{i:04d}") if out_dir else None,
                            held=str(out_dir) if out_dir else None)
            else:
                task.update(kind="fn", fn=blob,
                            config_overrides={**dict(fixed_config),
                                              **{k: value_text(v) for k, v in p.items()
                                                 if not k.startswith(BENCH_PREFIX)}},
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

        interrupted: KeyboardInterrupt | None = None
        try:
            _dispatch(executor, tasks, on_done, workers)
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: sweep.json gets the finished points, then stop
            interrupted = e
        finally:
            bar.close()

        rows: list[dict[str, Any]] = []
        failures: list[dict[str, Any]] = []
        for i, p in enumerate(points):
            rec = records.get(point_key(p))
            if rec is None:  # not run: the sweep was interrupted
                continue
            base = {"point": i, **{columns[k][0] if k in columns else k: columns[k][1](v) if k in columns else v
                                   for k, v in p.items()}}
            tail = {"status": rec["status"], "error": rec["error"], "wall_s": rec["wall_s"]}
            if rec["status"] != "ok":
                label = ", ".join(f"{k}={value_text(v)}" for k, v in p.items())
                failures.append({"name": f"point {i} ({label})", "error": rec["error"], "point": i, "params": p})
            for r in rec["rows"] or [{}]:
                rows.append({**base, **{k: v for k, v in r.items() if k not in base and k not in tail}, **tail})
        if interrupted is not None:
            failures.append({"name": "sweep", "error": f"{interrupt_reason(interrupted)}: "
                             f"{len(records)} of {len(points)} points finished"})
        df = pd.DataFrame(rows)
        df.attrs.update({"bench": name, "failures": failures, "points": len(points),
                         "computed": len(tasks), "wall_s": round(time.perf_counter() - t0, 3)})

        if out_dir is not None:
            doc = sweepjson.header("sweep", name, description=description, params=params, seed=seed, config=cfg,
                                   config_overrides=dict(fixed_config))
            doc.update({"grid": {k: [plain(v) for v in vals] for k, vals in grid.items()}
                        if isinstance(grid, Mapping) else {"points": plain(points)},
                        "points": len(points), "executor": executors.executor_name(executor)})
            doc["results"] = plain(rows)
            doc["failures"] = plain(failures)
            doc["wall_s"] = df.attrs["wall_s"]
            if columns:
                doc["grid_columns"] = {k: col for k, (col, _) in columns.items()}
            doc["files"] = ["checkpoint.jsonl"] if ckpt_path == out_dir / "checkpoint.jsonl" else []
            plot_error = None
            if plot is not None and interrupted is None:
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
            if interrupted is not None:
                raise interrupted
            if plot_error is not None:  # sweep.json is written; the bad plot request is still an error
                raise plot_error
        if interrupted is not None:
            raise interrupted
        return df


def _write_sweep_lenient(out_dir: Path, doc: dict[str, Any]) -> None:
    """sweep.json refuses NaN/inf: a non-finite metric (of a function or a checkpointed point) is written as null,
    said in failures (``sweepjson.null_non_finite``)."""
    bad = sweepjson.null_non_finite(doc, ["results"])
    if bad:
        doc["failures"].append(sweepjson.non_finite_failure(bad, f"sweep {doc['bench']!r}"))
    sweepjson.write_sweep(out_dir, doc)

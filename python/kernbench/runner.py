"""Running a bench: parameters, output folder, sweep.json, failures, traces.

``run_bench`` always writes ``sweep.json`` (atomically, in the versioned
format of kernbench.sweepjson, with ``sweep.csv`` beside it), even when the
bench itself fails: the file then holds the failure, and the caller gets it
back. ``trace=PATH`` writes the Chrome/Perfetto trace of one panel the bench
exposes through ``ctx.trace(result, label)``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kernbench import atomic_output as kio
from kernbench import sweepjson
from kernbench._core import ConfigError, UsageError
from kernbench.overrides import apply_bench_overrides, check_params
from kernbench.progress import progress_bar
from kernbench.registry import Bench, get_bench

DEFAULT_SEED = 1
from kernbench.args import SEED_MAX, check_seed  # noqa: E402,F401  (re-exported: the CLI's and sweeps' seed rule)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt (``kernbench`` installs the handler), so both
    stop a run the same way: what finished is written, with an ``interrupted`` failure."""


def interrupt_reason(e: BaseException) -> str:
    """The ``error`` of the failure an interrupt records: ``interrupted (KeyboardInterrupt)`` or ``(SIGTERM)``."""
    return "interrupted (SIGTERM)" if isinstance(e, Terminated) else "interrupted (KeyboardInterrupt)"


@dataclass
class BenchContext:
    """What a bench function receives."""

    bench: Bench
    params: dict[str, Any]
    seed: int
    out: Path
    config: Path | None = None
    config_overrides: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    quiet: bool = False
    verify: bool = False
    # Benches append here as they go, so an interrupted run keeps what it finished.
    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    # --trace: where to write the chosen panel's trace, which panel (None:
    # the first one), the panels offered so far and what was written.
    trace_path: Path | None = None
    trace_panel: str | None = None
    panels: list[str] = field(default_factory=list)
    traced: dict[str, Any] | None = None
    # Critical paths of the runs (label, kernbench.critical_path.summarize dict),
    # printed as a table and written to critical_path.csv after the run.
    critical_paths: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _critical_ps: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)
    # Whether the machine is generated from a `system:` section (None: not yet asked), and the
    # "ignored on an explicit graph" lines already logged (each is logged once per run).
    _generated: bool | None = field(default=None, repr=False)
    _ignored_logged: set[str] = field(default_factory=set, repr=False)

    @property
    def tracing(self) -> bool:
        """Whether a trace is still wanted (benches may skip building traceable runs otherwise)."""
        return self.trace_path is not None and self.traced is None

    def trace(self, result: Any, label: str) -> None:
        """Offer a run as a traceable panel: a RunResult, or a System that ran DMA ops.

        With ``--trace FILE`` the first panel (or the one named by
        ``--trace-panel``) is written to FILE; otherwise this only records the label.
        """
        self.panels.append(label)
        self.critical_path(result, label)
        if not self.tracing or (self.trace_panel is not None and label != self.trace_panel):
            return
        from kernbench.trace import write_trace

        self.traced = write_trace(result, self.trace_path, label)
        self.log(f"  trace of {label!r}: {self.trace_path} ({self.traced['tracks']} tracks, "
                 f"{self.traced['events']} events)")

    def critical_path(self, result: Any, label: str) -> dict[str, Any] | None:
        """The critical path of a RunResult, a System that ran bare DMA ops or transfers, or a ready
        CriticalPath (e.g. ``k200.Result.critical_path()``)
        as the sweep.json dict (``{"length_ps", "makespan_ps", "share"}``), also listed in the summary
        printed after the run; None for anything else.

        One per label: a second call with the same label (e.g. ``ctx.trace`` then the row) returns the first."""
        from kernbench import _core
        from kernbench import critical_path

        for lbl, known in reversed(self.critical_paths[-8:]):  # benches ask right after offering the panel
            if lbl == label:
                return known
        given = isinstance(result, critical_path.CriticalPath)  # e.g. a K200 or vGPU run's exact path
        bare = hasattr(result, "dma_ops") and not given  # a System that ran bare DMA ops or transfers
        if not (given or bare) and not isinstance(getattr(result, "_core", result), _core.RunResult):
            return None
        try:
            path = result if given else critical_path.from_system(result, label) if bare else critical_path.of(result)
            cp = path.contract()
        except Exception as e:  # a broken walk is a failure of this row, not of the bench
            self.failures.append({"name": f"critical path of {label}", "error": f"{type(e).__name__}: {e}"})
            return None
        self.critical_paths.append((label, cp))
        self._critical_ps[label] = path.share_ps  # exact, for critical_path.csv
        return cp

    def progress(self, iterable: Iterable[Any], total: int | None = None, desc: str | None = None):
        """``iterable`` with a tqdm progress bar on stderr when it is a terminal (never when quiet)."""
        return progress_bar(iterable, total=total, desc=desc or self.bench.name, enabled=None if not self.quiet else False)

    @property
    def default_machine(self) -> bool:
        """Whether this run simulates the bench's default config unchanged: no other --config (a copy
        with the same bytes counts as the same), no config --set. Reference figures taken against the
        default machine are only claimed when this holds."""
        if not self.bench.uses_config or self.config_overrides:
            return False
        from kernbench.system import config_path

        default = Path(config_path(self.bench.config))
        mine = Path(self.config) if self.config is not None else default
        try:
            return mine.resolve() == default.resolve() or mine.read_bytes() == default.read_bytes()
        except OSError:
            return False

    def machine_label(self, default: str = "the default machine") -> str:
        """The machine this run simulates, in words: ``default`` when it is the bench's default config
        unchanged, else the config's file name and the --set overrides ("mine.yaml",
        "the default machine with system.cubes.w=2")."""
        if self.default_machine:
            return default
        from kernbench.system import config_path

        sets = ", ".join(f"{k}={v}" for k, v in self.config_overrides.items())
        default_path = Path(config_path(self.bench.config)) if self.bench.uses_config else None
        same_file = self.config is None or (default_path is not None
                                            and Path(self.config).resolve() == default_path.resolve())
        name = default if same_file else Path(self.config).name
        return f"{name} with {sets}" if sets else name

    @property
    def generated_machine(self) -> bool:
        """Whether this run's machine (--config with its --set overrides) is generated from a ``system:``
        section (SIPs, cubes, routers) rather than given as an explicit ``graph:``. The ``system.*`` keys a
        bench sets (e.g. model-step's ``sips``) shape only a generated machine."""
        if self._generated is None:
            self._generated = self.bench.uses_config and is_generated(self.config or self.bench.config,
                                                                      self.config_overrides)
        return self._generated

    def ignored_on_graph(self, what: str) -> None:
        """Log, once per run, that ``what`` (a bench parameter, a panel) is ignored because the machine is
        an explicit graph."""
        if what in self._ignored_logged:
            return
        self._ignored_logged.add(what)
        name = Path(self.config).name if self.config is not None else "the machine"
        self.log(f"{self.bench.name}: {what} ignored: {name} is an explicit graph "
                 f"(it shapes only a machine generated from a `system:` section)")

    def require_generated(self, why: str) -> None:
        """ConfigError (one line, no traceback) unless the machine is generated: for a bench whose
        subject is the generated machine's shape itself (``why`` says what it sweeps)."""
        if not self.generated_machine:
            name = self.config if self.config is not None else "the machine"
            raise ConfigError(f"--config {name}: bench {self.bench.name!r} {why}, which needs a generated "
                              f"`system:` machine; this config is an explicit `graph:`")

    def load_system(self, extra: Mapping[str, Any] | None = None, seed: int | None = None, *,
                    shaped_by: str | None = None):
        """The bench's machine: --config (default topology.yaml) with --set overrides, then `extra`.

        On an explicit-graph machine the ``system.*`` keys of ``extra`` (they shape only a generated
        machine) are left out, with one line in the log naming ``shaped_by`` (the bench parameter they
        come from, e.g. ``"bench.sips"``) or else the keys."""
        from kernbench.system import System

        sets: dict[str, Any] = dict(self.config_overrides)
        extra = dict(extra or {})
        shaping = [k for k in extra if k.startswith(GENERATED_PREFIX)]
        if shaping and not self.generated_machine:
            for k in shaping:
                del extra[k]
            self.ignored_on_graph(shaped_by or ", ".join(shaping))
        sets.update(extra)
        return System.load(self.config, set=sets, seed=self.seed if seed is None else seed)

    def log(self, message: str) -> None:
        """Progress and summary lines (stdout; off when quiet); printed above the progress bar if one shows."""
        if not self.quiet:
            bar = getattr(self.results, "bar", None)
            if bar is not None and not bar.disable:
                bar.write(message, file=sys.stdout)
            else:
                print(message, flush=True)

    def write_csv(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        path = kio.write_csv(self.out / name, rows)
        self.files.append(name)
        return path

    def save_figure(self, fig: Any, name: str) -> Path:
        """Save ``fig`` as OUT/name and close it in pyplot (it can still be saved again)."""
        path = kio.save_figure(fig, self.out / name)
        self.files.append(name)
        _close_figure(fig)
        return path


GENERATED_PREFIX = "system."  # the config section of a generated machine (SIPs, cubes, routers)


def is_generated(config: Path | str | None, overrides: Mapping[str, Any] | None = None) -> bool:
    """Whether ``config`` (a path or a packaged name; None: the default) with ``overrides`` describes a
    generated ``system:`` machine, not an explicit ``graph:``. Raises ConfigError for a bad config."""
    from kernbench import _core
    from kernbench.system import config_path, include_dirs, override_pairs

    summary = _core.load_config_summary(str(config_path(config)), override_pairs(overrides or {}), include_dirs())
    return summary["kind"] == "system"


def smoke_shaping(b: Bench, config: Path, config_overrides: dict[str, str]) -> list[str]:
    """The smoke size's ``system.*`` keys (they shape the default, generated machine) left in
    ``config_overrides`` with the smoke's own values, when ``config`` is an explicit graph: they are
    dropped from it (in place) and returned. A ``system.*`` value the user set otherwise stays, and is an
    error of the config."""
    if not b.smoke:
        return []

    def text(v: Any) -> str:  # a smoke value as its --set text (kernbench.goldens.smoke_sets writes the same)
        if isinstance(v, bool):
            return "true" if v else "false"
        return ",".join(text(x) for x in v) if isinstance(v, (list, tuple)) else str(v)

    keys = [k for k, v in b.smoke.items()
            if k.startswith(GENERATED_PREFIX) and k in config_overrides and str(config_overrides[k]) == text(v)]
    if not keys or is_generated(config):
        return []
    for k in keys:
        del config_overrides[k]
    return keys


def _close_figure(fig: Any) -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close(fig)
        except Exception:  # noqa: BLE001 -- not a pyplot figure: nothing to release
            pass


def _open_figures() -> set[int]:
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


class _CountingResults(list):
    """ctx.results that advances a progress bar as rows arrive (benches append as they go)."""

    def __init__(self, bar):
        super().__init__()
        self.bar = bar

    def append(self, row) -> None:
        super().append(row)
        self.bar.update(1)

    def extend(self, rows) -> None:
        rows = list(rows)
        super().extend(rows)
        self.bar.update(len(rows))


def run_bench(
    key: str | int,
    *,
    out: Path | str | None = None,
    sets: Iterable[str] = (),
    seed: int = DEFAULT_SEED,
    config: Path | str | None = None,
    quiet: bool = False,
    verify: bool = False,
    trace: Path | str | None = None,
    trace_panel: str | None = None,
) -> dict[str, Any]:
    """Run one bench; returns the sweep dict that was written to ``out/sweep.json``.

    Bad names, bad ``--set`` keys and values (the bench's own ``Param``/``checks`` included) and a
    seed outside 0..2**63-1 raise ConfigError before anything runs; so does an output path that
    cannot be written (UsageError: ``out`` not a folder, ``trace`` not a file). ``out`` is locked
    (``OUT/.kernbench.lock``) for the run: a second run into it is a UsageError.
    ``trace``: write the Chrome/Perfetto trace of the panel ``trace_panel``
    (default: the first the bench offers) there; no such panel is a failure.
    """
    b = get_bench(key)
    check_seed(seed)
    params, config_overrides = apply_bench_overrides(b.name, b.params, sets)
    check_params(b.name, params, b.param_specs, b.checks)
    ignored: list[str] = []
    if not b.uses_config:
        if config_overrides:
            path = next(iter(config_overrides))
            known = ", ".join("bench." + k for k in b.params) or "none"
            raise ConfigError(
                f"--set {path}={config_overrides[path]}: unknown key {path!r}: bench {b.name!r} "
                f"models no machine config (its parameters: {known})"
            )
        if config is not None:
            raise ConfigError(f"--config {config}: bench {b.name!r} models no machine config")
    else:
        # Load the machine once up front: a bad file or override is a clear
        # error before anything runs.
        from kernbench.system import System, config_path

        config = config_path(config if config is not None else b.config)
        # --smoke on an explicit graph: the smoke size's system.* keys shape only the default machine
        ignored = smoke_shaping(b, config, config_overrides)
        System.load(config, set=config_overrides)
    # Every output path checked before anything runs (a bad one would only fail at the end).
    kio.check_output_dir(out if out is not None else Path("out") / b.name, "--out")
    out_dir = Path(out) if out is not None else Path("out") / b.name
    for name in ("sweep.json", "sweep.csv"):  # e.g. a folder named sweep.json left in OUT
        kio.check_output_file(out_dir / name, "--out")
    check_run_outputs(b, out_dir, trace)
    with kio.lock_output_dir(out_dir, "--out"):
        return _run_locked(b, out_dir, params, config_overrides, seed, config, quiet, verify, trace, trace_panel,
                           ignored)


def run_outputs(b: Bench, out_dir: Path) -> list[tuple[str, Path]]:
    """The files a run of ``b`` into ``out_dir`` writes that are known before it runs, as ``(what, path)``."""
    names = ["sweep.json", "sweep.csv", "critical_path.csv", kio.LOCK_NAME, *(b.outputs or {})]
    return [("--out", out_dir)] + [(f"--out's {n}", out_dir / n) for n in dict.fromkeys(names)]


def check_run_outputs(b: Bench, out_dir: Path, trace: Path | str | None) -> None:
    """All the output paths of one run checked together, before anything runs: the trace a file (not a folder, not
    the out folder, not one of the run's own files such as OUT/sweep.json) and outside any folder another
    kernbench run holds locked (the out folder's own check is ``lock_output_dir``'s)."""
    if trace is None:
        return
    kio.check_output_file(trace, "--trace")
    kio.check_distinct([*run_outputs(b, out_dir), ("--trace", trace)])
    if any(Path(os.path.realpath(trace)) == p for p in Path(os.path.realpath(out_dir)).parents):
        raise UsageError(f"--trace {trace}: a folder above --out {out_dir} (give a file name)")
    kio.check_not_inside_held(trace, "--trace")


def _write_sweep(b: Bench, out_dir: Path, sweep: dict[str, Any]) -> None:
    """sweep.json (and sweep.csv), with the documented rule for non-finite numbers: each is written as null and
    named in ``failures`` (the bench, the row and the metric)."""
    bad = sweepjson.null_non_finite(sweep, [k for k in sweep if k != "failures"])
    if bad:
        sweep["failures"].append(sweepjson.non_finite_failure(bad, f"bench {b.name!r}"))
    sweepjson.write_sweep(out_dir, sweep)


def _run_locked(b, out_dir, params, config_overrides, seed, config, quiet, verify, trace, trace_panel,
                ignored=()):
    # Figures a bench leaves open in pyplot are closed after it (runs in one process -- serial sweeps,
    # goldens, tests -- would otherwise pile them up).
    before = _open_figures()
    try:
        return _run_bench_func(b, out_dir, params, config_overrides, seed, config, quiet, verify, trace,
                               trace_panel, ignored)
    finally:
        plt = sys.modules.get("matplotlib.pyplot")
        for num in _open_figures() - before:
            plt.close(num)


def _run_bench_func(b, out_dir, params, config_overrides, seed, config, quiet, verify, trace, trace_panel,
                    ignored=()):
    ctx = BenchContext(
        bench=b,
        params=params,
        seed=seed,
        out=out_dir,
        config=Path(config) if config is not None else None,
        config_overrides=config_overrides,
        quiet=quiet,
        verify=verify,
        trace_path=Path(trace) if trace is not None else None,
        trace_panel=trace_panel,
    )
    # A bar of finished result rows on stderr, when it is a terminal and not --quiet.
    bar = progress_bar(total=None, desc=b.name, enabled=None if not quiet else False, unit="row")
    if hasattr(bar, "disable"):
        ctx.results = _CountingResults(bar)
    sweep = sweepjson.header("bench", b.name, description=b.description, params=params, seed=seed,
                             config=config, config_overrides=config_overrides)
    sweep["verify"] = verify
    if ignored:
        ctx.ignored_on_graph("the smoke size's " + ", ".join(f"{k}={b.smoke[k]}" for k in ignored))
    t0 = time.perf_counter()
    try:
        produced = b.func(ctx) or {}
        sweep["results"] = list(produced.get("results", []))
        sweep["failures"] = list(produced.get("failures", []))
        for k, v in produced.items():
            if k not in ("results", "failures"):
                sweep[k] = v
    except ConfigError:
        if hasattr(bar, "close"):
            bar.close()
        raise
    except KeyboardInterrupt as e:
        # Ctrl-C or SIGTERM: write what the bench had finished, then stop.
        sweep["results"] = list(ctx.results)
        if hasattr(bar, "close"):
            bar.close()
        sweep["failures"] = [*ctx.failures, {"name": b.name, "error": interrupt_reason(e)}]
        sweep["wall_s"] = round(time.perf_counter() - t0, 3)
        sweep["files"] = list(ctx.files)
        _write_sweep(b, out_dir, sweep)
        raise
    except Exception as e:  # the bench crashed: keep what we know, say why
        sweep["results"] = list(ctx.results)
        sweep["failures"] = list(ctx.failures)
        sweep["failures"].append(
            {"name": b.name, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        )
        print(f"kernbench: bench {b.name!r} failed: {type(e).__name__}: {e}", file=sys.stderr)
    _report_critical_paths(ctx)
    if ctx.trace_path is not None:
        sweep["trace"] = ctx.traced
        if ctx.traced is None:
            offered = ", ".join(repr(p) for p in ctx.panels[:20]) or "none"
            what = f"no panel {trace_panel!r}" if trace_panel is not None else "no traceable panel"
            sweep["failures"].append({"name": "trace", "error": f"--trace: bench {b.name!r} offered {what} "
                                      f"(panels: {offered}{', ...' if len(ctx.panels) > 20 else ''})"})
    if hasattr(bar, "close"):
        bar.close()
    sweep["wall_s"] = round(time.perf_counter() - t0, 3)
    sweep["files"] = list(ctx.files)
    _write_sweep(b, out_dir, sweep)
    return sweep


def _report_critical_paths(ctx: BenchContext, show: int = 8) -> None:
    """After a run: the critical-path table (the first ``show`` runs) and critical_path.csv (all of them)."""
    if not ctx.critical_paths:
        return
    from kernbench.critical_path import share_table

    rows = []
    for label, cp in ctx.critical_paths:
        for name, frac in cp["share"].items():
            exact = ctx._critical_ps.get(label, {})
            rows.append({"run": label, "label": name, "share": frac,
                         "time_ps": exact.get(name, round(frac * cp["length_ps"])),
                         "length_ps": cp["length_ps"], "makespan_ps": cp["makespan_ps"]})
    try:
        ctx.write_csv("critical_path.csv", rows)
    except OSError as e:
        ctx.failures.append({"name": "critical_path.csv", "error": f"{type(e).__name__}: {e}"})
    shown = ctx.critical_paths[:show]
    more = len(ctx.critical_paths) - len(shown)
    ctx.log(f"critical paths ({len(ctx.critical_paths)} runs; time on the path by label):")
    ctx.log(share_table(shown) + (f"\n  ... {more} more in critical_path.csv" if more > 0 else ""))

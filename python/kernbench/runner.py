"""Running a bench: parameters, output folder, sweep.json, failures.

``run_bench`` always writes ``sweep.json`` (atomically), even when the bench
itself fails: the file then holds the failure, and the caller gets it back.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kernbench import io as kio
from kernbench._core import ConfigError
from kernbench.overrides import apply_bench_overrides
from kernbench.registry import Bench, get_bench

DEFAULT_SEED = 1


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

    def load_system(self, extra: Mapping[str, Any] | None = None, seed: int | None = None):
        """The bench's machine: --config (default topology.yaml) with --set overrides, then `extra`."""
        from kernbench.system import System

        sets: dict[str, Any] = dict(self.config_overrides)
        sets.update(extra or {})
        return System.load(self.config, set=sets, seed=self.seed if seed is None else seed)

    def log(self, message: str) -> None:
        """Progress and summary lines (stdout; off when quiet)."""
        if not self.quiet:
            print(message, flush=True)

    def write_csv(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        path = kio.write_csv(self.out / name, rows)
        self.files.append(name)
        return path

    def save_figure(self, fig: Any, name: str) -> Path:
        path = kio.save_figure(fig, self.out / name)
        self.files.append(name)
        return path


def run_bench(
    key: str | int,
    *,
    out: Path | str | None = None,
    sets: Iterable[str] = (),
    seed: int = DEFAULT_SEED,
    config: Path | str | None = None,
    quiet: bool = False,
    verify: bool = False,
) -> dict[str, Any]:
    """Run one bench; returns the sweep dict that was written to ``out/sweep.json``.

    Bad names and bad ``--set`` keys raise ConfigError before anything runs.
    """
    b = get_bench(key)
    params, config_overrides = apply_bench_overrides(b.name, b.params, sets)
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

        config = config_path(config)
        System.load(config, set=config_overrides)
    out_dir = Path(out) if out is not None else Path("out") / b.name
    ctx = BenchContext(
        bench=b,
        params=params,
        seed=seed,
        out=out_dir,
        config=Path(config) if config is not None else None,
        config_overrides=config_overrides,
        quiet=quiet,
        verify=verify,
    )
    sweep: dict[str, Any] = {
        "bench": b.name,
        "description": b.description,
        "params": params,
        "seed": seed,
        "config": str(config) if config is not None else None,
        "config_overrides": config_overrides,
        "verify": verify,
        "results": [],
        "failures": [],
    }
    t0 = time.perf_counter()
    try:
        produced = b.func(ctx) or {}
        sweep["results"] = list(produced.get("results", []))
        sweep["failures"] = list(produced.get("failures", []))
        for k, v in produced.items():
            if k not in ("results", "failures"):
                sweep[k] = v
    except ConfigError:
        raise
    except KeyboardInterrupt:
        # Ctrl-C: write what the bench had finished, then stop.
        sweep["results"] = list(ctx.results)
        sweep["failures"] = [*ctx.failures, {"name": b.name, "error": "interrupted (KeyboardInterrupt)"}]
        sweep["wall_s"] = round(time.perf_counter() - t0, 3)
        sweep["files"] = ["sweep.json", *ctx.files]
        kio.write_json(out_dir / "sweep.json", sweep)
        raise
    except Exception as e:  # the bench crashed: keep what we know, say why
        sweep["results"] = list(ctx.results)
        sweep["failures"] = list(ctx.failures)
        sweep["failures"].append(
            {"name": b.name, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        )
        print(f"kernbench: bench {b.name!r} failed: {type(e).__name__}: {e}", file=sys.stderr)
    sweep["wall_s"] = round(time.perf_counter() - t0, 3)
    sweep["files"] = ["sweep.json", *ctx.files]
    kio.write_json(out_dir / "sweep.json", sweep)
    return sweep

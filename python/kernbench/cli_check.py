"""A dry check of a ``kernbench`` command line: parsed by the real parser, its names and values checked, nothing run.

Internal (the test that executes the docs' snippets, tests/python/test_doc_snippets.py, uses it for the commands
the docs show): ``check_command(["run", "--bench", "pe-dma-perf", "--set", "fabric.model=flow"])`` raises the error
the command itself would raise up front for a bad bench name, ``--set`` key or value, grid value, seed, machine
config or ``--free`` bound, and returns a one-line account of what it checked. Paths the user supplies that a
command reads or writes (run folders, measured-data files, nccl-tests logs, plugin folders) need not exist; when
one does, a machine config among them is loaded and a measured-data file read.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from kernbench._core import ConfigError, UsageError


def _parse(argv: list[str]):
    from kernbench.cli import parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parser().parse_args(argv)
    except SystemExit:
        raise UsageError(f"kernbench {' '.join(argv)}: {err.getvalue().strip() or 'not a valid command'}") from None


def _load(config: str | None, sets: list[str] | dict) -> None:
    from kernbench.system import System, config_path

    System.load(config_path(config), set=sets)


def _bench_sets(b, sets: list[str], smoke: bool) -> dict[str, str]:
    """The bench's params checked (as `run` does); returns the config overrides."""
    from kernbench.goldens import smoke_sets
    from kernbench.overrides import apply_bench_overrides, check_params

    if smoke and not b.smoke:
        raise ConfigError(f"--smoke: bench {b.name!r} has no smoke size")
    params, config = apply_bench_overrides(b.name, b.params, (smoke_sets(b) if smoke else []) + list(sets))
    check_params(b.name, params, b.param_specs, b.checks)
    if not b.uses_config and config:
        raise ConfigError(f"--set {next(iter(config))}: bench {b.name!r} models no machine config")
    return config


def _run(a) -> str:
    from kernbench.registry import get_bench
    from kernbench.runner import check_seed, smoke_shaping
    from kernbench.system import config_path

    b = get_bench(a.bench)
    check_seed(a.seed)
    config = _bench_sets(b, a.sets, a.smoke)
    if b.uses_config:
        path = config_path(a.config if a.config is not None else b.config)
        smoke_shaping(b, path, config)  # drops the smoke size's system.* keys on an explicit graph, as run does
        _load(str(path), config)
    elif a.config is not None:
        raise ConfigError(f"--config {a.config}: bench {b.name!r} models no machine config")
    return f"run {b.name}: bench, --set and config checked"


def _sweep(a) -> str:
    from kernbench.overrides import coerce
    from kernbench.registry import get_bench
    from kernbench.runner import check_seed
    from kernbench.sweeps import parse_grid
    from kernbench.system import config_path

    b = get_bench(a.bench)
    check_seed(a.seed)
    if not a.grid:
        raise ConfigError("sweep: give at least one --grid KEY=V1,V2")
    lists = [f"bench.{k}" for k, v in b.params.items() if isinstance(v, (list, tuple))]
    grid = parse_grid(a.grid, lists)
    config = _bench_sets(b, a.sets, a.smoke)
    path = str(config_path(a.config if a.config is not None else b.config)) if b.uses_config else None
    for key, values in grid.items():
        for v in values:
            if key.startswith("bench."):
                name = key[len("bench."):]
                if name not in b.params:
                    raise ConfigError(f"--grid {key}: unknown parameter {name!r} of bench {b.name!r}")
                try:
                    coerce(v, b.params[name])
                except ValueError as e:
                    raise ConfigError(f"--grid {key}: {e}") from None
            elif path is None:
                raise ConfigError(f"--grid {key}: bench {b.name!r} models no machine config")
            else:
                _load(path, {**config, key: v})
    return f"sweep {b.name}: {sum(len(v) for v in grid.values())} grid values checked"


def _calibrate(a) -> str:
    from kernbench.calibrate.data import load_data
    from kernbench.calibrate.fit import parse_free
    from kernbench.config import config_overrides

    for f in a.free:
        parse_free(f)
    config_overrides(a.sets)
    for path in (a.config, a.check):
        if path is not None:
            _load(path, a.sets)
    if Path(a.data).is_file():
        load_data(a.data)
    return f"calibrate: {len(a.free)} --free checked"


def check_command(argv: list[str]) -> str:
    """Check ``kernbench ARGV`` without running it (see the module's docstring); raises its error when bad."""
    a = _parse(list(argv))
    if getattr(a, "bench_path", None):
        from kernbench.registry import add_bench_path

        dirs = [d for d in a.bench_path if Path(d).is_dir()]
        if dirs:
            add_bench_path(*dirs)
    cmd = a.command
    if cmd in ("list", "schema"):
        return cmd
    if cmd == "describe":
        from kernbench.registry import get_bench

        return f"describe {get_bench(a.bench).name}"
    if cmd in ("validate", "show"):
        files = a.file if cmd == "validate" else [a.file]
        for f in files:
            _load(f, a.sets)
        return f"{cmd}: {len(files)} config(s) loaded"
    if cmd == "run":
        return _run(a)
    if cmd == "sweep":
        return _sweep(a)
    if cmd == "goldens":
        from kernbench.registry import get_bench

        for name in a.bench:
            if not get_bench(name).smoke:
                raise ConfigError(f"--bench {name}: no smoke size, so no golden")
        return "goldens"
    if cmd == "diff":
        from kernbench.registry import get_bench

        if a.bench is not None:
            get_bench(a.bench)
        for side in (a.a, a.b):
            if side.endswith((".yaml", ".yml")) and Path(side).is_file():
                _load(side, a.sets)
        return "diff"
    if cmd == "calibrate":
        return _calibrate(a)
    if cmd == "compare-nccl":
        from kernbench.nccl import resolve_machine

        _load(str(resolve_machine(a.config)), [])
        return f"compare-nccl on {a.config}"
    if cmd == "serve":
        from kernbench.workloads import WorkloadError, get_model

        try:
            get_model(a.model)  # a catalog name, an HF config.json or a YAML model spec
        except WorkloadError as e:
            raise ConfigError(f"--model {a.model}: {e}") from None
        from kernbench.serve_cli import checked_args

        checked_args(a)
        _load(a.config, [])
        return f"serve {a.model}"
    raise UsageError(f"kernbench {cmd}: no dry check for this verb")  # a verb added to the CLI but not here

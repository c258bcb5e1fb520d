"""The ``kernbench`` command line.

    kernbench list [--bench-path DIR]...
    kernbench describe NAME|INDEX [--bench-path DIR]... [--json]
    kernbench validate FILE [--set PATH=VALUE]... [--include-dir DIR]...
    kernbench schema [--markdown] | kernbench schema --config FILE [--set PATH=VALUE]... [--json]
    kernbench run --bench NAME|INDEX [--out DIR] [--set KEY=VALUE]... [--seed N] [--config FILE]
                  [--trace FILE [--trace-panel LABEL]] [--smoke | --full-check] [--bench-path DIR]...
    kernbench sweep --bench NAME --grid KEY=V1,V2 ... [--executor serial|process|dask]
                    [--scheduler ADDR] [--workers N] [--resume] [--out DIR] [--smoke] [--plot X Y]
                    [--bench-path DIR]...
    kernbench show [CONFIG] [--set PATH=VALUE]... [--png FILE]
    kernbench goldens [--update] [--bench NAME]... [--dir DIR]
    kernbench diff A B [--bench NAME] [--set KEY=VALUE]... [--smoke] [--rtol R] [--metric PATTERN]... [--json]
    kernbench calibrate --data FILE [--free PATH=LO..HI]... [--fit-on GROUPS] [--cv-by KEY] [--out DIR]
    kernbench calibrate --check OVERLAY --data FILE [--tolerance T]
    kernbench compare-nccl LOG --config MACHINE [--collective NAME] [--out DIR]

Plugin benches: ``--bench-path DIR`` (repeatable), the ``KERNBENCH_BENCH_PATH``
environment variable (folders separated by ``os.pathsep``) and the entry
point group ``kernbench.benches`` (see kernbench.registry).

Config includes: a config's ``include:`` may read its own folder tree and the
packaged configs; ``--include-dir DIR`` (repeatable, on every verb that loads
a config: validate, run, sweep, show, diff) and the ``KERNBENCH_INCLUDE_PATH``
environment variable (folders separated by ``os.pathsep``) allow more.

Library errors become one line on stderr and an exit code: 2 for bad input
(unknown bench, bad --set or --seed, an output path that cannot be written,
an output folder another run holds), 1 when a bench ran and reported failures or
when ``validate`` found the config invalid, 130 for Ctrl-C (SIGINT) and 143
for SIGTERM: both write what had finished first (see docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from kernbench._core import ConfigError, KernbenchError, UsageError
from kernbench.config import describe, validate
from kernbench.registry import list_benches
from kernbench.runner import DEFAULT_SEED, Terminated, check_seed, run_bench


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), like every other error."""

    def error(self, message: str):
        self.exit(2, f"kernbench: error: {_one_line(message)} (see `{self.prog} --help`)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernbench", description="Discrete-event simulation of accelerator hardware.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def bench_path(parser):
        parser.add_argument("--bench-path", dest="bench_path", action="append", default=[], metavar="DIR",
                            help="also load the bench plugins (*.py) of DIR (repeatable; "
                                 "the KERNBENCH_BENCH_PATH variable adds more)")

    def include_dir(parser):
        parser.add_argument("--include-dir", dest="include_dirs", action="append", default=[], metavar="DIR",
                            help="let config includes read DIR too (repeatable; the config's own folder tree and "
                                 "the packaged configs always; KERNBENCH_INCLUDE_PATH adds more)")

    ls = sub.add_parser("list", help="list the benches with their indices")
    bench_path(ls)

    de = sub.add_parser("describe", help="a bench's description, parameters, smoke size, outputs and config")
    de.add_argument("bench", help="bench name or index (see `kernbench list`)")
    de.add_argument("--json", action="store_true", help="the same as JSON on stdout")
    bench_path(de)

    v = sub.add_parser("validate", help="check a machine config strictly and summarise it")
    v.add_argument("file", nargs="+", help="YAML machine config(s): each is checked, a bad one does not stop the rest")
    v.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a config value, e.g. system.sips.w=4 (repeatable)",
    )
    include_dir(v)

    sc = sub.add_parser("schema", help="print the machine-config schema (JSON, or the Markdown reference)")
    sc.add_argument("--markdown", action="store_true", help="the reference as Markdown (docs/config-reference.md)")
    sc.add_argument("--config", default=None, metavar="FILE",
                    help="instead: the provenance of FILE's values (datasheet, fitted on which rows, or assumed), "
                         "with its includes and --set applied; --json for JSON")
    sc.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                    help="override a value of --config (its provenance becomes none)")
    sc.add_argument("--json", action="store_true", help="with --config: the records as JSON")
    include_dir(sc)

    r = sub.add_parser("run", help="run one bench")
    r.add_argument("--bench", required=True, help="bench name or index (see `kernbench list`)")
    r.add_argument("--out", default=None, help="output folder (default: out/<bench>)")
    r.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter: bench.KEY=VALUE, or a config path (repeatable)",
    )
    r.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    r.add_argument("--config", default=None, help="machine config file, for benches that simulate one")
    r.add_argument("--quiet", action="store_true", help="no progress or summary output")
    r.add_argument("--verify", action="store_true", help="check the bench's invariants; violations fail the run")
    r.add_argument("--trace", default=None, metavar="FILE",
                   help="write a Chrome/Perfetto trace (one track per engine) of one panel to FILE")
    r.add_argument("--trace-panel", default=None, metavar="LABEL",
                   help="which panel to trace (default: the first the bench offers)")
    size = r.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true",
                      help="the bench's smoke size (its golden-regression size; --set applies on top)")
    size.add_argument("--full-check", dest="full_check", action="store_true",
                      help="the bench's full-check size (what CI runs: every code path of the default, fewer "
                           "points; the default size when it declares none; --set applies on top)")
    bench_path(r)
    include_dir(r)

    sw = sub.add_parser("sweep", help="run a bench over a grid of config and bench values")
    sw.add_argument("--bench", required=True, help="bench name or index")
    sw.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                    help="a grid axis: a config path or bench.PARAM and its values (repeatable); "
                         "list-valued bench parameters separate values with ';'")
    sw.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="a value fixed for every point (repeatable)")
    sw.add_argument("--executor", default="process", choices=["serial", "process", "dask"],
                    help="where points run (default: process, all cores)")
    sw.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="dask scheduler address, e.g. tcp://host:8786 (implies --executor dask)")
    sw.add_argument("--workers", type=int, default=None, help="processes (process, local dask); default: all cores")
    sw.add_argument("--resume", action="store_true", help="keep the points in OUT/checkpoint.jsonl, run the rest")
    sw.add_argument("--retry-failed", action="store_true", help="with --resume, also re-run failed points")
    sw.add_argument("--out", default=None, help="output folder (default: out/<bench>-sweep)")
    sw.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    sw.add_argument("--config", default=None, help="machine config file")
    sw.add_argument("--quiet", action="store_true", help="no summary output")
    sw.add_argument("--smoke", action="store_true",
                    help="every point at the bench's smoke size (--set and the grid apply on top)")
    sw.add_argument("--plot", nargs=2, default=None, metavar=("X", "Y"),
                    help="draw column Y against X (a grid key or column) into OUT/Y-vs-X.png")
    bench_path(sw)
    include_dir(sw)

    sh = sub.add_parser("show", help="summarise a machine config: node kinds, link classes, the SIP grid")
    sh.add_argument("file", nargs="?", default=None, help="YAML machine config (default: topology.yaml)")
    sh.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                    help="override a config value (repeatable)")
    sh.add_argument("--png", default=None, metavar="FILE", help="also draw the machine to a PNG")
    include_dir(sh)

    g = sub.add_parser("goldens", help="check the benches' smoke runs against tests/goldens, or refresh them")
    g.add_argument("--update", action="store_true", help="rewrite the golden files and print what moved")
    g.add_argument("--bench", action="append", default=[], help="only this bench (repeatable; default: all with a smoke size)")
    g.add_argument("--dir", default=None, help="golden folder (default: tests/goldens)")

    d = sub.add_parser("diff", help="what moved between two runs (sweep.json files, run folders or configs)")
    d.add_argument("a", help="sweep.json, a bench output folder, or a machine config (YAML)")
    d.add_argument("b", help="the same for the other side")
    d.add_argument("--bench", default=None,
                   help="for configs: the bench run on each (default: the other side's bench, else pe-dma-perf)")
    d.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="for configs: an override applied to both runs (repeatable)")
    d.add_argument("--smoke", action="store_true", help="for configs: run the bench at its smoke size")
    d.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"for configs: random seed (default {DEFAULT_SEED})")
    d.add_argument("--out", default=None, help="for configs: where the two runs go (default: out/diff/...)")
    d.add_argument("--rtol", type=float, default=1e-9, help="relative change below which a number is unchanged")
    d.add_argument("--top", type=int, default=10, help="links and engines listed (default 10; 0: all)")
    d.add_argument("--metric", action="append", default=[], metavar="PATTERN",
                   help="only metrics matching PATTERN: a glob (*latency*, critical_path.*) or else a "
                        "substring (repeatable: any of them)")
    d.add_argument("--json", action="store_true", help="the diff as JSON on stdout")
    include_dir(d)
    from kernbench import calibrate_cli, serve_cli

    calibrate_cli.add_parser(sub)
    _compare_nccl_parser(sub)

    serve_cli.add_parser(sub)
    return p


def _compare_nccl_parser(sub) -> None:
    n = sub.add_parser("compare-nccl", help="put the model beside a user's nccl-tests *_perf output: errors and a plot")
    n.add_argument("log", help="an nccl-tests output (all_reduce_perf ... > LOG), complete or cut short")
    n.add_argument("--config", required=True, metavar="MACHINE",
                   help="machine config: a file, or a preset name (h100-8x-nvswitch, a100-8x-nvswitch, l40s-8x-pcie)")
    n.add_argument("--collective", default=None, metavar="NAME",
                   help="all_reduce, all_gather, reduce_scatter or broadcast (default: the log's own, else all_reduce)")
    n.add_argument("--algorithm", default=None,
                   help="the model's algorithm (default auto: the NCCL tuner's on a GPU machine, else ring; another "
                        "name is refused unless it has the collective, see kernbench.ccl.algorithms())")
    n.add_argument("--out", default="out/compare-nccl", help="output folder (default: out/compare-nccl)")
    n.add_argument("--no-plot", action="store_true", help="write no PNG")
    n.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")


def _cmd_compare_nccl(args: argparse.Namespace) -> int:
    from kernbench.atomic_output import check_output_dir, hold_output_dir

    check_seed(args.seed)
    check_output_dir(args.out, "--out")
    with hold_output_dir(args.out, "--out"):  # the whole command, as run and sweep hold theirs
        return _compare_nccl(args)


def _compare_nccl(args: argparse.Namespace) -> int:
    from kernbench import nccl

    res = nccl.compare_log(args.log, args.config, collective=args.collective, algorithm=args.algorithm,
                           seed=args.seed)
    print(f"{res['log']}: {res['collective']} ({res['collective_from']}), {res['ranks']} ranks, model "
          f"{res['algorithm']} on {res['config']}; busbw = algbw x {res['busbw_factor']:.4g}")
    for note in res["notes"]:
        print(f"  note: {note}")
    print(nccl.compare_text(res["rows"]))
    for f in res["failures"]:
        print(f"  no model at {f['size']} B: {f['error']}")
    if res["mean_abs_busbw_error_from_1MiB"] is not None:
        print(f"mean |busbw error| from 1 MiB up: {100 * res['mean_abs_busbw_error_from_1MiB']:.1f} %")
    for path in nccl.write_comparison(res, args.out, plot=not args.no_plot).values():
        print(f"wrote {path}")
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from kernbench.diff import diff_paths, format_diff

    d = diff_paths(args.a, args.b, bench=args.bench, sets=args.sets, smoke=args.smoke, rtol=args.rtol,
                   top=args.top, seed=args.seed, out=args.out, metrics=args.metric)
    if args.json:
        from kernbench.atomic_output import to_jsonable

        print(json.dumps(to_jsonable(d), indent=2))
    else:
        print(format_diff(d))
    return 0


def _cmd_list() -> int:
    benches = list_benches()
    width = max((len(b.name) for b in benches), default=4)
    for i, b in enumerate(benches):
        print(f"{i:>3}  {b.name:<{width}}  {b.description}" + (f"  [plugin: {b.source}]" if b.plugin else ""))
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    from kernbench import bench_info
    from kernbench.atomic_output import to_jsonable
    from kernbench.registry import get_bench

    d = bench_info.info(get_bench(args.bench))
    if args.json:
        print(json.dumps(to_jsonable(d), indent=2))
    else:
        print(bench_info.text(d))
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    # A bad config is the expected failure of this command: exit 1, not the
    # generic bad-input 2 of main(). With several files each is checked (a
    # header line names it) and the exit status is 1 if any was bad.
    bad = 0
    for i, path in enumerate(args.file):
        if len(args.file) > 1:
            print(f"{'' if i == 0 else chr(10)}== {path}")
        try:
            summary = validate(path, args.sets)
        except KernbenchError as e:  # ConfigError, or a CapacityError of a config too large to load
            print(f"kernbench: error: {_one_line(e)}", file=sys.stderr)
            bad += 1
            continue
        print(describe(summary))
    return 1 if bad else 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from kernbench.config import reference_markdown, schema

    if args.config is not None:
        from dataclasses import asdict

        from kernbench import provenance
        from kernbench.calibrate import load_data

        records = provenance.read(args.config, args.sets)
        if args.json:
            print(json.dumps({p: asdict(r) for p, r in records.items()}, indent=2))
        else:
            print(provenance.table(records))
        problems = provenance.check_rows(records, load_data)
        for line in problems:
            print(f"provenance: {line}", file=sys.stderr)
        return 1 if problems else 0
    if args.sets:
        raise UsageError("schema: --set applies to --config FILE only")
    if args.markdown:
        sys.stdout.write(reference_markdown())
    else:
        print(json.dumps(schema(), indent=2))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    sets = list(args.sets)
    if args.smoke:
        from kernbench.goldens import smoke_sets
        from kernbench.registry import get_bench

        sets = smoke_sets(get_bench(args.bench)) + sets
    elif args.full_check:
        from kernbench.full_check import full_check_sets
        from kernbench.registry import get_bench

        sets = full_check_sets(get_bench(args.bench)) + sets
    sweep = run_bench(
        args.bench,
        out=args.out,
        sets=sets,
        seed=args.seed,
        config=args.config,
        quiet=args.quiet,
        verify=args.verify,
        trace=args.trace,
        trace_panel=args.trace_panel,
    )
    out = args.out if args.out is not None else f"out/{sweep['bench']}"
    n_fail = len(sweep["failures"])
    if not args.quiet:
        print(f"wrote {out}/sweep.json ({len(sweep['results'])} results, {n_fail} failures)")
    return 1 if n_fail else 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from kernbench.atomic_output import check_output_dir
    from kernbench.registry import get_bench
    from kernbench.sweeps import parse_grid, sweep

    b = get_bench(args.bench)
    check_seed(args.seed)
    check_output_dir(args.out if args.out is not None else f"out/{b.name}-sweep", "--out")
    if not args.grid:
        raise ConfigError("sweep: give at least one --grid KEY=V1,V2")
    fixed = list(args.sets)
    if args.smoke:
        from kernbench.goldens import smoke_sets

        fixed = smoke_sets(b) + fixed  # the grid's values override these per point
    lists = [f"bench.{k}" for k, v in b.params.items() if isinstance(v, (list, tuple))]
    grid = parse_grid(args.grid, lists)
    for key, values in grid.items():
        if key.startswith("bench."):  # typed like the default, as --set does
            name = key[len("bench."):]
            if name in b.params:
                from kernbench.overrides import coerce

                try:
                    grid[key] = [coerce(v, b.params[name]) for v in values]
                except ValueError as e:
                    raise ConfigError(f"--grid {key}: {e}") from None
        else:  # plain integers read as integers (the config loader gets the same text back)
            grid[key] = [int(v) if v.lstrip("-").isdigit() else v for v in values]
    executor = args.scheduler if args.scheduler else args.executor
    out = args.out if args.out is not None else f"out/{b.name}-sweep"
    df = sweep(b.name, grid, executor, workers=args.workers, sets=fixed, config=args.config, seed=args.seed,
               resume=args.resume, retry_failed=args.retry_failed, out=out,
               plot=tuple(args.plot) if args.plot else None)
    fails = df.attrs["failures"]
    if not args.quiet:
        n = df.attrs["points"]
        print(f"wrote {out}/sweep.json: {n} points ({df.attrs['computed']} computed, {n - df.attrs['computed']} "
              f"from the checkpoint), {len(df)} rows, {len(fails)} failed points, {df.attrs['wall_s']:.1f} s")
        for f in fails[:10]:
            print(f"  {f['name']}: {f['error']}")
        if "plot" in df.attrs:
            print(f"wrote {df.attrs['plot']}")
    return 1 if fails else 0


def _cmd_show(args: argparse.Namespace) -> int:
    from kernbench.atomic_output import check_figure_file
    from kernbench.show import draw, summary_text, topology_summary

    check_figure_file(args.png, "--png")  # before anything is printed
    info = topology_summary(args.file, args.sets)
    print(summary_text(info))
    if args.png:
        draw(args.file, args.sets, args.png)
        print(f"wrote {args.png}")
    return 0


def _cmd_goldens(args: argparse.Namespace) -> int:
    from kernbench.goldens import main as goldens_main

    return goldens_main(benches=args.bench, update=args.update, folder=args.dir)


def _one_line(message: object) -> str:
    """An error message as one printable line: control characters (newlines, \x1e, ...) escaped, so the
    user's own text in it cannot break the one-line contract or the terminal."""
    text = str(message)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _include_path(dirs: list[str]) -> str:
    """``--include-dir`` folders, checked, in front of $KERNBENCH_INCLUDE_PATH (which every load reads, and
    which sweep workers inherit)."""
    for d in dirs:
        if not os.path.isdir(d):
            raise ConfigError(f"--include-dir {d}: no such folder")
    old = os.environ.get("KERNBENCH_INCLUDE_PATH", "")
    return os.pathsep.join([os.path.abspath(d) for d in dirs] + ([old] if old else []))


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # SIGTERM stops a run like Ctrl-C does (finished work written, an `interrupted` failure), exit 143.
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave SIGTERM alone
        pass
    try:
        return _main(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(args: argparse.Namespace) -> int:
    previous = os.environ.get("KERNBENCH_INCLUDE_PATH")  # --include-dir changes it for this call only
    try:
        return _dispatch(args)
    finally:
        if previous is None:
            os.environ.pop("KERNBENCH_INCLUDE_PATH", None)
        else:
            os.environ["KERNBENCH_INCLUDE_PATH"] = previous


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if getattr(args, "include_dirs", None):
            os.environ["KERNBENCH_INCLUDE_PATH"] = _include_path(args.include_dirs)
        if getattr(args, "bench_path", None):
            from kernbench.registry import add_bench_path

            add_bench_path(*args.bench_path)
        if args.command == "list":
            return _cmd_list()
        if args.command == "describe":
            return _cmd_describe(args)
        if args.command == "validate":
            return _cmd_validate(args)
        if args.command == "schema":
            return _cmd_schema(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
        if args.command == "show":
            return _cmd_show(args)
        if args.command == "goldens":
            return _cmd_goldens(args)
        if args.command == "diff":
            return _cmd_diff(args)
        if args.command == "calibrate":
            from kernbench import calibrate_cli

            return calibrate_cli.run(args)
        if args.command == "compare-nccl":
            return _cmd_compare_nccl(args)
        if args.command == "serve":
            from kernbench import serve_cli

            return serve_cli.run(args)
        return _cmd_run(args)
    except KernbenchError as e:
        print(f"kernbench: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Terminated:
        print("kernbench: interrupted (SIGTERM)", file=sys.stderr)
        return 143
    except BrokenPipeError:  # `kernbench describe X | head`: the reader left; not an error of ours
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 141
    except KeyboardInterrupt:
        print("kernbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

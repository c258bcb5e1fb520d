"""The ``kernbench`` command line.

    kernbench list
    kernbench validate FILE [--set PATH=VALUE]...
    kernbench schema [--markdown]
    kernbench run --bench NAME|INDEX [--out DIR] [--set KEY=VALUE]... [--seed N] [--config FILE]

Library errors become one line on stderr and an exit code: 2 for bad input
(unknown bench, bad --set), 1 when a bench ran and reported failures or
when ``validate`` found the config invalid.
"""

from __future__ import annotations

import argparse
import json
import sys

from kernbench._core import ConfigError, KernbenchError
from kernbench.config import describe, validate
from kernbench.registry import list_benches
from kernbench.runner import DEFAULT_SEED, run_bench


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (exit 2), like every other error."""

    def error(self, message: str):
        self.exit(2, f"kernbench: error: {message} (see `{self.prog} --help`)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernbench", description="Discrete-event simulation of accelerator hardware.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="list the benches with their indices")

    v = sub.add_parser("validate", help="check a machine config strictly and summarise it")
    v.add_argument("file", help="YAML machine config")
    v.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a config value, e.g. system.sips.w=4 (repeatable)",
    )

    sc = sub.add_parser("schema", help="print the machine-config schema (JSON, or the Markdown reference)")
    sc.add_argument("--markdown", action="store_true", help="the reference as Markdown (docs/config-reference.md)")

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
    return p


def _cmd_list() -> int:
    benches = list_benches()
    width = max((len(b.name) for b in benches), default=4)
    for i, b in enumerate(benches):
        print(f"{i:>3}  {b.name:<{width}}  {b.description}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    # A bad config is the expected failure of this command: exit 1, not the
    # generic bad-input 2 of main().
    try:
        summary = validate(args.file, args.sets)
    except ConfigError as e:
        print(f"kernbench: error: {e}", file=sys.stderr)
        return 1
    print(describe(summary))
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from kernbench.config import reference_markdown, schema

    if args.markdown:
        sys.stdout.write(reference_markdown())
    else:
        print(json.dumps(schema(), indent=2))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    sweep = run_bench(
        args.bench,
        out=args.out,
        sets=args.sets,
        seed=args.seed,
        config=args.config,
        quiet=args.quiet,
        verify=args.verify,
    )
    out = args.out or f"out/{sweep['bench']}"
    n_fail = len(sweep["failures"])
    if not args.quiet:
        print(f"wrote {out}/sweep.json ({len(sweep['results'])} results, {n_fail} failures)")
    return 1 if n_fail else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list()
        if args.command == "validate":
            return _cmd_validate(args)
        if args.command == "schema":
            return _cmd_schema(args)
        return _cmd_run(args)
    except KernbenchError as e:
        print(f"kernbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

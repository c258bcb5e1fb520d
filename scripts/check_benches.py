#!/usr/bin/env python3
"""check_benches.py -- run every registered bench once and fail on any failure it lists (CI, issue 30 item 6).

Each bench runs once, one after the other, each in its own process and its own output folder
(OUT/NAME): at its full-check size when it declares one (``@bench(full_check=...)``: every code path of
the default, fewer points, for a default too slow for CI), else at its default size, with ``--verify``
(the benches that check invariants check them). A bench fails the check when its sweep.json lists a
``failures`` entry, when it exits non-zero, or when it writes no sweep.json. The exit status is 1 when
any bench failed, each failure named on stderr (``check-benches: NAME: failure 'point': error text``);
one line per bench on stdout gives its size, rows, failures, wall time and CPU time (user + system of the
bench's processes: on a busy machine the wall time is inflated, the CPU time much less).

With ``--jobs N`` up to N benches run at once (each still in its own process; the lines come in the order
the benches end, the CPU time is each bench's own).

Usage: scripts/check_benches.py [--out DIR] [--bench NAME]... [--python EXE] [--jobs N]
  --out DIR      the output root (default build/check-benches)
  --bench NAME   only this bench (repeatable; default: every bench `kernbench list` lists)
  --python EXE   the interpreter with kernbench installed (default: this one)
  --jobs N       benches run at once (default 1)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


def _benches(python: str) -> list[tuple[str, bool]]:
    """(name, declares a full-check size) of every registered bench, in `kernbench list` order."""
    code = ("import json; from kernbench.registry import list_benches; "
            "print(json.dumps([[b.name, b.full_check is not None] for b in list_benches()]))")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"check-benches: cannot list the benches with {python}: {done.stderr.strip()[-2000:]}")
    return [(n, bool(f)) for n, f in json.loads(done.stdout.strip().splitlines()[-1])]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def check(name: str, full: bool, out: Path, python: str) -> tuple[list[str], str]:
    """Run one bench; (its failure texts, its summary line)."""
    size = "full-check" if full else "default"
    cmd = [python, "-m", "kernbench", "run", "--bench", name, "--out", str(out), "--quiet", "--verify"]
    if full:
        cmd.append("--full-check")
    start = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)  # this bench's own user + system time, whatever runs beside it
        proc.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        err_text = stderr.read().decode(errors="replace")
    wall, cpu = time.monotonic() - start, usage.ru_utime + usage.ru_stime
    problems = []
    sweep_path = out / "sweep.json"
    rows = "?"
    try:
        sweep = json.loads(sweep_path.read_text())
        rows = str(len(sweep.get("results", [])))
        for f in sweep.get("failures", []):
            what = f.get("name", "?") if isinstance(f, dict) else "?"
            err = f.get("error", f) if isinstance(f, dict) else f
            problems.append(f"failure {what!r}: {_one_line(err)}")
    except (OSError, ValueError) as e:
        problems.append(f"no readable {sweep_path} ({type(e).__name__}: {e})")
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not problems):
        tail = _one_line(err_text.strip().splitlines()[-1]) if err_text.strip() else "no stderr"
        problems.append(f"`{' '.join(cmd[1:])}` exited {proc.returncode}: {tail}")
    verdict = "ok" if not problems else f"{len(problems)} problem(s)"
    return problems, f"{name:<22} {size:<10} {rows:>5} rows  {wall:7.1f} s wall {cpu:7.1f} s cpu  {verdict}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="check_benches.py", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/check-benches", help="output root: one folder per bench")
    ap.add_argument("--bench", action="append", default=[], metavar="NAME", help="only this bench (repeatable)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with kernbench installed")
    ap.add_argument("--jobs", type=int, default=1, help="benches run at once (default 1)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        print(f"check-benches: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    benches = _benches(args.python)
    known = {n: f for n, f in benches}
    unknown = [n for n in args.bench if n not in known]
    if unknown:
        print(f"check-benches: unknown bench {', '.join(unknown)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    chosen = [(n, f) for n, f in benches if not args.bench or n in args.bench]
    root = Path(args.out)
    failed: list[str] = []
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # threads only wait: each bench is a process
        runs = {pool.submit(check, name, full, root / name, args.python): name for name, full in chosen}
        for run in as_completed(runs):
            name = runs[run]
            problems, line = run.result()
            print(line, flush=True)
            for p in problems:
                print(f"check-benches: {name}: {p}", file=sys.stderr, flush=True)
            if problems:
                failed.append(name)
    failed.sort(key=[n for n, _ in chosen].index)
    total = time.monotonic() - start
    print(f"check-benches: {len(chosen)} benches in {total:.1f} s wall, "
          + (f"{len(failed)} failed: {', '.join(failed)}" if failed else "none failed"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""nccl-tests in and out: its ``*_perf`` tables read, and the model's own written the same way.

nccl-tests (github.com/NVIDIA/nccl-tests) prints, per message size, the
time of one collective and two bandwidths (its doc/PERFORMANCE.md)::

    algbw = size / time
    busbw = algbw x factor      all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n;
                                broadcast, reduce, sendrecv 1

``parse_log(path)`` reads a user's log (``#`` header lines, the out-of-place
and in-place column groups, ``#wrong``; a log cut short keeps its complete
rows; text of another program between rows -- NCCL INFO lines -- skipped with a note; after the last row it
ends the table) and refuses a file that is not one (``NcclLogError``, naming file and line). A number in a row that means nothing -- ``nan``, ``inf``, a negative time,
bandwidth, size, count or ``#wrong`` -- is refused at its line, naming the column (never taken for a row cut
short). ``model_rows`` runs kernbench's collectives on a machine for the same
sizes; ``compare`` puts the two side by side with errors per size;
``format_table`` prints rows in nccl-tests' layout. The bench
``gpu-collectives`` and ``kernbench compare-nccl`` are built on these.

What the model is (docs/ccl.md, "On a GPU machine"; src/ccl/nccl.hpp): on a GPU machine
(``pe.target: gpu``) the collective as NCCL runs it -- the tuner's algorithm and protocol for the size
(``algorithm="auto"``), channels, a host launch per rank and the protocol's fixed cost, steps of the protocol's
size with its latency and payload efficiency, the buffer in HBM -- called ``REPEATS`` times back to back as
nccl-tests does (the time per call in steady state), routed as the preset's ``fabric.multipath`` says (the
NVSwitch presets spread every transfer over their switches by link count). Elsewhere the machine's own
collective (PE_CPU dispatch per op), the buffer in HBM.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kernbench._core import ConfigError, UsageError
from kernbench.nccl_checks import NcclLogError, BadValue, group_name, check_busbw, check_rate, check_repeats

__all__ = ["BUSBW", "MODELLED", "NcclLogError", "NcclLog", "NcclRow", "busbw_factor", "parse_log", "model_rows",
           "compare", "format_table", "resolve_machine", "TYPE_BYTES", "MAX_SIZE", "algorithm_names",
           "check_algorithm"]

#: nccl-tests' bus-bandwidth factor per collective, as a function of the rank count n (doc/PERFORMANCE.md).
BUSBW: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}

#: Collectives kernbench models, with the algorithm used by default (``auto``: on a GPU machine the NCCL
#: model's choice, elsewhere ring; ``kernbench.ccl.algorithms()``).
MODELLED = {"all_reduce": "auto", "all_gather": "auto", "reduce_scatter": "auto", "broadcast": "auto",
            "alltoall": "auto"}

#: Calls timed back to back per size (nccl-tests' iterations): the time per call in steady state.
REPEATS = 4

#: Bytes per element of nccl-tests' type names.
TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
              "half": 2, "float16": 2, "bfloat16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8,
              "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1}

# nccl-tests binaries are named <collective>_perf; the name of the collective as nccl spells it.
_ALIASES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
            "bcast": "broadcast", "alltoall": "alltoall", "all_to_all": "alltoall", "send_recv": "sendrecv"}
_KNOWN = set(BUSBW) | {"gather", "scatter", "hypercube"}
_NAME_IN_HEADER = re.compile(r"\b(" + "|".join(sorted(_KNOWN | set(_ALIASES), key=len, reverse=True))
                             + r")(?:_perf(?:_mpi)?)?\b")
_RANK_LINE = re.compile(r"^#\s*Rank\s+\d+\s")
_THREADS = re.compile(r"nThreads?\s+(\d+)\s+nGpus\s+(\d+)")


#: The largest size or count a row may give (a signed 64-bit byte count).
MAX_SIZE = (1 << 63) - 1


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` on ``n`` ranks."""
    name = canonical(collective)
    if name not in BUSBW:
        raise ConfigError(f"no bus-bandwidth factor for {collective!r} (known: {', '.join(sorted(BUSBW))})")
    return BUSBW[name](n)


def canonical(name: str) -> str:
    """all_reduce, allreduce, all_reduce_perf, AllReduce -> all_reduce."""
    n = re.sub(r"(_perf)?(_mpi)?$", "", name.strip().lower().replace("-", "_"))
    return _ALIASES.get(n, _ALIASES.get(n.replace("_", ""), n))


@dataclass
class NcclRow:
    """One size of a log: the leading fields and each column group (out-of-place first) as given."""

    size: int
    count: int
    type: str
    redop: str | None
    root: int | None
    groups: list[dict[str, Any]]  # [{"time_us", "algbw", "busbw", "wrong"}] out-of-place, then in-place
    line: int

    @property
    def time_us(self) -> float:
        """The out-of-place time (the first group)."""
        return self.groups[0]["time_us"]

    @property
    def busbw(self) -> float:
        return self.groups[0]["busbw"]


@dataclass
class NcclLog:
    """A parsed nccl-tests log."""

    path: str
    collective: str | None  # from the log itself (a *_perf name in its header); None if it does not say
    ranks: int | None       # "# Rank" lines, else nThread x nGpus; None if the log does not say
    columns: list[str]
    rows: list[NcclRow]
    truncated: bool = False  # no "Avg bus bandwidth" footer, or a last row cut short
    notes: list[str] = field(default_factory=list)
    avg_busbw: float | None = None
    devices: list[str] = field(default_factory=list)
    gpus_per_thread: int | None = None  # the header's nGpus: GPUs one host thread launches (None: not said)


def _number(tok: str, what: str) -> float | None:
    """A time or bandwidth field: None for N/A; ValueError (garbled) or BadValue (nan, inf, negative)."""
    if tok.upper() in ("N/A", "NA", "-"):
        return None
    x = float(tok)
    if not math.isfinite(x):
        raise BadValue(f"the {what} is {tok!r}, not a finite number")
    if x < 0:
        raise BadValue(f"the {what} is {tok}, negative (nccl-tests never prints one)")
    return x


def _whole(tok: str, what: str) -> int:
    """The size or count field: a whole number of ASCII digits, 0 .. MAX_SIZE."""
    if not re.fullmatch(r"[+-]?[0-9]+", tok):
        raise ValueError(f"the {what} {tok[:20]!r} is not a whole number")
    n = int(tok)
    if n < 0:
        raise BadValue(f"the {what} is {tok}, negative")
    if n > MAX_SIZE:
        raise BadValue(f"the {what} is {tok[:24]}{'...' if len(tok) > 24 else ''}, more than 2^63 - 1")
    return n


def parse_log(path: str | Path) -> NcclLog:
    """Read an nccl-tests ``*_perf`` output; ``NcclLogError`` (file:line: why) if it is not one."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise NcclLogError(f"{path}: cannot read: {e.strerror or e}") from None
    if b"\x00" in raw[:4096]:
        raise NcclLogError(f"{path}:1: not an nccl-tests *_perf output (a binary file)")
    lines = raw.decode("utf-8", errors="replace").splitlines()
    collective = None
    ranks = 0
    threads = None
    gpus_per_thread = None
    columns: list[str] | None = None
    lead: list[str] = []
    rows: list[NcclRow] = []
    notes: list[str] = []
    avg = None
    devices: list[str] = []
    truncated = False
    first_foreign: tuple[int, str] | None = None
    for i, text in enumerate(lines, start=1):
        s = text.strip()
        if not s:
            continue
        if s.startswith("#"):
            body = s.lstrip("#").strip()
            if _RANK_LINE.match(s):
                ranks += 1
                devices.append(body.split(" device ", 1)[-1] if " device " in body else body)
                continue
            m = _THREADS.search(body)
            if m:
                threads = int(m.group(1)) * int(m.group(2))
                gpus_per_thread = int(m.group(2))
            if collective is None and columns is None:
                m = _NAME_IN_HEADER.search(body.lower())
                if m and ("perf" in body.lower() or "collective" in body.lower() or "test" in body.lower()):
                    collective = canonical(m.group(1))
            toks = body.split()
            if columns is None and toks[:2] == ["size", "count"] and "time" in toks:
                columns = toks
                lead = toks[:toks.index("time")]
                if lead[2:3] != ["type"]:
                    raise NcclLogError(f"{path}:{i}: nccl-tests column header without 'type' third: {s[:80]!r}")
            if body.lower().startswith("avg bus bandwidth"):
                try:
                    avg = float(body.split(":", 1)[1].split()[0])
                except (IndexError, ValueError):
                    pass
                if avg is not None and not (math.isfinite(avg) and avg >= 0):
                    raise NcclLogError(f"{path}:{i}: the average bus bandwidth is {avg}, not a finite number >= 0: "
                                       f"{s[:80]!r}")
            continue
        if columns is None:  # launcher and library noise before the table (mpirun, warnings) is skipped
            if first_foreign is None:
                first_foreign = (i, s)
            continue
        toks = s.split()
        need = len(lead) + 4
        last = not any(x.strip() and not x.strip().startswith("#") for x in lines[i:])
        try:
            if len(toks) < need or (len(toks) - len(lead)) % 4:
                raise ValueError(f"{len(toks)} fields, expected {len(lead)} + 4 per column group")
            row = _row(toks, lead, i)
        except BadValue as e:  # a number that means nothing: refused, even on the last line
            raise NcclLogError(f"{path}:{i}: {e}: {s[:80]!r}") from None
        except ValueError as e:
            if last:  # a log cut mid-row: keep what came before
                truncated = True
                notes.append(f"line {i}: an incomplete last row was ignored ({e})")
                break
            if rows and not re.match(r"[+-]?[0-9]", toks[0]):  # text of another program (NCCL INFO, ...)
                if _rows_follow(lines, i, lead):
                    notes.append(f"line {i}: skipped, not a result row: {s[:40]!r}")
                    continue
                notes.append(f"line {i}: the table ends here (not a result row: {s[:40]!r})")
                break
            raise NcclLogError(f"{path}:{i}: not an nccl-tests result row ({e}): {s[:80]!r}") from None
        rows.append(row)
    if columns is None:
        where, what = first_foreign or (1, lines[0].strip() if lines else "")
        raise NcclLogError(f"{path}:{where}: not an nccl-tests *_perf output: no '#  size  count  type ... time  "
                           f"algbw  busbw' column header in the file (line {where} reads {what[:60]!r})")
    if not rows:
        raise NcclLogError(f"{path}:{len(lines)}: nccl-tests header but no result row (the log stops before the "
                           "first size)")
    check_repeats(path, rows)
    if avg is None:
        truncated = True
        if not notes:
            notes.append("no 'Avg bus bandwidth' footer: the log was cut short; its complete rows are used")
    return NcclLog(str(path), collective, ranks or threads, columns, rows, truncated, notes, avg, devices,
                   gpus_per_thread)


def _rows_follow(lines: list[str], i: int, lead: list[str]) -> bool:
    """Whether a line after line ``i`` (1-based) reads as a result row: then line ``i`` is a garbled row in the
    middle of the table (an error), not the end of the table."""
    for j, text in enumerate(lines[i:], start=i + 1):
        toks = text.split()
        if not toks or toks[0].startswith("#") or len(toks) < len(lead) + 4 or (len(toks) - len(lead)) % 4:
            continue
        try:
            _row(toks, lead, j)
        except ValueError:
            continue
        return True
    return False


def _row(toks: list[str], lead: list[str], line: int) -> NcclRow:
    fields = dict(zip(lead, toks))
    size, count = _whole(fields["size"], "size"), _whole(fields["count"], "count")
    root = fields.get("root")
    if root not in (None, "-") and not re.fullmatch(r"-?[0-9]{1,9}", root):
        raise ValueError(f"the root {root[:20]!r} is not a rank number")
    groups = []
    for g in range((len(toks) - len(lead)) // 4):
        t = toks[len(lead) + 4 * g: len(lead) + 4 * g + 4]
        where = group_name(g)
        time_us, algbw, busbw = (_number(t[0], f"{where} time"), _number(t[1], f"{where} algbw"),
                                 _number(t[2], f"{where} busbw"))
        if time_us is None and algbw is None:
            groups.append({"time_us": None, "algbw": None, "busbw": None, "wrong": None})
            continue
        wrong: Any = t[3]
        if wrong.upper() in ("N/A", "NA", "-"):
            wrong = None
        elif re.fullmatch(r"[0-9]+", wrong):
            wrong = int(wrong)
        else:  # older versions print an error value
            wrong = _number(wrong, f"{where} #wrong")
        check_rate(size, time_us, algbw, where)
        groups.append({"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": wrong})
    if groups[0]["time_us"] is None:
        raise ValueError("no out-of-place time")
    return NcclRow(size, count, fields["type"], fields.get("redop"),
                   int(root) if root not in (None, "-") else None, groups, line)


def resolve_machine(name: str | Path) -> Path:
    """A machine config: a path, a packaged name (machines/h100-8x-nvswitch.yaml) or a preset's bare name."""
    from kernbench.system import config_path

    try:
        return config_path(name)
    except ConfigError:
        if not str(name).endswith((".yaml", ".yml")):
            try:
                return config_path(f"machines/{name}.yaml")
            except ConfigError:
                pass
        raise


def algorithm_names(collective: str) -> list[str]:
    """The ``algorithm=`` values the model takes for ``collective``: ``auto``, every registry algorithm that
    implements it (``kernbench.ccl.algorithms()``), and ``tree`` (NCCL's name of double_binary_tree)."""
    from kernbench import ccl

    name = canonical(collective)
    names = ["auto"] + [a["name"] for a in ccl.algorithms() if name in a["collectives"]]
    if "double_binary_tree" in names:
        names.append("tree")
    return names


def check_algorithm(collective: str, algorithm: str | None, what: str = "algorithm") -> None:
    """Refuse (UsageError) an algorithm the model does not know, or one without ``collective``, before any run;
    the message names the algorithms that would do. None: the default."""
    from kernbench import ccl

    if algorithm is None:
        return
    name = canonical(collective)
    ok = algorithm_names(name)
    if algorithm in ok:
        return
    every = ["auto", "tree"] + [a["name"] for a in ccl.algorithms()]
    if isinstance(algorithm, str) and algorithm in every:
        raise UsageError(f"{what} {algorithm!r} has no {name} (algorithms with one: {', '.join(ok)})")
    raise UsageError(f"{what} {str(algorithm)[:60]!r}: unknown algorithm (known for {name}: {', '.join(ok)})")


def sweep_sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """nccl-tests' sizes: ``min_bytes`` times ``factor`` while at most ``max_bytes`` (-b, -e, -f)."""
    sizes, s = [], int(min_bytes)
    while s <= max_bytes:
        sizes.append(s)
        s *= int(factor)
    return sizes


def size_checks(p) -> str | None:
    """A bench's size parameters in order, or what is wrong with them."""
    return f"min_bytes {p['min_bytes']} > max_bytes {p['max_bytes']}" if p["min_bytes"] > p["max_bytes"] else None


def pes_of(system) -> list[str]:
    """The machine's compute nodes by name, in rank order (System.pes())."""
    return list(system.pes())


def model_rows(config: str | Path, collective: str, sizes: Sequence[int], *, ranks: int | None = None,
               algorithm: str | None = None, type_: str = "float", sets: dict | None = None, seed: int = 1,
               threads: int = 0, on_error: Callable[[int, Exception], None] | None = None,
               calls: int = REPEATS) -> list[dict[str, Any]]:
    """Model one collective per size on ``config``'s first ``ranks`` PEs: the nccl-tests row of each.

    The buffer lives in HBM. On a GPU machine the collective runs as NCCL runs it, ``calls`` calls back to
    back (default ``REPEATS``; the time is then per call in steady state; 1: one call, launch included), their
    kernels launched by ``threads`` host threads (nccl-tests ``-t``; 0: one per rank), and the
    row says which algorithm and protocol the size got. A size that cannot be modelled calls
    ``on_error(size, exc)`` (default: raise) and gives no row."""
    from kernbench import ccl
    from kernbench.system import System

    name = canonical(collective)
    if name not in MODELLED:
        raise ConfigError(f"collective {collective!r} has no model in kernbench (modelled: "
                          f"{', '.join(sorted(MODELLED))})")
    check_algorithm(name, algorithm)
    alg = algorithm or MODELLED[name]
    width = TYPE_BYTES.get(type_, 4)
    out = []
    system = System.load(config, set=dict(sets or {}), seed=seed)
    pes = pes_of(system)
    gpu = system.target == "gpu"
    if ranks is not None and not 2 <= ranks <= len(pes):
        raise ConfigError(f"{config}: {ranks} ranks asked, the machine has {len(pes)} PEs (kind pe nodes); "
                          "a collective needs 2 or more")
    pes = pes[:ranks] if ranks else pes
    n = len(pes)
    for size in sizes:
        try:
            kw: dict[str, Any] = {"pes": pes, "verify": "off", "buffer": "hbm"}
            if gpu:
                kw.update(calls=calls, host_threads=threads)
            r = ccl.collective(system, name, int(size), algorithm=alg, **kw)
        except Exception as e:  # one size failing never sinks the others
            if on_error is None:
                raise
            on_error(int(size), e)
            continue
        t_us = r.latency_ps / 1e6
        algbw = size / (r.latency_ps * 1e-12) / 1e9 if r.latency_ps else 0.0
        # nccl-tests' count is its paramcount: per rank for these (src/all_gather.cu, alltoall.cu)
        per_rank = name in ("all_gather", "reduce_scatter", "alltoall")
        out.append({"collective": name, "requested": alg, "algorithm": r.algorithm, "protocol": r.protocol,
                    "channels": r.channels, "fidelity": r.fidelity,
                    "ranks": n, "size": int(size),
                    "count": int(size) // width // (n if per_rank else 1), "type": type_,
                    "redop": "sum" if name == "all_reduce" or name == "reduce_scatter" else "none",
                    "root": 0 if name == "broadcast" else -1, "time_us": t_us, "algbw": algbw,
                    "busbw": algbw * busbw_factor(name, n), "link_bytes": dict(r.link_bytes)})
    return out


def _rel_error(model: float, measured: float | None) -> float | None:
    """(model - measured) / measured; None where the measured figure is 0 (or missing) or the quotient does not
    fit a float (a measured figure near 1e-308): the documented rule that keeps NaN and inf out of the outputs."""
    if not measured:
        return None
    e = (model - measured) / measured
    return e if math.isfinite(e) else None


def compare(log: NcclLog, model: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per size of the log: measured (out-of-place; in-place beside) and model, with relative errors (None, written
    as null, where the measured figure is 0 or missing, or the error does not fit a float)."""
    by_size = {m["size"]: m for m in model}
    rows = []
    for r in log.rows:
        m = by_size.get(r.size)
        ip = r.groups[1] if len(r.groups) > 1 else {}
        row = {"size": r.size, "count": r.count, "type": r.type, "measured_time_us": r.time_us,
               "measured_algbw": r.groups[0]["algbw"], "measured_busbw": r.busbw,
               "measured_inplace_time_us": ip.get("time_us"), "measured_inplace_busbw": ip.get("busbw"),
               "wrong": r.groups[0]["wrong"], "model_time_us": None, "model_busbw": None,
               "time_error": None, "busbw_error": None}
        if m is not None:
            row["model_time_us"], row["model_busbw"] = m["time_us"], m["busbw"]
            row["time_error"] = _rel_error(m["time_us"], r.time_us)
            row["busbw_error"] = _rel_error(m["busbw"], r.busbw)
        rows.append(row)
    return rows


def format_table(rows: list[dict[str, Any]], *, title: str = "", ranks: int | None = None) -> str:
    """Rows (model_rows' dicts) in nccl-tests' layout, one column group (the model has no in-place variant);
    ``parse_log`` reads it back."""
    out = []
    if title:
        out.append(f"# {title}")
    if ranks:
        out.append(f"# nThread 1 nGpus {ranks} (kernbench model)")
    out.append("#")
    out.append("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>12} {:>8} {:>8} {:>6}".format(
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"))
    out.append("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>12} {:>8} {:>8} {:>6}".format(
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""))
    for r in rows:
        out.append("  {:>10} {:>12} {:>8} {:>6} {:>6} {:>12.2f} {:>8.2f} {:>8.2f} {:>6}".format(
            r["size"], r["count"], r["type"], r["redop"], r["root"], r["time_us"], r["algbw"], r["busbw"], "N/A"))
    if rows:
        out.append(f"# Avg bus bandwidth    : {sum(r['busbw'] for r in rows) / len(rows):.4f}")
    out.append("#")
    return "\n".join(out) + "\n"


def compare_text(rows: list[dict[str, Any]]) -> str:
    """The comparison as a table for the terminal."""
    def f(v, fmt):
        return format(v, fmt) if v is not None else "-"

    out = ["{:>12} {:>12} {:>12} {:>9} {:>10} {:>10} {:>9}".format(
        "size (B)", "meas. us", "model us", "time err", "meas. bus", "model bus", "bus err")]
    for r in rows:
        te = f(100 * r["time_error"], "+.1f") + " %" if r["time_error"] is not None else "-"
        be = f(100 * r["busbw_error"], "+.1f") + " %" if r["busbw_error"] is not None else "-"
        out.append("{:>12} {:>12} {:>12} {:>9} {:>10} {:>10} {:>9}".format(
            r["size"], f(r["measured_time_us"], ".2f"), f(r["model_time_us"], ".2f"), te,
            f(r["measured_busbw"], ".2f"), f(r["model_busbw"], ".2f"), be))
    return "\n".join(out)


def figure(rows: list[dict[str, Any]], title: str):
    """busbw and time against size, measured and model (a matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [r["size"] for r in rows]
    for ax, key, label in ((a, "busbw", "busbw (GB/s)"), (b, "time_us", "time (us)")):
        ax.plot(xs, [r[f"measured_{key}"] for r in rows], marker="o", label="nccl-tests (out-of-place)")
        pts = [(r["size"], r[f"model_{key}"]) for r in rows if r[f"model_{key}"] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="x", ls="--", label="kernbench model")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (B)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    b.set_yscale("log")
    a.set_title(title)
    fig.tight_layout()
    return fig


def compare_log(log_path: str | Path, config: str | Path, *, collective: str | None = None,
                algorithm: str | None = None, seed: int = 1) -> dict[str, Any]:
    """Parse ``log_path``, model its collective on ``config`` at its sizes and rank count: the whole comparison."""
    log = parse_log(log_path)
    name = canonical(collective) if collective else (log.collective or "all_reduce")
    if collective and log.collective and canonical(collective) != log.collective:
        raise ConfigError(f"{log_path}: --collective {collective} but the log is {log.collective}_perf output")
    if name not in MODELLED:
        raise ConfigError(f"{log_path}: {name}: no model in kernbench (modelled: {', '.join(sorted(MODELLED))})")
    check_algorithm(name, algorithm, "--algorithm")
    machine = resolve_machine(config)
    failures: list[dict[str, Any]] = []
    # The log's launch layout: nGpus GPUs per host thread (nccl-tests -g), so ranks / nGpus threads.
    threads = log.ranks // log.gpus_per_thread if log.ranks and log.gpus_per_thread else 0
    model = model_rows(machine, name, sorted({r.size for r in log.rows}), ranks=log.ranks, algorithm=algorithm,
                       type_=log.rows[0].type, seed=seed, threads=threads,
                       on_error=lambda s, e: failures.append({"size": s, "error": f"{type(e).__name__}: {e}"}))
    if log.ranks:  # after the machine's own checks (the rank count it has)
        check_busbw(log, busbw_factor(name, log.ranks), "" if collective or log.collective else
                    f" (the log does not name its collective, so {name} is assumed: give --collective)")
    rows = compare(log, model)
    ranks = model[0]["ranks"] if model else log.ranks
    big = [r for r in rows if r["busbw_error"] is not None and r["size"] >= (1 << 20)]
    return {"log": str(log_path), "config": str(machine), "collective": name,
            "collective_from": "--collective" if collective else ("log" if log.collective else "default"),
            "algorithm": algorithm or MODELLED[name], "host_threads": threads, "ranks": ranks,
            "log_ranks": log.ranks,
            "algorithms_used": sorted({f"{m['algorithm']}/{m['protocol']}" if m["protocol"] else m["algorithm"]
                                       for m in model}),
            "truncated": log.truncated, "notes": log.notes, "rows": rows, "failures": failures,
            "busbw_factor": busbw_factor(name, ranks or 1),
            "mean_abs_busbw_error_from_1MiB": (sum(abs(r["busbw_error"]) for r in big) / len(big)) if big else None}


def write_comparison(res: dict[str, Any], out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """OUT/compare.csv, compare.png and compare.json, landing together or not at all: every file is rendered in
    memory first (a value JSON cannot hold is refused before anything is written), then written with
    ``kernbench.atomic_output.write_together``, compare.json last. A compare.png of an earlier run is removed
    when this one draws none, so the folder never mixes two runs."""
    import io

    from kernbench.atomic_output import csv_bytes, json_bytes, lock_output_dir, write_together

    folder = Path(out)
    try:
        files: dict[str, tuple[Path, bytes]] = {"csv": (folder / "compare.csv", csv_bytes(res["rows"]))}
        if plot and res["rows"]:
            import matplotlib.pyplot as plt

            fig = figure(res["rows"], f"{res['collective']} on {Path(res['config']).stem}, {res['ranks']} ranks")
            try:
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
            finally:
                plt.close(fig)
            files["png"] = (folder / "compare.png", buf.getvalue())
        files["json"] = (folder / "compare.json", json_bytes(res))
    except ValueError as e:  # a non-finite number the readers let through: a bug, but nothing half-written
        raise UsageError(f"{out}: nothing written: {e}") from None
    with lock_output_dir(folder):
        write_together({path: data for path, data in files.values()})
        stale = folder / "compare.png"
        if "png" not in files and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    return {k: path for k, (path, _) in files.items()}

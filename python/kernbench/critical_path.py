"""The critical path of a run: the chain of ops and waits that sets its makespan.

    res = prog.run()
    cp = res.critical_path()              # or kernbench.critical_path.of(res)
    cp.length_ps == res.makespan_ps       # always: the steps tile [start, end]
    cp.steps                              # list of dicts, in time order
    cp.share                              # {"engine:gemm": 0.61, "link:noc": 0.2, ...} (fractions)
    print(cp.summary())                   # a text table
    kernbench.critical_path.summarize(res)  # the sweep.json dict (docs/sweep-json.md)

The walk and what is exact or apportioned are described in
docs/critical-path.md and src/runtime/critical_path.hpp. The C++ core does the
walk (``_core.critical_path``); this module only shapes the answer.
"""

from __future__ import annotations

from typing import Any, Iterable

from kernbench import _core

__all__ = ["CriticalPath", "of", "summarize", "share_table", "from_op_log", "from_system", "STEP_COLUMNS"]

# Columns of a step row (and of critical_path.csv, after the run label).
STEP_COLUMNS = ("node", "op", "name", "kind", "op_kind", "engine", "start_ps", "end_ps", "duration_ps", "via",
                "holder", "holder_name", "waited_ps")


def _core_result(result: Any):
    """The _core.RunResult behind a kernbench.program.RunResult (or the core object itself)."""
    core = getattr(result, "_core", result)
    if not isinstance(core, _core.RunResult):
        raise _core.UsageError(f"critical path: expected a RunResult (a Program run), got {type(result).__name__}")
    return core


class CriticalPath:
    """The critical path of one run (see the module docstring)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.program: str = raw["program"]
        self.start_ps: int = int(raw["start_ps"])
        self.end_ps: int = int(raw["end_ps"])
        self.length_ps: int = int(raw["length_ps"])
        self.makespan_ps: int = int(raw["makespan_ps"])
        self.steps: list[dict[str, Any]] = list(raw["steps"])
        self.share_ps: dict[str, int] = {k: int(v) for k, v in raw["share_ps"].items()}

    @property
    def length(self) -> int:
        """Sum of the step durations (ps); equals the makespan."""
        return self.length_ps

    @property
    def share(self) -> dict[str, float]:
        """Fraction of the path by label, largest first (sums to 1 for a run that took time)."""
        total = max(self.length_ps, 1)
        return {k: v / total for k, v in sorted(self.share_ps.items(), key=lambda kv: (-kv[1], kv[0]))}

    def to_df(self):
        """The steps as a pandas DataFrame (parts flattened to ``part:<label>`` columns, ps)."""
        import pandas as pd

        rows = []
        for s in self.steps:
            row = {k: s[k] for k in STEP_COLUMNS}
            for label, t in s["parts"].items():
                row["part:" + label] = t
            rows.append(row)
        return pd.DataFrame(rows, columns=None if rows else list(STEP_COLUMNS))

    def contract(self) -> dict[str, Any]:
        """The sweep.json form: {"length_ps", "makespan_ps", "share": {label: fraction}}."""
        return {"length_ps": self.length_ps, "makespan_ps": self.makespan_ps,
                "share": {k: round(v, 6) for k, v in self.share.items()}}

    def summary(self, top: int = 8, steps: int = 6) -> str:
        """A text table: the largest shares, then the longest steps with their links."""
        lines = [f"critical path of {self.program!r}: {self.length_ps / 1e3:,.1f} ns "
                 f"(= makespan), {len(self.steps)} steps"]
        lines.append(f"  {'share':>7}  {'ns':>12}  label")
        for label, frac in list(self.share.items())[:top]:
            lines.append(f"  {frac:7.1%}  {self.share_ps[label] / 1e3:12,.1f}  {label}")
        if len(self.share_ps) > top:
            rest = sum(sorted(self.share_ps.values(), reverse=True)[top:])
            lines.append(f"  {rest / max(self.length_ps, 1):7.1%}  {rest / 1e3:12,.1f}  ({len(self.share_ps) - top} more)")
        if steps > 0 and self.steps:
            lines.append("  longest steps:")
            lines.append(f"  {'ns':>12}  {'engine':<8} op  [how the path got there]")
            for s in sorted(self.steps, key=lambda s: (-s["duration_ps"], s["start_ps"]))[:steps]:
                via = s["via"] + (f" <- {s['holder_name']}" if s["holder"] >= 0 and s["via"] != "op" else "")
                lines.append(f"  {s['duration_ps'] / 1e3:12,.1f}  {s['engine']:<8} {s['name'] or s['op_kind']}  [{via}]")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"CriticalPath({self.program!r}, length_ps={self.length_ps}, steps={len(self.steps)})"


def of(result: Any) -> CriticalPath:
    """The critical path of ``result`` (a kernbench.program.RunResult or a _core.RunResult)."""
    return CriticalPath(_core.critical_path(_core_result(result)))


def from_op_log(log: Any, *, program: str = "op log", start_ps: int | None = None,
                waits: Iterable[str] = ()) -> CriticalPath:
    """The critical path of a run that logged ops but is not a Program (the K200 and vGPU protocol models).

    ``log`` maps column names to sequences: ``issue``, ``start``, ``end`` (ps), ``resource`` and ``kind``
    (names, or codes with ``resource_names`` / ``kind_names``). These models record no causes, so the
    links are inferred from the times, and labelled so (``via``): a row that queued (start > issue) was
    handed its resource by the row on the same resource that ended at its start (``resource:<name>``);
    otherwise it followed the row that ended last at or before it became ready (``after (inferred)``),
    preferring one that ended exactly then and, among rows ending together, the one that started last.
    Rows of the kinds in ``waits`` are the model's blocking waits and envelopes (spans of other rows):
    such a row owns only its tail after the last row that ended while it waited, and the path goes on
    into that row (``inside (inferred)``); a wrapper that knows its model names them. Time no row explains is a wait step (``wait:resource:<name>``
    while queued with no holder found, ``wait:dependency`` for a gap). As for Programs, the steps tile
    [start, last end] exactly, so the length equals the makespan; the shares are by op kind
    (``engine:<kind>``) and wait label.
    """
    import bisect

    issue = [int(v) for v in log["issue"]]
    start = [int(v) for v in log["start"]]
    end = [int(v) for v in log["end"]]
    n = len(end)
    if not (len(issue) == len(start) == n == len(log["resource"]) == len(log["kind"])):
        raise _core.UsageError("critical path: the op log's columns differ in length")

    def names(col: str, table: str) -> list[str]:
        vals = list(log[col])
        if table in log and log[table] is not None:
            t = list(log[table])
            return [str(t[int(v)]) for v in vals]
        return [str(v) for v in vals]

    waits = set(waits)
    res = names("resource", "resource_names")
    kind = names("kind", "kind_names")
    if start_ps is not None:
        t0 = int(start_ps)
    else:
        t0 = min(issue) if n else 0
    t_end = max(end) if n else t0
    # Latest end first; among equal ends the latest start: the innermost of rows that span
    # others (a vGPU "pde_forward" ends with the poll it contains).
    by_end = sorted(range(n), key=lambda i: (end[i], start[i], i))
    ends = [end[i] for i in by_end]
    on_res: dict[str, list[int]] = {}
    for i in by_end:
        on_res.setdefault(res[i], []).append(i)
    visited = [False] * n
    steps: list[dict[str, Any]] = []
    share: dict[str, int] = {}

    def add(kind_: str, name: str, engine: str, a: int, b: int, via: str, node: int = -1, holder: int = -1,
            waited: int = 0, label: str = "") -> None:
        if b <= a:
            return
        steps.append({"node": node, "op": node, "name": name, "kind": kind_, "op_kind": name, "engine": engine,
                      "start_ps": a, "end_ps": b, "duration_ps": b - a, "via": via, "holder": holder,
                      "holder_name": kind[holder] if holder >= 0 else "", "waited_ps": waited,
                      "parts": {label: b - a}})
        share[label] = share.get(label, 0) + b - a

    def latest_before(t: int, pool: list[int] | None = None) -> int:
        """The unvisited row with the latest end <= t (ties: the latest start), or -1."""
        if pool is None:
            k = bisect.bisect_right(ends, t)
            while k > 0:
                k -= 1
                i = by_end[k]
                if not visited[i]:
                    return i
            return -1
        for i in reversed(pool):
            if end[i] <= t and not visited[i]:
                return i
        return -1

    def link(step: int, via: str, holder: int) -> None:
        """How the path got to steps[step]: from `holder`'s step, by `via`."""
        if 0 <= step < len(steps):
            steps[step].update(via=via, holder=holder, holder_name=kind[holder] if holder >= 0 else "")

    cursor = t_end
    cur = latest_before(t_end)
    def awaited(r: int, t: int) -> int:
        """For a waiting row r: the unvisited row that ended last in (start of r, t], or -1."""
        k = bisect.bisect_right(ends, t)
        while k > 0:
            k -= 1
            i = by_end[k]
            if end[i] <= start[r]:
                return -1
            if not visited[i] and i != r:
                return i
        return -1

    while cur >= 0:
        visited[cur] = True
        # A waiting row (a blocking wait, an envelope: kinds in `waits`) only owns
        # its tail after the last row that ended while it waited; the path goes on
        # into that row.
        c = awaited(cur, min(end[cur], cursor)) if kind[cur] in waits else -1
        a = max(min(end[c] if c >= 0 else start[cur], cursor), t0)
        add("op", kind[cur], res[cur], a, cursor, "start", node=cur, label=f"engine:{kind[cur]}")
        here = len(steps) - 1
        cursor = a
        if c >= 0:
            link(here, "inside (inferred)", c)
            cur = c
            continue
        if start[cur] > issue[cur]:
            h = latest_before(start[cur], on_res[res[cur]])
            if h >= 0 and end[h] == start[cur]:
                link(here, f"resource:{res[cur]}", h)  # it queued; h handed it the resource
                steps[here]["waited_ps"] = start[cur] - issue[cur]
                cur = h
                continue
            add("wait:resource", kind[cur], res[cur], max(issue[cur], t0), cursor, "queued", node=cur,
                waited=cursor - issue[cur], label=f"wait:resource:{res[cur]}")
            cursor = max(issue[cur], t0)
        nxt = latest_before(cursor)
        if nxt < 0:
            break
        link(here, "after (inferred)", nxt)
        add("wait:dependency", "gap", "", max(end[nxt], t0), cursor, "gap", label="wait:dependency")
        cursor = max(min(cursor, end[nxt]), t0)
        cur = nxt
    add("wait:dependency", "before the first op", "", t0, cursor, "start", label="wait:dependency")
    steps.reverse()
    length = sum(s["duration_ps"] for s in steps)
    return CriticalPath({"program": program, "start_ps": t0, "end_ps": t_end, "length_ps": length,
                         "makespan_ps": t_end - t0, "steps": steps, "share_ps": share})


_FABRIC_PARTS = (("overhead_ps", "fabric:overhead"), ("transmission_ps", "fabric:transmission"),
                 ("drain_ps", "fabric:drain"), ("queuing_ps", "wait:resource:fabric"))


def from_system(system: Any, label: str = "system") -> CriticalPath:
    """The critical path of a System that ran bare DMA ops (else transfers): no op depends on another,
    so the path is the gap before the last op to end was issued, then that op, split exactly by the
    fabric's four parts (node overhead, transmission, drain, queuing) of its latency."""
    core = getattr(system, "_core", system)
    d = core.dma_ops()
    what = "dma"
    if len(d["issue_ps"]) == 0:
        d, what = core.transfers(), "transfer"
    issue, end = [int(v) for v in d["issue_ps"]], [int(v) for v in d["end_ps"]]
    done = [i for i in range(len(end)) if end[i] >= 0 and ("done" not in d or bool(d["done"][i]))]
    if not done:
        raise _core.UsageError(f"critical path of {label!r}: the system ran no DMA ops and no transfers")
    t0 = min(issue[i] for i in done)
    last = max(done, key=lambda i: (end[i], issue[i], i))
    steps: list[dict[str, Any]] = []
    share: dict[str, int] = {}

    def step(kind: str, name: str, a: int, b: int, via: str, parts: dict[str, int]) -> None:
        if b <= a:
            return
        steps.append({"node": last if kind == "op" else -1, "op": last if kind == "op" else -1, "name": name,
                      "kind": kind, "op_kind": what, "engine": what, "start_ps": a, "end_ps": b,
                      "duration_ps": b - a, "via": via, "holder": -1, "holder_name": "", "waited_ps": 0,
                      "parts": parts})
        for k, v in parts.items():
            share[k] = share.get(k, 0) + v

    step("wait:dependency", "before the last op was issued", t0, issue[last], "start",
         {"wait:dependency": issue[last] - t0})
    parts = {lbl: int(d[col][last]) for col, lbl in _FABRIC_PARTS if int(d[col][last]) > 0}
    step("op", f"{what} {last}", issue[last], end[last], "last to end", parts)
    length = sum(x["duration_ps"] for x in steps)
    if sum(share.values()) != length:
        raise _core.InternalError(f"critical path of {label!r}: the {what}'s parts do not sum to its latency")
    return CriticalPath({"program": label, "start_ps": t0, "end_ps": end[last], "length_ps": length,
                         "makespan_ps": end[last] - t0, "steps": steps, "share_ps": share})


def summarize(result: Any) -> dict[str, Any]:
    """The shared sweep.json dict of a run's critical path:
    ``{"length_ps": int, "makespan_ps": int, "share": {label: fraction}}``."""
    return of(result).contract()


def share_table(paths: Iterable[tuple[str, dict[str, Any]]], top: int = 6) -> str:
    """A text table of labelled summaries (``summarize`` dicts): one line per run, its top shares."""
    lines = []
    for label, cp in paths:
        shares = sorted(cp["share"].items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        text = ", ".join(f"{k} {v:.0%}" for k, v in shares)
        lines.append(f"  {label}: {cp['length_ps'] / 1e3:,.1f} ns -- {text}")
    return "\n".join(lines)

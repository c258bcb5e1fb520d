"""The critical path of a run: the chain of ops and waits that sets its makespan.

    res = prog.run()
    cp = res.critical_path()              # or kernbench.critical_path.of(res)
    cp.length_ps == res.makespan_ps       # always: the steps tile [start, end]
    cp.steps                              # list of dicts, in time order
    cp.share                              # {"engine:gemm": 0.61, "link:noc": 0.2, ...} (fractions)
    cp.busiest_channel("link:ring")       # "gpu1->gpu2": the channel with the most of that link time
    print(cp.summary())                   # a text table
    kernbench.critical_path.summarize(res)  # the sweep.json dict (docs/sweep-json.md)

The walk and what is exact or apportioned are described in
docs/critical-path.md and src/runtime/critical_path.hpp. The C++ core does the
walk (``_core.critical_path``) for every model: Programs, and the K200 and vGPU
protocol models, which record their causes through the same runtime facility
(``k200.Result.critical_path()``, ``vgpu.critical_path(run)``, ``from_raw``);
this module only shapes the answer.
"""

from __future__ import annotations

from typing import Any, Iterable

from kernbench import _core

__all__ = ["CriticalPath", "of", "summarize", "share_table", "from_raw", "from_system", "STEP_COLUMNS"]

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
        # link:<class> time on the path by channel ("gpu0->gpu1"); steps carry theirs as step["channels"]
        self.channels_ps: dict[str, dict[str, int]] = {
            label: {ch: int(t) for ch, t in chans.items()} for label, chans in raw.get("channels_ps", {}).items()}

    def busiest_channel(self, label: str) -> str:
        """The channel of link label ``label`` ("link:ring") with the most time on the path ("" if none; ties:
        the first name)."""
        chans = self.channels_ps.get(label, {})
        return min(chans, key=lambda ch: (-chans[ch], ch)) if chans else ""

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
            busiest = self.busiest_channel(label)
            where = ""
            if busiest:
                on = self.channels_ps[label][busiest]
                where = f"  (busiest channel {busiest}: {on / max(self.share_ps[label], 1):.0%} of it)"
            lines.append(f"  {frac:7.1%}  {self.share_ps[label] / 1e3:12,.1f}  {label}{where}")
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


def from_raw(raw: Any, program: str | None = None) -> CriticalPath:
    """The exact critical path a model that is not a Program recorded (the K200 and vGPU protocol models
    write their ops and causes through the runtime's Recorder, and the C++ core walks them as it walks a
    Program's): ``raw`` is the ``"critical_path"`` dict of a K200 report or a vGPU run. ``program``
    renames it (the label of a table row)."""
    if raw is None:
        raise _core.UsageError("critical path: this run recorded too many ops to walk here (more than 200000); "
                               "use a smaller run")
    if isinstance(raw, CriticalPath):
        raw = raw.raw
    raw = dict(raw)
    if program is not None:
        raw["program"] = program
    return CriticalPath(raw)


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
    # Stripes of a spread transfer (parent >= 0) are parts of their parent's record, not transfers of their own.
    done = [i for i in range(len(end)) if end[i] >= 0 and ("done" not in d or bool(d["done"][i]))
            and ("parent" not in d or int(d["parent"][i]) < 0)]
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

"""Chrome / Perfetto traces of a run: one process per agent, one track per engine.

    from kernbench.trace import write_trace
    write_trace(result, "trace.json")      # a RunResult (a Program run), or a System after DMA ops or traffic

Open the file in https://ui.perfetto.dev or chrome://tracing. Every op-log
row becomes a complete ("X") event on the track of the engine that ran it.
An engine with several units (a PE's DMA channels) gets one track per unit
("dma", "dma #1", ...), so overlapping ops never share a track; ops that
hold no engine (alloc, free, barrier, the composite's envelope) go to a
"control" track. A System's DMA ops (or, without any, its transfers) trace
as one process per issuer (source) with one track per concurrent op. Times are microseconds in the file (the format's unit),
exact to the picosecond.
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

from kernbench import io as kio

ENGINE_ORDER = ("pe_cpu", "dma", "gemm", "vector", "ipcq")


def _lanes(starts, ends, n_units: int) -> list[int]:
    """Assign each interval (in start order) the lowest unit that is free by then."""
    order = sorted(range(len(starts)), key=lambda i: (starts[i], ends[i], i))
    free = list(range(max(n_units, 1)))
    heapq.heapify(free)
    busy: list[tuple[int, int]] = []  # (end, unit)
    lane = [0] * len(starts)
    for i in order:
        while busy and busy[0][0] <= starts[i]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        # More overlap than units (should not happen): open an extra track.
        unit = heapq.heappop(free) if free else len(busy)
        lane[i] = unit
        heapq.heappush(busy, (ends[i], unit))
    return lane


def _us(ps: int) -> float:
    return ps / 1e6


def _program_trace(result, label: str | None) -> dict[str, Any]:
    core = getattr(result, "_core", result)
    system = result.system
    log = core.log()
    eng = core.engines()
    kinds = core.kind_names
    tags = core.tags
    names = core.log_names
    n = len(log["op"])
    start = [int(x) for x in log["start_ps"]]
    end = [int(x) for x in log["end_ps"]]
    res = [int(x) for x in log["resource"]]
    lane = [0] * n
    by_res: dict[int, list[int]] = {}
    for i in range(n):
        if res[i] >= 0:
            by_res.setdefault(res[i], []).append(i)
    for r, rows in by_res.items():
        got = _lanes([start[i] for i in rows], [end[i] for i in rows], int(eng["capacity"][r]))
        for i, u in zip(rows, got):
            lane[i] = u
    pids: dict[int, int] = {}
    tracks: dict[tuple[int, int], str] = {}
    events = []
    for i in range(n):
        agent = int(log["agent"][i])
        pid = pids.setdefault(agent, len(pids) + 1)
        r = res[i]
        if r >= 0:
            kind = str(eng["engine"][r])
            rank = ENGINE_ORDER.index(kind) if kind in ENGINE_ORDER else len(ENGINE_ORDER)
            tid = 1 + rank * 64 + lane[i]
            tracks[(pid, tid)] = kind if lane[i] == 0 else f"{kind} #{lane[i]}"
        else:
            tid = 1 + (len(ENGINE_ORDER) + 1) * 64
            tracks[(pid, tid)] = "control"
        kind_name = kinds[int(log["kind"][i])]
        t = int(log["tag"][i])
        events.append({
            "name": names[i] or kind_name,
            "cat": kind_name,
            "ph": "X",
            "ts": _us(start[i]),
            "dur": _us(end[i] - start[i]),
            "pid": pid,
            "tid": tid,
            "args": {"op": int(log["op"][i]), "kind": kind_name, "tag": tags[t] if 0 <= t < len(tags) else "",
                     "bytes": int(log["bytes"][i]), "work": float(log["work"][i]),
                     "issue_ps": int(log["issue_ps"][i]), "start_ps": start[i], "end_ps": end[i]},
        })
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": system.node_name(a)}}
            for a, pid in pids.items()]
    critical = _critical_path_events(core, events, len(pids) + 1, tracks)
    if critical:
        meta.append({"name": "process_name", "ph": "M", "pid": len(pids) + 1, "args": {"name": "critical path"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": len(pids) + 1, "args": {"sort_index": -1}})
    for (pid, tid), name in sorted(tracks.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return {"traceEvents": meta + events + critical, "displayTimeUnit": "ns",
            "otherData": {"panel": label, "program": core.program, "makespan_ps": int(core.makespan_ps),
                          "tracks": len(tracks), "source": "program",
                          "critical_path_steps": sum(1 for e in critical if e["ph"] == "X")}}


def _critical_path_events(core, events: list[dict[str, Any]], pid: int, tracks: dict) -> list[dict[str, Any]]:
    """The critical path as its own process (one track of steps, linked by flow arrows), and
    ``args.critical = True`` on the op-log events of the ops it runs through."""
    from kernbench import _core

    if not isinstance(core, _core.RunResult) or int(core.makespan_ps) <= 0:
        return []
    cp = _core.critical_path(core)
    on_path: dict[int, list[tuple[int, int]]] = {}
    for s in cp["steps"]:
        on_path.setdefault(int(s["node"]), []).append((int(s["start_ps"]), int(s["end_ps"])))
    for e in events:  # op-log rows carry their run-graph node as "op"
        spans = on_path.get(e["args"]["op"])
        if spans and any(a < e["args"]["end_ps"] and e["args"]["start_ps"] < b for a, b in spans):
            e["args"]["critical"] = True
    tid = 1
    tracks[(pid, tid)] = "steps"
    out: list[dict[str, Any]] = []
    for i, s in enumerate(cp["steps"]):
        args = {"node": s["node"], "op": s["op"], "kind": s["kind"], "engine": s["engine"], "via": s["via"],
                "holder": s["holder_name"], "waited_ps": s["waited_ps"], "issue_ps": s["start_ps"], "start_ps": s["start_ps"],
                "end_ps": s["end_ps"], "parts_ps": dict(s["parts"])}
        out.append({"name": s["name"] or s["op_kind"], "cat": "critical:" + s["kind"], "ph": "X",
                    "ts": _us(s["start_ps"]), "dur": _us(s["duration_ps"]), "pid": pid, "tid": tid, "args": args})
        if i > 0 and s["via"] != "op":  # an arrow from the cause to the step it let start
            prev = cp["steps"][i - 1]
            out.append({"name": s["via"], "cat": "critical", "ph": "s", "id": i, "pid": pid, "tid": tid,
                        "ts": _us(prev["start_ps"])})
            out.append({"name": s["via"], "cat": "critical", "ph": "f", "bp": "e", "id": i, "pid": pid,
                        "tid": tid, "ts": _us(s["start_ps"])})
    return out


def _interval_trace(system, label, source, owners, start, end, track, event) -> dict[str, Any]:
    """Intervals of a System's records: one process per owner node, one track per concurrent interval.

    ``event(i)`` gives row i's (name, cat, args); ``track`` names the first track ("dma", "transfers")."""
    n = len(owners)
    lane = [0] * n
    by: dict[int, list[int]] = {}
    for i, a in enumerate(owners):
        by.setdefault(a, []).append(i)
    for rows in by.values():
        for i, u in zip(rows, _lanes([start[i] for i in rows], [end[i] for i in rows], len(rows))):
            lane[i] = u
    pids: dict[int, int] = {}
    tracks: dict[tuple[int, int], str] = {}
    events = []
    for i in range(n):
        pid = pids.setdefault(owners[i], len(pids) + 1)
        tid = 1 + lane[i]
        tracks[(pid, tid)] = track if lane[i] == 0 else f"{track} #{lane[i]}"
        name, cat, args = event(i)
        events.append({"name": name, "cat": cat, "ph": "X", "ts": _us(start[i]), "dur": _us(end[i] - start[i]),
                       "pid": pid, "tid": tid, "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": system.node_name(a)}}
            for a, pid in pids.items()]
    for (pid, tid), name in sorted(tracks.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"panel": label, "makespan_ps": max(end) - min(start), "tracks": len(tracks),
                          "source": source}}


_PARTS = ("overhead_ps", "transmission_ps", "drain_ps", "queuing_ps")


def _dma_trace(system, label: str | None) -> dict[str, Any]:
    """DMA ops of a System (``system.dma(...)`` then ``run()``): one process per issuer, one track per channel."""
    d = system.dma_ops()
    if len(d["issue_ps"]) == 0:
        raise ValueError("this System ran no DMA ops: nothing to trace")
    start = [int(x) for x in d["issue_ps"]]
    end = [int(x) for x in d["end_ps"]]
    parts = [p for p in _PARTS if p in d]

    def event(i):
        kind = str(d["kind"][i]) if "kind" in d else "dma"
        args = {"memory": system.node_name(int(d["memory"][i])), "bytes": int(d["bytes"][i]),
                "issue_ps": start[i], "end_ps": end[i]}
        args.update({p: int(d[p][i]) for p in parts})
        return f"{kind} {args['memory']}", kind, args

    return _interval_trace(system, label, "dma", [int(x) for x in d["issuer"]], start, end, "dma", event)


def _transfer_trace(system, label: str | None) -> dict[str, Any]:
    """Transfers of a System (traffic, ``transfer(...)``): one process per source, one track per concurrent transfer."""
    t = system.transfers()
    if len(t["issue_ps"]) == 0:
        raise ValueError("this System ran no DMA ops and no transfers: nothing to trace")
    start = [int(x) for x in t["issue_ps"]]
    end = [int(x) for x in t["end_ps"]]

    def event(i):
        dst = system.node_name(int(t["dst"][i]))
        args = {"dst": dst, "bytes": int(t["bytes"][i]), "hops": int(t["hops"][i]), "issue_ps": start[i],
                "end_ps": end[i]}
        args.update({p: int(t[p][i]) for p in _PARTS})
        return f"-> {dst}", "transfer", args

    return _interval_trace(system, label, "transfers", [int(x) for x in t["src"]], start, end, "transfers", event)


def chrome_trace(obj, label: str | None = None) -> dict[str, Any]:
    """The Trace Event JSON of a RunResult (Program run), or of a System's DMA ops (else its transfers)."""
    if hasattr(obj, "log") and hasattr(obj, "engines"):
        return _program_trace(obj, label)
    if hasattr(obj, "dma_ops"):
        if len(obj.dma_ops()["issue_ps"]):
            return _dma_trace(obj, label)
        return _transfer_trace(obj, label)
    raise TypeError(f"cannot trace a {type(obj).__name__}: pass a RunResult or a System that ran DMA ops "
                    "or transfers")


def write_trace(obj, path: str | Path, label: str | None = None) -> dict[str, Any]:
    """Write the trace atomically; returns ``{"panel", "file", "tracks", "events"}``."""
    trace = chrome_trace(obj, label)
    kio.write_json(Path(path), trace)
    n_events = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    return {"panel": label, "file": str(path), "tracks": trace["otherData"]["tracks"], "events": n_events}

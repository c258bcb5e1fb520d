"""Chrome / Perfetto traces of a run: one process per agent, one track per engine.

    from kernbench.trace import write_trace
    write_trace(result, "trace.json")      # a RunResult (a Program run), a K200 result, a vGPU run,
                                           # or a System after DMA ops or traffic

Open the file in https://ui.perfetto.dev or chrome://tracing. Every op-log
row becomes a complete ("X") event on the track of the engine that ran it.
An engine with several units (a PE's DMA channels) gets one track per unit
("dma", "dma #1", ...), so overlapping ops never share a track; ops that
hold no engine (alloc, free, barrier, the composite's envelope) go to a
"control" track. K200 and vGPU runs go through the same writer (_op_trace):
one track per model resource (per guest for the vGPU), and like Programs
their exact critical path as a process of its own. A System's DMA ops (or, without any, its transfers) trace
as one process per issuer (source) with one track per concurrent op. Times are microseconds in the file (the format's unit),
exact to the picosecond.
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

from kernbench import atomic_output as kio

ENGINE_ORDER = ("pe_cpu", "dma", "gemm", "vector", "ipcq", "ipcq_rx", "launch", "sm")  # a GPU: its host launches, its SMs


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


def _op_trace(n: int, *, start, end, process, track, units, event, process_names: dict, t0: int = 0,
              critical: dict | None = None, match: str = "node", other: dict | None = None) -> dict[str, Any]:
    """The one writer of op-log traces, for every model (Programs, K200, vGPU).

    Row i goes to process ``process[i]`` (named by ``process_names``), on the track ``track[i]`` =
    (order, name) of the resource it ran on, or None (the "control" track); a track with ``units[track]``
    units (default 1) gets one lane per unit ("dma", "dma #1", ...) so overlapping rows never share a
    lane. ``event(i)`` gives (name, cat, args); args get ``start_ps``/``end_ps`` (and the caller's
    ``op``, ``issue_ps``). ``critical`` (a critical-path dict) adds its own process of steps linked by flow
    arrows, and ``args.critical = True`` on the rows it runs through (``match``: the step key that equals a
    row's ``args.op``: "node" for Programs, "op" for the other models). Times are microseconds from ``t0``."""
    lane = [0] * n
    by: dict[tuple, list[int]] = {}
    for i in range(n):
        if track[i] is not None:
            by.setdefault((process[i], track[i]), []).append(i)
    for (p, t), rows in by.items():
        for i, u in zip(rows, _lanes([start[i] for i in rows], [end[i] for i in rows], int(units.get(t, 1)))):
            lane[i] = u
    pids: dict[Any, int] = {}
    tracks: dict[tuple[int, int], str] = {}
    events = []
    for i in range(n):
        pid = pids.setdefault(process[i], len(pids) + 1)
        t = track[i]
        if t is not None:
            tid = 1 + int(t[0]) * 64 + lane[i]
            tracks[(pid, tid)] = t[1] if lane[i] == 0 else f"{t[1]} #{lane[i]}"
        else:
            tid = 1 + (len(ENGINE_ORDER) + 1) * 64
            tracks[(pid, tid)] = "control"
        name, cat, args = event(i)
        args.update(start_ps=int(start[i]), end_ps=int(end[i]))
        events.append({"name": name, "cat": cat, "ph": "X", "ts": _us(start[i] - t0), "dur": _us(end[i] - start[i]),
                       "pid": pid, "tid": tid, "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": process_names.get(key, str(key))}}
            for key, pid in pids.items()]
    crit = _critical_path_events(critical, events, len(pids) + 1, tracks, t0, match) if critical else []
    if crit:
        meta.append({"name": "process_name", "ph": "M", "pid": len(pids) + 1, "args": {"name": "critical path"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": len(pids) + 1, "args": {"sort_index": -1}})
    for (pid, tid), name in sorted(tracks.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    data = {"tracks": len(tracks), "events": n, "critical_path_steps": sum(1 for e in crit if e["ph"] == "X")}
    data.update(other or {})
    return {"traceEvents": meta + events + crit, "displayTimeUnit": "ns", "otherData": data}


def _program_trace(result, label: str | None) -> dict[str, Any]:
    from kernbench import _core

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
    agents = [int(x) for x in log["agent"]]

    def track_of(r: int):
        if r < 0:
            return None
        kind = str(eng["engine"][r])
        rank = ENGINE_ORDER.index(kind) if kind in ENGINE_ORDER else len(ENGINE_ORDER)
        return (rank, kind)

    track = [track_of(r) for r in res]
    units = {}
    for r in set(res):
        if r >= 0:
            t = track_of(r)
            units[t] = max(units.get(t, 1), int(eng["capacity"][r]))

    def event(i):
        kind_name = kinds[int(log["kind"][i])]
        t = int(log["tag"][i])
        return names[i] or kind_name, kind_name, {
            "op": int(log["op"][i]), "kind": kind_name, "tag": tags[t] if 0 <= t < len(tags) else "",
            "bytes": int(log["bytes"][i]), "work": float(log["work"][i]), "issue_ps": int(log["issue_ps"][i])}

    critical = _core.critical_path(core) if isinstance(core, _core.RunResult) and int(core.makespan_ps) > 0 else None
    return _op_trace(n, start=start, end=end, process=agents, track=track, units=units, event=event,
                     process_names={a: system.node_name(a) for a in set(agents)}, critical=critical,
                     other={"panel": label, "program": core.program, "makespan_ps": int(core.makespan_ps),
                            "source": "program"})


def k200_trace(result, label: str = "K200") -> dict[str, Any]:
    """The trace of a K200 run (a ``kernbench.k200.Result``): one track per resource (lanes for overlaps),
    times from the run's start, and its exact critical path."""
    from kernbench import _core

    raw = result.raw
    log = raw.get("log")
    if log is None:
        raise _core.UsageError("this run recorded too many ops to trace (more than 200000); trace a smaller run")
    names = raw["resource_names"]
    n = len(log["kind"])
    res = [int(r) for r in log["resource"]]
    t0 = int(raw["start_ps"])

    def event(i):
        return log["kind"][i], names[res[i]], {
            "op": int(log["op"][i]), "kind": log["kind"][i], "bytes": int(log["bytes"][i]),
            "tag": int(log["tag"][i]), "issue_ps": int(log["issue_ps"][i]),
            "issue_us": (int(log["issue_ps"][i]) - t0) / 1e6}

    return _op_trace(n, start=[int(x) for x in log["start_ps"]], end=[int(x) for x in log["end_ps"]],
                     process=[0] * n, track=[(r, names[r]) for r in res], units={}, event=event,
                     process_names={0: label}, t0=t0, critical=raw.get("critical_path"), match="op",
                     other={"panel": label, "makespan_ps": int(raw["elapsed_ps"]), "source": "k200"})


def vgpu_trace(run, label: str = "vGPU") -> dict[str, Any]:
    """The trace of a vGPU run (the dict of ``kernbench.vgpu.launches``; or its ``"ops"`` alone, then
    without the critical path): one process per guest, one track per resource, and the run's exact
    critical path."""
    ops = run["ops"] if "ops" in run else run
    kinds = list(ops["kind_names"])
    res_names = list(ops["resource_names"])
    n = len(ops["op"])
    res = [int(r) for r in ops["resource"]]
    start = [int(x) for x in ops["start"]]

    def event(i):
        return kinds[int(ops["kind"][i])], res_names[res[i]], {
            "op": int(ops["op"][i]), "kind": kinds[int(ops["kind"][i])], "tag": int(ops["tag"][i]),
            "issue_ps": int(ops["issue"][i]), "queued_us": (start[i] - int(ops["issue"][i])) / 1e6,
            "bytes": int(ops["bytes"][i]), "work": float(ops["work"][i])}

    guests = [int(g) for g in ops["agent"]]
    end = [int(x) for x in ops["end"]]
    return _op_trace(n, start=start, end=end, process=guests, track=[(r, res_names[r]) for r in res], units={},
                     event=event, process_names={g: f"guest {g}" for g in set(guests)},
                     critical=run.get("critical_path") if "ops" in run else None, match="op",
                     other={"panel": label, "makespan_ps": (max(end) - min(int(x) for x in ops["issue"])) if n else 0,
                            "source": "vgpu"})


def _critical_path_events(cp: dict, events: list[dict[str, Any]], pid: int, tracks: dict, t0: int = 0,
                          match: str = "node") -> list[dict[str, Any]]:
    """The critical path as its own process (one track of steps, linked by flow arrows), and
    ``args.critical = True`` on the op-log events of the ops it runs through."""
    if not cp or not cp["steps"]:
        return []
    on_path: dict[int, list[tuple[int, int]]] = {}
    for s in cp["steps"]:
        on_path.setdefault(int(s[match]), []).append((int(s["start_ps"]), int(s["end_ps"])))
    for e in events:  # op-log rows carry their run-graph node (Programs) or their row (other models) as "op"
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
                    "ts": _us(s["start_ps"] - t0), "dur": _us(s["duration_ps"]), "pid": pid, "tid": tid, "args": args})
        if i > 0 and s["via"] != "op":  # an arrow from the cause to the step it let start
            prev = cp["steps"][i - 1]
            out.append({"name": s["via"], "cat": "critical", "ph": "s", "id": i, "pid": pid, "tid": tid,
                        "ts": _us(prev["start_ps"] - t0)})
            out.append({"name": s["via"], "cat": "critical", "ph": "f", "bp": "e", "id": i, "pid": pid,
                        "tid": tid, "ts": _us(s["start_ps"] - t0)})
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

    if "parent" in t:  # the stripes of a spread transfer are drawn as their parent, once
        keep = [i for i in range(len(start)) if int(t["parent"][i]) < 0]
        t = {k: [v[i] for i in keep] for k, v in t.items()}
        start, end = [start[i] for i in keep], [end[i] for i in keep]
    return _interval_trace(system, label, "transfers", [int(x) for x in t["src"]], start, end, "transfers", event)


def chrome_trace(obj, label: str | None = None) -> dict[str, Any]:
    """The Trace Event JSON of a RunResult (Program run), a K200 run (``kernbench.k200.Result``), a vGPU
    run (the dict of ``kernbench.vgpu.launches``), or a System's DMA ops (else its transfers)."""
    if hasattr(obj, "log") and hasattr(obj, "engines"):
        return _program_trace(obj, label)
    if hasattr(obj, "raw") and isinstance(getattr(obj, "raw"), dict) and "resource_names" in obj.raw:
        return k200_trace(obj, label or "K200")
    if isinstance(obj, dict) and ("ops" in obj or "kind_names" in obj):
        return vgpu_trace(obj, label or "vGPU")
    if hasattr(obj, "dma_ops"):
        if len(obj.dma_ops()["issue_ps"]):
            return _dma_trace(obj, label)
        return _transfer_trace(obj, label)
    raise TypeError(f"cannot trace a {type(obj).__name__}: pass a RunResult, a K200 result, a vGPU run or a "
                    "System that ran DMA ops or transfers")


def write_trace(obj, path: str | Path, label: str | None = None) -> dict[str, Any]:
    """Write the trace atomically; returns ``{"panel", "file", "tracks", "events"}``."""
    trace = chrome_trace(obj, label)
    kio.write_json(Path(path), trace)
    n_events = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    return {"panel": label, "file": str(path), "tracks": trace["otherData"]["tracks"], "events": n_events}

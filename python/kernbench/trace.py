"""Chrome / Perfetto traces of a run: one process per agent, one track per engine.

    from kernbench.trace import write_trace
    write_trace(result, "trace.json")      # a RunResult (a Program run), a K200 result, a vGPU run,
                                           # or a System after DMA ops or traffic

Open the file in https://ui.perfetto.dev or chrome://tracing. This module knows no platform: every result
type has a ``to_trace(label=None) -> dict`` (``program.RunResult``, ``k200.Result``, the ``vgpu.Run`` of
``vgpu.launches`` and its ``vgpu.OpLog``, ``System``) that hands its rows to one of the two writers here, and
``chrome_trace(obj, label)`` is ``obj.to_trace(label)``.

- ``op_trace``: the one op-log shape. Every row becomes a complete ("X") event of its process, on the track of
  the resource that ran it. A resource with several units (a PE's DMA channels) gets one track per unit
  ("dma", "dma #1", ...), so overlapping ops never share a track; rows that hold none (alloc, free, barrier,
  the composite's envelope) go to a "control" track. The run's exact critical path, when given, is a process
  of its own.
- ``link_counter_events``: a Program run's link tracks: per channel (one direction of a link) its utilisation
  over time as a Perfetto counter track ("ph": "C"), from the fabric's busy time per bin (``RunResult.links()``).
- ``interval_trace``: a System's records (DMA ops, or without any its transfers): one process per issuer
  (source) with one track per concurrent interval.

Times are microseconds in the file (the format's unit), exact to the picosecond (``start_ps``/``end_ps``).
"""

from __future__ import annotations

import heapq
from pathlib import Path
from typing import Any

from kernbench import atomic_output as kio

__all__ = ["lanes", "us", "op_trace", "critical_path_events", "link_counter_events", "interval_trace",
           "not_traceable", "chrome_trace", "write_trace"]


def lanes(starts, ends, n_units: int) -> list[int]:
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


def us(ps: int) -> float:
    """Picoseconds as the file's microseconds."""
    return ps / 1e6


def op_trace(n: int, *, start, end, process, track, units, event, process_names: dict, t0: int = 0,
             critical: dict | None = None, match: str = "node", other: dict | None = None,
             control_order: int | None = None) -> dict[str, Any]:
    """The one writer of op-log traces, for every model (Programs, K200, vGPU): the common op-log shape.

    Row i goes to process ``process[i]`` (named by ``process_names``), on the track ``track[i]`` =
    (order, name) of the resource it ran on, or None (the "control" track); a track with ``units[track]``
    units (default 1) gets one lane per unit ("dma", "dma #1", ...) so overlapping rows never share a
    lane. ``event(i)`` gives (name, cat, args); args get ``start_ps``/``end_ps`` (and the caller's
    ``op``, ``issue_ps``). ``critical`` (a critical-path dict) adds its own process of steps linked by flow
    arrows, and ``args.critical = True`` on the rows it runs through (``match``: the step key that equals a
    row's ``args.op``: "node" for Programs, "op" for the other models). Times are microseconds from ``t0``.
    The "control" track sorts at ``control_order`` (default: after every resource track)."""
    lane = [0] * n
    by: dict[tuple, list[int]] = {}
    for i in range(n):
        if track[i] is not None:
            by.setdefault((process[i], track[i]), []).append(i)
    for (p, t), rows in by.items():
        for i, u in zip(rows, lanes([start[i] for i in rows], [end[i] for i in rows], int(units.get(t, 1)))):
            lane[i] = u
    if control_order is None:
        control_order = 1 + max((int(t[0]) for t in track if t is not None), default=0)
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
            tid = 1 + control_order * 64
            tracks[(pid, tid)] = "control"
        name, cat, args = event(i)
        args.update(start_ps=int(start[i]), end_ps=int(end[i]))
        events.append({"name": name, "cat": cat, "ph": "X", "ts": us(start[i] - t0), "dur": us(end[i] - start[i]),
                       "pid": pid, "tid": tid, "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": process_names.get(key, str(key))}}
            for key, pid in pids.items()]
    crit = critical_path_events(critical, events, len(pids) + 1, tracks, t0, match) if critical else []
    if crit:
        meta.append({"name": "process_name", "ph": "M", "pid": len(pids) + 1, "args": {"name": "critical path"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": len(pids) + 1, "args": {"sort_index": -1}})
    for (pid, tid), name in sorted(tracks.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    data = {"tracks": len(tracks), "events": n, "critical_path_steps": sum(1 for e in crit if e["ph"] == "X")}
    data.update(other or {})
    return {"traceEvents": meta + events + crit, "displayTimeUnit": "ns", "otherData": data}


def critical_path_events(cp: dict, events: list[dict[str, Any]], pid: int, tracks: dict, t0: int = 0,
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
        if s.get("channels"):  # its link time by channel: {"link:ring": {"gpu0->gpu1": ps}}
            args["channels_ps"] = {k: dict(v) for k, v in s["channels"].items()}
        out.append({"name": s["name"] or s["op_kind"], "cat": "critical:" + s["kind"], "ph": "X",
                    "ts": us(s["start_ps"] - t0), "dur": us(s["duration_ps"]), "pid": pid, "tid": tid, "args": args})
        if i > 0 and s["via"] != "op":  # an arrow from the cause to the step it let start
            prev = cp["steps"][i - 1]
            out.append({"name": s["via"], "cat": "critical", "ph": "s", "id": i, "pid": pid, "tid": tid,
                        "ts": us(prev["start_ps"] - t0)})
            out.append({"name": s["via"], "cat": "critical", "ph": "f", "bp": "e", "id": i, "pid": pid,
                        "tid": tid, "ts": us(s["start_ps"] - t0)})
    return out


def link_counter_events(links: dict, start_ps: int, end_ps: int, pid: int, t0: int = 0) -> list[dict[str, Any]]:
    """The link tracks of a run as a process of its own ("links"): one counter track per channel that was busy,
    named ``"<class> <from>-><to>"``, whose value is its utilisation (busy lane-time over the bin's length times
    its lanes, 0..1) per bin of ``links["bin_ps"]`` from ``start_ps`` (``RunResult.links()``). A value is written
    where it changes, and 0 at the run's end, so the counter integrates (value x time x lanes) to the channel's
    busy time: its bytes / lane bandwidth, up to the ps rounding of each chunk."""
    names = list(links.get("name", ()))
    width = int(links.get("bin_ps", 0))
    if not names or width <= 0:
        return []
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "links"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": -2}}]
    order = sorted(range(len(names)), key=lambda i: (links["link_class"][i], names[i]))
    for i in order:
        track = f"{links['link_class'][i]} {names[i]}"
        lanes = max(int(links["lanes"][i]), 1)
        last = None
        for b, busy in enumerate(links["busy_ps"][i]):
            a = start_ps + b * width
            if a >= end_ps:
                break
            span = min(end_ps, a + width) - a  # the last bin may end with the run
            value = int(busy) / (span * lanes)
            if value != last:
                out.append({"name": track, "ph": "C", "ts": us(a - t0), "pid": pid,
                            "args": {"utilization": value}})
                last = value
        if last:
            out.append({"name": track, "ph": "C", "ts": us(end_ps - t0), "pid": pid, "args": {"utilization": 0.0}})
    return out


def interval_trace(system, label, source, owners, start, end, track, event) -> dict[str, Any]:
    """Intervals of a System's records: one process per owner node, one track per concurrent interval.

    ``event(i)`` gives row i's (name, cat, args); ``track`` names the first track ("dma", "transfers")."""
    n = len(owners)
    lane = [0] * n
    by: dict[int, list[int]] = {}
    for i, a in enumerate(owners):
        by.setdefault(a, []).append(i)
    for rows in by.values():
        for i, u in zip(rows, lanes([start[i] for i in rows], [end[i] for i in rows], len(rows))):
            lane[i] = u
    pids: dict[int, int] = {}
    tracks: dict[tuple[int, int], str] = {}
    events = []
    for i in range(n):
        pid = pids.setdefault(owners[i], len(pids) + 1)
        tid = 1 + lane[i]
        tracks[(pid, tid)] = track if lane[i] == 0 else f"{track} #{lane[i]}"
        name, cat, args = event(i)
        events.append({"name": name, "cat": cat, "ph": "X", "ts": us(start[i]), "dur": us(end[i] - start[i]),
                       "pid": pid, "tid": tid, "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": system.node_name(a)}}
            for a, pid in pids.items()]
    for (pid, tid), name in sorted(tracks.items()):
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"panel": label, "makespan_ps": max(end) - min(start), "tracks": len(tracks),
                          "source": source}}


def not_traceable(obj) -> TypeError:
    """The error for an object that has no ``to_trace``."""
    return TypeError(f"cannot trace a {type(obj).__name__}: pass a RunResult, a K200 result, a vGPU run or a "
                     "System that ran DMA ops or transfers")


def chrome_trace(obj, label: str | None = None) -> dict[str, Any]:
    """The Trace Event JSON of anything with a ``to_trace(label)``: a RunResult (Program run), a K200 run
    (``kernbench.k200.Result``), a vGPU run (``kernbench.vgpu.launches``'s ``vgpu.Run``, or its ``"ops"``), or
    a System's DMA ops (else its transfers). TypeError for anything else."""
    to_trace = getattr(obj, "to_trace", None)
    if not callable(to_trace):
        raise not_traceable(obj)
    return to_trace(label)


def write_trace(obj, path: str | Path, label: str | None = None) -> dict[str, Any]:
    """Write the trace atomically; returns ``{"panel", "file", "tracks", "events"}``."""
    trace = chrome_trace(obj, label)
    kio.write_json(Path(path), trace)
    n_events = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    return {"panel": label, "file": str(path), "tracks": trace["otherData"]["tracks"], "events": n_events}

"""``kernbench show CONFIG``: what a machine config builds, in a few lines and one picture.

    from kernbench.show import topology_summary, summary_text, draw
    info = topology_summary("configs/topology.yaml", ["system.sips.w=1"])
    print(summary_text(info))           # node kinds, link classes with bandwidths, the SIP grid
    draw("configs/topology.yaml", [], "machine.png")

Everything comes from the built machine (``System.nodes()``,
``System.channels()``) and the loader's summary, so the picture is what
the simulator routes over.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from kernbench.config import config_overrides, validate
from kernbench.units import gbps as _gbps
from kernbench.units import ns as _ns


def _load(config, sets: Iterable[str]):
    from kernbench.system import System, config_path

    path = config_path(config)
    return path, System.load(path, set=dict(config_overrides(sets)))


def topology_summary(config=None, sets: Iterable[str] = ()) -> dict[str, Any]:
    """Counts by node kind, link classes (links, lanes, bandwidth, latency), the loader's summary."""
    import numpy as np

    sets = list(sets)
    path, system = _load(config, sets)
    summary = validate(path, sets)
    nodes = system.nodes()
    kinds = Counter(str(k) for k in nodes["kind"])
    ch = system.channels()
    classes: dict[str, dict[str, Any]] = {}
    cls = np.asarray(ch["class"])
    for c in sorted(set(cls.tolist())):
        sel = cls == c
        bw = sorted({int(x) for x in np.asarray(ch["bandwidth_Bps"])[sel]})
        lat = sorted({int(x) for x in np.asarray(ch["latency_ps"])[sel]})
        conn = np.asarray(ch["connections"])[sel]
        classes[c] = {
            "channels": int(sel.sum()),              # one per direction
            "links": int(sel.sum()) // 2,
            "lanes": sorted({int(x) for x in conn}),
            "bandwidth_Bps": bw,                     # per lane and direction
            "latency_ps": lat,
            "aggregate_Bps": int(sum(int(b) * int(k) for b, k in
                                     zip(np.asarray(ch["bandwidth_Bps"])[sel], conn))),
        }
    return {"source": str(path), "summary": summary, "nodes": dict(sorted(kinds.items())),
            "total_nodes": int(sum(kinds.values())), "link_classes": classes, "fabric": system.fabric_model}


def _sip_grid(summary: dict[str, Any]) -> list[str]:
    sips = summary["sips"]
    w, h = sips["w"], sips["h"]
    width = len(f"sip{w * h - 1}")
    rows = []
    for y in range(h):
        rows.append("    " + " -- ".join(f"sip{y * w + x}".ljust(width) for x in range(w)))
        if y < h - 1:
            rows.append("    " + "    ".join("|".ljust(width) for _ in range(w)))
    wrap = {"torus": "rows and columns wrap around", "ring": "one ring through all SIPs",
            "mesh": "no wrap-around"}.get(sips["topology"], "")
    return [f"  SIP grid {w}x{h} ({sips['topology']}{': ' + wrap if wrap else ''}):", *rows]


def summary_text(info: dict[str, Any]) -> str:
    """The human summary ``kernbench show`` prints."""
    s = info["summary"]
    lines = [f"{info['source']}"]
    if s["kind"] == "system":
        c, r = s["cubes"], s["routers"]
        lines.append(f"  system {s['name']!r}: {s['sips']['count']} SIPs of {c['w']}x{c['h']} cubes, "
                     f"each cube {r['w']}x{r['h']} routers and {s['pes_per_cube']} PEs; {s['total_pes']} PEs in all")
    else:
        lines.append(f"  explicit graph: {s['nodes']} nodes, {s['edges']} edges")
    f = s["fabric"]
    extra = f", chunk {f['chunk']} B, flit {f['flit']} B" if f["model"] == "packet" else ""
    lines.append(f"  fabric: {f['model']} model{extra}")
    lines.append(f"  nodes ({info['total_nodes']}): " + ", ".join(f"{k} {n}" for k, n in info["nodes"].items()))
    lines.append("  link classes (bandwidth per lane and direction):")
    width = max((len(k) for k in info["link_classes"]), default=5)
    for name, c in info["link_classes"].items():
        bw = " / ".join(_gbps(b) for b in c["bandwidth_Bps"])
        lat = " / ".join(_ns(x) for x in c["latency_ps"])
        lanes = "/".join(str(x) for x in c["lanes"])
        lines.append(f"    {name:<{width}}  {c['links']:>6} links  x{lanes} lanes  {bw:>12} per lane  "
                     f"latency {lat}")
    if s["kind"] == "system":
        lines += _sip_grid(s)
    return "\n".join(lines)


# ---- drawing -------------------------------------------------------------------------------

_KIND_STYLE = {  # marker, size, colour
    "router": ("s", 14, "#555555"),
    "pe": ("o", 10, "#1f77b4"),
    "hbm_ctrl": ("D", 8, "#2ca02c"),
    "ucie": ("^", 18, "#d62728"),
    "pcie_ep": ("P", 40, "#9467bd"),
}
_SIDE = {"e": (0.6, 0.0), "w": (-0.6, 0.0), "n": (0.0, -0.6), "s": (0.0, 0.6)}
_OFFSET = {"pe": (-0.22, 0.22), "hbm_ctrl": (0.22, 0.22), "pcie_ep": (0.0, -0.9)}


def _positions(system, summary) -> dict[int, tuple[float, float]]:
    """Routers on their grid (cube within SIP within the SIP grid); other nodes beside their neighbours."""
    import numpy as np

    nodes = system.nodes()
    n = len(nodes["name"])
    ch = system.channels()
    nbrs: dict[int, list[int]] = {i: [] for i in range(n)}
    for a, b in zip(ch["src"], ch["dst"]):
        nbrs[int(a)].append(int(b))
    pos: dict[int, tuple[float, float]] = {}
    if summary["kind"] == "system":
        r, c, s = summary["routers"], summary["cubes"], summary["sips"]
        cube_w, cube_h = r["w"] + 1.8, r["h"] + 1.8
        sip_w, sip_h = c["w"] * cube_w + 2.5, c["h"] * cube_h + 2.5
        for i in range(n):
            if nodes["kind"][i] != "router":
                continue
            sip, cube = int(nodes["sip"][i]), int(nodes["cube"][i])
            x = (sip % s["w"]) * sip_w + (cube % c["w"]) * cube_w + int(nodes["col"][i])
            y = (sip // s["w"]) * sip_h + (cube // c["w"]) * cube_h + int(nodes["row"][i])
            pos[i] = (x, y)
    else:
        return _layered(n, nbrs)
    for _ in range(3):  # nodes next to placed ones (PEs, then HBM controllers behind them, ...)
        for i in range(n):
            if i in pos:
                continue
            placed = [pos[j] for j in nbrs[i] if j in pos]
            if not placed:
                continue
            x = float(np.mean([p[0] for p in placed]))
            y = float(np.mean([p[1] for p in placed]))
            kind = str(nodes["kind"][i])
            name = str(nodes["name"][i])
            dx, dy = _SIDE.get(name.rsplit("_", 1)[-1], (0.0, 0.0)) if kind == "ucie" else _OFFSET.get(kind, (0.3, 0.3))
            pos[i] = (x + dx, y + dy)
    return pos


def _bfs(start: int, nbrs: dict[int, list[int]]) -> dict[int, int]:
    depth = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            for v in nbrs[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    nxt.append(v)
        frontier = nxt
    return depth


def _layered(n: int, nbrs: dict[int, list[int]]) -> dict[int, tuple[float, float]]:
    """Explicit graphs: rows by hop distance from the graph's centre (a circle past 400 nodes)."""
    if n > 400:
        return {i: (10 * math.cos(2 * math.pi * i / n), 10 * math.sin(2 * math.pi * i / n)) for i in range(n)}
    centre = min(range(n), key=lambda i: (max(_bfs(i, nbrs).values()), -len(nbrs[i]), i)) if n else 0
    depth = _bfs(centre, nbrs) if n else {}
    rows: dict[int, list[int]] = {}
    for i in range(n):
        rows.setdefault(depth.get(i, max(depth.values(), default=0) + 1), []).append(i)
    pos = {}
    for d, members in rows.items():
        for k, i in enumerate(members):
            pos[i] = (k - (len(members) - 1) / 2, float(d))
    return pos


def draw(config=None, sets: Iterable[str] = (), png: str | Path = "machine.png") -> Path:
    """Draw the machine to ``png``: nodes by kind, links coloured by class (legend with bandwidths)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    from kernbench import atomic_output as kio

    kio.check_figure_file(png, "--png")  # before drawing: a bad path is refused, not found at the end
    sets = list(sets)
    path, system = _load(config, sets)
    summary = validate(path, sets)
    pos = _positions(system, summary)
    nodes = system.nodes()
    ch = system.channels()
    fig, ax = plt.subplots(figsize=(12, 9))
    cmap = plt.get_cmap("tab10")
    seen: set[tuple[int, int]] = set()
    segs: dict[str, list] = {}
    bws: dict[str, set[int]] = {}
    for a, b, cls, bw in zip(ch["src"], ch["dst"], ch["class"], ch["bandwidth_Bps"]):
        a, b = int(a), int(b)
        if (b, a) in seen or a not in pos or b not in pos:
            continue
        seen.add((a, b))
        segs.setdefault(str(cls), []).append([pos[a], pos[b]])
        bws.setdefault(str(cls), set()).add(int(bw))
    for k, (cls, lines) in enumerate(sorted(segs.items())):
        label = f"{cls}: {len(lines)} links, " + "/".join(_gbps(x) for x in sorted(bws[cls]))
        width = 2.0 if cls in ("pcie", "ucie") else 0.8
        ax.add_collection(LineCollection(lines, colors=[cmap(k % 10)], linewidths=width, label=label, zorder=1))
    kinds = sorted({str(x) for x in nodes["kind"]})
    for kind in kinds:
        idx = [i for i in range(len(nodes["name"])) if nodes["kind"][i] == kind and i in pos]
        marker, size, colour = _KIND_STYLE.get(kind, ("o", 40, plt.get_cmap("Dark2")(kinds.index(kind) % 8)))
        ax.scatter([pos[i][0] for i in idx], [pos[i][1] for i in idx], s=size, marker=marker, color=colour,
                   label=f"{kind} ({len(idx)})", zorder=2)
    if len(pos) <= 60:  # small (explicit) graphs: name every node
        for i, (x, y) in pos.items():
            ax.annotate(str(nodes["name"][i]), (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.autoscale()
    ax.invert_yaxis()
    if summary["kind"] == "system":
        ax.set_aspect("equal")
    if summary["kind"] == "system":
        ax.set_xlabel("router column (grid units: cube, then SIP, offsets added)")
        ax.set_ylabel("router row (grid units)")
    else:
        ax.set_xlabel("position within its row (arbitrary units)")
        ax.set_ylabel("hops from the graph's centre")
    title = summary.get("name") or Path(str(path)).name
    ax.set_title(f"{title}: {len(nodes['name'])} nodes, {len(seen)} links ({system.fabric_model} fabric)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    out = kio.save_figure(fig, Path(png))
    plt.close(fig)
    return out

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
    if s.get("cluster"):
        c = s["cluster"]
        k = c["counts"]
        lines.append(f"  cluster: {c['nodes']} x {c['box']} ({c['gpus']} GPUs), {c['nics_per_node']} x {c['nic']['name']} "
                     f"per node; {c['kind']} {c['tiers']} tiers, radix {c['radix']}, leaf {c['leaf_down']} down / "
                     f"{c['leaf_up']} up; {k['leaves']} leaves, {k['spines']} spines, {k['cores']} cores")
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


def node_positions(system, summary) -> dict[int, tuple[float, float]]:
    """Where ``draw`` puts each node: on a generated machine routers on their grid (cube within SIP within the SIP
    grid) and other nodes beside their neighbours; an explicit graph by a graph layout (``graph_layout``)."""
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
    elif summary.get("cluster"):
        return cluster_layout(nodes)
    else:
        return graph_layout(n, nbrs)
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


def cluster_layout(nodes) -> dict[int, tuple[float, float]]:
    """Clusters (any size, linear time): one row per tier -- cores, spines, leaves, NICs -- each row spread over
    the same width, and every box's own nodes in a column under its node's NICs, by kind."""
    names = [str(x) for x in nodes["name"]]
    kinds = [str(x) for x in nodes["kind"]]
    rows: dict[str, list[int]] = {"core": [], "spine": [], "leaf": [], "nic": []}
    boxes: dict[int, list[int]] = {}
    for i, name in enumerate(names):
        head = name.split(".", 1)[0]
        if kinds[i] == "nic":
            rows["nic"].append(i)
        elif "." in name and head[1:].isdigit():
            boxes.setdefault(int(head[1:]), []).append(i)
        else:
            rows[next((r for r in ("core", "spine", "leaf") if name.startswith(r)), "leaf")].append(i)
    width = float(max(len(boxes), 1))
    pos: dict[int, tuple[float, float]] = {}
    for y, row in enumerate(("core", "spine", "leaf", "nic")):
        for k, i in enumerate(rows[row]):
            pos[i] = ((k + 0.5) * width / len(rows[row]), 2.0 * y)
    order = sorted({k for k in kinds})
    for b, members in boxes.items():
        for k, i in enumerate(members):
            pos[i] = (b + 0.5 + 0.3 * (order.index(kinds[i]) % 3 - 1), 8.0 + k * 4.0 / max(len(members), 1))
    return pos


def graph_layout(n: int, nbrs: dict[int, list[int]]) -> dict[int, tuple[float, float]]:
    """Explicit graphs: networkx's Kamada-Kawai layout (deterministic, no random start), so that a ring is drawn
    as a ring, its wraparound edge visible, and up to 64 nodes (a box, whose nodes are labelled) no node is left on
    an edge it does not join (``clear_edges``). Past 100 nodes the quicker Fruchterman-Reingold layout (seeded),
    past 400 a circle."""
    if n > 400:
        return {i: (10 * math.cos(2 * math.pi * i / n), 10 * math.sin(2 * math.pi * i / n)) for i in range(n)}
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, bs in nbrs.items() for b in bs)
    if n <= 2:
        return {i: (float(i), 0.0) for i in range(n)}
    placed = nx.kamada_kawai_layout(g) if n <= 100 else nx.spring_layout(g, seed=0)
    pos = {int(i): (float(x), float(y)) for i, (x, y) in placed.items()}
    if n > 64:
        return pos
    return clear_edges(pos, sorted({tuple(sorted((a, b))) for a, bs in nbrs.items() for b in bs if a != b}))


def clear_edges(pos: dict[int, tuple[float, float]], edges: list[tuple[int, int]],
                gap: float = 0.03, rounds: int = 50) -> dict[int, tuple[float, float]]:
    """Moves every node that lies within ``gap`` (of the drawing's size) of an edge it does not join off that edge,
    until none does (or ``rounds`` passes): a force layout may put a node on a line between two others in a dense
    graph (an NVSwitch box), which then hides the edge and the node. A node is moved perpendicular to the edge, to
    the nearest of a few spots on either side that clears every edge; deterministic."""
    pos = dict(pos)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    size = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    limit = gap * size

    def near(v: int, p: tuple[float, float], a: int, b: int) -> float | None:
        """The foot of p on edge a-b when p lies within the limit of its inside, else None."""
        (ax, ay), (bx, by) = pos[a], pos[b]
        dx, dy = bx - ax, by - ay
        length2 = dx * dx + dy * dy
        if v in (a, b) or length2 == 0:
            return None
        t = ((p[0] - ax) * dx + (p[1] - ay) * dy) / length2
        if not 0.0 < t < 1.0:
            return None
        cx, cy = ax + t * dx, ay + t * dy
        return (cx, cy) if math.hypot(p[0] - cx, p[1] - cy) < limit else None

    def clashes(v: int, p: tuple[float, float]) -> int:
        return sum(near(v, p, a, b) is not None for a, b in edges)

    for _ in range(rounds):
        moved = False
        for v in sorted(pos):
            for a, b in edges:
                foot = near(v, pos[v], a, b)
                if foot is None:
                    continue
                (ax, ay), (bx, by) = pos[a], pos[b]
                px, py = pos[v]
                side = (px - foot[0], py - foot[1])
                if math.hypot(*side) == 0:
                    side = (-(by - ay), bx - ax)
                norm = math.hypot(*side)
                ux, uy = side[0] / norm, side[1] / norm
                spots = [(foot[0] + sgn * k * limit * ux, foot[1] + sgn * k * limit * uy)
                         for k in (1.5, 2.5, 4.0, 6.0) for sgn in (1, -1)]
                pos[v] = min(spots, key=lambda q: (clashes(v, q), math.hypot(q[0] - px, q[1] - py)))
                moved = True
                break
        if not moved:
            break
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
    pos = node_positions(system, summary)
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
        ax.set_xlabel("graph layout (networkx; arbitrary units)")
        ax.set_aspect("equal")
    title = summary.get("name") or Path(str(path)).name
    ax.set_title(f"{title}: {len(nodes['name'])} nodes, {len(seen)} links ({system.fabric_model} fabric)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    out = kio.save_figure(fig, Path(png))
    plt.close(fig)
    return out

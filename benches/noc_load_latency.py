"""noc-load-latency: packet latency and accepted throughput against offered load, up to saturation.

Synthetic traffic among the PEs of one cube's router mesh (one PE per router,
dimension-order routes), with the packet model at flit granularity:

  meshes     mesh-4x4, mesh-8x8 (and cube-4x2, the default machine's cube)
  patterns   uniform, transpose, bitcomplement, neighbour, hotspot
             (src/topology/fabric/traffic.hpp defines each destination mapping)
  buffers    "unbounded" (the packet model's infinite queues) or a per-VC
             input buffer size such as "8 flits" (links.<class>.buffer, with
             credit flow control), each with `vcs` virtual channels
             (links.<class>.vcs); the unbounded setting runs once
  injection  bernoulli (default): at each cycle a node starts a packet with
             probability load / packet_flits; or poisson

Units: a *cycle* is the time one flit takes on a router-to-router link
(fabric.flit / links.noc bandwidth: 64 B at 256 GB/s = 250 ps), and load is
in flits per node per cycle, offered per *sending* node (a transpose's
diagonal node sends nothing and is not counted).

For every load the bench measures, over the packets injected after the
warm-up, the accepted throughput and the mean / p99 latency. Per (mesh,
pattern, buffer, vcs) it finds the saturation load -- the first load where
accepted throughput drops below 95 % of offered or the mean latency passes 3x
its zero-load value (interpolated between the measured loads) -- and prints it
beside the channel-load bound of the pattern: for each channel c,
gamma_c = sum over (s, d) of P(s sends to d) over the routes through c,
exactly from the simulator's own routes (every channel, PE injection and
ejection included), and bound = min_c capacity_c / gamma_c. No routing of
that pattern can accept more.

The tree-saturation study sends hotspot traffic (every other node to one
destination, past its ejection capacity) plus a light victim flow whose route
touches neither the hotspot node nor its router, and reports the victim's
latency: with unbounded queues the hot queue stays at the hotspot's links;
with finite buffers and credits it backs up into the links the victim shares.

Outputs: sweep.json (results: one row per load point, study "load" or
"tree"; summary.saturation: one row per (mesh, pattern, buffer, vcs) with
`pattern`, `buffer`, `vcs`, `saturation` and `bound` in flits/node/cycle),
load_latency.csv, load_latency_<mesh>.png (latency-load curves, buffered vs
unbounded), tree_saturation.png.
"""

from __future__ import annotations

import math

import numpy as np

from kernbench import bench
from kernbench.overrides import Param

MESHES = {
    # name: (router mesh w, h, PEs per cube)
    "cube-4x2": (4, 2, 8),
    "mesh-4x4": (4, 4, 16),
    "mesh-8x8": (8, 8, 64),
}
PATTERNS = ["uniform", "transpose", "bitcomplement", "neighbour", "hotspot"]
FLIT = 64  # bytes; the bench sets fabric.flit and fabric.chunk to it (one flit per chunk)
ACCEPT_FRACTION = 0.95  # saturation: accepted below this fraction of offered ...
LATENCY_FACTOR = 3.0    # ... or mean latency over this multiple of zero-load


def _buffer_check(v):
    if not isinstance(v, str) or not v.strip():
        return "a buffer setting is 'unbounded' or a size such as '8 flits' or '512 B'"
    return None


@bench(
    name="noc-load-latency",
    description="NoC latency and accepted throughput vs offered load (flits/node/cycle) by pattern and buffer "
                "setting, saturation vs the channel-load bound, and tree saturation",
    params={
        # checked per mesh: an unknown one fails its points only; a size, not a code path (full_check)
        "meshes": Param(["mesh-4x4", "mesh-8x8"], size=True),
        # The target study; bitcomplement, neighbour and hotspot run with --set bench.patterns=...
        "patterns": Param(["uniform", "transpose"], choices=PATTERNS),
        "buffers": Param(["unbounded", "4 flits", "16 flits"], check=_buffer_check),
        "vcs": Param([1, 2, 4], min=1, help="virtual channels per link for the buffered settings"),
        "buffer_classes": Param(["noc", "pe"], help="link classes that get the buffer / vcs setting"),
        "injection": Param("bernoulli", choices=["bernoulli", "poisson"]),
        "loads": Param([0.1, 0.25, 0.4, 0.6, 0.75, 0.9, 1.0, 1.15, 1.3], min=0.001,
                       help="offered loads as fractions of each pattern's channel-load bound"),
        "packet_flits": Param(4, min=1),
        "hotspot_fraction": Param(0.2, min=0.0, max=1.0),
        "window_cycles": Param(12000, min=100),
        "warmup_cycles": Param(3000, min=0),
        "tree": Param(True, help="run the tree-saturation study"),
        "tree_mesh": "mesh-4x4",
        "tree_loads": Param([0.0, 0.05, 0.1, 0.2], min=0.0,
                            help="hotspot load per source (flits/node/cycle); 0: the victim alone"),
        "victim_load": Param(0.05, min=0.001, help="the victim flow's load (flits/cycle)"),
    },
    uses_config=True,
    smoke={"bench.meshes": ["mesh-4x4"], "bench.patterns": ["uniform", "transpose"],
           "bench.buffers": ["unbounded", "8 flits"], "bench.vcs": [2], "bench.loads": [0.3, 0.8, 1.3],
           "bench.window_cycles": 3000, "bench.warmup_cycles": 800, "bench.tree_loads": [0.0, 0.2]},
    # CI (scripts/check_benches.py): every pattern, buffer setting and study of the default, on the 4x4 mesh
    # only, with one VC and several, three loads (below, near and past saturation) and shorter windows
    full_check={"bench.meshes": ["mesh-4x4"], "bench.vcs": [1, 2], "bench.loads": [0.25, 0.75, 1.3],
                "bench.window_cycles": 3000, "bench.warmup_cycles": 800, "bench.tree_loads": [0.0, 0.2]},
    golden={"key": ["study", "mesh", "pattern", "buffer", "vcs", "load_fraction"],
            "metrics": ["packets", "offered_flits", "injected_flits", "accepted_flits", "mean_latency_cycles",
                        "p99_latency_cycles", "bound_flits"]},
)
def noc_load_latency(ctx):
    p = ctx.params
    # its subject is a generated cube's router mesh (system.routers.*): an explicit graph is refused
    ctx.require_generated("builds its meshes as one cube's router grid (system.routers, system.pes_per_cube)")
    results, failures, saturation = ctx.results, ctx.failures, []
    settings = _settings(p)
    for mesh in p["meshes"]:
        if mesh not in MESHES:
            failures.append({"name": mesh, "error": f"unknown mesh {mesh!r} (known: {', '.join(MESHES)})"})
            continue
        for pattern in p["patterns"]:
            for buf, vcs in settings:
                label = f"{mesh} {pattern} {_setting_name(buf, vcs)}"
                try:
                    rows, summary = _curve(ctx, mesh, pattern, buf, vcs, p)
                except Exception as e:  # a failing setting never sinks the others
                    failures.append({"name": label, "error": f"{type(e).__name__}: {e}"})
                    ctx.log(f"  {label}: FAILED: {type(e).__name__}: {e}")
                    continue
                results.extend(rows)
                saturation.append(summary)
                sat = summary["saturation"]
                ctx.log(f"  {label:<34} saturation {_fmt(sat)} flits/node/cycle"
                        f" = {_fmt(summary['saturation_vs_bound'], '.0%')} of the channel-load bound"
                        f" {summary['bound']:.3f} ({summary['saturated_by']}; zero-load"
                        f" {summary['zero_load_latency_cycles']:.1f} cycles)")
    tree = []
    if p["tree"] and p["tree_mesh"] not in MESHES:
        failures.append({"name": "tree", "error": f"unknown mesh {p['tree_mesh']!r} (known: {', '.join(MESHES)})"})
    elif p["tree"]:
        for buf, vcs in settings:
            try:
                tree.extend(_tree(ctx, p["tree_mesh"], buf, vcs, p))
            except Exception as e:
                failures.append({"name": f"tree {_setting_name(buf, vcs)}", "error": f"{type(e).__name__}: {e}"})
        results.extend(tree)
    if results:
        ctx.write_csv("load_latency.csv", results)
        from kernbench.benches._noc_plots import plot_curves, plot_tree

        plot_curves(ctx, [r for r in results if r["study"] == "load"], saturation)
        if tree:
            plot_tree(ctx, tree)
    return {"results": results, "failures": failures, "summary": {"saturation": saturation}}


def _settings(p):
    """(buffer, vcs) pairs: unbounded once (VCs need buffers to mean anything), each size per VC count."""
    out = []
    for b in p["buffers"]:
        if str(b).strip() == "unbounded":
            out.append(("unbounded", 1))
        else:
            out.extend((str(b).strip(), int(v)) for v in p["vcs"])
    return out


def _setting_name(buf, vcs):
    return "unbounded" if buf == "unbounded" else f"{buf} x{vcs}vc"


def _fmt(x, spec=".3f"):
    return "none" if x is None else format(x, spec)


def _extra(mesh, buf, vcs, classes):
    w, h, pes = MESHES[mesh]
    extra = {
        "system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 1, "system.cubes.h": 1,
        "system.routers.w": w, "system.routers.h": h, "system.pes_per_cube": pes,
        "fabric.chunk": f"{FLIT} B", "fabric.flit": f"{FLIT} B",
    }
    # Every setting is explicit: the default machine has finite buffers of its own (configs/topology.yaml).
    for c in classes:
        extra[f"links.{c}.buffer"] = buf
        extra[f"links.{c}.vcs"] = vcs
    return extra


def cycle_ps(system):
    """One flit on a router-to-router link, in ps (the bench's cycle)."""
    ch = system.channels()
    rates = {int(b) * int(n) for b, n, c in zip(ch["bandwidth_Bps"], ch["connections"], ch["class"]) if c == "noc"}
    if len(rates) != 1:
        raise ValueError(f"the mesh links (class noc) have {len(rates)} different rates; the cycle needs one")
    cyc = FLIT * 1e12 / rates.pop()
    if abs(cyc - round(cyc)) > 1e-9 * cyc:
        raise ValueError(f"a {FLIT} B flit takes {cyc} ps on a mesh link: not a whole number of ps")
    return int(round(cyc))


def destinations(pattern, n, grid_w, hotspot=0, hotspot_fraction=0.5):
    """P(source s sends a packet to d), as an n x n matrix, as the generator picks them (traffic.cpp).

    A row sums to the chance that an injection of s is sent at all (a transpose's
    diagonal and a hotspot node drawing itself send nothing)."""
    m = np.zeros((n, n))
    for s in range(n):
        if pattern == "uniform":
            m[s, :] = 1.0 / (n - 1)
            m[s, s] = 0.0
        elif pattern == "transpose":
            d = (s % grid_w) * grid_w + s // grid_w
            if d != s:
                m[s, d] = 1.0
        elif pattern == "bitcomplement":
            m[s, ~s & (n - 1)] = 1.0
        elif pattern == "neighbour":
            m[s, (s // grid_w) * grid_w + (s % grid_w + 1) % grid_w] = 1.0
        elif pattern == "hotspot":
            m[s, :] = (1.0 - hotspot_fraction) / (n - 1)
            m[s, s] = 0.0
            if s != hotspot:
                m[s, hotspot] += hotspot_fraction
        else:
            raise ValueError(f"unknown pattern {pattern!r}")
    return m


def channel_load_bound(system, endpoints, prob, cyc_ps):
    """gamma_c per unit of load, from the routes; the bound in flits/node/cycle.

    Every endpoint injects at the load L; `prob[s, d]` is P(an injection of s
    goes to d), so channel c carries L x gamma_c with gamma_c the sum of
    prob[s, d] over the pairs routed through c. A node that never sends (a
    transpose's diagonal) offers nothing: load is per sending node, and
    `senders` (sum of prob) is what accepted throughput is divided by."""
    n = len(endpoints)
    send = prob.sum(axis=1)
    load = {}
    for s in range(n):
        for d in range(n):
            if prob[s, d] <= 0:
                continue
            for c in system.route_info(endpoints[s], endpoints[d])["channels"]:
                load[c] = load.get(c, 0.0) + prob[s, d]
    ch = system.channels()
    best, gamma_max, bound = None, 0.0, math.inf
    for c, g in load.items():
        cap = ch["bandwidth_Bps"][c] * ch["connections"][c] * cyc_ps * 1e-12 / FLIT  # flits per cycle
        if cap / g < bound:
            bound, best, gamma_max = cap / g, c, g
    busiest = f"{system.node_name(int(ch['src'][best]))} -> {system.node_name(int(ch['dst'][best]))}"
    return {"gamma_max": gamma_max, "bound": bound, "busiest": busiest, "senders": float(send.sum())}


def find_saturation(rows):
    """Where a curve saturates: the first load whose accepted throughput is below 95 % of offered
    (as injected in the window, `injected_flits`, when the row has it) or whose mean latency is
    over 3x the zero-load latency (the lowest load's), linearly interpolated in the nominal
    offered load from the point before. Returns (load, criterion) or (None, None)."""
    rows = sorted(rows, key=lambda r: r["offered_flits"])
    if not rows:
        return None, None
    zero = rows[0]["mean_latency_cycles"]

    def excess(r):  # >= 0 once saturated, by each criterion
        # Offered as actually injected in the window when measured: a Bernoulli run's injected
        # load scatters around the nominal one by a few % at low loads, which is not saturation.
        offered = r.get("injected_flits") or r["offered_flits"]
        return (ACCEPT_FRACTION - r["accepted_flits"] / offered,
                r["mean_latency_cycles"] / zero - LATENCY_FACTOR)

    prev = None
    for r in rows:
        a, l = excess(r)
        if a >= 0 or l >= 0:
            if prev is None:
                return r["offered_flits"], "accepted" if a >= 0 else "latency"
            pa, pl = excess(prev)
            x0, x1 = prev["offered_flits"], r["offered_flits"]
            cands = []
            for name, e0, e1 in (("accepted", pa, a), ("latency", pl, l)):
                if e1 >= 0:
                    cands.append((x0 + (x1 - x0) * (-e0) / (e1 - e0) if e1 > e0 else x1, name))
            x, name = min(cands)
            return x, name
        prev = r
    return None, None


def _curve(ctx, mesh, pattern, buf, vcs, p):
    extra = _extra(mesh, buf, vcs, p["buffer_classes"])
    probe = ctx.load_system(extra)
    endpoints = probe.pes()
    w = MESHES[mesh][0]
    cyc = cycle_ps(probe)
    prob = destinations(pattern, len(endpoints), w, 0, p["hotspot_fraction"])
    bound = channel_load_bound(probe, endpoints, prob, cyc)
    rows = []
    for frac in p["loads"]:
        load = frac * bound["bound"]
        label = f"{mesh}@{pattern}@{_setting_name(buf, vcs)}@{frac}"
        r = _point(ctx, extra, endpoints, pattern, load, cyc, bound["senders"], p, label)
        r.update({"study": "load", "mesh": mesh, "pattern": pattern, "buffer": buf, "vcs": vcs,
                  "load_fraction": frac, "bound_flits": bound["bound"]})
        rows.append(r)
    sat, why = find_saturation(rows)
    summary = {"mesh": mesh, "pattern": pattern, "buffer": buf, "vcs": vcs, "saturation": sat,
               "bound": bound["bound"], "saturation_vs_bound": sat / bound["bound"] if sat else None,
               "saturated_by": why or "not within the loads swept", "gamma_max": bound["gamma_max"],
               "busiest": bound["busiest"], "zero_load_latency_cycles": min(r["mean_latency_cycles"] for r in rows),
               "peak_accepted": max(r["accepted_flits"] for r in rows), "cycle_ps": cyc}
    return rows, summary


def _inject(system, pattern, endpoints, load, cyc, p, stop, hotspot=None, fraction=None, tag=0, grid_w=0):
    """One generator: `load` flits per node per cycle, as GB/s for the binding."""
    gbps = load * FLIT / cyc * 1e3
    packet = p["packet_flits"] * FLIT
    kw = {"cycle_ps": cyc} if p["injection"] == "bernoulli" else {}
    if hotspot is not None:
        kw.update(hotspot=hotspot, hotspot_fraction=fraction)
    system.traffic(pattern, endpoints, gbps, packet, 0, stop, injection=p["injection"], grid_w=grid_w, tag=tag,
                   **kw)


def _measure(t, mask, warm, window, cyc, senders, packet_bytes):
    issue, end = t["issue_ps"], t["end_ps"]
    measured = mask & (issue >= warm) & (issue < window)
    lat = (end - issue)[measured] / cyc
    delivered = (mask & (end >= warm) & (end < window)).sum() * packet_bytes / FLIT
    cycles = (window - warm) / cyc
    return {
        "accepted_flits": float(delivered / cycles / senders),
        "injected_flits": float(measured.sum() * packet_bytes / FLIT / cycles / senders),
        "mean_latency_cycles": float(lat.mean()) if lat.size else float("nan"),
        "p99_latency_cycles": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "mean_latency_ns": float(lat.mean()) * cyc / 1e3 if lat.size else float("nan"),
        "p99_latency_ns": float(np.percentile(lat, 99)) * cyc / 1e3 if lat.size else float("nan"),
        "packets": int(measured.sum()),
    }


def _point(ctx, extra, endpoints, pattern, load, cyc, senders, p, label):
    system = ctx.load_system(extra)
    window, warm = p["window_cycles"] * cyc, p["warmup_cycles"] * cyc
    hot = endpoints[0] if pattern == "hotspot" else None
    grid_w = int(extra["system.routers.w"])  # one PE per router, row-major: the PE grid is the router grid
    _inject(system, pattern, endpoints, load, cyc, p, window, hot, p["hotspot_fraction"], grid_w=grid_w)
    system.run()
    ctx.trace(system, label)  # `kernbench run --trace FILE --trace-panel MESH@PATTERN@SETTING@LOAD`
    t = system.transfers()
    row = _measure(t, np.ones(len(t["issue_ps"]), dtype=bool), warm, window, cyc, senders,
                   p["packet_flits"] * FLIT)
    row["offered_flits"] = load
    row["mean_queuing_ns"] = float(t["queuing_ps"].mean()) / 1e3 if len(t["queuing_ps"]) else float("nan")
    return row


def tree_flows(w, h):
    """(hotspot, victim source, victim destination) PE indices on a w x h mesh, row-major.

    The hotspot is the east end of row 0; its traffic runs east along each row, then north/south
    down the last column. The victim runs along row 0 from its west end to the router two short
    of the hotspot: its route shares row-0 links with hotspot traffic but touches neither the
    hotspot node nor the hotspot's router."""
    if w < 3:
        raise ValueError(f"tree saturation needs a mesh at least 3 routers wide, got {w}")
    return w - 1, 0, w - 2


def _tree(ctx, mesh, buf, vcs, p):
    w, h, _ = MESHES[mesh]
    extra = _extra(mesh, buf, vcs, p["buffer_classes"])
    probe = ctx.load_system(extra)
    pes = probe.pes()
    cyc = cycle_ps(probe)
    hot, vsrc, vdst = tree_flows(w, h)
    victim_route = probe.route(pes[vsrc], pes[vdst])
    hot_router = probe.route(pes[hot], pes[vdst])[1]
    if probe.node_name(pes[hot]) in victim_route or hot_router in victim_route:
        raise AssertionError(f"the victim route {victim_route} touches the hotspot")
    sources = [pes[i] for i in range(len(pes)) if i not in (hot, vsrc)]
    # The hotspot's bound: every source sends only to the hotspot (its ejection link is the busiest).
    prob = np.zeros((len(sources) + 1, len(sources) + 1))
    prob[:-1, -1] = 1.0
    bound = channel_load_bound(probe, sources + [pes[hot]], prob, cyc)
    window, warm = p["window_cycles"] * cyc, p["warmup_cycles"] * cyc
    rows = []
    for load in p["tree_loads"]:
        system = ctx.load_system(extra)
        if load > 0:  # every source straight at the hotspot (the hotspot in the list so it is a valid destination)
            _inject(system, "hotspot", sources + [pes[hot]], load, cyc, p, window, pes[hot], 1.0, tag=0)
        # The victim: a hotspot pattern of two endpoints whose hot end is the victim's
        # destination, so the source always sends there and the destination sends nothing.
        _inject(system, "hotspot", [pes[vsrc], pes[vdst]], p["victim_load"], cyc, p, window, pes[vdst], 1.0, tag=1)
        system.run()
        ctx.trace(system, f"tree@{_setting_name(buf, vcs)}@{load}")
        t = system.transfers()
        victim = _measure(t, t["tag"] == 1, warm, window, cyc, 1.0, p["packet_flits"] * FLIT)
        rows.append({"study": "tree", "mesh": mesh, "pattern": "hotspot+victim", "buffer": buf, "vcs": vcs,
                     "load_fraction": load, "offered_flits": load, "bound_flits": bound["bound"],
                     **victim})
        ctx.log(f"  tree {_setting_name(buf, vcs):<16} hotspot load {load:.3f}: victim mean latency "
                f"{victim['mean_latency_cycles']:.1f} cycles (p99 {victim['p99_latency_cycles']:.1f})")
    return rows

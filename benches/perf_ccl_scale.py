"""perf-ccl-scale: what a hierarchical all-reduce costs to simulate, 1 to 64 SIPs.

The LRAB all-reduce of ``bytes`` per PE on 1, 4, 16 and 64 SIPs of the
default machine (128 PEs each: up to 8192 PEs) in the packet and the flow
fabric. Each point runs in a fresh process, so its peak memory (ru_maxrss)
is its own. Reported per point: simulated latency, wall time, events,
events/s, fabric transfers, wall per event and per transfer, peak memory;
for the packet model also chunk-hops (a chunk crossing one link, its unit of
work) and wall per chunk-hop.

Beside each point, in the same process after the timing, PHOLD runs on the
same event engine with as many events pending as the point had at its peak
(a handler that does nothing but draw a delay and reschedule). Its wall per
event is what the event loop alone costs at that queue size on this machine,
and ``vs_phold`` = the model's wall per event / PHOLD's: if that ratio stays
flat while the machine grows, the model's cost per event grows only as fast
as a bare event loop's does (its queue and memory outgrowing the caches).
The cost should grow about linearly with the number of simulated events
(wall per event roughly flat); per model the bench fits wall ~ events^b over
its points and reports b (1 = linear). The target is the 8192-PE flow point
in under 60 s on a 2-core machine.

``packet`` runs the config as it is: on the default machine the router
links (pe, noc, hbm) have finite buffers with credits (docs/buffers.md);
``packet-unbounded`` runs the same with every link class's buffer set to
unbounded (the ideal model). The bench logs the buffered model's wall per
event against the unbounded one's at each size (target: within 1.5x).

``slot``: the IPCQ slot size for these runs. A send moves in slot-sized
segments, each its own fabric transfer, so the event count is proportional
to bytes / slot; the default here (256 KiB) moves each 1 MiB buffer's
pipeline pieces as single segments. Symbolic checking is off (its state
grows as ranks^2 x slices).

Outputs: sweep.json, scale.csv, scale.png (wall and wall/event vs PEs).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import time

from kernbench import bench
from kernbench.overrides import Param, shape_check
from kernbench.critical_path import CriticalPath


@bench(
    name="perf-ccl-scale",
    description="simulation cost of a hierarchical all-reduce (1 MiB/PE) on 1..64 SIPs, packet vs flow",
    params={"sips": Param(["1x1", "2x2", "4x4", "8x8"], check=shape_check(2), size=True,
                          allowed="WxH SIPs, positive integers"),
            "models": Param(["flow", "packet", "packet-unbounded"], choices=["flow", "packet", "packet-unbounded"]),
            "bytes": 1 << 20,
            "slot": "256 KiB", "packet_max_pes": 8192, "target_s": 60.0, "phold_events": 2_000_000},
    uses_config=True,
    smoke={"bench.sips": ["1x1", "2x1"], "bench.bytes": 65536, "bench.phold_events": 20000},
    # CI (scripts/check_benches.py): every fabric model of the default on 1 and 2 SIPs, 256 KiB per PE (one
    # slot), so each model still gets two points for its events^b fit
    full_check={"bench.sips": ["1x1", "2x1"], "bench.bytes": 262144, "bench.phold_events": 100_000},
    golden={"key": "name", "metrics": {"latency_us": "rel=1e-9", "pes": "exact", "events": "exact", "ops": "exact",
                                       "peak_pending": "exact"}},
)
def perf_ccl_scale(ctx):
    p = ctx.params
    # its subject is the generated machine's size (system.sips.*): an explicit graph is refused
    ctx.require_generated("scales the SIP grid (system.sips over bench.sips)")
    for model in p["models"]:
        for grid in p["sips"]:
            w, h = (int(v) for v in str(grid).lower().split("x"))
            pes_guess = w * h * 128
            name = f"{model} {w}x{h} SIPs"
            if model != "flow" and pes_guess > p["packet_max_pes"]:
                ctx.log(f"  {name:<22} skipped (packet_max_pes = {p['packet_max_pes']})")
                continue
            sets = {**ctx.config_overrides, "system.sips.w": w, "system.sips.h": h,
                    "fabric.model": "flow" if model == "flow" else "packet", "pe.ipcq.slot": p["slot"]}
            if model == "packet-unbounded":
                sets.update({f"links.{k}.buffer": "unbounded" for k in _LINK_CLASSES})
            try:
                with cf.ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
                    row = pool.submit(_point, str(ctx.config) if ctx.config else None, sets, int(p["bytes"]),
                                      ctx.seed, int(p["phold_events"])).result()
            except Exception as e:  # a failing point never sinks the others
                ctx.failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
                ctx.log(f"  {name:<22} FAILED: {type(e).__name__}: {e}")
                continue
            ctx.critical_path(CriticalPath(row.pop("critical_path_raw")), name)  # walked in the child, after timing
            row.update({"name": name, "model": model, "sips": w * h, "grid": f"{w}x{h}"})
            ctx.results.append(row)
            ctx.log(f"  {name:<22} {row['pes']:>5} PEs  sim {row['latency_us']:9.2f} us  wall {row['wall_s']:7.2f} s"
                    f"  {row['events'] / 1e6:8.2f} M events  {row['events_per_s'] / 1e6:5.2f} M ev/s"
                    f"  {row['wall_us_per_event']:.3f} us/ev"
                    + (f"  {row['wall_us_per_chunk_hop']:.3f} us/chunk-hop" if row["chunk_hops"] else "")
                    + f"  peak {row['peak_mb']:.0f} MB  {row['vs_phold']:.2f}x PHOLD at {row['peak_pending']} pending")
    buffer_cost = _buffer_cost(ctx.results)
    for row in buffer_cost:
        ctx.log(f"buffered vs unbounded at {row['grid']} SIPs: {row['buffered_us_per_event']:.3f} vs "
                f"{row['unbounded_us_per_event']:.3f} us/event = {row['ratio']:.2f}x "
                f"({row['buffered_events'] / 1e6:.2f} vs {row['unbounded_events'] / 1e6:.2f} M events; "
                f"{'within' if row['ratio'] <= 1.5 else 'OVER'} the 1.5x target)")
    flow = [r for r in ctx.results if r["model"] == "flow"]
    biggest = max(flow, key=lambda r: r["pes"]) if flow else None
    target = None
    if biggest:
        target = {"pes": biggest["pes"], "wall_s": biggest["wall_s"], "target_s": p["target_s"],
                  "met": biggest["wall_s"] < p["target_s"]}
        ctx.log(f"target: the {biggest['pes']}-PE flow point in {biggest['wall_s']:.1f} s "
                f"({'met' if target['met'] else 'MISSED'}: < {p['target_s']:.0f} s)")
    scaling = _scaling(ctx.results)
    for model, fit in scaling.items():
        ctx.log(f"{model}: wall ~ events^{fit['exponent']:.2f} over {fit['points']} points; "
                f"{fit['us_per_event_smallest']:.3f} -> {fit['us_per_event_largest']:.3f} us/event "
                f"from {fit['pes_smallest']} to {fit['pes_largest']} PEs; "
                f"{fit['vs_phold_smallest']:.2f}x -> {fit['vs_phold_largest']:.2f}x PHOLD's cost per event")
    ctx.write_csv("scale.csv", ctx.results)
    _figure(ctx, ctx.results)
    # Host times, rates and memory are wall-clock by nature: named in wall_clock_fields (docs/sweep-json.md).
    return {"results": ctx.results, "failures": ctx.failures, "target": target, "scaling": scaling,
            "buffer_cost": buffer_cost,
            "wall_clock_fields": ["results[].build_s", "results[].events_per_s", "results[].peak_mb", "buffer_cost",
                                  "results[].phold_us_per_event", "results[].vs_phold", "results[].wall_us_per_*",
                                  "scaling", "target.wall_s"]}


_LINK_CLASSES = ("pe", "noc", "hbm", "ucie_port", "ucie", "pcie_port", "pcie")


def _buffer_cost(rows):
    """Per SIP grid run both ways: the buffered packet model's wall per event against the unbounded one's."""
    out = []
    for grid in sorted({r["grid"] for r in rows}, key=lambda g: [int(v) for v in g.split("x")]):
        b = next((r for r in rows if r["grid"] == grid and r["model"] == "packet"), None)
        u = next((r for r in rows if r["grid"] == grid and r["model"] == "packet-unbounded"), None)
        if b and u and u["wall_us_per_event"]:
            out.append({"grid": grid, "buffered_us_per_event": b["wall_us_per_event"],
                        "unbounded_us_per_event": u["wall_us_per_event"],
                        "ratio": b["wall_us_per_event"] / u["wall_us_per_event"],
                        "buffered_events": b["events"], "unbounded_events": u["events"]})
    return out


def _scaling(rows):
    """Per model, the least-squares slope b of log(wall) against log(events)."""
    import math

    out = {}
    for model in sorted({r["model"] for r in rows}):
        pts = sorted((r["pes"], r["events"], r["wall_s"], r["wall_us_per_event"], r.get("vs_phold")) for r in rows
                     if r["model"] == model and r["events"] > 0 and r["wall_s"] > 0)
        if len({p[1] for p in pts}) < 2:
            continue  # a slope needs two distinct event counts
        xs = [math.log(p[1]) for p in pts]
        ys = [math.log(p[2]) for p in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out[model] = {"exponent": round(slope, 3), "points": len(pts),
                      "pes_smallest": pts[0][0], "pes_largest": pts[-1][0],
                      "us_per_event_smallest": pts[0][3], "us_per_event_largest": pts[-1][3],
                      "vs_phold_smallest": pts[0][4], "vs_phold_largest": pts[-1][4]}
    return out


def _point(config, sets, nbytes, seed, phold_events):
    """One run in a fresh process (its peak memory is its own)."""
    import resource

    import kernbench
    from kernbench import ccl
    from kernbench.system import System

    t = time.perf_counter()
    system = System.load(config, set=sets, seed=seed)
    built = time.perf_counter()
    r = ccl.all_reduce(system, nbytes, algorithm="lrab", buffer="hbm", verify="off")
    wall = time.perf_counter() - t
    events = int(system.events_processed)
    hops = int(system.chunk_hops)  # the packet model's unit of work (0 under the flow model)
    transfers = len(system.transfers()["src"])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the walk below
    path = r.run.critical_path().raw  # outside the timed part: the walk is not the simulation
    # The event loop alone at this point's peak queue size (see the module doc).
    pending = int(system.peak_pending_events)
    phold = kernbench.run_phold(kernbench.Simulation(seed=seed), engine="callbacks", lps=max(pending, 1),
                                events_per_lp=1, events=phold_events, mean_delay_ps=int(kernbench.MICROSECOND))
    phold_us = 1e6 / phold["events_per_s"] if phold["events_per_s"] else 0.0
    us_per_event = wall / events * 1e6 if events else 0.0
    return {"critical_path_raw": path,
            "pes": r.ranks, "latency_us": r.latency_us, "wall_s": round(wall, 3), "build_s": round(built - t, 3),
            "events": events, "events_per_s": events / wall if wall else 0.0,
            "wall_us_per_event": us_per_event, "transfers": transfers, "peak_pending": pending,
            "phold_us_per_event": phold_us, "vs_phold": us_per_event / phold_us if phold_us else 0.0,
            "chunk_hops": hops, "wall_us_per_chunk_hop": wall / hops * 1e6 if hops else None,
            "ops": int(sum(r.op_counts.values())), "peak_mb": peak_mb}


def _figure(ctx, rows):
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for model in sorted({r["model"] for r in rows}):
        pts = sorted((r["pes"], r["wall_s"], r["wall_us_per_event"], r.get("phold_us_per_event"))
                     for r in rows if r["model"] == model)
        a.plot([q[0] for q in pts], [q[1] for q in pts], marker="o", label=model)
        line, = b.plot([q[0] for q in pts], [q[2] for q in pts], marker="o", label=model)
        if all(q[3] for q in pts):
            b.plot([q[0] for q in pts], [q[3] for q in pts], ls="--", marker=".", color=line.get_color(),
                   label=f"PHOLD at {model}'s peak pending events")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("PEs (ranks)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    a.set_yscale("log")
    a.set_ylabel("wall time (s)")
    a.set_title("LRAB all-reduce, 1 MiB per PE")
    b.set_ylabel("wall per simulated event (us)")
    b.set_title("cost per event (flat = linear in events)")
    b.set_ylim(bottom=0)
    fig.tight_layout()
    ctx.save_figure(fig, "scale.png")
    plt.close(fig)

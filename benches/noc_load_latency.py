"""noc-load-latency: average packet latency against offered load, up to saturation.

Uniform random traffic (Poisson injection) among the PEs of one cube's
router mesh, on (a) the default machine's cube (4x2 routers, 8 PEs) and
(b) an 8x8 mesh (64 PEs), with the packet model at flit granularity. For
each offered load the bench measures the mean latency of the packets
injected after a warm-up and the accepted throughput. Beside the curve it
reports the channel-load bound of the topology and the measured saturation (the load
where mean latency reaches 3x its zero-load value). With dimension-order routes
and uniform destinations, the busiest channel carries gamma_max x lambda, so
no routing can accept more than bw / gamma_max per PE. gamma_max is computed
exactly from the simulator's own routes, for every channel including the PE
injection and ejection links.
"""

from __future__ import annotations

import numpy as np

from kernbench import bench

MESHES = {
    # name: (router mesh w, h, PEs per cube)
    "cube-4x2": (4, 2, 8),
    "mesh-8x8": (8, 8, 64),
}


@bench(
    name="noc-load-latency",
    description="NoC latency vs offered load (uniform random) on a cube's mesh and an 8x8 mesh, vs the channel-load bound",
    params={
        "meshes": ["cube-4x2", "mesh-8x8"],
        "loads": [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.3],  # fractions of the channel-load bound
        "packet_bytes": 256,
        "window_ns": 4000.0,
        "warmup_ns": 1000.0,
    },
    uses_config=True,
    smoke={"bench.meshes": ["cube-4x2"], "bench.loads": [0.2, 0.6, 1.4], "bench.window_ns": 800,
           "bench.warmup_ns": 200},
    golden={"key": ["mesh", "load_fraction"],
            "metrics": ["packets", "offered_GBps", "accepted_GBps", "mean_latency_ns", "p99_latency_ns",
                        "mean_queuing_ns", "bound_GBps"]},
)
def noc_load_latency(ctx):
    p = ctx.params
    results, failures, bounds = ctx.results, ctx.failures, {}
    for mesh in p["meshes"]:
        if mesh not in MESHES:
            failures.append({"name": mesh, "error": f"unknown mesh {mesh!r} (known: {', '.join(MESHES)})"})
            continue
        w, h, pes = MESHES[mesh]
        extra = {
            "system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 1, "system.cubes.h": 1,
            "system.routers.w": w, "system.routers.h": h, "system.pes_per_cube": pes,
            "fabric.chunk": "64 B", "fabric.flit": "64 B",
        }
        try:
            probe = ctx.load_system(extra)
            endpoints = probe.pes()
            bound = _channel_load_bound(probe, endpoints)
        except Exception as e:
            failures.append({"name": mesh, "error": f"{type(e).__name__}: {e}"})
            continue
        bounds[mesh] = bound
        ctx.log(f"  {mesh}: channel-load bound {bound['lambda_sat_GBps']:.1f} GB/s per PE "
                f"(busiest channel {bound['busiest']}, gamma_max {bound['gamma_max']:.3f})")
        for frac in p["loads"]:
            offered = frac * bound["lambda_sat_GBps"]
            try:
                row = _point(ctx, extra, endpoints, offered, p, label=f"{mesh}@{frac}")
            except Exception as e:
                failures.append({"name": f"{mesh}@{frac}", "error": f"{type(e).__name__}: {e}"})
                continue
            row.update({"mesh": mesh, "load_fraction": frac, "bound_GBps": bound["lambda_sat_GBps"]})
            results.append(row)
            ctx.log(f"  {mesh:<9} offered {offered:7.1f} GB/s/PE  accepted {row['accepted_GBps']:7.1f}"
                    f"  mean latency {row['mean_latency_ns']:8.1f} ns  ({row['packets']} packets)")
    summary = {}
    for mesh, bound in bounds.items():
        rows = [r for r in results if r["mesh"] == mesh]
        if rows:
            # Saturation: where the mean latency reaches 3x its zero-load
            # value (the usual finite-window stand-in for "latency goes to
            # infinity"), interpolated between measured loads. The peak
            # accepted rate is reported too: past saturation it can creep
            # above the bound because pairs whose routes avoid the hot
            # channel still get through, but that is no longer the uniform
            # load the bound is about.
            zero = min(r["mean_latency_ns"] for r in rows)
            sat = _crossing(rows, 3.0 * zero)
            summary[mesh] = {**bound, "zero_load_latency_ns": zero, "saturation_GBps": sat,
                             "saturation_vs_bound": sat / bound["lambda_sat_GBps"] if sat else None,
                             "peak_accepted_GBps": max(r["accepted_GBps"] for r in rows)}
    if results:
        ctx.write_csv("load_latency.csv", results)
        _plot(ctx, results, summary)
        for mesh, s in summary.items():
            if s["saturation_GBps"] is None:
                ctx.log(f"{mesh}: no saturation within the loads swept (raise bench.loads)")
                continue
            ctx.log(f"{mesh}: saturation (latency = 3x zero-load {s['zero_load_latency_ns']:.1f} ns) at "
                    f"{s['saturation_GBps']:.1f} GB/s per PE = {s['saturation_vs_bound']:.0%} of the channel-load "
                    f"bound {s['lambda_sat_GBps']:.1f} GB/s; peak accepted {s['peak_accepted_GBps']:.1f} GB/s")
    return {"results": results, "failures": failures, "summary": summary}


def _crossing(rows, threshold):
    """Offered load at which mean latency first reaches `threshold` (linear interpolation), or None."""
    rows = sorted(rows, key=lambda r: r["offered_GBps"])
    for a, b in zip(rows, rows[1:]):
        if a["mean_latency_ns"] < threshold <= b["mean_latency_ns"]:
            f = (threshold - a["mean_latency_ns"]) / (b["mean_latency_ns"] - a["mean_latency_ns"])
            return a["offered_GBps"] + f * (b["offered_GBps"] - a["offered_GBps"])
    return None


def _channel_load_bound(system, endpoints):
    """gamma_max per unit injection rate, over every channel, from the routes themselves."""
    n = len(endpoints)
    load = {}
    for s in endpoints:
        for d in endpoints:
            if s == d:
                continue
            for c in system.route_info(s, d)["channels"]:
                load[c] = load.get(c, 0.0) + 1.0 / (n - 1)
    ch = system.channels()
    best, gamma_max, sat = None, 0.0, float("inf")
    for c, g in load.items():
        cap = ch["bandwidth_Bps"][c] * ch["connections"][c] / 1e9
        if cap / g < sat:
            sat, best, gamma_max = cap / g, c, g
    names = ch["src"], ch["dst"]
    busiest = f"{system.node_name(int(names[0][best]))} -> {system.node_name(int(names[1][best]))}"
    return {"gamma_max": gamma_max, "lambda_sat_GBps": sat, "busiest": busiest}


def _point(ctx, extra, endpoints, offered_gbps, p, label=""):
    system = ctx.load_system(extra)
    window = int(p["window_ns"] * 1000)
    warm = int(p["warmup_ns"] * 1000)
    system.traffic("uniform", endpoints, offered_gbps, p["packet_bytes"], 0, window)
    system.run()
    ctx.trace(system, label)  # `kernbench run --trace FILE --trace-panel MESH@LOAD`
    t = system.transfers()
    issue, end = t["issue_ps"], t["end_ps"]
    measured = (issue >= warm) & (issue < window)
    lat = (end - issue)[measured]
    delivered = ((end >= warm) & (end < window)).sum() * p["packet_bytes"]
    accepted = delivered / ((window - warm) * 1e-12) / 1e9 / len(endpoints)
    return {
        "offered_GBps": offered_gbps,
        "accepted_GBps": float(accepted),
        "mean_latency_ns": float(lat.mean()) / 1e3 if lat.size else float("nan"),
        "p99_latency_ns": float(np.percentile(lat, 99)) / 1e3 if lat.size else float("nan"),
        "mean_queuing_ns": float(t["queuing_ps"][measured].mean()) / 1e3 if lat.size else float("nan"),
        "packets": int(measured.sum()),
    }


def _plot(ctx, rows, summary):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for mesh in dict.fromkeys(r["mesh"] for r in rows):
        rs = [r for r in rows if r["mesh"] == mesh]
        x = [r["offered_GBps"] for r in rs]
        axes[0].plot(x, [r["mean_latency_ns"] for r in rs], "o-", label=mesh)
        axes[1].plot(x, [r["accepted_GBps"] for r in rs], "o-", label=mesh)
        if mesh in summary:
            for ax in axes:
                ax.axvline(summary[mesh]["lambda_sat_GBps"], ls="--", lw=0.8, color=ax.lines[-1].get_color())
    axes[0].set_yscale("log")
    axes[0].set_xlabel("offered load per PE (GB/s)")
    axes[0].set_ylabel("mean packet latency (ns)")
    axes[0].set_title("latency vs offered load (dashed: channel-load bound)")
    axes[1].set_xlabel("offered load per PE (GB/s)")
    axes[1].set_ylabel("accepted throughput per PE (GB/s)")
    axes[1].set_title("accepted vs offered")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    ctx.save_figure(fig, "load_latency.png")
    plt.close(fig)

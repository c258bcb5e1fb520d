"""perf-fabric: how fast the fabric models simulate, and what chunk size costs.

Every PE of every SIP sends uniform random traffic to the PEs of its own SIP
(Poisson, 4 KiB packets) for a fixed window; the bench times the run.

1. Scale: simulated chunk-hops per second (packet model) and transfers per
   second (flow model) at 128 PEs (one SIP) and 512 PEs (2x2 SIPs), and the
   wall time per event at both sizes. The 512-PE machine also runs with one
   SIP busy: that isolates the machine's size (no per-event cost may scale
   with the graph) from the concurrent working set (more transfers in
   flight touch more memory, as PHOLD shows for the event queue alone).
2. The fidelity knob: the same 128-PE workload with the packet model at
   several chunk sizes and with the flow model; mean transfer latency and
   its error against the flit-level (64 B) run, and the speed-up.
"""

from __future__ import annotations

import time

import numpy as np

from kernbench import bench
from kernbench.overrides import Param


@bench(
    name="perf-fabric",
    description="fabric simulation speed (chunk-hops/s, transfers/s) at 128 and 512 PEs, and the chunk-size fidelity knob",
    params={
        "window_ns": 20000.0,
        "offered_GBps": 32.0,       # per PE
        "packet_bytes": 4096,
        "pe_counts": Param([128, 512], choices=[128, 512], allowed="128 (1 SIP) or 512 (2x2 SIPs)"),
        "chunks": [64, 256, 1024, 4096],
    },
    uses_config=True,
    # Rates (events/s, ...) are wall-clock and no goldens; what was simulated is.
    smoke={"bench.pe_counts": [128], "bench.chunks": [64, 1024], "bench.window_ns": 500},
    golden={"key": ["study", "model", "pes", "chunk_bytes", "busy_sips"],
            "metrics": ["events", "transfers", "chunk_hops", "mean_latency_ns", "simulated_us"]},
)
def perf_fabric(ctx):
    p = ctx.params
    # its subject is the generated machine's size (system.sips.*): an explicit graph is refused
    ctx.require_generated("times the fabric at 1 and 2 x 2 SIPs (system.sips)")
    results, failures = ctx.results, ctx.failures  # kept if the run is interrupted
    # 1. scale
    for n_pe in p["pe_counts"]:
        sips = {128: (1, 1), 512: (2, 2)}.get(n_pe)
        if sips is None:
            failures.append({"name": f"{n_pe} PEs", "error": "pe_counts takes 128 (1 SIP) or 512 (2x2 SIPs)"})
            continue
        # All SIPs busy; and, on the big machine, one SIP busy: that separates
        # the machine's size (which should cost nothing per event) from the
        # amount of concurrent activity (which grows the working set).
        runs = [("packet", None), ("flow", None)] + ([("packet", 1)] if sips != (1, 1) else [])
        for model, active in runs:
            extra = {"system.sips.w": sips[0], "system.sips.h": sips[1], "fabric.model": model}
            try:
                row = _timed(ctx, extra, p, active, label=f"{n_pe}/{model}" + (f"/{active} busy" if active else ""))
            except Exception as e:
                failures.append({"name": f"{n_pe}/{model}", "error": f"{type(e).__name__}: {e}"})
                continue
            row.update({"study": "scale", "pes": n_pe, "model": model, "chunk_bytes": None,
                        "busy_sips": active or sips[0] * sips[1]})
            results.append(row)
            ctx.log(f"  {n_pe:>4} PEs {row['busy_sips']} SIP(s) busy {model:<6}  {row['events'] / 1e6:6.2f} M events in {row['wall_s']:6.2f} s"
                    f"  {row['events_per_s'] / 1e6:5.2f} M ev/s  {row['chunk_hops_per_s'] / 1e6:6.2f} M chunk-hops/s"
                    f"  {row['transfers_per_s'] / 1e3:8.1f} K transfers/s  {row['ns_per_event']:6.1f} ns/event")
    # 2. the fidelity knob on one SIP
    knob = []
    for chunk in p["chunks"]:
        extra = {"system.sips.w": 1, "system.sips.h": 1, "fabric.model": "packet", "fabric.chunk": f"{chunk} B"}
        try:
            row = _timed(ctx, extra, p, label=f"chunk {chunk} B")
        except Exception as e:
            failures.append({"name": f"chunk {chunk}", "error": f"{type(e).__name__}: {e}"})
            continue
        row.update({"study": "chunk", "pes": 128, "model": "packet", "chunk_bytes": chunk})
        knob.append(row)
    try:
        row = _timed(ctx, {"system.sips.w": 1, "system.sips.h": 1, "fabric.model": "flow"}, p, label="chunk flow")
        row.update({"study": "chunk", "pes": 128, "model": "flow", "chunk_bytes": None})
        knob.append(row)
    except Exception as e:
        failures.append({"name": "flow (knob)", "error": f"{type(e).__name__}: {e}"})
    ref = next((r for r in knob if r["chunk_bytes"] == min(p["chunks"])), None)
    for r in knob:
        if ref is not None:
            r["latency_error"] = r["mean_latency_ns"] / ref["mean_latency_ns"] - 1
            r["speedup"] = ref["wall_s"] / r["wall_s"]
        label = f"{r['chunk_bytes']} B" if r["chunk_bytes"] else "flow"
        ctx.log(f"  chunk {label:>7}: mean latency {r['mean_latency_ns']:8.1f} ns"
                f"  error {r.get('latency_error', 0):+7.1%}  wall {r['wall_s']:6.2f} s  speed-up {r.get('speedup', 1):6.1f}x")
    results += knob
    scale = [r for r in results if r["study"] == "scale"]
    flat = {}
    for model in ("packet", "flow"):
        rs = sorted((r for r in scale if r["model"] == model and r["busy_sips"] == r["pes"] // 128),
                    key=lambda r: r["pes"])
        if len(rs) >= 2:
            flat[model] = rs[-1]["ns_per_event"] / rs[0]["ns_per_event"]
            ctx.log(f"{model}: cost per event at {rs[-1]['pes']} PEs = {flat[model]:.2f}x the cost at {rs[0]['pes']} PEs"
                    " (all SIPs busy)")
    one = [r for r in scale if r["model"] == "packet" and r["busy_sips"] == 1]
    if len(one) >= 2:
        size_only = one[-1]["ns_per_event"] / one[0]["ns_per_event"]
        flat["packet_machine_size_only"] = size_only
        ctx.log(f"packet, one SIP busy: cost per event on the {one[-1]['pes']}-PE machine = {size_only:.2f}x the"
                f" {one[0]['pes']}-PE machine (machine size alone; the rest is concurrent working set)")
    if results:
        ctx.write_csv("perf_fabric.csv", results)
        _plot(ctx, knob)
    # Rates and costs per event are wall-clock by nature: named in wall_clock_fields (docs/sweep-json.md).
    return {"results": results, "failures": failures, "cost_per_event_ratio": flat,
            "wall_clock_fields": ["results[].*_per_s", "results[].ns_per_event", "results[].speedup",
                                  "cost_per_event_ratio"]}


def _timed(ctx, extra, p, active_sips=None, label=""):
    system = ctx.load_system(extra)
    window = int(p["window_ns"] * 1000)
    names = system.pes()
    by_sip = {}
    for n in names:
        by_sip.setdefault(n.split(".")[0], []).append(n)
    for sip_pes in list(by_sip.values())[:active_sips]:
        system.traffic("uniform", sip_pes, p["offered_GBps"], p["packet_bytes"], 0, window)
    t0 = time.perf_counter()
    system.run()
    wall = time.perf_counter() - t0
    ctx.trace(system, label)  # after the timing: `kernbench run --trace FILE --trace-panel LABEL`
    t = system.transfers()
    lat = t["end_ps"] - t["issue_ps"]
    events = system.events_processed
    return {
        "wall_s": wall,
        "events": events,
        "transfers": int(len(lat)),
        "chunk_hops": int(system.chunk_hops),
        "events_per_s": events / wall,
        "ns_per_event": wall / events * 1e9,
        "chunk_hops_per_s": system.chunk_hops / wall,
        "transfers_per_s": len(lat) / wall,
        "mean_latency_ns": float(np.mean(lat)) / 1e3,
        "simulated_us": system.now / 1e6,
    }


def _plot(ctx, knob):
    if not knob:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['chunk_bytes']} B" if r["chunk_bytes"] else "flow" for r in knob]
    fig, ax1 = plt.subplots(figsize=(7, 4))
    ax1.bar(labels, [r.get("speedup", 1) for r in knob], color="#4c72b0")
    ax1.set_ylabel("speed-up vs 64 B chunks", color="#4c72b0")
    ax2 = ax1.twinx()
    ax2.plot(labels, [100 * r.get("latency_error", 0) for r in knob], "o-", color="#c44e52")
    ax2.set_ylabel("mean latency error vs 64 B (%)", color="#c44e52")
    ax1.set_title("Fidelity knob: chunk size (128 PEs, uniform random)")
    fig.tight_layout()
    ctx.save_figure(fig, "chunk_knob.png")
    plt.close(fig)

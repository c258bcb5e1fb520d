"""pe2pe-latency: moving bytes between two PEs -- IPCQ vs raw DMA, by size and distance.

Variants, each one op pair on an idle machine:
  ipcq          send + recv: slot-sized segments into the receiver's queue,
                each slot read out of scratch (bank hop + bytes at the
                scratch width) before it is freed;
  ipcq_nc       send + recv_no_consume: the same without the slot reads --
                the diagnostic that puts IPCQ on equal footing with DMA;
  dma_store     the sender's DMA engine writes into the receiver's scratch;
  dma_load      the receiver's DMA engine reads from the sender's scratch
                (a request packet first, then the data).
Latency = from the first op's dispatch to the last op's end. Distances
follow the PE DMA ladder: same cube (neighbour, far), remote cube (near,
far), remote SIP.

Outputs: sweep.json, pe2pe.csv, latency.png (latency vs size per distance
and variant), ratio.png (ipcq / dma_store).
"""

from __future__ import annotations

import time

from kernbench import bench
from kernbench.overrides import Param

KiB = 1024
VARIANTS = ["ipcq", "ipcq_nc", "dma_store", "dma_load"]


@bench(
    name="pe2pe-latency",
    description="PE-to-PE: IPCQ send/recv vs recv_no_consume vs DMA store/load, by size and distance",
    params={"sizes": [256, 4 * KiB, 32 * KiB, 128 * KiB, 1024 * KiB], "variants": Param(VARIANTS, choices=VARIANTS)},
    uses_config=True,
    smoke={"bench.sizes": [256, 65536], "system.sips.w": 2, "system.sips.h": 1},
    golden={"key": "name", "metrics": {"latency_ns": "rel=1e-9", "slot_waits": "exact"}},
)
def pe2pe_latency(ctx):
    t0 = time.perf_counter()
    p = ctx.params
    probe = ctx.load_system()
    distances = _distances(probe)
    for dname, (src, dst) in distances.items():
        for size in p["sizes"]:
            for variant in p["variants"]:
                name = f"{dname} {variant} {size} B"
                try:
                    row = _point(ctx, variant, src, dst, int(size))
                except Exception as e:  # a failing point never sinks the others
                    ctx.failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
                    ctx.log(f"  {name:<44} FAILED: {type(e).__name__}: {e}")
                    continue
                row.update({"name": name, "distance": dname, "src": src, "dst": dst})
                ctx.results.append(row)
                ctx.log(f"  {name:<44} {row['latency_ns']:10.1f} ns  {row['bandwidth_GBps']:7.2f} GB/s")
    checks = _checks(ctx.results)
    for c in checks:
        ctx.log(f"  check: {c['check']}: {'ok' if c['ok'] else 'FAILED'} ({c['detail']})")
    ctx.write_csv("pe2pe.csv", ctx.results)
    _figures(ctx, ctx.results)
    wall = time.perf_counter() - t0
    ctx.log(f"pe2pe-latency: {len(ctx.results)} points in {wall:.1f} s")
    # Wall time only in the documented field (sweep.json's top-level wall_s, written by the runner).
    return {"results": ctx.results, "failures": ctx.failures, "checks": checks}


def _distances(system):
    """(src, dst) PE names for the distance ladder, from the machine's shape."""
    nodes = system.nodes()
    pes = {(nodes["sip"][i], nodes["cube"][i], nodes["pe"][i]): nodes["name"][i]
           for i in range(len(nodes["name"])) if nodes["kind"][i] == "pe"}
    n_pe = 1 + max(k[2] for k in pes)
    n_cube = 1 + max(k[1] for k in pes)
    n_sip = 1 + max(k[0] for k in pes)
    out = {"same_cube_near": (pes[(0, 0, 0)], pes[(0, 0, min(1, n_pe - 1))]),
           "same_cube_far": (pes[(0, 0, 0)], pes[(0, 0, n_pe - 1)])}
    if n_cube > 1:
        out["remote_cube_near"] = (pes[(0, 0, 0)], pes[(0, 1, 0)])
        out["remote_cube_far"] = (pes[(0, 0, 0)], pes[(0, n_cube - 1, n_pe - 1)])
    if n_sip > 1:
        out["remote_sip"] = (pes[(0, 0, 0)], pes[(1, 0, 0)])
    return out


def _point(ctx, variant, src, dst, size):
    system = ctx.load_system()
    prog = system.program(f"pe2pe {variant}")
    if variant in ("ipcq", "ipcq_nc"):
        prog.recv(dst, src, 1, name="recv", mode="consume" if variant == "ipcq" else "no_consume")
        prog.send(src, dst, size, 1, name="send")
    elif variant == "dma_store":
        prog.dma(src, src, dst, size, name="store")
    elif variant == "dma_load":
        prog.dma(dst, src, dst, size, name="load")
    else:
        raise ValueError(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    res = prog.run()
    ctx.critical_path(res, f"{variant} {size} B {src} -> {dst}")  # listed after the run, all in critical_path.csv
    lat = int(res.makespan_ps)
    return {"variant": variant, "bytes": size, "latency_ns": lat / 1e3,
            "bandwidth_GBps": size / (lat * 1e-12) / 1e9 if lat else 0.0,
            "slot_waits": int(res.op_counts.get("slot_wait", 0))}


def _checks(rows):
    """Orderings the model must show at every distance and size."""
    by = {(r["distance"], r["bytes"], r["variant"]): r["latency_ns"] for r in rows}
    out = []
    keys = sorted({(r["distance"], r["bytes"]) for r in rows})
    nc_le = [k for k in keys if (k + ("ipcq_nc",)) in by and (k + ("ipcq",)) in by]
    ok = all(by[k + ("ipcq_nc",)] <= by[k + ("ipcq",)] for k in nc_le)
    out.append({"check": "recv_no_consume <= recv (the slot reads cost time)", "ok": ok, "detail": f"{len(nc_le)} points"})
    load = [k for k in keys if (k + ("dma_load",)) in by and (k + ("dma_store",)) in by]
    ok = all(by[k + ("dma_store",)] <= by[k + ("dma_load",)] for k in load)
    out.append({"check": "dma store <= dma load (a load sends a request first)", "ok": ok, "detail": f"{len(load)} points"})
    return out


def _figures(ctx, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dists = sorted({r["distance"] for r in rows})
    if not dists:
        return
    fig, axes = plt.subplots(1, len(dists), figsize=(3.6 * len(dists), 3.8), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], dists):
        for v in VARIANTS:
            pts = sorted((r["bytes"], r["latency_ns"]) for r in rows if r["distance"] == d and r["variant"] == v)
            if pts:
                ax.plot([x / KiB for x, _ in pts], [y for _, y in pts], marker="o", label=v)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(d, fontsize=9)
        ax.set_xlabel("bytes (KiB)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency (ns)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    ctx.save_figure(fig, "latency.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for d in dists:
        pts = sorted((r["bytes"], r["latency_ns"]) for r in rows if r["distance"] == d and r["variant"] == "ipcq")
        ref = {r["bytes"]: r["latency_ns"] for r in rows if r["distance"] == d and r["variant"] == "dma_store"}
        pts = [(x, y / ref[x]) for x, y in pts if x in ref and ref[x] > 0]
        if pts:
            ax.plot([x / KiB for x, _ in pts], [y for _, y in pts], marker="o", label=d)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes (KiB)")
    ax.set_ylabel("IPCQ send+recv / DMA store (ratio)")
    ax.set_title("What the IPCQ's slot reads cost over a raw DMA store")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    ctx.save_figure(fig, "ratio.png")
    plt.close(fig)

"""milestone-1h-ccl: all-reduce algorithms vs message size, SIP grids, buffer kinds.

Every point runs the collective's Program on the machine (IPCQ sends and
recvs in slot-sized segments, reductions on the vector engine, HBM loads and
stores for HBM buffers) and checks it symbolically when the state is small.

Panels:
  algorithms   every algorithm on one SIP of the machine (128 PEs on the default one),
               message size per PE over ``sizes``, buffers in HBM; the
               halving-doubling / ring crossover is reported;
  full         every algorithm on the whole machine at ``full_size`` (96 KiB),
               printed beside the external reference (366 us) when the
               machine is the default one (the reference is set beside it);
  grids        the hierarchical LRAB on a ``grid`` of SIPs wired as a ring, a
               torus and a mesh (inter-SIP exchange to match), over ``grid_sizes``;
  buffers      SRAM vs HBM buffers for ``buffer_algorithms`` on one SIP, for
               the sizes that fit the scratch.

On an explicit-graph --config (a GPU box) "one SIP" is the whole machine and
the grids panel is left out (both shape only a generated machine); the log
says so, one line each.

Outputs: sweep.json (results, failures, crossover, reference), ccl.csv,
latency.png, algbw.png, grids.png, buffers.png, full.png.
"""

from __future__ import annotations

import time

from kernbench import bench, ccl, units
from kernbench.overrides import Param, shape_check

KiB, MiB = units.KiB, units.MiB
REFERENCE_US = ccl.REFERENCE_ALL_REDUCE_US  # another simulator, 96 KiB per PE (docs/references.md, `kernbench`)
LINK_CLASSES = ["pe", "noc", "hbm", "ucie_port", "ucie", "pcie_port", "pcie"]
#: The all-reduce algorithms of the registry that run on PEs (in-network ones need reducing switches): a new
#: algorithm registered in src/ccl joins the bench without an edit here.
ALGORITHMS = [a["name"] for a in ccl.algorithms() if "all_reduce" in a["collectives"] and not a["in_network"]]


@bench(
    name="milestone-1h-ccl",
    description="all-reduce: every algorithm vs message size, SIP ring/torus/mesh, SRAM vs HBM, the 96 KB reference",
    params={
        "sizes": [1 * KiB, 16 * KiB, 96 * KiB, 1 * MiB, 8 * MiB, 64 * MiB],
        "algorithms": Param(ALGORITHMS, choices=ALGORITHMS),
        "full_size": 96 * KiB,
        "full_algorithms": Param(["torus2d", "mesh2d", "double_binary_tree", "lrab"], choices=ALGORITHMS),
        "grid": Param("4x2", check=shape_check(2), allowed="WxH SIPs, positive integers"),
        "grid_sizes": [1 * KiB, 16 * KiB, 96 * KiB, 1 * MiB, 8 * MiB],  # 64 MiB on 1024 PEs: ~10 min per point
        "grid_topologies": ["ring", "torus", "mesh"],
        "buffer_algorithms": Param(["ring", "lrab"], choices=ALGORITHMS),
        "verify": Param("auto", choices=["auto", "on", "off"]),
    },
    uses_config=True,
    primary="latency_us",
    smoke={"bench.sizes": [1024, 98304], "bench.algorithms": ["ring", "halving_doubling", "double_binary_tree", "lrab"],
           "bench.full_algorithms": ["lrab"], "bench.grid": "2x2", "bench.grid_sizes": [1024, 98304], "bench.grid_topologies": ["ring", "mesh"],
           "bench.buffer_algorithms": ["lrab"], "system.cubes.w": 2, "system.cubes.h": 2},
    golden={"key": ["panel", "name"], "metrics": {"latency_us": "rel=1e-9", "ranks": "exact", "verified": "exact",
                                                  "bytes_pe": "exact", "bytes_pcie": "exact"}},
)
def milestone_1h_ccl(ctx):
    t0 = time.perf_counter()
    p = ctx.params
    results, failures = ctx.results, ctx.failures

    def point(panel, name, extra, shaped_by=None, **kw):
        t = time.perf_counter()
        try:
            system = ctx.load_system(extra, shaped_by=shaped_by)
            r = ccl.all_reduce(system, verify=p["verify"], **kw)
        except Exception as e:  # a failing point never sinks the others
            failures.append({"name": f"{panel}: {name}", "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {panel:<10} {name:<44} FAILED: {type(e).__name__}: {e}")
            return None
        row = {"panel": panel, "name": name, **r.summary(), "buffer": kw.get("buffer", "sram"),
               "wall_s": round(time.perf_counter() - t, 3)}
        for cls in LINK_CLASSES:  # a class no byte crossed is a 0, not a missing column
            row.setdefault(f"bytes_{cls}", 0)
        row["critical_path"] = ctx.critical_path(r.run, f"{panel}: {name}")  # docs/critical-path.md
        results.append(row)
        ctx.trace(r.run, f"{panel}: {name}")
        ctx.log(f"  {panel:<10} {name:<44} {row['latency_us']:12.3f} us  {row['algbw_GBps']:8.2f} GB/s"
                f"  {'verified' if r.verified else 'unchecked'}  ({row['wall_s']:.2f} s)")
        return row

    one_sip = {"system.sips.w": 1, "system.sips.h": 1}
    machine = ctx.machine_label()  # "the default machine", or the --config / --set actually loaded
    with_reference = ctx.default_machine  # the reference figure is claimed against the default machine only
    ctx.log(f"algorithms: {'one SIP of ' if ctx.generated_machine else ''}{machine}, buffers in HBM")
    for alg in p["algorithms"]:
        for size in p["sizes"]:
            point("algorithms", f"{alg} {_size(size)}", one_sip, "one SIP (system.sips 1 x 1)", bytes_per_pe=size,
                  algorithm=alg, buffer="hbm")

    ctx.log(f"full: the whole of {machine} at {_size(p['full_size'])} per PE"
            + (f" (reference {REFERENCE_US} us)" if with_reference else
               " (no reference: it is set beside the default machine only)"))
    for alg in p["full_algorithms"]:
        point("full", f"{alg} {_size(p['full_size'])}", None, bytes_per_pe=p["full_size"], algorithm=alg,
              buffer="sram")

    gw, gh = (int(v) for v in str(p["grid"]).lower().split("x"))
    if ctx.generated_machine:
        ctx.log(f"grids: lrab on {gw}x{gh} SIPs as ring / torus / mesh")
    else:  # the SIP grid and its topology shape only a generated machine
        ctx.ignored_on_graph(f"the grids panel (bench.grid={p['grid']}, bench.grid_topologies)")
    for topo in (p["grid_topologies"] if ctx.generated_machine else []):
        extra = {"system.sips.w": gw, "system.sips.h": gh, "system.sips.topology": topo}
        for size in p["grid_sizes"]:
            point("grids", f"lrab {topo} {gw}x{gh} {_size(size)}", extra, bytes_per_pe=size, algorithm="lrab",
                  buffer="hbm", inter=topo)

    ctx.log("buffers: SRAM vs HBM on one SIP")
    for alg in p["buffer_algorithms"]:
        for size in p["sizes"]:
            for buf in ("sram", "hbm"):
                if buf == "sram" and size > 1 * MiB:
                    continue  # does not fit the 1 MiB scratch (the CapacityError is tested elsewhere)
                point("buffers", f"{alg} {buf} {_size(size)}", one_sip, "one SIP (system.sips 1 x 1)",
                      bytes_per_pe=size, algorithm=alg, buffer=buf)

    crossover = _crossover(results)
    if crossover:
        ctx.log(f"halving_doubling vs ring on one SIP: {crossover['text']}")
    full = [r for r in results if r["panel"] == "full"]
    for r in full if with_reference else []:
        ctx.log(f"  {r['name']:<32} {r['latency_us']:10.2f} us = {r['latency_us'] / REFERENCE_US:6.3f} x the "
                f"{REFERENCE_US:.0f} us reference")
    out = {"results": results, "failures": failures, "crossover": crossover,
           "reference": {"size": 96 * KiB, "latency_us": REFERENCE_US,
                         "source": "another simulator's all-reduce at 96 KB per PE (kernbench-model.md)",
                         "applies": with_reference, "machine": machine}}
    ctx.write_csv("ccl.csv", [{k: v for k, v in r.items() if k != "critical_path"} for r in results])
    _figures(ctx, results, machine, with_reference)
    wall = time.perf_counter() - t0
    ctx.log(f"milestone-1h-ccl: {len(results)} points, {len(failures)} failures in {wall:.1f} s")
    return out  # the bench's wall time is sweep.json's top-level wall_s (the runner writes it)


def _size(b: int) -> str:
    return units.size(b, largest="MiB")


def _crossover(results):
    """The smallest size from which the ring beats halving-doubling (one SIP)."""
    rows = [r for r in results if r["panel"] == "algorithms"]
    by = {(r["algorithm"], r["bytes_per_pe"]): r["latency_us"] for r in rows}
    sizes = sorted({r["bytes_per_pe"] for r in rows})
    both = [s for s in sizes if ("ring", s) in by and ("halving_doubling", s) in by]
    if not both:
        return None
    ring_wins = [s for s in both if by[("ring", s)] < by[("halving_doubling", s)]]
    hd_wins = [s for s in both if by[("halving_doubling", s)] < by[("ring", s)]]
    first = min(ring_wins) if ring_wins else None
    text = (f"halving_doubling faster up to {_size(max(s for s in hd_wins if first is None or s < first))}, "
            f"ring faster from {_size(first)}" if first and hd_wins and min(hd_wins) < first
            else "no crossover in the sizes swept")
    return {"ring_faster_from": first, "hd_faster_sizes": hd_wins, "ring_faster_sizes": ring_wins, "text": text}


def _figures(ctx, results, machine="the default machine", with_reference=True):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def lines(panel, key, ylabel, title, fname, label_of):
        rows = [r for r in results if r["panel"] == panel]
        if not rows:
            return
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label in sorted({label_of(r) for r in rows}):
            pts = sorted((r["bytes_per_pe"], r[key]) for r in rows if label_of(r) == label)
            ax.plot([x / KiB for x, _ in pts], [y for _, y in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size per PE (KiB)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        ctx.save_figure(fig, fname)
        plt.close(fig)

    lines("algorithms", "latency_us", "all-reduce latency (us)", f"All-reduce on one SIP of {machine}, HBM buffers",
          "latency.png", lambda r: r["algorithm"])
    lines("algorithms", "algbw_GBps", "algorithm bandwidth (GB/s per PE)", "Bytes per PE / latency, one SIP",
          "algbw.png", lambda r: r["algorithm"])
    lines("grids", "latency_us", "all-reduce latency (us)", "LRAB across a SIP grid: ring vs torus vs mesh",
          "grids.png", lambda r: r["name"].split()[1])
    lines("buffers", "latency_us", "all-reduce latency (us)", "SRAM vs HBM buffers, one SIP", "buffers.png",
          lambda r: f"{r['algorithm']} {r['buffer']}")

    full = [r for r in results if r["panel"] == "full"]
    if full:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar([r["algorithm"] for r in full], [r["latency_us"] for r in full], color="tab:blue")
        if with_reference:
            ax.axhline(REFERENCE_US, color="tab:red", ls="--", label=f"external reference {REFERENCE_US:.0f} us")
            ax.legend(fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("all-reduce latency (us)")
        ax.set_title(f"The whole of {machine}, {_size(full[0]['bytes_per_pe'])} per PE")
        fig.tight_layout()
        ctx.save_figure(fig, "full.png")
        plt.close(fig)

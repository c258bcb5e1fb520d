"""cluster-collectives: nccl-tests tables of a cluster of GPU boxes, at a list of node counts.

On a ``cluster:`` machine (default configs/machines/dgx-h100-cluster.yaml, DGX H100 boxes on a
rail-optimised NDR fat-tree; docs/cluster.md), for each node count of ``nodes`` (``--set
cluster.nodes=N`` each), it models all-reduce, all-gather, reduce-scatter and all-to-all over every GPU of
the machine, sizes ``min_bytes`` to ``max_bytes`` by ``factor``, and prints the tables nccl-tests prints:
size, count, type, time (us), algbw, busbw (busbw = algbw x nccl-tests' factor, kernbench.nccl.BUSBW).

The collectives run as NCCL runs them over several boxes (src/ccl, docs/ccl.md "Across boxes"): ``algorithm``
``auto`` takes NCCL's tuner's choice per size (ring, tree or NVLS+tree across the boxes, each row names it), the
ring box after box on its channels' rails, the tree a chain in each box and a double binary tree over the boxes,
NVLS+tree NVLS in each box and a binary tree over each rail's GPUs,
sends to another box relayed through the peer on the receiver's rail (PXN, ``nccl.pxn``). One call per row
(``calls``), its launch included. Beside every all-to-all row it prints the fabric's bound for that traffic
(kernbench.cluster.alltoall_bound: the slowest of the NIC and uplink cuts, inter-node bytes only) and the
model's per-GPU rate against it.

Every row also gives the wall time of its simulation, the fidelity it ran at (``steps``: every protocol step;
``pipeline``: one coflow per channel, which ``auto`` takes at scale; docs/ccl.md "Fidelity") and the process's
peak memory so far. A collective or size the model cannot run is a row of ``failures`` with the reason.

Scale targets (``scale``, on by default, off in the smoke run): a 1 GiB all-reduce (``algorithm`` auto) over
``target_nodes`` (default 128 nodes = 1,024 GPUs) on the flow fabric, against 10 s of wall time, and over
``packet_nodes`` (default 16 nodes = 128 GPUs) on the packet fabric at ``packet_chunk`` (default 16 KiB: NCCL's
all-reduce there is within a few per cent of the flow fabric's, docs/cluster.md), against 60 s; each printed with
its simulated time, the tuner's, the wall time, the events the simulation ran and the peak memory (target 8 GB)
(scale.csv).

Outputs: sweep.json, nccl.csv (every row), nccl_tables.txt (nccl-tests' layout, one table per node count and
collective; ``kernbench compare-nccl`` reads it back), busbw.png.
"""

from __future__ import annotations

import time
from pathlib import Path

from kernbench import bench, nccl
from kernbench.benches._host import peak_mb
from kernbench.overrides import Param

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]


@bench(
    name="cluster-collectives",
    description="nccl-tests tables (time, algbw, busbw) of all-reduce/all-gather/reduce-scatter/all-to-all on a "
                "cluster of GPU boxes at several node counts, with the fabric's all-to-all bound",
    params={"nodes": Param([2, 4], min=1), "collectives": Param(list(COLLECTIVES), choices=COLLECTIVES),
            "min_bytes": Param(1 << 20, min=1), "max_bytes": Param(64 << 20, min=1), "factor": Param(8, min=2),
            "type": Param("float", choices=sorted(nccl.TYPE_BYTES)),
            "algorithm": Param("auto", choices=["auto", "ring", "double_binary_tree", "tree", "nvls_tree", "nvls"]),
            "calls": Param(1, min=1, max=16), "scale": Param(True), "target_nodes": Param(128, min=1),
            "packet_nodes": Param(16, min=1), "packet_chunk": Param(16 << 10, min=1)},
    config="machines/dgx-h100-cluster.yaml",
    smoke={"bench.nodes": [2], "bench.max_bytes": 1 << 20, "bench.scale": False},
    golden={"key": ["nodes", "collective", "size"], "metrics": {"time_us": "rel=1e-9", "busbw": "rel=1e-9",
                                                               "count": "exact", "gpus": "exact",
                                                               "algorithm": "exact", "protocol": "exact"}},
    outputs={"nccl.csv": "every row: nodes, collective, size, count, type, time_us, algbw, busbw, wall_s",
             "nccl_tables.txt": "one table per node count and collective in nccl-tests' layout",
             "busbw.png": "busbw against size per collective and node count",
             "scale.csv": "the scale targets: nodes, gpus, fabric, chunk, algorithm, fidelity, time_us, wall_s, "
                          "events, peak_mb"},
    primary=["busbw", "time_us"],
    checks=nccl.size_checks,
)
def cluster_collectives(ctx):
    from kernbench import cluster as kcluster
    from kernbench.system import System

    p = ctx.params
    sizes = nccl.sweep_sizes(p["min_bytes"], p["max_bytes"], p["factor"])
    config = str(ctx.config)
    tables = []
    for nodes in p["nodes"]:
        sets = {**dict(ctx.config_overrides), "cluster.nodes": int(nodes)}
        try:
            info = System.load(config, set=sets, seed=ctx.seed).cluster()
        except Exception as e:  # a node count the fabric cannot hold: recorded, the others still run
            ctx.failures.append({"name": f"{nodes} nodes", "nodes": nodes, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"{nodes} nodes FAILED: {type(e).__name__}: {e}")
            continue
        gpus = info["nodes"] * info["gpus_per_node"]
        if gpus < 2:
            ctx.failures.append({"name": f"{nodes} nodes", "nodes": nodes,
                                 "error": f"{gpus} GPU: a collective needs 2 or more"})
            continue
        for coll in p["collectives"]:
            alg = p["algorithm"] if coll == "all_reduce" else "auto"

            def failed(size, e, coll=coll, nodes=nodes):
                ctx.failures.append({"name": f"{nodes} nodes {coll} {size} B", "nodes": nodes, "collective": coll,
                                     "size": size, "error": f"{type(e).__name__}: {e}"})
                ctx.log(f"  {nodes} nodes {coll} {size} B FAILED: {type(e).__name__}: {e}")

            rows = []
            for size in sizes:
                t0 = time.perf_counter()
                got = nccl.model_rows(config, coll, [size], algorithm=alg, type_=p["type"], sets=sets,
                                      seed=ctx.seed, calls=int(p["calls"]), on_error=failed)
                wall = time.perf_counter() - t0
                for r in got:
                    lb = r.pop("link_bytes")
                    r.update({f"bytes_{k}": v for k, v in sorted(lb.items())})
                    r.update(nodes=int(nodes), gpus=gpus, wall_s=wall, peak_mb=peak_mb())
                    if coll == "alltoall" and info["nodes"] > 1:
                        b = kcluster.alltoall_bound(info, size // gpus)
                        model_rate = size * (gpus - info["gpus_per_node"]) / gpus / (r["time_us"] * 1e-6)
                        r.update(bound_us=b["time_s"] * 1e6, bound_per_gpu_GBps=b["per_gpu_Bps"] / 1e9,
                                 bound_cut=b["bottleneck"], per_gpu_GBps=model_rate / 1e9,
                                 vs_bound=model_rate / b["per_gpu_Bps"])
                    rows.append(r)
                    ctx.results.append(r)
            title = f"{coll}_perf (kernbench model: {alg}, {nodes} nodes x {info['gpus_per_node']} GPUs " \
                    f"on {Path(config).stem})"
            table = nccl.format_table(rows, title=title, ranks=gpus)
            tables.append(table)
            ctx.log(table.rstrip())
            for r in rows:
                line = f"  {r['size']:>12} B  {r['algorithm']}/{r['protocol']}  sim {r['wall_s']:.2f} s wall, " \
                       f"peak {r['peak_mb']:.0f} MiB"
                if "bound_us" in r:
                    line += (f"; fabric bound {r['bound_us']:.1f} us ({r['bound_cut']} cut, "
                             f"{r['bound_per_gpu_GBps']:.1f} GB/s per GPU inter-node), model "
                             f"{r['per_gpu_GBps']:.1f} GB/s = {r['vs_bound']:.3f} of it")
                ctx.log(line)
    _scale_targets(ctx, config)
    from kernbench.atomic_output import atomic_write_bytes  # the one atomic writer

    atomic_write_bytes(ctx.out / "nccl_tables.txt", "\n".join(tables).encode())
    ctx.files.append("nccl_tables.txt")
    ctx.write_csv("nccl.csv", ctx.results)
    _figure(ctx)
    # Host memory is wall-clock by nature: named in wall_clock_fields (docs/sweep-json.md).
    return {"results": ctx.results, "failures": ctx.failures, "wall_clock_fields": ["results[].peak_mb"]}


#: The issue's targets for a 1 GiB all-reduce: over a thousand GPUs on the flow fabric, over 128 on the packet one.
TARGET_WALL_S = {"flow": 10.0, "packet": 60.0}
TARGET_PEAK_MB = 8 * 1024


def _scale_targets(ctx, config: str) -> None:
    """A 1 GiB all-reduce over ``target_nodes`` nodes on the flow fabric and over ``packet_nodes`` on the packet
    fabric: time, wall, events, peak memory."""
    from kernbench import ccl
    from kernbench.system import System

    rows = []
    targets = [(ctx.params["target_nodes"], "flow", {}),
               (ctx.params["packet_nodes"], "packet", {"fabric.chunk": f"{int(ctx.params['packet_chunk'])} B"})]
    for nodes, fabric, extra in targets if ctx.params["scale"] else []:
        sets = {**dict(ctx.config_overrides), "cluster.nodes": int(nodes), "fabric.model": fabric, **extra}
        try:
            system = System.load(config, set=sets, seed=ctx.seed)
            t0 = time.perf_counter()
            e0 = system._core.events_processed
            r = ccl.all_reduce(system, 1 << 30, algorithm="auto", buffer="hbm", verify="off")
            wall = time.perf_counter() - t0
        except Exception as e:  # recorded, the rest still runs
            ctx.failures.append({"name": f"scale {nodes} nodes ({fabric})", "nodes": nodes,
                                 "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"scale {nodes} nodes ({fabric}) FAILED: {type(e).__name__}: {e}")
            continue
        chunk = int(ctx.params["packet_chunk"]) if fabric == "packet" else 0
        row = {"nodes": int(nodes), "gpus": r.ranks, "fabric": fabric, "chunk": chunk, "algorithm": r.algorithm,
               "protocol": r.protocol, "fidelity": r.fidelity, "time_us": r.latency_us,
               "tuner_us": r.predicted_ps / 1e6, "wall_s": wall, "events": system._core.events_processed - e0,
               "peak_mb": peak_mb()}
        rows.append(row)
        where = f"{fabric} fabric" + (f", {chunk // 1024} KiB chunks" if chunk else "")
        ctx.log(f"scale target: 1 GiB all_reduce over {row['gpus']} GPUs ({nodes} nodes, {where}): "
                f"{r.algorithm}/{r.protocol} at fidelity {r.fidelity}, {row['time_us'] / 1e3:.3f} ms simulated "
                f"(tuner {row['tuner_us'] / 1e3:.3f} ms) in {wall:.2f} s wall (target < {TARGET_WALL_S[fabric]:.0f} s), "
                f"{row['events']} events, peak {row['peak_mb']:.0f} MiB (target < {TARGET_PEAK_MB} MiB)")
    if rows:
        ctx.write_csv("scale.csv", rows)


def _figure(ctx) -> None:
    """busbw against size, one panel per collective, one line per node count."""
    if not ctx.results:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = [c for c in COLLECTIVES if any(r["collective"] == c for r in ctx.results)]
    fig, axes = plt.subplots(1, len(colls), figsize=(4.2 * len(colls), 3.6), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for nodes in sorted({r["nodes"] for r in ctx.results}):
            rows = [r for r in ctx.results if r["collective"] == coll and r["nodes"] == nodes]
            ax.plot([r["size"] for r in rows], [r["busbw"] for r in rows], marker="o", label=f"{nodes} nodes")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (B)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(coll)
        ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.save_figure(fig, "busbw.png")

"""gpu-collectives: the nccl-tests tables of an 8-GPU box, from the model.

For all-reduce, all-gather, reduce-scatter, broadcast and alltoall on a GPU-box preset
(default configs/machines/h100-8x-nvswitch.yaml), sizes ``min_bytes`` to
``max_bytes`` by ``factor``, it prints and writes the table nccl-tests prints:
size, count, type, redop, root, time (us), algbw, busbw. algbw = size / time
and busbw = algbw x nccl-tests' factor (all_reduce 2(n-1)/n, all_gather and
reduce_scatter and alltoall (n-1)/n, broadcast 1; kernbench.nccl.BUSBW).
``count`` is size / element size, divided by the ranks for all_gather,
reduce_scatter and alltoall, as nccl-tests prints it.

The model runs each collective as NCCL runs it (kernbench.ccl on a GPU machine, src/ccl/nccl.hpp):
``algorithm`` ``auto`` takes the NCCL tuner's algorithm and protocol per size (each row names them), the
buffer in HBM (alltoall: NCCL's p2p channels and protocol, every pair at once), ``REPEATS`` calls back to back launched by ``threads`` host threads (0: one per rank), the
time per call in steady state, as nccl-tests reports it. A collective or size the model cannot run is a row of
``failures`` with the reason; no number is made up for it.

Where the box's switches reduce in the network (``reduction:`` on the H100's NVSwitch gen3; not the A100's),
all-reduce is also modelled with ``innet_algorithm`` (default ``nvls``): rows with algorithm ``nvls`` beside the
tuner's, and its busbw at the largest size in the log and in ``target``. On a box without a reducing switch it
is skipped, with the reason in the log and in ``innet`` (sweep.json).

Target (when all_reduce reaches 1 GiB): the ring all-reduce at 1 GiB (Simple) beside the link rates (the
GPU's NVLink total per direction, and the rate the neighbour pair's routing gives: under
``fabric.multipath: spread``, as on the H100 and A100 presets, every transfer is striped over all equal-cost
paths -- one per NVSwitch -- in proportion to their link counts, so the rate is the sum of the paths'; under
``single`` the one path's), with the alpha-beta closed form at that rate times ``nccl.link_efficiency`` and
the fixed costs the model charges, with where they come from (docs/ccl.md, "On a GPU machine").

Outputs: sweep.json, nccl.csv (every row), nccl_tables.txt (the tables in
nccl-tests' layout; ``kernbench compare-nccl`` reads it back), busbw.png.
"""

from __future__ import annotations

from pathlib import Path

from kernbench import bench, nccl
from kernbench.args import machine_range
from kernbench.overrides import Param

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"]


@bench(
    name="gpu-collectives",
    description="nccl-tests tables (time, algbw, busbw) of all-reduce/all-gather/reduce-scatter/broadcast/alltoall "
                "on a GPU box",
    params={"collectives": Param(list(COLLECTIVES), choices=COLLECTIVES + ["reduce", "sendrecv"]),
            "min_bytes": Param(8, min=1), "max_bytes": Param(1 << 30, min=1), "factor": Param(2, min=2),
            "ranks": Param(8, min=2), "type": Param("float", choices=sorted(nccl.TYPE_BYTES)),
            "algorithm": Param("auto", choices=["auto", "ring", "double_binary_tree", "tree", "nvls"]),
            "threads": Param(0, min=0), "innet_algorithm": Param("nvls", choices=["nvls", ""])},
    config="machines/h100-8x-nvswitch.yaml",
    smoke={"bench.max_bytes": 1 << 20, "bench.factor": 16},
    golden={"key": ["collective", "requested", "size"], "metrics": {"time_us": "rel=1e-9", "busbw": "rel=1e-9",
                                                       "count": "exact", "ranks": "exact"}},
    outputs={"nccl.csv": "every row: collective, size, count, type, time_us, algbw, busbw",
             "nccl_tables.txt": "one table per collective in nccl-tests' layout",
             "busbw.png": "busbw against size per collective"},
    primary=["busbw", "time_us"],
    checks=nccl.size_checks,
)
def gpu_collectives(ctx):
    p = ctx.params
    sizes = nccl.sweep_sizes(p["min_bytes"], p["max_bytes"], p["factor"])
    config = str(ctx.config)
    n_pes = len(ctx.load_system().pes())  # more ranks than the machine has PEs: refused before any row runs
    machine_range("ranks", p["ranks"], 2, n_pes, ctx.machine_label(), f"{n_pes} PEs")
    tables = []
    for coll in p["collectives"]:
        if coll not in nccl.MODELLED:
            ctx.failures.append({"name": coll, "collective": coll,
                                 "error": f"no model of {coll} in kernbench.ccl (modelled: "
                                          f"{', '.join(sorted(nccl.MODELLED))})"})
            ctx.log(f"{coll}: no model (recorded in failures)")
            continue
        alg = (p["algorithm"] if coll == "all_reduce" or (p["algorithm"] in ("auto", "ring") and coll != "alltoall")
               else "auto")  # alltoall: pairwise, NCCL's p2p

        def failed(size, e, coll=coll):
            ctx.failures.append({"name": f"{coll} {size} B", "collective": coll, "size": size,
                                 "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {coll} {size} B FAILED: {type(e).__name__}: {e}")

        rows = nccl.model_rows(config, coll, sizes, ranks=int(p["ranks"]), algorithm=alg, type_=p["type"],
                               sets=dict(ctx.config_overrides), seed=ctx.seed, threads=int(p["threads"]),
                               on_error=failed)
        for r in rows:
            lb = r.pop("link_bytes")
            r.update({f"bytes_{k}": v for k, v in sorted(lb.items())})
            ctx.results.append(r)
        title = f"{coll}_perf (kernbench model: {alg} on {Path(config).stem})"
        table = nccl.format_table(rows, title=title, ranks=int(p["ranks"]))
        tables.append(table)
        ctx.log(table.rstrip())
    innet = _innet(ctx, config, sizes) if "all_reduce" in p["collectives"] and p["innet_algorithm"] else None
    text = "\n".join(tables)
    from kernbench.atomic_output import atomic_write_bytes  # the one atomic writer

    atomic_write_bytes(ctx.out / "nccl_tables.txt", text.encode())
    ctx.files.append("nccl_tables.txt")
    ctx.write_csv("nccl.csv", ctx.results)
    _figure(ctx, ctx.results)
    target = _target(ctx, config)
    if target is not None and innet is not None:
        target["innet"] = innet
    return {"results": ctx.results, "failures": ctx.failures, "target": target, "innet": innet,
            "busbw_factors": {c: nccl.busbw_factor(c, int(p["ranks"])) for c in p["collectives"] if c in nccl.BUSBW}}


def _innet(ctx, config: str, sizes: list[int]):
    """All-reduce with the in-network algorithm beside ring's, where the box's switches reduce."""
    p = ctx.params
    alg = p["innet_algorithm"]
    errors = []

    def failed(size, e):
        errors.append((size, e))

    rows = nccl.model_rows(config, "all_reduce", sizes, ranks=int(p["ranks"]), algorithm=alg, type_=p["type"],
                           sets=dict(ctx.config_overrides), seed=ctx.seed, threads=int(p["threads"]),
                           on_error=failed)
    missing = [e for _, e in errors if "needs an in-network reducing switch" in str(e)]
    if missing and not rows:  # the box has no reducing switch: not a failure of the model
        ctx.log(f"all_reduce {alg}: skipped: {missing[0]}")
        return {"algorithm": alg, "skipped": str(missing[0])}
    for size, e in errors:
        ctx.failures.append({"name": f"all_reduce {alg} {size} B", "collective": "all_reduce", "size": size,
                             "error": f"{type(e).__name__}: {e}"})
    ring = {r["size"]: r for r in ctx.results if r["collective"] == "all_reduce" and r["requested"] != alg}
    for r in rows:
        lb = r.pop("link_bytes")
        r.update({f"bytes_{k}": v for k, v in sorted(lb.items())})
        ctx.results.append(r)
    if not rows:
        return {"algorithm": alg, "skipped": "every size failed (see failures)"}
    last = rows[-1]
    other = ring.get(last["size"])
    ctx.log(f"all_reduce {alg} (in-network) beside {other['algorithm'] if other else 'ring'}, busbw GB/s:")
    for r in rows:
        o = ring.get(r["size"])
        ctx.log(f"  {r['size']:>12} B  {alg} {r['busbw']:8.2f}" + (f"  {o['algorithm']} {o['busbw']:8.2f}" if o else ""))
    return {"algorithm": alg, "size": last["size"], "busbw_GBps": last["busbw"], "time_us": last["time_us"],
            "ring_busbw_GBps": other["busbw"] if other else None}


def _target(ctx, config: str):
    """The ring all-reduce at 1 GiB beside the link rates, the closed form and the fixed costs."""
    from kernbench import _core
    from kernbench.system import System

    p = ctx.params
    if not any(r["collective"] == "all_reduce" and r["size"] == 1 << 30 for r in ctx.results):
        return None
    sets = dict(ctx.config_overrides)
    rows = nccl.model_rows(config, "all_reduce", [1 << 30], ranks=int(p["ranks"]), algorithm="ring",
                           sets=sets, seed=ctx.seed, threads=int(p["threads"]))
    row = rows[0]
    system = System.load(config, set=sets, seed=ctx.seed)
    pes = nccl.pes_of(system)[: row["ranks"]]
    ch = system.channels()
    paths = system.route_paths(pes[0], pes[1])
    mode = system.multipath
    info = paths[0]
    cls = info["classes"][0]  # the GPU's links of the class the ring takes (nvlink, or pcie on a PCIe box)
    out_of_gpu = sum(int(ch["bandwidth_Bps"][i]) * int(ch["connections"][i]) for i in range(len(ch["src"]))
                     if system.node_name(int(ch["src"][i])) == pes[0] and ch["class"][i] == cls)
    used = paths if mode == "spread" else paths[:1]  # ecmp: one path per transfer, path 0 stated
    path_bps = _striped_rate(used)
    n, size = row["ranks"], row["size"]
    overheads = []
    eff = 1.0
    if system.target == "gpu":
        nc = _core.nccl_config(system._core)
        eff = nc["link_efficiency"]
        base = {"ll": nc["ll_base_ps"], "ll128": nc["ll128_base_ps"], "simple": nc["simple_base_ps"]}[row["protocol"]]
        overheads = [
            {"name": "host launch per call", "ps": nc["call_host_ps"],
             "from": "nccl.call_host (one per rank's thread; back to back it overlaps the previous call)"},
            {"name": f"{row['protocol']} fixed cost per call", "ps": base, "from": f"nccl.{row['protocol']}_base"},
        ]
    rate = path_bps * eff
    closed_ps = 2 * (n - 1) / n * size / rate * 1e12
    model_ps = row["time_us"] * 1e6
    t = {"collective": "all_reduce", "algorithm": "ring", "protocol": row["protocol"], "size": size, "ranks": n,
         "busbw_GBps": row["busbw"], "algbw_GBps": row["algbw"], "time_us": row["time_us"],
         "link_class": cls, "gpu_link_rate_GBps": out_of_gpu / 1e9,
         "route": info["nodes"], "path_rate_GBps": path_bps / 1e9, "multipath": mode, "link_efficiency": eff,
         "paths": [{"nodes": q["nodes"], "rate_GBps": q["rate_Bps"] / 1e9} for q in used],
         "busbw_vs_gpu_links": row["busbw"] / (out_of_gpu / 1e9) if out_of_gpu else None,
         "busbw_vs_path": row["busbw"] / (path_bps / 1e9),
         "closed_form_us": closed_ps / 1e6, "model_vs_closed_form": model_ps / closed_ps - 1,
         "overheads": [{**o, "us": o.pop("ps") / 1e6} for o in overheads]}
    rates = ", ".join(f"{q['nodes'][1]} {q['rate_Bps'] / 1e9:.0f}" for q in used)
    via = f"{len(used)} paths striped by rate: {rates} GB/s" if len(used) > 1 else " -> ".join(info["nodes"])
    if mode == "ecmp" and len(paths) > 1:  # concurrent transfers may hash onto other paths: not a bound
        via = (f"each transfer on one of {len(paths)} paths by flow hash, the first stated: {via}; "
               "transfers in flight together may take others")
    ctx.log(f"target: ring all-reduce ({row['protocol']}), {n} GPUs, 1 GiB: busbw {row['busbw']:.1f} GB/s beside "
            f"the GPU's {cls} links, {t['gpu_link_rate_GBps']:.1f} GB/s per direction "
            f"({100 * (t['busbw_vs_gpu_links'] or 0):.0f} %), and the routing's {t['path_rate_GBps']:.1f} GB/s "
            f"(fabric.multipath {mode}; {via}: {100 * t['busbw_vs_path']:.1f} %)")
    ctx.log(f"  closed form 2(n-1)/n S / (rate x nccl.link_efficiency {eff:.3f}): {t['closed_form_us']:.1f} us; "
            f"model {row['time_us']:.1f} us ({100 * t['model_vs_closed_form']:+.3f} %); fixed costs:")
    for o in t["overheads"]:
        ctx.log(f"    {o['us']:8.3f} us  {o['name']}: {o['from']}")
    return t


def _striped_rate(paths: list) -> float:
    """The rate (B/s) of a transfer striped over `paths` in proportion to their rates (fabric.multipath spread).

    Stripe p carries w_p / W of the bytes (w_p its path's rate, W their sum), so a channel on several paths
    carries the sum of their shares: the rate is the min over channels of capacity x W / (the weights of the
    paths through it). On disjoint paths (one per NVSwitch) that is the sum of the paths' rates; on one path,
    its rate.
    """
    total = sum(p["rate_Bps"] for p in paths)
    load: dict[int, float] = {}
    capacity: dict[int, float] = {}
    for p in paths:
        for c, rate in zip(p["channels"], p["hop_rates_Bps"]):
            load[c] = load.get(c, 0.0) + p["rate_Bps"]
            capacity[c] = rate
    return min(capacity[c] * total / w for c, w in load.items())


def _figure(ctx, rows):
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for coll, alg in dict.fromkeys((r["collective"], r["requested"]) for r in rows):
        pts = [(r["size"], r["busbw"]) for r in rows if r["collective"] == coll and r["requested"] == alg]
        ax.plot([q[0] for q in pts], [q[1] for q in pts], marker="o", label=f"{coll} ({alg})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (B)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"kernbench model, {Path(str(ctx.config)).stem}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    ctx.save_figure(fig, "busbw.png")
    plt.close(fig)

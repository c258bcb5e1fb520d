"""The built-in measurement functions: K200, vGPU and fabric figures, each the call the models' own tables use.

K200 (default config ``k200.yaml``):
  k200.gemm     m n k precision ncluster        -> gflops [GFLOPS], time [us]
  k200.copy     kind direction bytes            -> bandwidth [GiB/s], time [us]   (knobs: the row's set)
  k200.wait     elements ncluster               -> wait [us]  (one kernel launched and waited for, as REFERENCE_WAIT)
  k200.launch   threads kernels loops elements ncluster -> launch, per_kernel, wait, single [us] (the vendor test)
  k200.dispatch threads commands elements ncluster -> round_trip, per_command [us]
  k200.case     case variant batch              -> throughput [samples/s], latency [ms]
vGPU (``vgpu.yaml``):
  vgpu.launch   index n guests                  -> elapsed [ms] (jiffies), forwarding, round_trip, firmware,
                                                   poll_wait, copy_in, doorbell_to_completion, copy_out, host [ms]
  vgpu.spread   runs                            -> min, max, median [ms] of the first launch's elapsed_ms
  vgpu.workload seeds side                      -> any P1-P12 metric of kernbench.vgpu.metrics (p50 over seeds)
Fabric (``topology.yaml``):
  fabric.dma        kind issuer memory bytes    -> latency [ns], bandwidth [GB/s]
  fabric.pe_dma     scenario bytes              -> makespan, latency_mean [ns], effective [GB/s] (pe-dma-perf)
  fabric.allreduce  bytes algorithm             -> latency [us]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.calibrate.registry import measurement
from kernbench.units import MiB

US = 1e6  # ps per us
MS = 1e9


# ---- K200 ----------------------------------------------------------------------------

@measurement("k200.gemm", metrics={"gflops": "GFLOPS", "time": "us"}, config="k200.yaml",
             doc="one xdnn-fc GEMM on die 0 (kernbench.k200.gemm: launch, dispatch, run, wait)")
def k200_gemm(ctx, m: int, n: int, k: int, precision: str = "fp32", ncluster: int = 0):
    from kernbench import k200

    r = k200.gemm(ctx.load(), m, n, k, precision, ncluster=ncluster)
    return {"gflops": r.gflops, "time": r.elapsed_s * 1e6}


@measurement("k200.copy", metrics={"bandwidth": "GiB/s", "time": "us"}, config="k200.yaml",
             doc="one host copy (kernbench.k200.copy); driver knobs go in the row's set")
def k200_copy(ctx, kind: str, direction: str = "h2d", bytes: int = 64 * MiB):
    from kernbench import k200

    r = k200.copy(ctx.load(), kind, direction, bytes)
    return {"bandwidth": r.gib_per_s, "time": r.elapsed_s * 1e6}


@measurement("k200.wait", unit="us", config="k200.yaml",
             doc="single-kernel wait: one elementwise add launched and waited for (REFERENCE_WAIT)")
def k200_wait(ctx, elements: int = 5120, ncluster: int = 4):
    from kernbench import k200

    return k200.launch(ctx.load(), threads=1, kernels=1, loops=1, elements=elements, ncluster=ncluster)["wait_us"]


@measurement("k200.launch", metrics={"launch": "us", "per_kernel": "us", "wait": "us", "single": "us"},
             config="k200.yaml", doc="the vendor launch test (kernbench.k200.launch; VENDOR_KERNEL by default)")
def k200_launch(ctx, threads: int = 1, kernels: int = 10, loops: int = 100, elements: int = 5120,
                ncluster: int = 4):
    from kernbench import k200

    d = k200.launch(ctx.load(), threads=threads, kernels=kernels, loops=loops, elements=elements, ncluster=ncluster)
    return {"launch": d["launch_us"], "per_kernel": d["per_kernel_us"], "wait": d["wait_us"],
            "single": d["single_us"]}


@measurement("k200.dispatch", metrics={"round_trip": "us", "per_command": "us"}, config="k200.yaml",
             doc="the synchronous round trip per thread (kernbench.k200.dispatch)")
def k200_dispatch(ctx, threads: int = 1, commands: int = 100, elements: int = 5120, ncluster: int = 4):
    from kernbench import k200

    d = k200.dispatch(ctx.load(), threads=threads, commands=commands, elements=elements, ncluster=ncluster)
    return {"round_trip": d["round_trip_us"], "per_command": d["per_command_us"]}


def case_variant(case: dict[str, Any], variant: str) -> dict[str, Any]:
    """The overrides of a case's variant by name ("baseline": none); KeyError lists the known names."""
    if variant == "baseline":
        return {"name": "baseline"}
    for w in case.get("what_if") or []:
        if w.get("name") == variant:
            return dict(w)
    known = ["baseline"] + [str(w.get("name")) for w in case.get("what_if") or []]
    raise KeyError(f"case {case['name']}: no variant {variant!r} (known: {', '.join(known)})")


@measurement("k200.case", metrics={"throughput": "samples/s", "latency": "ms"}, config="k200.yaml",
             doc="an end-to-end case (configs/k200_cases/) at one batch: kernbench.k200.run_variant")
def k200_case(ctx, case: str, variant: str = "baseline", batch: int = 1):
    from kernbench import k200

    c = k200.load_case(case)
    over = case_variant(c, variant)
    # The case's and the variant's own overrides are the row's conditions: they win over fitted values.
    sets = {**ctx.sets, **{k: str(v) for k, v in (c.get("set") or {}).items()},
            **{k: str(v) for k, v in (over.pop("set", None) or {}).items()}}
    over["set"] = sets
    over["batch"] = batch
    rows = k200.run_variant(c, over, config=ctx.config_path, seed=ctx.seed)
    return {"throughput": rows[0]["throughput_per_s"], "latency": rows[0]["latency_ms"]}


# ---- vGPU ----------------------------------------------------------------------------

_VGPU_LAUNCH = {"elapsed": "ms", "forwarding": "ms", "round_trip": "ms", "firmware": "ms", "poll_wait": "ms",
                "gsp_wait": "ms", "copy_in": "ms", "doorbell_to_completion": "ms", "copy_out": "ms", "host": "ms",
                "forwards": "count", "accepted": "count", "refused": "count"}


@measurement("vgpu.launch", metrics=_VGPU_LAUNCH, metric="forwarding", config="vgpu.yaml",
             doc="launch `index` of `n` of a fresh context (kernbench.vgpu.launches): elapsed is jiffies "
                 "(whole ms: fit the continuous components, predict elapsed)")
def vgpu_launch(ctx, index: int = 0, n: int = 1, guests: int = 0):
    from kernbench import _core

    run = _core.vgpu_launches(ctx.load()._core, n, guests, [], False)
    la = run["launches"][index]
    rts = np.asarray(la["round_trips_ps"], dtype=float) / MS
    return {"elapsed": float(la["elapsed_ms"]), "forwarding": la["forwarding_ps"] / MS,
            "round_trip": float(rts.mean()) if rts.size else 0.0, "firmware": la["firmware_ps"] / MS,
            "poll_wait": la["poll_wait_ps"] / MS, "gsp_wait": la["gsp_wait_ps"] / MS,
            "copy_in": la["copy_in_ps"] / MS, "doorbell_to_completion": la["doorbell_to_completion_ps"] / MS,
            "copy_out": la["copy_out_ps"] / MS, "host": la["host_ps"] / MS, "forwards": float(la["forwards"]),
            "accepted": float(la["accepted"]), "refused": float(la["refused"])}


@measurement("vgpu.spread", metrics={"min": "ms", "max": "ms", "median": "ms"}, config="vgpu.yaml",
             doc="elapsed_ms of the first launch of a fresh context over `runs` seeds (kernbench.vgpu.elapsed_spread)")
def vgpu_spread(ctx, runs: int = 100):
    from kernbench import _core

    v = [float(_core.vgpu_launches(ctx.load(seed=ctx.seed + i)._core, 1, 0, [], False)["launches"][0]["elapsed_ms"])
         for i in range(runs)]
    return {"min": min(v), "max": max(v), "median": float(np.median(v))}


def _p_unit(metric: str) -> str | None:
    for suffix, unit in (("_ms", "ms"), ("_us", "us"), ("_GBps", "GB/s"), ("_KiB", "KiB"), ("_per_s", "1/s"),
                         ("_cycles", "cycles")):
        if metric.endswith(suffix):
            return unit
    return "1" if metric.startswith("P11_") else None


@measurement("vgpu.workload", metrics={"P3h_host_ms": "ms", "P4_warm_p50_ms": "ms", "P10_launches_per_s": "1/s"},
             metric_unit=_p_unit, config="vgpu.yaml",
             doc="the scripted workload P1-P12 (kernbench.vgpu.metrics), p50 over `seeds` seeds; side guest|bare|ratio")
def vgpu_workload(ctx, seeds: int = 1, side: str = "guest", metric_name: str = ""):
    from kernbench import _core
    from kernbench.vgpu import metrics

    if side not in ("guest", "bare", "ratio"):
        raise ValueError(f"vgpu.workload side={side!r}: expected guest, bare or ratio")
    runs = {"guest": [], "bare": []}
    for s in range(ctx.seed, ctx.seed + seeds):
        for name, bare in (("guest", False), ("bare", True)):
            if side in (name, "ratio"):
                runs[name].append(metrics(_core.vgpu_workload(ctx.load(seed=s)._core, bare)))
    keys = runs["guest"][0] if runs["guest"] else runs["bare"][0]
    out = {}
    for k in keys:
        g = float(np.median([r[k] for r in runs["guest"]])) if runs["guest"] else None
        b = float(np.median([r[k] for r in runs["bare"]])) if runs["bare"] else None
        out[k] = g / b if side == "ratio" else (g if side == "guest" else b)
    return out


# ---- fabric (SIP/CUBE/PE machines) ------------------------------------------------------

@measurement("fabric.dma", metrics={"latency": "ns", "bandwidth": "GB/s"}, config="topology.yaml",
             doc="one DMA alone on the machine (kernbench.System.dma): issue to end, bytes / latency")
def fabric_dma(ctx, issuer: str = "sip0.cube0.pe0", memory: str = "sip0.cube0.hbm_ctrl.pe0", bytes: int = 16384,
               kind: str = "read"):
    system = ctx.load()
    system.dma(kind, issuer, memory, bytes)
    system.run()
    d = system.dma_ops()
    lat = float(d["end_ps"][0] - d["issue_ps"][0])
    return {"latency": lat / 1e3, "bandwidth": bytes / (lat * 1e-12) / 1e9}


@measurement("fabric.pe_dma", metrics={"makespan": "ns", "latency_mean": "ns", "effective": "GB/s"},
             metric="makespan", config="topology.yaml",
             doc="a pe-dma-perf scenario (kernbench.pe_dma): SAME_CUBE_PE_LOCAL, ctrl_hot_2, ucie_east_8, ...")
def fabric_pe_dma(ctx, scenario: str, bytes: int = 16384, sip: int = 0):
    from kernbench import pe_dma

    for name, kind, ops in pe_dma.scenarios(ctx.load(), sip):
        if name == scenario:
            row = pe_dma.run_scenario(ctx.load(), name, kind, ops, bytes)
            return {"makespan": row["makespan_ns"], "latency_mean": row["latency_mean_ns"],
                    "effective": row["effective_GBps"]}
    known = [s[0] for s in pe_dma.scenarios(ctx.load(), sip)]
    raise KeyError(f"fabric.pe_dma: no scenario {scenario!r} on this machine (known: {', '.join(known)})")


@measurement("fabric.allreduce", unit="us", config="topology.yaml",
             doc="an all-reduce of `bytes` per PE (kernbench.ccl.all_reduce), latency")
def fabric_allreduce(ctx, bytes: int = 96 * 1024, algorithm: str = "lrab"):
    from kernbench import ccl

    return ccl.all_reduce(ctx.load(), bytes, algorithm=algorithm).latency_ps / US

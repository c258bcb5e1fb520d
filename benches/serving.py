"""serving: requests under load through one instance, per scheduler and arrival rate (kernbench.serving).

For each scheduler of ``schedulers`` and each rate of ``qps``, ``requests`` requests of ``model`` (lognormal
prompts around ``prompt_mean`` tokens and outputs around ``output_mean``, sigma ``sigma``; Poisson arrivals;
seeded) are served on the machine (default the H100 preset, tp 1) by the request-level DES of
``src/workloads/serving``, each iteration priced by the hardware model (memoised on a lattice, its
interpolation checked against direct simulation). Each row: TTFT, TPOT and E2E p50/p90/p99, throughput,
goodput under ``slo``, the mean batch per iteration, preemptions, the iteration-cost cache's hit rate and
the interpolation's error, and the wall time. The log ends with the schedulers side by side at the highest
rate: throughputs, p99 TTFTs and their ratio.

Outputs: sweep.json, serving.csv (every row), latency_throughput.png (p99 TTFT and TPOT against throughput
over the rates, per scheduler), and per point a folder with requests.csv, timeseries.csv, summary.json
(vLLM benchmark_serving's keys) and the latency CDF and KV-over-time plots.
"""

from __future__ import annotations

from kernbench import bench
from kernbench.args import machine_range
from kernbench.overrides import Param

METRICS = ("ttft", "tpot", "e2el")


@bench(
    name="serving",
    description="requests under load: TTFT/TPOT/E2E percentiles, throughput and goodput per scheduler and QPS",
    params={"model": Param("llama3-8b"), "schedulers": Param(["vllm", "static"], choices=["vllm", "sarathi", "orca",
                                                                                           "static"]),
            "qps": Param([4.0]), "requests": Param(10_000, min=1), "prompt_mean": Param(512, min=1),
            "output_mean": Param(256, min=1), "sigma": Param(0.5, min=0.0), "tp": Param(1, min=1),
            "max_num_seqs": Param(256, min=1), "slo": Param("ttft=200ms,tpot=50ms"), "check": Param(20, min=0)},
    config="machines/h100-8x-nvswitch.yaml",
    smoke={"bench.requests": 200, "bench.check": 5},
    golden={"key": ["scheduler", "qps"], "metrics": {"p50_ttft_ms": "rel=1e-6", "p99_tpot_ms": "rel=1e-6",
                                                     "completed": "exact", "iterations": "exact"}},
    outputs={"serving.csv": "every row: scheduler, qps, percentiles, throughput, goodput, cache, interpolation",
             "latency_throughput.png": "p99 TTFT and TPOT against throughput per scheduler",
             "points/": "per (scheduler, qps): requests.csv, timeseries.csv, summary.json, latency_cdf.png, "
                        "kv_over_time.png"},
    primary=["p99_ttft_ms", "p99_tpot_ms", "request_goodput"],
)
def serving_bench(ctx):
    from kernbench import serving
    from kernbench.system import System

    p = ctx.params
    system = System.load(str(ctx.config), set=dict(ctx.config_overrides), seed=ctx.seed)
    n_pes = len(system.pes())  # a tp wider than the machine is refused before any point runs
    machine_range("tp", p["tp"], 1, n_pes, ctx.machine_label(), f"{n_pes} PEs")
    cap = float(p["prompt_mean"]) * 8
    prompt = f"lognormal:mean={p['prompt_mean']},sigma={p['sigma']},max={int(cap)}"
    output = f"lognormal:mean={p['output_mean']},sigma={p['sigma']},max={int(float(p['output_mean']) * 8)}"
    for sched in p["schedulers"]:
        for qps in p["qps"]:
            name = f"{sched} {qps:g}/s"
            try:
                res = serving.run(p["model"], system, config=str(ctx.config), tp=int(p["tp"]), qps=float(qps),
                                  requests=int(p["requests"]), prompt=prompt, output=output, scheduler=sched,
                                  max_num_seqs=int(p["max_num_seqs"]), slo=p["slo"], check=int(p["check"]),
                                  seed=ctx.seed)
            except Exception as e:  # one point failing never sinks the others
                ctx.failures.append({"name": name, "scheduler": sched, "qps": qps, "error": f"{type(e).__name__}: {e}"})
                ctx.log(f"{name}: FAILED: {type(e).__name__}: {e}")
                continue
            s = res.summary()
            row = {"scheduler": sched, "qps": float(qps), "requests": s["requests"], "completed": s["completed"],
                   "rejected": s["rejected"], "request_throughput": s["request_throughput"],
                   "output_throughput": s["output_throughput"], "request_goodput": s["request_goodput"],
                   "mean_batch": s["mean_batch"], "iterations": s["iterations"], "preemptions": s["preemptions"],
                   "peak_kv_utilization": s["peak_kv_utilization"], "kv_blocks": s["kv_blocks"],
                   "cache_hit_rate": s["cost_cache"]["hit_rate"], "corners_simulated": s["cost_cache"]["simulated"],
                   "interp_max_abs_error": s["interpolation"].get("max_abs_error"),
                   "interp_checked": s["interpolation"].get("checked", 0), "wall_s": s["wall_s"]}
            for m in METRICS:
                for q in ("p50", "p90", "p99"):
                    row[f"{q}_{m}_ms"] = s[f"{q}_{m}_ms"]
            ctx.results.append(row)
            res.write(ctx.out / "points" / f"{sched}-{qps:g}")
            ctx.log(serving.report(res))
    ctx.write_csv("serving.csv", ctx.results)
    _side_by_side(ctx)
    _figure(ctx)
    return {"results": ctx.results, "failures": ctx.failures}


def _side_by_side(ctx):
    rows = ctx.results
    if not rows:
        return
    top = max(r["qps"] for r in rows)
    at = {r["scheduler"]: r for r in rows if r["qps"] == top}
    if "vllm" in at and "static" in at:
        v, s = at["vllm"], at["static"]
        if not (s["output_throughput"] > 0 and v["p99_ttft_ms"] > 0):  # every request rejected: no ratio
            ctx.log(f"at {top:g} req/s: vllm completed {v['completed']}, static {s['completed']} of "
                    f"{v['requests']} requests; no ratio of throughputs")
            return
        ctx.log(f"at {top:g} req/s, {v['requests']} requests: vllm {v['output_throughput']:.1f} tokens/s, p99 TTFT "
                f"{v['p99_ttft_ms']:.1f} ms, mean batch {v['mean_batch']:.1f}; static {s['output_throughput']:.1f} "
                f"tokens/s, p99 TTFT {s['p99_ttft_ms']:.1f} ms, mean batch {s['mean_batch']:.1f}; throughput "
                f"vllm/static {v['output_throughput'] / s['output_throughput']:.2f}x, p99 TTFT static/vllm "
                f"{s['p99_ttft_ms'] / v['p99_ttft_ms']:.1f}x")


def _figure(ctx):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for sched in sorted({r["scheduler"] for r in ctx.results}):
        rows = sorted((r for r in ctx.results if r["scheduler"] == sched), key=lambda r: r["qps"])
        x = [r["request_throughput"] for r in rows]
        axes[0].plot(x, [r["p99_ttft_ms"] for r in rows], marker="o", label=sched)
        axes[1].plot(x, [r["p99_tpot_ms"] for r in rows], marker="o", label=sched)
    for ax, what in zip(axes, ("p99 TTFT (ms)", "p99 TPOT (ms)")):
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel(what)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{ctx.params['model']}: latency against throughput")
    fig.tight_layout()
    ctx.save_figure(fig, "latency_throughput.png")

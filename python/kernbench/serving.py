"""Serving under load: requests arrive, queue, are batched into iterations over a paged KV cache, and leave.

    from kernbench import serving
    res = serving.run("llama3-8b", config="machines/h100-8x-nvswitch.yaml", qps=5, requests=1000,
                      scheduler="vllm", slo="ttft=200ms,tpot=50ms", seed=1)
    res.summary()["p99_ttft_ms"], res.goodput, res.write("out/")

The request loop is a discrete-event simulation on the C++ core (``src/workloads/serving``): arrivals,
the scheduler's iterations (``vllm``, ``sarathi``, ``orca``, ``static``), the KV cache's blocks and
preemptions. Each iteration's time is the hardware model's: the iteration's graph (its prefill chunks' and
decodes' tokens through every layer, each layer's attention one op for the prefill queries and one for the
decoding sequences) lowered on the machine and plan and simulated (``estimate.simulate``). Shapes repeat,
so the core memoises the time at the corners of a lattice over (prefill tokens, keys per prefill query,
decoding sequences, keys per decoding sequence) and interpolates inside a cell; ``check`` iterations of the
run, off the lattice, are simulated directly afterwards and the interpolation's error is reported
(``interpolation``). docs/serving.md says what each policy follows and what is not modelled.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernbench import _core
from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.targets import is_k200

__all__ = ["Dist", "Trace", "make_trace", "read_trace", "parse_slo", "kv_capacity", "IterationPricer", "run",
           "report", "ServingResult", "ServingError", "SHAREGPT", "SCHEDULERS"]

from kernbench.serving_args import MAX_ITERATION_S, SCHEDULERS, check_run_args, check_warmup  # noqa: E402
from kernbench.serving_load import SHAREGPT, Dist, ServingError, Trace, make_trace, parse_slo, read_trace  # noqa: E402

# ---- the machine: KV capacity and iteration prices --------------------------------------------------------
def _budget(system, gpu: str) -> tuple[int, float]:
    if is_k200(system):  # one die's HBM (k200.compute.hbm_capacity)
        return int(_core.k200_info(system._core)["hbm_capacity"]), 1.0
    if system.target == "gpu":
        sp = _core.gpu_spec(system._core, gpu)
        return int(sp["memory_capacity"]), float(sp["memory_utilization"])
    return int(_core.HbmAllocator(system._core).capacity), 1.0


def kv_capacity(spec, system, *, tp: int = 1, pp: int = 1, block_size: int = 16, max_batched_tokens: int = 2048,
                dtype: str | None = None) -> dict[str, Any]:
    """Blocks of ``block_size`` tokens the cache holds per instance: what each device's memory budget (the GPU's
    capacity x gpu.memory_utilization; a PE's HBM slice on other machines) leaves after the weights and one
    iteration's activations (``max_batched_tokens`` tokens: what the framework's profiling pass reserves),
    over the KV bytes a token needs on that device (its KV heads / tp, its stage's layers)."""
    from kernbench.workloads import ParallelPlan
    from kernbench.workloads.memory import inference_footprint

    check_run_args({"tp": tp, "pp": pp, "block_size": block_size, "max_tokens": max_batched_tokens, "dtype": dtype},
                   "kv_capacity", lambda n: "max_batched_tokens" if n == "max_tokens" else n)
    d = dtype or spec.dtype
    if is_k200(system):
        if tp != 1 or pp != 1:
            raise ServingError("on the K200 host an instance is one die (tp 1, pp 1): its lowering runs one stream")
        group = ("card0.die0",)
    else:
        group = ParallelPlan(tp=tp, pp=pp).place(system).group(0, 0)
    capacity, util = _budget(system, group[0])
    need = inference_footprint(spec, tp=tp, pp=pp, batch=1, prompt=max_batched_tokens, tokens=0, dtype=d)
    budget = int(capacity * util)
    layers = -(-spec.layers // pp)
    per_token = spec.kv_bytes_per_token(d, tp=tp, layers=layers)
    left = budget - need.weights - need.activations
    blocks = left // (per_token * block_size) if left > 0 else 0
    info = {"capacity_bytes": capacity, "budget_bytes": budget, "weights_bytes": need.weights,
            "activation_bytes": need.activations, "kv_bytes_per_token": per_token, "block_size": block_size,
            "block_bytes": per_token * block_size, "blocks": int(blocks), "device": group[0]}
    if blocks < 1:
        gib = 1 << 30
        short = need.weights + need.activations + per_token * block_size - budget
        raise ServingError(f"{spec.name} at tp {tp} pp {pp} leaves no KV cache on {group[0]}: weights "
                           f"{need.weights / gib:.2f} GiB + activations {need.activations / gib:.2f} GiB of a "
                           f"{budget / gib:.2f} GiB budget; {short / gib:.2f} GiB short of one block (raise tp or "
                           "pp, or lower max_batched_tokens)")
    return info


class IterationPricer:
    """The hardware model's time (ps) of one iteration of a shape: the model's layers over the iteration's
    tokens, each layer's attention one causal op for the prefill queries over the context that gives them
    their mean keys per query (exact for one chunk; several fresh prompts become a batch of equal causal ones
    with about the same query-key pairs: one op either way, so the lattice's corners share a structure) and one for the decoding sequences (each its mean cache), the LM head
    on each sequence's last token; lowered on the plan and simulated (one layer, reused), plus the serving
    framework's host time per step on a GPU (gpu.framework_step). Decode-only iterations replay CUDA graphs,
    others launch from the host, as vLLM does."""

    def __init__(self, spec, system, *, tp: int = 1, pp: int = 1, dtype: str | None = None):
        from kernbench.workloads import ParallelPlan

        check_run_args({"tp": tp, "pp": pp, "dtype": dtype}, "IterationPricer")
        self.spec, self.system, self.dtype = spec, system, dtype or spec.dtype
        self.plan = ParallelPlan(tp=tp, pp=pp)
        self.k200 = is_k200(system)
        self.device = None if self.k200 else self.plan.place(system).group(0, 0)[0]  # the plan must fit
        self.step_ps = 0.0
        if system.target == "gpu":
            self.step_ps = float(_core.gpu_spec(system._core, self.device)["framework_step_ps"])
        self.calls = 0

    def breaks(self, max_keys: int) -> list[list[float]]:
        """Where the machine's iteration time steps, per lattice axis: on a GPU, decode attention's split-KV
        count changes at multiples of its chunk (while splits fill the SMs), so the decode-keys axis gets a
        corner on each side of each; on the K200, a GEMM's rows fill micro-tiles of ``core_tile_m``, so the
        token axes get one after each multiple (up to 4096 tokens)."""
        if self.k200:  # a GEMM's rows go in micro-tiles: time steps after each multiple of the tile
            tile = int(_core.k200_info(self.system._core).get("core_tile_m", 16))
            steps = [float(tile * k + 1) for k in range(1, 4096 // tile)]
            return [steps, [], steps, []]
        if self.system.target != "gpu":
            return []
        sp = _core.gpu_spec(self.system._core, self.device)
        chunk = int(sp["split_kv_chunk"])
        kv_heads = 1 if self.spec.attention == "mla" else self.spec.kv_heads  # MLA decodes over one latent head
        most = -(-int(sp["sms"]) // max(1, kv_heads // self.plan.tp)) + 1
        return [[], [], [], [float(chunk * k) for k in range(1, most + 1) if chunk * k <= max_keys]]

    def graph(self, shape: dict):
        from kernbench.workloads.handbuilt import decoder_graph

        P, D = int(shape["prefill_tokens"]), int(shape["decode_seqs"])
        parts = []
        if P:
            keys = float(shape["prefill_keys"])
            if keys >= (P + 1) / 2:  # one causal chunk over its context: keys per query = context + (P + 1) / 2
                parts.append((1, P, max(P, round(keys + (P - 1) / 2)), True))
            else:  # several fresh prompts: a batch of equal causal ones, about the same query-key pairs
                q = min(P, max(1, round(2 * keys - 1)))
                parts.append((max(1, round(P / q)), q, q, True))
        if D:
            parts.append((D, 1, max(1, math.ceil(shape["decode_keys"] - 1e-9)), False))
        return decoder_graph(1, P + D, None, dims=self.spec.dims, dtype=self.dtype, attention=parts,
                             head_tokens=D + (1 if P else 0), name=self.spec.name)

    def __call__(self, shape: dict) -> float:
        from kernbench.workloads import estimate

        self.calls += 1
        if self.k200:  # the platform's lowering: one stream of its launches on die 0 (fp16: its half precision)
            from kernbench import k200

            prec = "fp32" if self.dtype == "fp32" else "fp16"
            t = k200.run_ops(self.system, self.graph(shape).ops, precision=prec)["latency_ms"] * 1e9
        else:
            launch = "graph" if int(shape["prefill_tokens"]) == 0 else "host"
            t = float(estimate.simulate(self.graph(shape), self.system, self.plan, launch=launch).time_ps) + self.step_ps
        if not (math.isfinite(t) and 0 <= t <= MAX_ITERATION_S * 1e12):  # else the core's int64 clock wraps
            raise ServingError(f"an iteration of {int(shape['prefill_tokens'])} prefill tokens and "
                               f"{int(shape['decode_seqs'])} decoding sequences takes {t / 1e12:.4g} s on this machine, "
                               f"past {MAX_ITERATION_S:g} s: check the machine's clocks and rates (e.g. pe.clock)")
        return t


def _swap_cost(system, device: str):
    """ps to move `bytes` between the device's memory and the host (a cpu node), simulated; None: no host."""
    d = system._core.nodes()
    hosts = [n for n, k in zip(d["name"], d["kind"]) if k in ("cpu", "host")]
    if not hosts:
        return None
    mem = system.memory_of(device) or device
    memo: dict[int, float] = {}

    def cost(nbytes: int) -> float:
        if nbytes not in memo:
            prog = system.program("kv swap")
            prog.dma(device, mem, hosts[0], int(nbytes))
            memo[nbytes] = prog.run().makespan_ns * 1e3
        return memo[nbytes]

    return cost


# ---- results -----------------------------------------------------------------------------------------------
def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if len(a) else float("nan")


@dataclass
class ServingResult:
    """One serving run: per request (arrays, ps), per iteration, and the figures of vLLM's benchmark_serving."""

    model: str
    scheduler: str
    config: str
    trace: Trace
    requests: dict[str, Any]
    iterations: dict[str, np.ndarray]
    kv: dict[str, Any]
    counters: dict[str, int]
    warmup: int
    slo: dict[str, float]
    interpolation: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    # per request, ms (nan where it does not apply)
    def _ms(self, key: str) -> np.ndarray:
        v = self.requests[key].astype(float)
        v[v < 0] = np.nan
        return v / 1e9

    @property
    def served(self) -> np.ndarray:
        return np.array([not r for r in self.requests["rejected"]])

    def per_request(self) -> dict[str, np.ndarray]:
        """Columns: arrival, queue delay, TTFT, TPOT, E2E (ms), tokens, preemptions, rejected reason."""
        arr = self._ms("arrival_ps")
        ttft = self._ms("first_token_ps") - arr
        e2e = self._ms("finish_ps") - arr
        out = self.requests["output"]
        tpot = np.where(out > 1, (self._ms("finish_ps") - self._ms("first_token_ps")) / np.maximum(out - 1, 1), np.nan)
        return {"arrival_ms": arr, "queue_ms": self._ms("scheduled_ps") - arr, "ttft_ms": ttft, "tpot_ms": tpot,
                "e2e_ms": e2e, "prompt": self.requests["prompt"], "output": out,
                "generated": self.requests["generated"], "preemptions": self.requests["preemptions"],
                "rejected": np.array(self.requests["rejected"], dtype=object)}

    def _window(self) -> np.ndarray:
        m = np.zeros(len(self.trace), dtype=bool)
        m[self.warmup:] = True
        return m & self.served

    def summary(self) -> dict[str, Any]:
        pr = self.per_request()
        m = self._window()
        start = float(np.min(pr["arrival_ms"][m])) if m.any() else 0.0
        end = float(np.nanmax(pr["e2e_ms"][m] + pr["arrival_ms"][m])) if m.any() else 0.0
        dur_s = max(end - start, 1e-12) / 1e3
        done = int(m.sum())
        out_tok = int(pr["generated"][m].sum())
        in_tok = int(pr["prompt"][m].sum())
        s: dict[str, Any] = {
            "model": self.model, "scheduler": self.scheduler, "config": self.config, "requests": len(self.trace),
            "warmup_requests": self.warmup, "completed": done, "rejected": int((~self.served).sum()),
            "duration": dur_s, "total_input_tokens": in_tok, "total_output_tokens": out_tok,
            "request_throughput": done / dur_s, "output_throughput": out_tok / dur_s,
            "total_token_throughput": (in_tok + out_tok) / dur_s}
        for key in ("ttft", "tpot", "e2e", "queue"):
            v = pr[f"{key}_ms"][m]
            v = v[~np.isnan(v)]
            name = "e2el" if key == "e2e" else key
            s[f"mean_{name}_ms"] = float(v.mean()) if len(v) else float("nan")
            s[f"median_{name}_ms"] = _pct(v, 50)
            s[f"std_{name}_ms"] = float(v.std()) if len(v) else float("nan")
            for q in (90, 99):
                s[f"p{q}_{name}_ms"] = _pct(v, q)
            s[f"p50_{name}_ms"] = s[f"median_{name}_ms"]
        good = m.copy()
        if "ttft_ms" in self.slo:
            good &= pr["ttft_ms"] <= self.slo["ttft_ms"]
        if "tpot_ms" in self.slo:
            good &= ~(pr["tpot_ms"] > self.slo["tpot_ms"])  # a one-token output has no TPOT: it meets it
        if "e2e_ms" in self.slo:
            good &= pr["e2e_ms"] <= self.slo["e2e_ms"]
        s["slo"] = dict(self.slo)
        s["request_goodput"] = int(good.sum()) / dur_s if self.slo else None
        s["preemptions"] = int(self.counters["preemptions_total"])
        it = self.iterations
        n_it = len(it["start_ps"])
        s["iterations"] = n_it
        s["mean_batch"] = float((it["decode_seqs"] + (it["prefill_tokens"] > 0)).mean()) if n_it else 0.0
        s["kv_blocks"] = int(self.kv["blocks"])
        s["peak_kv_utilization"] = float(it["kv_used"].max() / self.kv["blocks"]) if n_it else 0.0
        c = self.counters
        s["cost_cache"] = {"lookups": c["cost_lookups"], "corner_reads": c["cost_reads"],
                           "simulated": c["cost_simulated"],
                           "hit_rate": 1 - c["cost_simulated"] / c["cost_reads"] if c["cost_reads"] else 0.0}
        s["interpolation"] = dict(self.interpolation)
        s["wall_s"] = self.wall_s
        return s

    @property
    def goodput(self) -> float | None:
        return self.summary()["request_goodput"]

    def timeseries(self) -> dict[str, np.ndarray]:
        it = self.iterations
        return {"time_s": it["end_ps"] / 1e12, "running": it["running"], "waiting": it["waiting"],
                "kv_utilization": it["kv_used"] / self.kv["blocks"],
                "batch": it["decode_seqs"] + (it["prefill_tokens"] > 0), "prefill_tokens": it["prefill_tokens"]}

    def write(self, out: str | Path, plots: bool = True) -> list[str]:
        """requests.csv, timeseries.csv, summary.json (benchmark_serving's keys), and the plots; each file
        atomically, the folder held locked meanwhile (``atomic_output.lock_output_dir``: another kernbench run
        writing into it is refused, as ``kernbench run`` refuses it)."""
        from kernbench.atomic_output import check_output_dir, check_output_file, lock_output_dir

        out = Path(out)
        check_output_dir(out, "out")
        for name in ("requests.csv", "timeseries.csv", "summary.json") + (("latency_cdf.png", "kv_over_time.png")
                                                                          if plots else ()):
            check_output_file(out / name, "out")
        with lock_output_dir(out, "out"):
            return self._write(out, plots)

    def _write(self, out: Path, plots: bool) -> list[str]:
        from kernbench.atomic_output import write_csv, write_json

        files = []
        pr = self.per_request()

        def cell(v):  # a number as Python prints it; a missing value (NaN) empty
            v = v.item() if hasattr(v, "item") else v
            return "" if isinstance(v, float) and math.isnan(v) else v

        write_csv(out / "requests.csv", ({"id": i, **{c: cell(pr[c][i]) for c in pr}} for i in range(len(self.trace))))
        ts = self.timeseries()
        write_csv(out / "timeseries.csv", ({c: float(ts[c][i]) for c in ts} for i in range(len(ts["time_s"]))))
        summ = self.summary()
        write_json(out / "summary.json", _finite(summ))  # NaN and inf as null
        files += ["requests.csv", "timeseries.csv", "summary.json"]
        if plots:
            files += _plots(self, out)
        return files


def report(res: ServingResult) -> str:
    """The figures a user asks first, as text."""
    s = res.summary()
    inst = res.params.get("instances", [("both", [])])
    roles = {r: sum(1 for x, _ in inst if x == r) for r in ("both", "prefill", "decode")}
    shape = (f"{roles['prefill']} prefill + {roles['decode']} decode instances" if roles["prefill"] else
             f"{roles['both']} instance{'s' if roles['both'] > 1 else ''}" +
             (f" ({res.params['routing']})" if roles["both"] > 1 else ""))
    lines = [f"{s['model']} on {s['config'] or 'the default machine'} ({shape} of tp {res.params['tp']}, pp "
             f"{res.params['pp']}), scheduler {s['scheduler']}: {s['requests']} requests ({res.trace.source}), "
             f"{s['warmup_requests']} warm-up left out, {s['completed']} completed, {s['rejected']} rejected",
             f"  KV cache {s['kv_blocks']} blocks of {res.kv['block_size']} tokens ({res.kv['block_bytes'] / 2**20:.2f} "
             f"MiB each), peak use {100 * s['peak_kv_utilization']:.1f} %, preemptions {s['preemptions']}",
             "  metric        p50        p90        p99       mean  (ms)"]
    for key, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2el", "E2E"), ("queue", "queue")):
        lines.append(f"  {name:<8} {s[f'p50_{key}_ms']:>10.2f} {s[f'p90_{key}_ms']:>10.2f} {s[f'p99_{key}_ms']:>10.2f} "
                     f"{s[f'mean_{key}_ms']:>10.2f}")
    lines.append(f"  throughput {s['request_throughput']:.3f} req/s, {s['output_throughput']:.1f} output tokens/s, "
                 f"mean batch {s['mean_batch']:.1f} over {s['iterations']} iterations")
    if s["request_goodput"] is not None:
        bounds = ", ".join(f"{k[:-3]} <= {v:g} ms" for k, v in s["slo"].items())
        lines.append(f"  goodput {s['request_goodput']:.3f} req/s meeting {bounds}")
    c, e = s["cost_cache"], s["interpolation"]
    lines.append(f"  iteration costs: {c['simulated']} lattice corners simulated for {c['lookups']} iterations "
                 f"(corner hit rate {100 * c['hit_rate']:.1f} %)" +
                 (f"; interpolation vs direct simulation at {e['checked']} iterations: max |error| "
                  f"{100 * e['max_abs_error']:.2f} %, mean {100 * e['mean_abs_error']:.3f} %" if e.get("checked") else ""))
    if res.params.get("prefix_caching"):
        lines.append(f"  prefix cache: {c_hit(res):.1f} % of prompt tokens reused")
    if "fabric_link_bytes" in res.params:
        kv = res.requests["kv_bytes"]
        dt = (res.requests["kv_end_ps"] - res.requests["kv_start_ps"])[kv > 0] / 1e6
        lines.append(f"  KV moved prefill -> decode: {kv.sum() / 2**30:.2f} GiB, per request p50 "
                     f"{np.percentile(dt, 50) if len(dt) else 0:.1f} us, p99 {np.percentile(dt, 99) if len(dt) else 0:.1f} us")
    lines.append(f"  wall {s['wall_s']:.1f} s")
    return "\n".join(lines)


def c_hit(res: ServingResult) -> float:
    return 100 * res.counters["prefix_hit_tokens"] / max(1, res.counters["prompt_tokens"])


def _finite(v):
    """NaN and inf become null (the JSON rule of kernbench's outputs)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _plots(res: ServingResult, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernbench.atomic_output import save_figure

    pr = res.per_request()
    m = res._window()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, key in zip(axes, ("ttft_ms", "tpot_ms", "e2e_ms")):
        v = np.sort(pr[key][m][~np.isnan(pr[key][m])])
        if len(v):
            ax.plot(v, np.arange(1, len(v) + 1) / len(v))
        if key[:-3] + "_ms" in res.slo:
            ax.axvline(res.slo[key[:-3] + "_ms"], color="red", ls="--", lw=1, label="SLO")
            ax.legend()
        ax.set_xlabel(key.replace("_ms", " (ms)").upper().replace("(MS)", "(ms)"))
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{res.model}, {res.scheduler}: latency CDFs ({int(m.sum())} requests after {res.warmup} warm-up)")
    fig.tight_layout()
    save_figure(fig, out / "latency_cdf.png")
    plt.close(fig)
    ts = res.timeseries()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot(ts["time_s"], ts["kv_utilization"], label="KV cache used")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("fraction of blocks")
    ax2 = ax.twinx()
    ax2.plot(ts["time_s"], ts["running"], color="C1", alpha=0.6, label="running")
    ax2.plot(ts["time_s"], ts["waiting"], color="C2", alpha=0.6, label="waiting")
    ax2.set_ylabel("requests")
    fig.legend(loc="upper left")
    ax.set_title(f"{res.model}, {res.scheduler}: KV cache and queues over time")
    fig.tight_layout()
    save_figure(fig, out / "kv_over_time.png")
    plt.close(fig)
    return ["latency_cdf.png", "kv_over_time.png"]


# ---- the run -----------------------------------------------------------------------------------------------
DEFAULT_BUDGET = {"vllm": 2048, "sarathi": 512, "orca": 8192, "static": 8192}


def run(model: str, system=None, *, config: str | None = None, tp: int = 1, pp: int = 1, qps: float = 1.0,
        requests: int = 100, prompt: str | int = "sharegpt-prompt", output: str | int = "sharegpt-output",
        arrival: str = "poisson", cv: float = 1.0, trace: str | Path | Trace | None = None,
        scheduler: str = "vllm", max_num_seqs: int = 256, max_batched_tokens: int | None = None,
        block_size: int = 16, kv_blocks: int | None = None, preemption: str = "recompute",
        slo: str | dict | None = None, warmup: float | int = 0.1, check: int = 20, seed: int = 1,
        dtype: str | None = None, replicas: int = 1, routing: str = "round_robin",
        disaggregate: tuple[int, int] | None = None, prefix_caching: bool = False, prefix_groups: int = 0,
        prefix_tokens: int = 0) -> ServingResult:
    """Serve ``requests`` requests of ``model`` (a catalog name) on ``system`` (or ``config``; default the
    default machine) at ``qps`` (or a ``trace``), through one instance of tp x pp devices.

    ``scheduler``: vllm | sarathi | orca | static; ``max_batched_tokens`` default: vllm 2048 (its server's),
    sarathi 512 (its chunk), orca and static 8192. ``kv_blocks``: override the computed capacity (for
    experiments). ``warmup``: requests excluded from the statistics (a fraction of them, or a count).
    ``check``: iterations simulated directly afterwards to measure the interpolation's error (0: none).
    ``replicas`` instances (each tp x pp devices, the machine's PEs in order) behind a router (``round_robin``
    or ``least_loaded``: fewest requests in it); ``disaggregate=(P, D)``: P prefill and D decode instances
    instead, each request's KV cache moving from its prefill instance to a decode instance as fabric
    transfers between their devices (shard to shard), simulated on a twin of the machine with their
    contention. ``prefix_caching``: a cached shared prefix's full blocks are reused (the generated trace's
    ``prefix_groups`` prefixes of ``prefix_tokens`` tokens, or a trace's ``prefix_id``/``prefix_tokens``)."""
    import time

    from kernbench.system import System
    from kernbench.workloads import get_model

    w0 = time.perf_counter()
    args = check_run_args(dict(model=model, tp=tp, pp=pp, qps=qps, requests=requests, prompt=prompt, output=output,
                               arrival=arrival, cv=cv, trace=trace, scheduler=scheduler, max_num_seqs=max_num_seqs,
                               max_batched_tokens=max_batched_tokens, block_size=block_size, kv_blocks=kv_blocks,
                               preemption=preemption, slo=slo, warmup=warmup, check=check, seed=seed, dtype=dtype,
                               replicas=replicas, routing=routing, disaggregate=disaggregate,
                               prefix_caching=prefix_caching, prefix_groups=prefix_groups,
                               prefix_tokens=prefix_tokens))
    disaggregate = args["disaggregate"]
    spec = get_model(model)
    if system is None:
        system = System.load(config)
    slo_d = parse_slo(slo)
    tr = trace if isinstance(trace, Trace) else read_trace(trace) if trace is not None else \
        make_trace(requests, qps, arrival=arrival, cv=cv, prompt=prompt, output=output, seed=seed,
                   prefix_groups=prefix_groups, prefix_tokens=prefix_tokens)
    if isinstance(trace, Trace):
        tr.check()  # its columns may have changed since it was made
    check_warmup(warmup, "serving.run", "warmup", len(tr))
    budget = int(max_batched_tokens if max_batched_tokens is not None else DEFAULT_BUDGET[scheduler])
    cap = kv_capacity(spec, system, tp=tp, pp=pp, block_size=block_size, max_batched_tokens=budget, dtype=dtype)
    blocks = int(kv_blocks) if kv_blocks is not None else cap["blocks"]
    pricer = IterationPricer(spec, system, tp=tp, pp=pp, dtype=dtype)
    roles, devices, fabric = _instances(system, tp, pp, replicas, disaggregate, routing, scheduler)
    swap = _swap_cost(system, cap["device"]) if preemption == "swap" else None
    if preemption == "swap" and swap is None:
        raise ServingError("preemption=swap: the machine has no host (a cpu or host node) to swap the KV cache to; "
                           "use preemption=recompute")
    longest = _check_positions(spec, tr)
    # The most prefill tokens one iteration can hold: the budget, a whole prompt (orca), a batch of them (static).
    max_tokens = {"static": int(tr.prompt.max()) * max_num_seqs,
                  "orca": max(budget, int(tr.prompt.max()))}.get(scheduler, budget)
    raw = _core.serving_simulate(
        (tr.arrival_s * 1e12).round().astype(np.int64), tr.prompt, tr.output, scheduler, int(max_num_seqs), budget,
        int(block_size), blocks, preemption, int(cap["block_bytes"]), pricer, swap, int(max_tokens), longest + 1,
        pricer.breaks(longest + 1), roles, devices, routing, int(cap["kv_bytes_per_token"]),
        fabric._core if fabric is not None else None, tr.prefix_group, tr.prefix_tokens, bool(prefix_caching))
    iters = {k: np.asarray(v) for k, v in raw.pop("iterations").items()}
    n_warm = int(warmup) if isinstance(warmup, numbers.Integral) else int(len(tr) * float(warmup))
    res = ServingResult(spec.name, scheduler, str(config or getattr(system, "source", "")), tr,
                        {k: raw[k] for k in ("arrival_ps", "scheduled_ps", "first_token_ps", "finish_ps", "prompt",
                                             "output", "generated", "preemptions", "rejected", "instance", "decoder",
                                             "kv_start_ps", "kv_end_ps", "kv_bytes", "cached_tokens")},
                        iters, {**cap, "blocks": blocks},
                        {k: int(raw[k]) for k in ("blocks_allocated", "blocks_freed", "blocks_held",
                                                  "preemptions_total", "swaps", "cost_lookups", "cost_simulated",
                                                  "cost_reads", "events", "prefix_hit_tokens", "prompt_tokens")},
                        min(n_warm, len(tr) - 1), slo_d,
                        params={"tp": tp, "pp": pp, "max_num_seqs": max_num_seqs, "max_batched_tokens": budget,
                                "block_size": block_size, "preemption": preemption, "seed": seed,
                                "instances": list(zip(roles, devices)) or [("both", [])], "routing": routing,
                                "prefix_caching": bool(prefix_caching)})
    if fabric is not None:
        res.params["fabric_link_bytes"] = _link_bytes(fabric)
    res.interpolation = _check(res, pricer, raw["lattice"], check, seed)
    res.wall_s = time.perf_counter() - w0
    return res


def _check_positions(spec, tr: Trace) -> int:
    """The longest request's tokens (prompt + output); a request past the model's positions (``max_positions``,
    what it was trained for and what vLLM's max_model_len defaults to) is refused, naming both numbers."""
    total = tr.prompt + tr.output
    worst = int(total.argmax())
    longest = int(total[worst])
    if longest > spec.max_positions:
        raise ServingError(f"request {worst} of {tr.source}: prompt {int(tr.prompt[worst])} + output "
                           f"{int(tr.output[worst])} = {longest} tokens, past {spec.name}'s {spec.max_positions} "
                           "positions (max_positions); shorten the prompts or outputs")
    return longest


def _instances(system, tp: int, pp: int, replicas: int, disaggregate, routing: str, scheduler: str):
    """Each instance's role and devices (the machine's PEs in order, tp x pp each), and the twin machine whose
    fabric carries the KV of a disaggregated run (None otherwise)."""
    if routing not in ("round_robin", "least_loaded"):
        raise ServingError(f"unknown router {routing!r} (round_robin, least_loaded)")
    if disaggregate is not None:
        n_p, n_d = (int(x) for x in disaggregate)
        if n_p < 1 or n_d < 1:
            raise ServingError(f"disaggregate=(prefill, decode) needs at least one of each, got {disaggregate!r}")
        if pp != 1:
            raise ServingError("disaggregated prefill and decode are modelled at pp 1 (the KV moves shard to shard)")
        if scheduler == "static":
            raise ServingError("disaggregated prefill and decode need a paged scheduler (vllm, sarathi, orca)")
        count = n_p + n_d
    else:
        if not isinstance(replicas, int) or replicas < 1:
            raise ServingError(f"replicas must be a positive integer, got {replicas!r}")
        if replicas == 1:
            return [], [], None
        count = replicas
    pes = system.pes()
    per = tp * pp
    if count * per > len(pes):  # before any list of that many instances is made
        raise ServingError(f"{count} instances of tp {tp} x pp {pp} need {count * per} devices; the machine "
                           f"has {len(pes)}")
    roles = ["prefill"] * n_p + ["decode"] * n_d if disaggregate is not None else ["both"] * replicas
    devices = [pes[k * per:(k + 1) * per][:tp] for k in range(len(roles))]
    return roles, devices, system.twin() if disaggregate is not None else None


def _link_bytes(system) -> dict[str, int]:
    """Payload bytes per link class the fabric carried (a disaggregated run's KV transfers)."""
    ch = system._core.channels()
    out: dict[str, int] = {}
    for cls, b in zip(ch["class"], ch["bytes"]):
        out[cls] = out.get(cls, 0) + int(b)
    return out


def _check(res: ServingResult, pricer: IterationPricer, lattice, k: int, seed: int) -> dict[str, Any]:
    """Simulate ``k`` of the run's iterations directly (a seeded choice among those off the lattice's corners)
    and compare with the interpolated times the run used."""
    it = res.iterations
    if k <= 0 or not len(it["start_ps"]):
        return {"checked": 0}
    on = [set(a) for a in lattice]
    cand = [i for i in range(len(it["start_ps"]))
            if not (it["prefill_tokens"][i] in on[0] and it["decode_seqs"][i] in on[2]
                    and (it["prefill_tokens"][i] == 0 or it["prefill_keys"][i] in on[1])
                    and (it["decode_seqs"][i] == 0 or it["decode_keys"][i] in on[3]))]
    if not cand:
        return {"checked": 0, "note": "every iteration fell on a lattice corner (simulated exactly)"}
    rng = np.random.Generator(np.random.PCG64(seed + 7919))
    pick = sorted(rng.choice(len(cand), size=min(k, len(cand)), replace=False))
    errs, shapes = [], []
    for j in pick:
        i = cand[j]
        shape = {"prefill_tokens": int(it["prefill_tokens"][i]), "prefill_keys": float(it["prefill_keys"][i]),
                 "decode_seqs": int(it["decode_seqs"][i]), "decode_keys": float(it["decode_keys"][i])}
        direct = pricer(shape)
        used = float(it["end_ps"][i] - it["start_ps"][i] - it["swap_ps"][i])
        errs.append(used / direct - 1)
        shapes.append(shape)
    e = np.abs(np.array(errs))
    w = int(e.argmax())
    return {"checked": len(errs), "max_abs_error": float(e.max()), "mean_abs_error": float(e.mean()),
            "worst": {**shapes[w], "error": float(errs[w])}, "errors": [float(x) for x in errs]}

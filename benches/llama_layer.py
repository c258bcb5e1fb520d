"""llama-layer: one LLaMA-3.1-70B decoder layer as one Program, over TP degree and machine size.

The layer (src/workloads/llama.hpp: Megatron sharding, GQA case per KV group,
chunked schedule overlapping the all-reduces with compute) runs
  prefill  T = S_kv in ``prefill_tokens`` (the prompt attends itself);
  decode   a batch of ``decode_batch`` sequences, one new token each, against
           S_kv in ``decode_s_kv`` cached tokens per sequence;
for every TP degree in ``tp`` on every machine in ``machines``:
  sip      one SIP of the default config (system.sips 1 x 1, 128 PEs);
  full     the whole default machine (2 x 2 SIPs, 512 PEs).
On an explicit-graph --config (a GPU box) ``sip`` is the whole machine too:
it shapes only a generated one, and the log says so once. A TP degree wider
than the machine's PEs (16 on an 8-GPU box) is skipped, with one log line.
With ``replicate`` the layer is copied data-parallel over every PE of the
machine (replicas = PEs / tp; throughput counts all copies); otherwise one
copy runs and the rest of the machine idles. A failing point lands in
``failures`` and never hides the others.

Each result row: latency, tokens/s (all replicas), achieved TFLOP/s, per
phase the active time (union of its ops' intervals), and -- from the other
parts of issue 11 -- ``critical_path`` (kernbench.critical_path.summarize)
and ``energy`` (kernbench.energy.summarize) when those modules are present.
Outputs: sweep.json, llama.csv, latency_vs_tp.png, tokens_per_s_vs_tp.png,
phases.png (stacked per-phase active time per point).
"""

from __future__ import annotations

import time

from kernbench import bench
from kernbench.overrides import Param

MACHINES = {"sip": {"system.sips.w": 1, "system.sips.h": 1}, "full": {}}


@bench(
    name="llama-layer",
    description="LLaMA-3.1-70B decoder layer (prefill / decode) as one Program: latency, tokens/s, phases vs TP",
    params={
        "prefill_tokens": [2048, 8192],
        "decode_batch": [8, 64],
        "decode_s_kv": [8192, 32768],
        "tp": Param([8, 16, 32, 64], check=lambda tp: None if 64 % tp == 0 else f"{tp} does not divide the 64 query heads",
                   allowed="1, 2, 4, 8, 16, 32 or 64: Megatron sharding gives every rank whole heads"),
        "machines": Param(["sip"], choices=list(MACHINES)),
        "replicate": False,
        "chunks": 0,
        "allreduce": "ring",
        "energy": True,
    },
    uses_config=True,
    smoke={"bench.prefill_tokens": [128], "bench.decode_batch": [4], "bench.decode_s_kv": [1024],
           "bench.tp": [8, 16], "bench.machines": ["sip"]},
    golden={"key": ["machine", "phase", "tokens", "s_kv", "tp"],
            "metrics": {"latency_us": "rel=1e-6", "flops_program": "rel=1e-9", "ipcq_bytes": "exact",
                        "dma_bytes": "exact", "gqa_case": "exact"}},
)
def llama_layer(ctx):
    from kernbench import llama

    t0 = time.perf_counter()
    p = ctx.params
    results, failures = ctx.results, ctx.failures

    def point(machine, phase, tokens, s_kv, tp):
        name = f"{machine} {phase} tokens={tokens} S_kv={s_kv} tp={tp}"
        w0 = time.perf_counter()
        try:
            if machine not in MACHINES:
                raise ValueError(f"unknown machine {machine!r} (known: {', '.join(MACHINES)})")
            # machine=sip shapes a generated machine; an explicit graph runs whole (logged once)
            system = ctx.load_system(MACHINES[machine], shaped_by=f"bench.machines={machine}")
            replicas = max(1, len(system.pes()) // tp) if p["replicate"] else 1
            r = llama.layer(system, phase, tokens, s_kv=s_kv, tp=tp, replicas=replicas, chunks=p["chunks"],
                            allreduce=p["allreduce"])
        except Exception as e:  # a failing point never sinks the others
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {name:<48} FAILED: {type(e).__name__}: {e}")
            return
        row = r.row()
        row["name"] = name
        row["machine"] = machine
        row["wall_s"] = round(time.perf_counter() - w0, 3)
        cp = ctx.critical_path(r.run, name)
        if cp is not None:
            row["critical_path"] = cp
        if p["energy"]:
            try:
                from kernbench import energy

                row["energy"] = energy.summarize(r.run)
            except ImportError:  # energy model not present in this tree
                pass
            except Exception as e:
                failures.append({"name": f"{name} energy", "error": f"{type(e).__name__}: {e}"})
        ctx.trace(r.run, name)
        results.append(row)
        ctx.log(f"  {name:<48} {row['latency_us']:10.1f} us  {row['tokens_per_s']:12.0f} tok/s  "
                f"{row['achieved_tflops']:7.1f} TFLOP/s  case {row['gqa_case']}  ({row['wall_s']:.1f} s)")

    for machine in p["machines"]:
        tps = list(p["tp"])
        if machine in MACHINES:  # a TP degree wider than the machine has no point to run: skipped, and logged
            pes = len(ctx.load_system(MACHINES[machine], shaped_by=f"bench.machines={machine}").pes())
            wide = [tp for tp in tps if tp > pes]
            if wide:
                ctx.log(f"  {machine}: tp {', '.join(map(str, wide))} skipped: the machine has {pes} PEs")
                tps = [tp for tp in tps if tp <= pes]
        for tp in tps:
            for t in p["prefill_tokens"]:
                point(machine, "prefill", t, 0, tp)
            for b in p["decode_batch"]:
                for s in p["decode_s_kv"]:
                    point(machine, "decode", b, s, tp)

    out = {"results": results, "failures": failures}
    if results:
        ctx.write_csv("llama.csv", [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in results])
        _figures(ctx, results)
    wall = time.perf_counter() - t0
    ctx.log(f"llama-layer: {len(results)} points, {len(failures)} failures in {wall:.1f} s")
    return out  # the bench's wall time is sweep.json's top-level wall_s (the runner writes it)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(rows):
    """(machine, phase, tokens, s_kv) -> rows sorted by tp."""
    out = {}
    for r in rows:
        out.setdefault((r["machine"], r["phase"], r["tokens"], r["s_kv"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["tp"]) for k, v in sorted(out.items())}


def _figures(ctx, rows):
    from kernbench.llama import PHASES

    plt = _plt()
    series = _series(rows)
    for key, ylabel, fname in (("latency_us", "layer latency (us)", "latency_vs_tp.png"),
                               ("tokens_per_s", "tokens / s (all replicas)", "tokens_per_s_vs_tp.png")):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, phase in zip(axes, ("prefill", "decode")):
            for (machine, ph, tokens, s_kv), pts in series.items():
                if ph != phase:
                    continue
                label = f"{machine} T={tokens}" if phase == "prefill" else f"{machine} B={tokens} S={s_kv}"
                ax.plot([r["tp"] for r in pts], [r[key] for r in pts], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("tensor-parallel degree")
            ax.set_ylabel(ylabel)
            ax.set_title(phase)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"LLaMA-3.1-70B layer: {ylabel}")
        ctx.save_figure(fig, fname)

    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rows) + 2), 5))
    bottom = [0.0] * len(rows)
    labels = [f"{r['machine']} {r['phase'][0]} {r['tokens']}/{r['s_kv']} tp{r['tp']}" for r in rows]
    for name in PHASES:
        vals = [r[f"active_us_{name}"] / r["latency_us"] if r["latency_us"] else 0.0 for r in rows]
        ax.bar(range(len(rows)), vals, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.axhline(1.0, color="k", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=70, fontsize=6, ha="right")
    ax.set_ylabel("phase active time / latency (sum > 1: phases overlap)")
    ax.set_title("LLaMA layer: per-phase active time")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    ctx.save_figure(fig, "phases.png")

"""model-step: a whole LLaMA-3-8B on the default machine -- inference (TTFT, TPOT, tokens/s) and a training step.

Any --config works: ``sips`` (the SIP count of a generated machine) is ignored
on an explicit-graph machine such as configs/machines/h100-8x-nvswitch.yaml,
with one line in the log saying so.

The model is the imported ``LlamaForCausalLM`` with LLaMA-3-8B's published
configuration (kernbench.workloads.import_model('llama3_8b'), traced on the
meta device; it needs the ``kernbench[torch]`` extra, and without it the run
fails naming that extra). ``source=hand`` takes instead the hand-built op
graph of kernbench.workloads.handbuilt, with the same dimensions and names:
the smoke size (and so the golden) uses it, so that it needs no torch;
tests/python/test_model_step_import.py checks the two agree. It is lowered
by kernbench.workloads.lower at the plan ``dp x tp x pp`` and estimated by
kernbench.workloads.estimate (docs/model-estimates.md):

  inference  prefill of ``batch`` prompts of ``prompt`` tokens, then
             ``decode_steps`` steps with the KV cache growing; one decoder
             layer simulated per KV length and reused for the others;
  training   one step of ``train_layers`` decoder layers (every op lowered:
             forward, backward = 2 x the forward GEMMs, the data-parallel
             exchange of ``sharding`` -- none, zero1, zero2, fsdp -- overlapping
             the backward, Adam; ``recompute`` none, selective or full), 1F1B over pp
             stages with ``microbatches``; its simulated bubble beside
             (pp - 1) / (M + pp - 1); ``train_head`` adds the embedding and the
             LM head to the hand-built graph (off in the smoke size; the
             imported model always has them); the peak memory per GPU
             (``memory_peak_gib``, kernbench.workloads.memory: a plan that
             does not fit is a failure naming its shortfall; an imported
             graph records no dimensions and is not estimated).

Rows: one per mode. Figures are deterministic (one seed).
"""

from __future__ import annotations

import time

from kernbench import bench
from kernbench.overrides import Param


def _builder(dims_name, layers, source):
    from kernbench.workloads import handbuilt

    dims = dict(handbuilt.LLAMA3_8B if dims_name == "llama3_8b" else handbuilt.LLAMA3_70B)
    if layers:
        dims["layers"] = int(layers)
    if source == "import":
        try:
            import torch  # noqa: F401  (the importer's extra: kernbench[torch])
        except ImportError:
            raise ImportError("source=import needs the kernbench[torch] extra (torch==2.13.0, "
                              "transformers==5.24.0); or run with --set bench.source=hand") from None
        from kernbench.workloads import import_model
        from kernbench.workloads.estimate import with_kv_len

        def build(b, s, kv):  # imported at s new tokens, its attention re-shaped to the cache length
            return with_kv_len(import_model(dims_name, batch=b, seq=s, layers=dims["layers"]), kv)
        return build, "import"
    return (lambda b, s, kv: handbuilt.llama_graph(b, s, kv, dims=dims, name=dims_name)), "hand"


def _fit_plan(ctx, system, dp: int, tp: int, pp: int, what: str) -> tuple[int, int, int]:
    """(dp, tp, pp), with tp halved until the plan fits the machine's PEs (an 8-GPU box runs the smoke size's
    16-PE training plan at tp 4); the log says so. A plan that cannot fit at tp 1 is left to fail."""
    n = len(system.pes())
    t = tp
    while dp * t * pp > n and t > 1 and t % 2 == 0:
        t //= 2
    if t != tp and dp * t * pp <= n:
        ctx.log(f"  {what}: dp x tp x pp = {dp * tp * pp} PEs, the machine has {n}: run at tp = {t}")
        return dp, t, pp
    return dp, tp, pp


@bench(
    name="model-step",
    description="Whole-model LLaMA-3-8B: inference TTFT/TPOT/tokens per s and a training step with its 1F1B bubble",
    params={
        "model": Param("llama3_8b", choices=["llama3_8b", "llama3_70b"]),
        "source": Param("import", choices=["import", "hand"]),
        "mode": Param(["inference", "training"], choices=["inference", "training"]),
        "dp": 1, "tp": 8, "pp": 1,
        "batch": 8, "prompt": 512, "decode_steps": 128, "kv_samples": 5, "layers": 0,
        "train_dp": 2, "train_tp": 8, "train_pp": 2, "microbatches": 4, "train_batch": 1, "train_seq": 256,
        "train_layers": 4, "train_head": True,
        "sharding": Param("none", choices=["none", "zero1", "zero2", "fsdp"]),
        "recompute": Param("none", choices=["none", "selective", "full"]),
        "sips": 1,
    },
    uses_config=True,
    smoke={"bench.source": "hand", "bench.batch": 1, "bench.prompt": 64, "bench.decode_steps": 4, "bench.kv_samples": 2, "bench.layers": 2,
           "bench.train_seq": 32, "bench.train_layers": 2, "bench.microbatches": 2, "bench.train_dp": 1,
           "bench.train_head": False},
    # CI (scripts/check_benches.py): the default's model, source (the imported model), plan, sharding and
    # recompute, every layer at inference, fewer decode steps, a 2-layer training step at sequence 64
    full_check={"bench.decode_steps": 16, "bench.kv_samples": 3, "bench.prompt": 128, "bench.train_layers": 2,
                "bench.train_seq": 64},
    golden={"key": ["mode"],
            # time_ms: the request (TTFT + decode) or the training step; gemm_flops: the prefill pass's or the
            # step's (forward + backward)
            "metrics": {"time_ms": "rel=1e-6", "gemm_flops": "rel=1e-9"}},
)
def model_step(ctx):
    from kernbench.workloads import estimate
    from kernbench.workloads.plan import ParallelPlan

    p = ctx.params
    t0 = time.perf_counter()
    results, failures = ctx.results, ctx.failures
    # `sips` shapes only a generated machine: on an explicit graph (a GPU box) it is left out, and the
    # log says so once
    machine = {"system.sips.w": int(p["sips"]), "system.sips.h": 1}
    sips = f"bench.sips={p['sips']}"
    if "inference" in p["mode"]:
        name = f"inference {p['model']} dp={p['dp']} tp={p['tp']} pp={p['pp']} b={p['batch']} prompt={p['prompt']}"
        try:
            build, source = _builder(p["model"], p["layers"], p["source"])
            system = ctx.load_system(machine, shaped_by=sips)
            dp, tp, pp = _fit_plan(ctx, system, p["dp"], p["tp"], p["pp"], "inference")
            plan = ParallelPlan(dp=dp, tp=tp, pp=pp)
            name = f"inference {p['model']} dp={dp} tp={tp} pp={pp} b={p['batch']} prompt={p['prompt']}"
            est = estimate.inference(build, system, plan, batch=p["batch"], prompt=p["prompt"],
                                     decode_steps=p["decode_steps"], kv_samples=p["kv_samples"] or None)
            row = {"name": name, "mode": "inference", "source": source, **est.row(),
                   "layers": est.prefill.layers, "time_ms": est.ttft_ms + est.decode_ms,
                   "gemm_flops": est.prefill.gemm_flops,
                   "prefill_by_kind_us": est.breakdown["prefill"]["by_kind"],
                   "decode_by_kind_us": est.breakdown["decode"]["by_kind"],
                   "decode_by_part_us": est.breakdown["decode"]["by_part"]}
            results.append(row)
            ctx.log(f"  {name}: TTFT {est.ttft_ms:.3f} ms, TPOT {est.tpot_ms:.3f} ms, "
                    f"{est.tokens_per_s:.0f} tok/s ({est.wall_s:.1f} s wall)")
        except Exception as e:  # a failing point never sinks the others
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {name} FAILED: {type(e).__name__}: {e}")
    if "training" in p["mode"]:
        name = (f"training {p['model']} dp={p['train_dp']} tp={p['train_tp']} pp={p['train_pp']} "
                f"M={p['microbatches']} layers={p['train_layers']}")
        try:
            system = ctx.load_system(machine, shaped_by=sips)
            dp, tp, pp = _fit_plan(ctx, system, p["train_dp"], p["train_tp"], p["train_pp"], "training")
            plan = ParallelPlan(dp=dp, tp=tp, pp=pp, microbatches=p["microbatches"], sharding=p["sharding"],
                                recompute=p["recompute"])
            name = (f"training {p['model']} dp={dp} tp={tp} pp={pp} M={p['microbatches']} "
                    f"layers={p['train_layers']} sharding={p['sharding']} recompute={p['recompute']}")
            from kernbench.workloads import handbuilt

            dims = dict(handbuilt.LLAMA3_8B if p["model"] == "llama3_8b" else handbuilt.LLAMA3_70B)
            # train_head: the embedding and the LM head + final norm too (their 128256-row tables dominate a
            # few-layer step; the smoke size leaves them out)
            if p["source"] == "import":  # the imported model always has its embedding and LM head
                build, _ = _builder(p["model"], p["train_layers"], "import")
                g = build(p["train_batch"], p["train_seq"], p["train_seq"])
            else:
                g = handbuilt.llama_graph(p["train_batch"], p["train_seq"], dims=dims, layers=p["train_layers"],
                                          embed=bool(p["train_head"]), head=bool(p["train_head"]))
            tr = estimate.training_step(g, system, plan)
            row = {"name": name, "mode": "training", "source": p["source"], **tr.row(), "counts": tr.counts,
                   "time_ms": tr.step_ms, "gemm_flops": tr.gemm_flops.get("forward", 0.0) +
                   tr.gemm_flops.get("backward", 0.0)}
            results.append(row)
            parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(tr.parts.items(), key=lambda kv: -kv[1]))
            m = tr.memory
            mem = (f"peak memory {m['peak_gib']:.2f} GiB per GPU (stage {m['stage']}, budget "
                   f"{m['budget_gib']:.2f} GiB)" if "peak_gib" in m else f"memory not estimated ({m.get('skipped')})")
            ctx.log(f"  {name}: step {tr.step_ms:.3f} ms = {parts} (mean over stages; active: fwd "
                    f"{tr.forward_ms:.3f}, bwd {tr.backward_ms:.3f}, adam {tr.optimizer_ms:.3f}), bubble "
                    f"{tr.bubble:.3f} (analytic {tr.bubble_analytic:.3f}), {tr.tokens_per_gpu_s:.0f} tokens/s per "
                    f"GPU; {mem}; {tr.reuse['mode']} from {tr.reuse['ops']} program ops, {tr.wall_s:.1f} s wall")
        except Exception as e:
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {name} FAILED: {type(e).__name__}: {e}")
    if results:
        ctx.write_csv("model_step.csv", [{k: v for k, v in r.items() if not isinstance(v, dict)} for r in results])
    ctx.log(f"model-step: {len(results)} rows, {len(failures)} failures in {time.perf_counter() - t0:.1f} s")
    return {"results": results, "failures": failures}

"""training-scale: Megatron-LM training steps on a cluster of GPU boxes, each with the wall time, events and peak
memory of its simulation beside the issue's targets (60 s, 8 GB).

Default: the issue's two targets on configs/machines/dgx-h100-cluster.yaml (DGX H100 boxes on a rail-optimised
NDR fat-tree, the flow fabric; the box count is the plan's GPUs over the box's eight):

* GPT-3 175B (``gpt3-175b``: Korthikanti et al. 2022, Table 1) on 1,024 H100s at TP 8, PP 8, DP 16, interleave 3,
  global batch 1,536 of sequences of 2048 (micro-batch 1: 96 microbatches per replica), the plan Narayanan et al.
  2021 ran on A100s;
* Mixtral-8x7B (``mixtral-8x7b``) on 256 H100s at TP 1, PP 4, DP 64, EP 8 (expert parallelism carved out of dp:
  each EP group one box), global batch 512 of 4096 tokens.

``models`` picks among the catalog's Megatron and MoE models (PRESETS: a model without one runs the assumed TP 8 x
PP 8 replica); ``tp pp dp cp ep interleave global_batch seq`` override the preset's (0: the preset's; ``cp``:
context parallelism, the GPUs dp x cp x pp x tp). The step
(kernbench.workloads.estimate.training_step, docs/model-estimates.md "Training at scale") is Megatron's:
interleaved 1F1B over pp x v model chunks, TP all-reduces inside a box, stage-to-stage transfers across boxes, the
data-parallel gradient all-reduces bucketed per layer and overlapping the backward, MoE dispatch and combine
all-to-alls over each EP group, Adam.

Three things keep a thousand-GPU step in reach, each said in the row:

* ``replicas`` (default ``one``): replica 0 (with MoE layers, the ep replicas of EP group 0) is lowered and the
  other replicas only join its data-parallel all-reduces (their GPUs' share of every ring or tree), ``all`` lowers
  every replica;
* ``tp_ranks`` (default ``auto``: ``one`` for a model without MoE layers): rank 0 of each tensor-parallel group is
  lowered and the other ranks only join its group's tensor-parallel collectives (docs/model-estimates.md, "One
  tensor-parallel rank for all"), ``all`` lowers every rank;
* ``fidelity`` (default ``pipeline``): one coflow per NCCL channel for the collectives across boxes
  (docs/ccl.md "Fidelity");
* the microbatches and layers extended from a window of fewer where the schedule is periodic (exact to the
  picosecond where the makespan's increments agree; the row's ``reuse``).

Rows: one per model, with step (ms), tokens/s per GPU, MFU (model FLOPs without recompute over the bf16 dense
peak), the peak memory per GPU (``memory_gib``: the stage that needs most, kernbench.workloads.memory; a plan that
does not fit is a failure naming its shortfall; ``check_memory=false`` simulates it anyway), the simulated bubble beside Megatron's (pp - 1) / (v m), the exposed data-parallel time, the breakdown of the
step (mean over stages), and wall_s, events, peak_mb (the process's peak so far), ops_simulated against the
targets.

Outputs: sweep.json, training_scale.csv.
"""

from __future__ import annotations

import time

from kernbench import bench
from kernbench.benches._host import peak_mb
from kernbench.overrides import Param
from kernbench.workloads import recipes

MODELS = ["gpt3-175b", "megatron-22b", "turing-530b", "megatron-1t", "mixtral-8x7b", "deepseek-moe-16b"]
#: Each model's plan unless a parameter sets it (0: the preset's). The issue's two targets: GPT-3 175B on 1,024 H100s
#: (Narayanan et al. 2021's plan: TP 8, PP 8, DP 16, interleave 3, global batch 1,536) and Mixtral-8x7B on 256
#: H100s (TP 1, PP 4, DP 64, EP 8, global batch 512, seq 4096). The others: assumed, one TP 8 x PP 8 replica.
#: GPT-3 175B recomputes its activations (Narayanan et al. 2021, section 3.5: activation recomputation in every run;
#: without it the plan needs 80.1 GiB on its first stage, over an 80 GB H100's budget).
PRESETS = {
    "gpt3-175b": dict(tp=8, pp=8, dp=16, cp=1, ep=1, interleave=3, global_batch=1536, seq=2048, sharding="none",
                      recompute="full", sp=False),
    "mixtral-8x7b": dict(tp=1, pp=4, dp=64, cp=1, ep=8, interleave=1, global_batch=512, seq=4096, sharding="none",
                         recompute="none", sp=False),
}
ASSUMED = dict(tp=8, pp=8, dp=1, cp=1, ep=1, interleave=1, global_batch=64, seq=2048, sharding="none",
               recompute="none", sp=False)
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "interleave", "global_batch", "seq")
#: The knobs whose bench value "preset" (the default) takes the preset's or the recipe's.
CHOICE_KEYS = ("sharding", "recompute", "sp")
#: The issue's targets for a thousand-GPU training step.
TARGET_WALL_S = 60.0
TARGET_PEAK_MB = 8 * 1024


@bench(
    name="training-scale",
    description="Megatron-LM training steps on a cluster (GPT-3 175B on 1,024 H100s, Mixtral-8x7B on 256) with the "
                "wall time, events and peak memory of each against the targets",
    params={"models": Param(["gpt3-175b", "mixtral-8x7b"], choices=MODELS),
            "recipes": Param([], choices=["all", *recipes.names()],
                             help="published recipes (kernbench.workloads.recipes) to run instead of the models; "
                                  "'all' for every one"),
            "machine": Param("recipe", choices=["recipe", "config"],
                             help="a recipe's machine: its own cluster preset, or --config's"),
            "tp": Param(0, min=0), "pp": Param(0, min=0), "dp": Param(0, min=0), "cp": Param(0, min=0),
            "ep": Param(0, min=0),
            "interleave": Param(0, min=0), "global_batch": Param(0, min=0), "seq": Param(0, min=0),
            "micro_batch": Param(1, min=1), "layers": Param(0, min=0),
            "sharding": Param("preset", choices=["preset", "none", "zero1", "zero2", "fsdp"]),
            "recompute": Param("preset", choices=["preset", "none", "selective", "full"]),
            "sp": Param("preset", choices=["preset", "on", "off"]),
            "replicas": Param("one", choices=["one", "mirror", "all"]),
            "tp_ranks": Param("auto", choices=["auto", "one", "all"],
                              help="auto: one (tp rank 0 for its group) for a model without MoE layers, else all"),
            "fidelity": Param("pipeline", choices=["auto", "steps", "pipeline"]),
            "check_memory": Param(True)},
    config="machines/dgx-h100-cluster.yaml",
    smoke={"bench.models": ["gpt3-175b"], "bench.layers": 16, "bench.dp": 2, "bench.interleave": 2,
           "bench.global_batch": 32, "bench.recompute": "none"},
    golden={"key": ["model"], "metrics": {"step_ms": "rel=1e-9", "bubble": "rel=1e-9", "gpus": "exact",
                                          "microbatches": "exact"}},
    outputs={"training_scale.csv": "one row per run: model, plan, step_ms, tokens_per_gpu, mfu, memory_gib, bubble, "
                                   "bubble_ratio_analytic, dp_exposed_ms, wall_s, events, peak_mb, ops_simulated"},
    primary=["step_ms", "tokens_per_gpu"],
)
def training_scale(ctx):
    p = ctx.params
    if p["recipes"]:
        for name in (recipes.names() if "all" in p["recipes"] else p["recipes"]):
            _run(ctx, *_recipe(ctx, recipes.get(name)))
    for model in ([] if p["recipes"] else p["models"]):
        preset = PRESETS.get(model, ASSUMED)
        plan = {k: p[k] or preset[k] for k in PLAN_KEYS}
        plan.update({k: _choice(p, k, preset[k]) for k in CHOICE_KEYS})
        _run(ctx, model, plan, str(ctx.config), {})
    if ctx.results:
        ctx.write_csv("training_scale.csv", [{k: x for k, x in r.items() if not isinstance(x, dict)}
                                             for r in ctx.results])
    # Host memory and wall time are wall-clock by nature (docs/sweep-json.md).
    return {"results": ctx.results, "failures": ctx.failures,
            "wall_clock_fields": ["results[].peak_mb", "results[].wall_s"]}


def _choice(p: dict, key: str, preset):
    """A CHOICE_KEYS knob: the bench's value, or with "preset" the preset's (sp: "on"/"off" as a bool)."""
    v = p[key]
    if v == "preset":
        return preset
    return v == "on" if key == "sp" else v


def _recipe(ctx, r) -> tuple:
    """_run's arguments for recipe ``r``: its plan with the bench's knobs over it (0 / "preset": the recipe's),
    its machine (or --config's with ``machine=config``) and that machine's overrides."""
    p = ctx.params
    own = dict(tp=r.tp, pp=r.pp, dp=r.dp, cp=r.cp, ep=r.ep, interleave=r.vp, global_batch=r.global_batch, seq=r.seq,
               sharding=r.sharding, recompute=r.recompute, sp=r.sp, micro_batch=r.micro_batch, recipe=r.name)
    plan = {k: p[k] or own[k] for k in PLAN_KEYS}
    plan.update({k: _choice(p, k, own[k]) for k in CHOICE_KEYS}, micro_batch=r.micro_batch, recipe=r.name)
    config = str(ctx.config) if p["machine"] == "config" else r.machine
    return r.model, plan, config, dict(r.machine_set) if p["machine"] == "recipe" else {}


def _run(ctx, model: str, plan_of: dict, config: str, machine_set: dict) -> None:
    """One training step of ``model`` at ``plan_of`` (PLAN_KEYS, CHOICE_KEYS; a recipe's also ``micro_batch`` and
    ``recipe``) on ``config`` (with ``machine_set`` under the user's overrides): a result row, or a failure with
    the reason."""
    from kernbench import _core
    from kernbench.workloads import ParallelPlan, estimate, get_model

    p = ctx.params
    tp, pp, dp, cp, ep, v = (plan_of[k] for k in ("tp", "pp", "dp", "cp", "ep", "interleave"))
    name = (plan_of["recipe"] + ": " if "recipe" in plan_of else "") + f"{model} tp{tp} pp{pp} dp{dp}" + \
        (f" cp{cp}" if cp > 1 else "") + (f" ep{ep}" if ep > 1 else "") + f" v{v}"
    mb = plan_of.get("micro_batch", p["micro_batch"])
    try:
        if plan_of["global_batch"] % (dp * mb):
            raise ValueError(f"global_batch {plan_of['global_batch']} is not a multiple of dp x micro_batch = "
                             f"{dp * mb}")
        M = plan_of["global_batch"] // (dp * mb)
        spec = get_model(model)
        graph = spec.graph(mb, plan_of["seq"], layers=p["layers"] or None)
        plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, interleave=v, microbatches=M,
                            sharding=plan_of["sharding"], recompute=plan_of["recompute"], sp=bool(plan_of["sp"]),
                            fidelity=p["fidelity"])
        system = recipes.cluster_for(config, plan.size, {**machine_set, **dict(ctx.config_overrides)}, ctx.seed)
        nodes = system.cluster()["nodes"]
        e0 = system._core.events_processed
        t0 = time.perf_counter()
        tr = estimate.training_step(graph, system, plan, replicas=p["replicas"],
                                    check_memory=bool(p["check_memory"]),
                                    tp_ranks=None if p["tp_ranks"] == "auto" else p["tp_ranks"])
        wall = time.perf_counter() - t0
        gpu = plan.place(system).group(0, 0)[0]
        peak = _core.gpu_spec(system._core, gpu)["peak_flops"]["bf16"]
        row = {"model": model, "recipe": plan_of.get("recipe", ""), "machine": config,
               "layers": graph.meta.get("layers", spec.layers), "nodes": nodes,
               "gpus": plan.size, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "interleave": v, "microbatches": M,
               "global_batch": plan_of["global_batch"], "seq": plan_of["seq"], "micro_batch": mb,
               "sharding": plan.sharding, "recompute": plan.recompute, "sp": plan.sp, "replicas": p["replicas"],
               "tp_ranks": tr.reuse["tp_ranks"], "fidelity": p["fidelity"], "step_ms": tr.step_ms,
               "tokens_per_gpu": tr.tokens_per_gpu_s,
               "mfu": tr.mfu(peak), "memory_gib": tr.memory.get("peak_gib"),
               "memory_parts_gib": tr.memory.get("parts_gib", {}), "bubble": tr.bubble, "bubble_ratio": tr.bubble_ratio,
               "bubble_ratio_analytic": tr.bubble_ratio_analytic, "dp_exposed_ms": tr.dp_exposed_ms,
               "parts_ms": tr.parts, "reuse": tr.reuse["mode"], "extended": ",".join(tr.reuse["extended"]),
               "ops_simulated": sum(tr.reuse["ops"]), "wall_s": wall,
               "events": system._core.events_processed - e0, "peak_mb": peak_mb()}
        ctx.results.append(row)
        parts = ", ".join(f"{k} {x:.1f}" for k, x in sorted(tr.parts.items(), key=lambda kv: -kv[1]))
        ctx.log(f"{name} on {row['gpus']} GPUs ({nodes} boxes), {M} microbatches: step {tr.step_ms:.1f} ms = "
                f"{parts}; {tr.tokens_per_gpu_s:.0f} tokens/s per GPU, MFU {row['mfu']:.3f}; {_memory(tr)}; bubble "
                f"{tr.bubble_ratio:.3f} of ideal (Megatron's (pp-1)/(v m) = {tr.bubble_ratio_analytic:.3f}); "
                f"DP exposed {tr.dp_exposed_ms:.1f} ms")
        ctx.log(f"  simulated: replicas {p['replicas']}, tp ranks {tr.reuse['tp_ranks']}, fidelity {p['fidelity']}, "
                f"{tr.reuse['mode']} "
                f"({row['extended'] or 'nothing'} extended) from {tr.reuse['ops']} program ops; "
                f"{wall:.1f} s wall (target < {TARGET_WALL_S:.0f} s), {row['events']} events, peak "
                f"{row['peak_mb']:.0f} MiB (target < {TARGET_PEAK_MB} MiB)")
    except Exception as e:  # recorded with the reason; the other models still run
        ctx.failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
        ctx.log(f"{name} FAILED: {type(e).__name__}: {e}")


def _memory(tr) -> str:
    """The log's memory clause: the peak per GPU and its stage, by part, against the budget."""
    m = tr.memory
    if "peak_gib" not in m:
        return f"memory not estimated ({m.get('skipped', 'no figure')})"
    parts = ", ".join(f"{k} {x:.1f}" for k, x in m["parts_gib"].items() if x)
    return (f"peak memory {m['peak_gib']:.1f} GiB per GPU (stage {m['stage']}: {parts}) of a "
            f"{m['budget_gib']:.1f} GiB budget")

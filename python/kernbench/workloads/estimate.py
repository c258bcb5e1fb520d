"""Whole-model estimates from the lowering: LLM inference (TTFT, TPOT, tokens/s) and a training step.

    from kernbench.workloads import estimate, handbuilt
    est = estimate.inference(lambda b, s, kv: handbuilt.llama_graph(b, s, kv), system, ParallelPlan(tp=8),
                             batch=8, prompt=512, decode_steps=128)
    est.ttft_ms, est.tpot_ms, est.tokens_per_s, est.breakdown["decode"]["by_kind"]

Repeated layers (docs/model-estimates.md): the instances of a block are
identical ops on identical PEs, and at a given KV length they do identical
work, so one instance is simulated and its time reused. The graph is
reduced to the ops before the block, one instance and the ops after it
(deps into later instances re-pointed at instance 0), lowered and run; the
layer's time is the span of its ops in that run (first start to last end),
and the whole pass is ``makespan + (count - 1) x layer``. Layers run one
after another on the same PEs, so no overlap between layers is lost but
that inside the layer boundary (the next layer's norm waits for the residual
anyway).

Decode: step ``i = 1..decode_steps`` attends ``kv_len = prompt + i`` keys (the
cache of ``prompt + i - 1`` tokens plus the new one). The decode graph at
q_len = 1 comes from the model builder, a callable ``(batch, seq, kv_len) ->
WorkloadGraph``. Only attention depends on kv_len, and its time is linear in
it (it streams the cache tile by tile), so the step is simulated at
``kv_samples`` KV lengths spread over the steps and interpolated linearly
between them (``kv_samples=None``: every step simulated).

Context parallelism in inference (``plan.cp`` > 1): the prompt's prefill is split over the cp GPUs of a replica
(kernbench.workloads.context: 1/cp of the tokens per op, attention by the ring or the all-to-alls); decode with
cp > 1 is refused (not modelled).

Pipeline parallelism in inference: every stage's layers run on its own
group; a stage's time is its layers' (and the head/tail ops') simulated
time, and ``M`` microbatches through ``pp`` stages take ``sum(stage) +
(M - 1) x max(stage)`` (the forward-only pipeline; the graph is one
microbatch).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from kernbench import _core
from kernbench.workloads.graph import WorkloadError, WorkloadGraph
from kernbench.workloads.lower import Lowered, lower
from kernbench.workloads.plan import ParallelPlan
from kernbench.workloads.step import TrainingEstimate, training_step  # noqa: F401  (the training step: step.py)

__all__ = ["inference", "training_step", "simulate", "reduce_blocks", "with_kv_len", "PassTime", "InferenceEstimate",
           "TrainingEstimate"]

Builder = Callable[[int, int, int], WorkloadGraph]


def with_kv_len(graph: WorkloadGraph, kv_len: int) -> WorkloadGraph:
    """The graph with every attention attending ``kv_len`` keys (a KV cache of ``kv_len - q_len`` tokens plus
    the new ones): how a graph imported at ``seq`` new tokens becomes a decode step (attrs and FLOPs
    re-shaped; everything else reads only the new tokens)."""
    from dataclasses import replace

    ops = []
    for op in graph.ops:
        if op.kind == "attention":
            a = dict(op.attrs)
            old = int(a["kv_len"])
            a["kv_len"] = int(kv_len)
            op = replace(op, attrs=a, flops=op.flops * int(kv_len) // max(old, 1))
        ops.append(op)
    return WorkloadGraph(graph.name, ops, source=graph.source, inputs=graph.inputs, blocks=graph.blocks,
                         meta={**graph.meta, "kv_len": int(kv_len)})


def reduce_blocks(graph: WorkloadGraph) -> tuple[WorkloadGraph, int, tuple[int, int] | None]:
    """The graph with its main block cut to one instance: (graph, count, (first, end) of the instance)."""
    if not graph.blocks:
        return graph, 1, None
    b = max(graph.blocks, key=lambda b: b.size * b.count)
    if b.count == 1:
        return graph, 1, (b.first, b.end)
    cut_lo, cut_hi = b.end, b.first + b.size * b.count  # instances 1.. removed
    shift = cut_hi - cut_lo

    def remap(d):
        if d < b.first:
            return d
        if d < cut_hi:
            return b.first + (d - b.first) % b.size
        return d - shift

    from dataclasses import replace

    ops = [op for i, op in enumerate(graph.ops) if not cut_lo <= i < cut_hi]
    ops = [replace(op, deps=tuple(sorted({remap(d) for d in op.deps}))) for op in ops]
    g = WorkloadGraph(graph.name + " (one layer)", ops, source=graph.source, inputs=graph.inputs,
                      blocks=[type(b)(b.prefix, b.first, b.end, 1)], meta=graph.meta)
    return g, b.count, (b.first, b.end)


@dataclass
class PassTime:
    """One simulated forward pass (all layers): time, and where it went."""

    time_ps: float
    layer_ps: float
    layers: int
    by_kind: dict[str, float]   # us per op kind, adding up to time_ps (Lowered.partition; exposed_communication,
    by_part: dict[str, float]   # launch, idle and, with pp > 1, bubble named); by_part the same by layer part
    gemm_flops: float
    wall_s: float
    lowered: Lowered | None = field(default=None, repr=False)

    @property
    def time_ms(self) -> float:
        return self.time_ps / 1e9


def simulate(graph: WorkloadGraph, system, plan: ParallelPlan, *, reuse: bool = True, precision=None,
             launch: str | None = None) -> PassTime:
    """One forward pass of ``graph`` on ``system``: with ``reuse`` one layer simulated and reused (see the
    module doc), else every op lowered. Runs on ``system`` (advances its clock). ``launch``: how a GPU
    target launches the kernels (``host`` or ``graph``; lower())."""
    w0 = time.perf_counter()
    if not reuse:
        lo = lower(graph, system, plan, precision=precision, launch=launch)
        res = lo.run()
        br = lo.breakdown(res)
        layers = max((b.count for b in graph.blocks), default=1)
        return PassTime(float(res.makespan_ps), 0.0, layers, br["by_kind"], br["by_part"], lo.gemm_flops,
                        time.perf_counter() - w0, lo)
    plan.check_rules(graph)  # the whole graph's names; the reduced one keeps the rules that name its ops
    g, count, inst = reduce_blocks(graph)
    one = ParallelPlan(dp=1, tp=plan.tp, pp=1, sp=plan.sp, microbatches=1, cp=plan.cp, cp_comm_type=plan.cp_comm_type,
                       pes=None if plan.pes is None else plan.pes[:plan.tp * plan.cp], rules=plan.rules_matching(g),
                       algorithm=plan.algorithm)
    plan.place(system)  # the whole plan must fit, even though one stage's group is simulated
    lo = lower(g, system, one, precision=precision, launch=launch)
    res = lo.run()
    t = res._core.ops()
    st, en = t["start_ps"], t["end_ps"]
    in_layer = (lambda s: inst is not None and inst[0] <= s.op < inst[1])
    skip = lo.launches
    lay = [(int(st[o]), int(en[o])) for s in lo.spans if in_layer(s) for o in range(s.first, s.end)
           if st[o] >= 0 and o not in skip]
    layer_ps = float(max(e for _, e in lay) - min(a for a, _ in lay)) if lay else 0.0
    # GPU target: the host issues a layer's launches while the GPU runs the one before, so layers follow
    # each other at the slower of the two: the layer's kernels, or its launches end to end.
    host: dict[str, int] = {}  # per GPU: its host thread issues its own launches
    for s in lo.spans:
        if in_layer(s):
            for o in range(s.first, s.end):
                if o in skip:
                    host[skip[o]] = host.get(skip[o], 0) + int(en[o]) - int(st[o])
    span_ps = layer_ps
    layer_ps = max(layer_ps, float(max(host.values(), default=0)))
    base = res.makespan_ps
    # Where the pass's time goes, adding up to it: the run cut into parts (Lowered.partition) outside the
    # layer's window once, inside it `count` times; a host-bound layer's wait for its launches, per repeat.
    origin = int(res._core.start_ps)  # the run's start on the system's clock (op times are on it too)
    w0_ps = min((a for a, _ in lay), default=origin)
    w1_ps = w0_ps + int(span_ps)
    breakdowns = []
    for attr in ("kind", "part"):
        whole = lo.partition(res, lambda s, attr=attr: getattr(s, attr), origin, origin + int(base))
        inside = lo.partition(res, lambda s, attr=attr: getattr(s, attr), w0_ps, w1_ps) if lay else {}
        out = {k: (whole.get(k, 0.0) - inside.get(k, 0.0) + count * inside.get(k, 0.0)) / 1e6
               for k in set(whole) | set(inside)}
        if count > 1 and layer_ps > span_ps:
            out["launch"] = out.get("launch", 0.0) + (count - 1) * (layer_ps - span_ps) / 1e6
        breakdowns.append(out)
    by_kind, by_part = breakdowns
    total_ps = float(base) + (count - 1) * layer_ps
    flops = lo.gemm_flops
    if inst is not None and count > 1:
        flops = _flops_scaled(g, lo, inst, count)
    if plan.pp > 1:
        piped = _pipelined(total_ps, layer_ps, count, plan)
        for out in (by_kind, by_part):  # the pipeline's fill and drain
            out["bubble"] = out.get("bubble", 0.0) + (piped - total_ps) / 1e6
        total_ps = piped
    return PassTime(total_ps, layer_ps, count, by_kind, by_part, flops, time.perf_counter() - w0, lo)


def _flops_scaled(g, lo, inst, count):
    """GEMM FLOPs of the whole pass: the outside ops once, the layer's ``count`` times."""
    layer = 0.0
    total = lo.gemm_flops
    for i in range(inst[0], inst[1]):
        op = g.ops[i]
        if op.kind in ("matmul", "conv"):
            layer += op.flops
    return total + (count - 1) * layer


def _pipelined(total_ps, layer_ps, layers, plan):
    """pp stages of contiguous layers, M microbatches: sum(stage) + (M - 1) max(stage)."""
    pp, M = plan.pp, plan.microbatches
    outside = total_ps - layers * layer_ps
    per = [sum(1 for l in range(layers) if l * pp // layers == s) * layer_ps for s in range(pp)]
    per[0] += outside  # the head and tail ops sit on the first and last stage; counted on one for the bound
    return sum(per) + (M - 1) * max(per)


@dataclass
class InferenceEstimate:
    batch: int
    prompt: int
    decode_steps: int
    plan: ParallelPlan
    prefill: PassTime
    steps: list[dict[str, Any]]     # per decode step: kv_len, time_ms, kv_cache_bytes, simulated (or interpolated)
    breakdown: dict[str, dict]      # phase -> by_kind / by_part (us)
    wall_s: float

    @property
    def ttft_ms(self) -> float:
        """Time to first token: the prefill pass (the first token comes out of its LM head)."""
        return self.prefill.time_ms

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first (one decode step, all sequences of the batch)."""
        return sum(s["time_ms"] for s in self.steps) / len(self.steps) if self.steps else 0.0

    @property
    def decode_ms(self) -> float:
        return sum(s["time_ms"] for s in self.steps)

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second over the whole request, all dp replicas (each serves its own batch):
        dp x batch x (1 + steps) / (TTFT + decode)."""
        t = self.ttft_ms + self.decode_ms
        return self.plan.dp * self.batch * (1 + self.decode_steps) / (t * 1e-3) if t > 0 else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return (self.plan.dp * self.batch * self.decode_steps / (self.decode_ms * 1e-3)
                if self.decode_ms > 0 else 0.0)

    def row(self) -> dict[str, Any]:
        return {"batch": self.batch, "prompt": self.prompt, "decode_steps": self.decode_steps,
                "dp": self.plan.dp, "tp": self.plan.tp, "pp": self.plan.pp, "cp": self.plan.cp, "ttft_ms": self.ttft_ms,
                "tpot_ms": self.tpot_ms, "tokens_per_s": self.tokens_per_s,
                "decode_tokens_per_s": self.decode_tokens_per_s,
                "kv_cache_bytes_last": self.steps[-1]["kv_cache_bytes"] if self.steps else 0,
                "simulated_steps": sum(1 for s in self.steps if s["simulated"]), "wall_s": self.wall_s}


def _kv_cache_bytes(graph: WorkloadGraph) -> int:
    """The cache the graph's attention ops read: per op, batch x kv_len tokens of ``cache_width`` elements (an
    MLA op's latent, set from ``ModelSpec.cache_width``), else K and V of kv_heads x head_dim."""
    out = 0
    for op in graph.ops:
        if op.kind == "attention":
            a = op.attrs
            e = 2 if op.dtype in ("bf16", "fp16") else 4 if op.dtype == "fp32" else 1
            width = int(a.get("cache_width") or 2 * int(a["kv_heads"]) * int(a["head_dim"]))
            out += int(a["batch"]) * int(a["kv_len"]) * width * e
    return out


def _sample_points(n: int, k: int | None) -> list[int]:
    if k is None or k >= n:
        return list(range(1, n + 1))
    if k < 2:
        raise WorkloadError(f"inference: kv_samples = {k}: at least 2 (the first and the last step) or None")
    return sorted({1 + round(j * (n - 1) / (k - 1)) for j in range(k)})


def inference(model: Union[WorkloadGraph, Builder], system, plan: ParallelPlan | None = None, *, batch: int,
              prompt: int, decode_steps: int = 0, kv_samples: int | None = 9, reuse: bool = True,
              precision: str | None = None, system_factory: Callable[[], Any] | None = None,
              launch: tuple[str, str] = ("host", "graph")) -> InferenceEstimate:
    """Prefill of ``batch`` prompts of ``prompt`` tokens, then ``decode_steps`` steps of one token each with the
    KV cache growing. ``model``: a builder ``(batch, seq, kv_len) -> WorkloadGraph``, or the prefill graph itself
    (then ``decode_steps`` must be 0). ``system_factory`` gives a fresh System per simulation (default: reuse
    ``system``, whose clock advances; results are the same, runs are relative). ``launch``: how a GPU
    target launches the (prefill, decode) kernels -- by default eagerly from the host for prefill and as
    CUDA graph replays for decode, as vLLM does."""
    plan = plan or ParallelPlan()
    w0 = time.perf_counter()
    for name, v in (("batch", batch), ("prompt", prompt)):
        if int(v) < 1:
            raise WorkloadError(f"inference: {name} must be >= 1, got {v}")
    if decode_steps < 0:
        raise WorkloadError(f"inference: decode_steps must be >= 0, got {decode_steps}")
    if decode_steps and plan.cp > 1:
        raise WorkloadError(f"inference: plan cp = {plan.cp} splits a prompt's prefill over cp GPUs; decode with "
                            "context parallelism (a KV cache split over the cp ranks) is not modelled: estimate the "
                            "prefill alone (decode_steps=0), or decode at cp = 1")
    if isinstance(model, WorkloadGraph):
        if decode_steps:
            raise WorkloadError("inference: decode needs the graph at q_len = 1: pass a builder "
                                "(batch, seq, kv_len) -> WorkloadGraph instead of one graph")
        build = None
        pre_g = model
    else:
        build = model
        if decode_steps:  # the longest context first: a model refuses one past its positions before any work
            build(1, 1, prompt + decode_steps)
        pre_g = build(batch, prompt, prompt)
    sysf = system_factory or (lambda: system)
    # The serving framework's host time per step (gpu.framework_step), paid between steps on a GPU target.
    step_ps = 0.0
    if system.target == "gpu":
        step_ps = float(_core.gpu_spec(system._core, plan.place(system).group(0, 0)[0])["framework_step_ps"])
    pre = simulate(pre_g, sysf(), plan, reuse=reuse, precision=precision, launch=launch[0])
    pre.time_ps += step_ps
    for part in (pre.by_kind, pre.by_part):  # the serving framework's host time per step (gpu.framework_step)
        if step_ps:
            part["framework"] = part.get("framework", 0.0) + step_ps / 1e6
    steps: list[dict[str, Any]] = []
    dec_break: dict[str, dict] = {"by_kind": {}, "by_part": {}}
    if decode_steps:
        pts = _sample_points(decode_steps, kv_samples)
        sim: dict[int, PassTime] = {}
        kvb: dict[int, int] = {}
        for i in pts:
            g = build(batch, 1, prompt + i)
            sim[i] = simulate(g, sysf(), plan, reuse=reuse, precision=precision, launch=launch[1])
            sim[i].time_ps += step_ps
            if step_ps:
                for part in (sim[i].by_kind, sim[i].by_part):
                    part["framework"] = part.get("framework", 0.0) + step_ps / 1e6
            kvb[i] = _kv_cache_bytes(g)
        weight = {p: 0.0 for p in pts}  # how much of each simulated step the steps' times are made of
        for i in range(1, decode_steps + 1):
            if i in sim:
                t, kb, simulated = sim[i].time_ps, kvb[i], True
                weight[i] += 1.0
            else:  # linear in kv_len between the neighbouring simulated steps
                lo = max(p for p in pts if p < i)
                hi = min(p for p in pts if p > i)
                f = (i - lo) / (hi - lo)
                t = sim[lo].time_ps + f * (sim[hi].time_ps - sim[lo].time_ps)
                weight[lo] += 1 - f
                weight[hi] += f
                kb = round(kvb[lo] + f * (kvb[hi] - kvb[lo]))
                simulated = False
            steps.append({"step": i, "kv_len": prompt + i, "time_ms": t / 1e9, "kv_cache_bytes": int(kb),
                          "simulated": simulated})
        # Where decode time goes: each simulated step's breakdown, weighted as the steps' times are
        # interpolated from it, so the parts add up to decode_ms.
        for key in ("by_kind", "by_part"):
            acc: dict[str, float] = {}
            for p in pts:
                for k, v in getattr(sim[p], key).items():
                    acc[k] = acc.get(k, 0.0) + v * weight[p]
            dec_break[key] = acc
    br = {"prefill": {"by_kind": pre.by_kind, "by_part": pre.by_part}, "decode": dec_break}
    return InferenceEstimate(int(batch), int(prompt), int(decode_steps), plan, pre, steps, br,
                             time.perf_counter() - w0)

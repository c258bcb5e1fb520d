"""Lowering a workload graph onto a machine: one kernbench.Program built from the existing kernel models.

    lowered = lower(graph, system, ParallelPlan(tp=8))
    res = lowered.run()                  # a RunResult: critical path, energy, traces, diff work unchanged
    lowered.breakdown(res)               # active time per op kind and per layer part

What each op kind becomes, on every rank of the tensor-parallel group that runs
it (docs/model-estimates.md has the full table):

* ``matmul`` -> ``prog.gemm`` on the rank's own PE (the GEMM kernel model:
  tiles from the PE's HBM slice) with the Megatron-sharded shape
  (kernbench.workloads.plan); a row-parallel linear is followed by an
  all-reduce of its ``m x n`` output over the group (reduce-scatter with
  ``sp``). A batched matmul runs as one GEMM of ``batch x m`` rows (the same
  FLOPs). Sibling linears reading the same input (q/k/v, gate/up) are fused
  into one GEMM of their summed ``n`` when ``fuse=True`` (Megatron's fused
  QKV, as the hand-built llama layer does).
* ``conv`` -> its im2col GEMM (``gemm_m x groups``, ``gemm_n``, ``gemm_k``),
  after a DMA writing the lowered matrix when the kernel is not 1x1 stride 1.
* ``attention`` -> ``prog.attention`` (the GQA model), one program per KV
  group and sequence: GQA case 2 on the rank's PE when a rank holds whole KV
  groups (tp <= kv_heads), else case 1 (prefill) / 4 (decode) over the
  ``tp / kv_heads`` PEs of the group plus the IPCQ re-layout of O to heads,
  exactly as src/workloads/llama.cpp places them.
* ``elementwise``, ``norm``, ``softmax``, ``reduce``, ``embedding`` -> the
  vector tile pipeline src/workloads/llama.cpp uses for its norms, SiLU and
  residuals: ``operands`` streams of the op's bytes from the PE's HBM into
  scratch, ``passes x`` the bytes through the vector engine (elementwise and
  reduce 1, norm and softmax 2), one stream out; 64 KiB tiles, double
  buffered, the scratch claimed around it.
* ``view`` -> nothing (free); ``copy`` -> a DMA of its bytes from the PE's
  HBM slice to its scratch and back.
* with context parallelism (``plan.cp`` > 1) every op of a cp rank does 1/cp of the tokens and attention runs
  over the cp ranks by a ring exchange of K/V or all-to-alls (kernbench.workloads.context).
* ``moe`` (an MoE layer's routed experts) -> over each expert-parallel group
  (``plan.ep`` replicas): the dispatch transfers, each EP rank's expert GEMMs
  sized by the tokens its experts receive, the combine transfers
  (kernbench.workloads.moe_lower); in a training step also its backward (the
  reverse all-to-alls, the experts' dgrad and wgrad) and the experts' gradients
  reduced over their expert-data-parallel groups (kernbench.workloads.moe_train).

An op that has no lowering (a kind outside these, a convolution that is not
2-D, dilated or transposed, an attention whose heads the plan cannot split)
raises WorkloadError naming the op and its module path -- never a silent zero.

Compute steps on one PE run in graph order (each claims the PE's scratch);
collectives and stage-to-stage transfers only wait for their data, so a
gradient all-reduce overlaps the backward ops after it.
"""

from __future__ import annotations

import functools
import gc

from kernbench.program import Program
from kernbench.workloads.graph import WorkloadError, WorkloadGraph
from kernbench.workloads.lowerer import (VECTOR_PASSES, Lowered, Lowerer, Span, forward_pass,  # noqa: F401
                                         part_of, stage_ranges)
from kernbench.workloads import context
from kernbench.workloads.moe_lower import check_ep, moe_ops
from kernbench.workloads.plan import ParallelPlan
from kernbench.workloads.training import lower_training, model_chunks, replicas_mode, tp_ranks_mode

__all__ = ["lower", "Lowered", "VECTOR_PASSES", "part_of", "stage_ranges", "MAX_LOWERED_OPS"]

#: The most op instances one lowering appends (graph ops x microbatches x replicas, x 3 for a training step's
#: forward, backward and optimizer): checked before any work, as a lowering takes about 0.1 ms per op instance
#: and its simulation more.
MAX_LOWERED_OPS = 2_000_000


def _collector_paused(fn):
    """``fn`` with Python's cyclic garbage collector paused while it runs. A lowering allocates 10**5 to 10**6 small
    objects (handles, their lists, spans) that all live as long as the Lowered: each full collection would walk
    them all again and find nothing, a quarter of a big lowering's time. What cycles it leaves are collected once
    the collector resumes."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return paused


@_collector_paused
def lower(graph: WorkloadGraph, system, plan: ParallelPlan | None = None, *, phase: str = "inference",
          program: Program | None = None, precision: str | None = None, fuse: bool = True,
          attention_tiles: tuple[int, int] = (256, 256), optimizer: str = "adam",
          launch: str | None = None, mirror_replicas: bool = False, replicas: str | None = None,
          tp_ranks: str = "all") -> Lowered:
    """Place ``graph`` on ``system`` by ``plan`` and append it to ``program`` (a new one when None).

    ``phase``: ``inference`` (forward only: every microbatch through the pipeline stages) or ``train``
    (forward, backward, gradient all-reduce over dp and the optimizer, (interleaved) 1F1B over the stages; see
    kernbench.workloads.training). ``precision`` overrides every op's compute type (default: the op's
    dtype). The graph is one microbatch: ``plan.microbatches`` of them run. Each op becomes the kernel the
    machine's target gives it (kernbench.workloads.targets, by ``pe.target``); ``launch`` (``host`` or
    ``graph``, GPU target only) says how its kernels are launched (default ``host``). ``replicas`` (train;
    kernbench.workloads.training.REPLICAS): ``all`` (default) lowers every data-parallel replica, ``mirror``
    lets replicas past the first reuse its compute ops and append only their collectives and transfers
    (``mirror_replicas=True`` says the same), ``one`` lowers replica 0 alone, the others joining only its
    data-parallel collectives. ``tp_ranks`` (train; training.TP_RANKS): ``all`` (default) lowers every rank of
    each tensor-parallel group, ``one`` rank 0 alone, the others only in its group's collectives (a GPU machine,
    no MoE layers: Lowerer.represent_tp_ranks).
    """
    plan = plan or ParallelPlan()
    if phase not in ("inference", "train"):
        raise WorkloadError(f"lower: phase {phase!r}: expected 'inference' or 'train'")
    replicas = replicas_mode(replicas, mirror_replicas, "lower")
    if tp_ranks != "all" and phase != "train":
        raise WorkloadError(f"lower: tp_ranks {tp_ranks!r} applies to a training step (phase 'train'), not {phase!r}")
    tp_ranks_mode(tp_ranks, graph, system, "lower")  # an unknown mode, or 'one' with MoE layers: refused first
    dp = plan.period if phase == "train" and replicas == "one" else plan.dp_cp
    work = len(graph.ops) * plan.microbatches * dp * (3 if phase == "train" else 1)
    if work > MAX_LOWERED_OPS:
        raise WorkloadError(f"lower: {graph.name}: {len(graph.ops)} ops x microbatches {plan.microbatches} x dp "
                            f"{'x cp ' if plan.cp > 1 else ''}{dp}{' x 3 (train)' if phase == 'train' else ''} = "
                            f"{work} op instances: over the limit of {MAX_LOWERED_OPS} (lower fewer microbatches or "
                            "layers)")
    check_ep(graph, plan)
    context.check_cp(graph, plan, system)
    prog = program if program is not None else Program(system, graph.name)
    L = Lowerer(graph, system, plan, prog, precision=precision, fuse=fuse, attention_tiles=attention_tiles,
                 launch=launch)
    if phase == "train":
        # collectives at fidelity auto: NCCL's ring as the channel pipeline on a flow fabric (Lowerer.fidelity)
        L.ring_pipeline = system._core.fabric_model == "flow"
        lower_training(L, model_chunks(graph, plan), optimizer=optimizer, replicas=replicas, tp_ranks=tp_ranks)
        return L.out
    if plan.interleave > 1:
        raise WorkloadError(f"lower: {graph.name}: interleave = {plan.interleave} is a training step's pipeline "
                            "schedule (phase 'train'); an inference pass runs each stage's layers once: interleave 1")
    stages = stage_ranges(graph, plan.pp)
    if moe_ops(graph):  # an MoE op spans the replicas of an EP group: op-major within each microbatch
        for mb in range(plan.microbatches):
            context.moe_forward_pass(L, mb, stages)
        return L.out
    for rep in range(plan.dp):
        for mb in range(plan.microbatches):
            if plan.cp > 1:  # the replica's cp ranks op-major at attention (kernbench.workloads.context)
                context.forward_pass(L, rep, mb, stages)
            else:
                forward_pass(L, rep, mb, stages)
    return L.out

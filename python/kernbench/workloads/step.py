"""A training step's estimate (``estimate.training_step``), and the reuse that keeps its run graph small.

    from kernbench.workloads import estimate, get_model, ParallelPlan
    g = get_model("mpt-7b").graph(6, 2048)
    tr = estimate.training_step(g, system, ParallelPlan(dp=8, sharding="fsdp"))
    tr.step_ms, tr.parts, tr.tokens_per_gpu_s, tr.reuse

Reuse (``reuse=True``, the default). A step of ``n`` identical layers per pipeline stage is a periodic
schedule: past the first layers of a stage, one more layer adds the same ops at the same offsets (its
forward, its backward, its gradient exchange overlapping the layer before it), so every additive figure of
the step -- its makespan, each part of its breakdown, the active time of each pass, the FLOPs, the kernel
counts, the bytes exchanged -- grows by the same amount per layer. The step is simulated with ``c``,
``c + 1`` and ``c + 2`` layers per stage (each stage keeps its difference from the others); when the two
increments of the makespan are equal to the picosecond the schedule is periodic there, and every figure is
extrapolated from ``c + 2`` to the real count. When they are not (the fill of a deep pipeline, a step
whose host launches fall behind late), the window moves up by a layer, and after three windows the whole
step is simulated. An interleaved pipeline (``ParallelPlan.interleave`` = v > 1) is cut the same way per
model chunk: ``c``, ``c + 1``, ``c + 2`` layers in each of its pp x v equal chunks. Every collective of the
simulated layers runs on the fabric, with the contention of everything else in flight; no figure is scaled
by a factor. The microbatches are extended the same way (``_extend``): a step of M of them is simulated at
x, x + pp and x + 2 pp microbatches (each further group of pp adds the same steady-state work to every stage)
and extended to M when the increments agree and the window costs fewer microbatches than M. (In 1F1B one more
microbatch already repeats the makespan, but not the breakdown: idle time moves between launch, exposed
communication and bubble from one microbatch to the next.) ``reuse=False`` simulates every
layer and microbatch. ``TrainingEstimate.reuse`` says which was done (``extended``: layers, microbatches) and
how many program ops and microbatches each simulation had.

Bubble. ``bubble`` is the simulated share of the pipeline span the stages idle (their mean), beside
``bubble_analytic`` = (pp - 1) / (v M + pp - 1), the same share on equal stages with free communication;
``bubble_ratio`` and ``bubble_ratio_analytic`` = (pp - 1) / (v M) are the same bubble as Megatron-LM states it,
bubble time over ideal time (v = 1 for plain 1F1B).

Identical data-parallel replicas (``mirror_replicas=True``, off by default). Replica r > 0 appends no compute
of its own: its k-th compute step on a rank is replica 0's k-th on the same rank (Lowerer.mirror_replicas),
while its collectives and stage-to-stage transfers are still appended and simulated, so the fabric carries
all of their traffic. It is not exact: a mirrored replica's compute neither loads the fabric (the SIP
machine's tiles stream over its mesh) nor fills its host's launch queue, and the SIP machine's replicas sit
at different places of its mesh; on a GPU its NCCL kernels never wait behind kernels of its own. Measured
(2-layer steps, tests/python/test_training_sharding.py): within 4e-5 of the full step on the H100 box at pp 1
(2.8e-3 at dp 2, tp 2, pp 2), within 1 % on the SIP machine at dp 8, from 2.5x fewer program ops there.

One replica for all (``replicas="one"``): only replica 0 is lowered; the others join its data-parallel
collectives (their GPUs are in every dp group), and its counts and FLOPs stand for all of them
(Lowerer.represent_replicas). It leaves out the other replicas' own traffic on shared links; on four DGX boxes at
dp 4 x tp 8 it is within 0.5 % of every replica lowered (tests/python/test_training_scale.py).

One tensor-parallel rank for all (``tp_ranks="one"``, the default on a GPU machine where it was measured exact):
only rank 0 of each tensor-parallel group is lowered; the other ranks join its group's tensor-parallel collectives
with rank 0's handles, and its counts, FLOPs and bytes stand for all of them (kernbench.workloads.tp_ranks). Equal
to every rank lowered on the H100 box and the two-tier DGX cluster (tests/python/test_tp_ranks.py); ``all`` by
default with MoE layers and on three switch tiers of several pods (training.tp_ranks_mode).

Exposed data-parallel time. ``dp_ms`` and ``dp_exposed_ms`` (TrainingEstimate) are read from the trace per
stage: the data-parallel collectives in flight, and the part of that no forward/backward/recompute work of the
stage overlaps (the optimizer hides nothing; the field's comment says why).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kernbench.workloads import context, memory as _memory, timeline
from kernbench.workloads.graph import Block, WorkloadError, WorkloadGraph
from kernbench.workloads.lower import Lowered, lower
from kernbench.workloads.lowerer import COMM_KINDS, stage_layers
from kernbench.workloads.plan import ParallelPlan
from kernbench.workloads.sharding import dp_collectives
from kernbench.workloads.training import model_chunks, replicas_mode, tp_ranks_mode

__all__ = ["TrainingEstimate", "training_step", "with_layers", "COMPUTE"]

#: How close the makespan's two increments must be for the schedule to count as periodic (relative to the
#: increment). Where a stage's collectives run alone on the fabric and its kernels outlast their launches the
#: increments are equal to the picosecond (dp replicas with unsharded or FSDP gradients at tp 1, a pipeline of
#: equal stages), and so is the extension. Where flows of different collectives share links, or host launches
#: and short kernels interleave, successive increments differ by up to a few 1e-4 of a layer (the flow fabric's
#: max-min rates are doubles, summed in the order flows come and go), and a few layers later a regime may shift
#: the whole step by up to about 1 % (MPT-7B at FSDP dp 8: docs/model-estimates.md); reuse=False is exact.
PERIODIC = 1e-3

#: The passes whose spans are a stage's compute (the recompute of activations is part of the backward's time).
COMPUTE = ("forward", "backward", "recompute")


@dataclass
class TrainingEstimate:
    step_ms: float
    forward_ms: float     # active time of the forward ops (union over the step)
    backward_ms: float
    optimizer_ms: float
    grad_allreduce_ms: float
    gemm_flops: dict[str, float]   # forward / backward (backward == 2 x forward, exactly) / recompute
    #: The pipeline bubble as a share of the span: the span is first compute start to last compute end over all
    #: stages; a stage's idle share is 1 - (its compute time, a union of its forward/backward/recompute spans) /
    #: span. ``bubble`` is the simulated mean of the stages' idle shares; ``bubble_analytic`` the same share on
    #: equal stages with free communication: (pp - 1) / (v M + pp - 1), v = plan.interleave (1F1B: v = 1).
    bubble: float
    bubble_analytic: float
    plan: ParallelPlan
    counts: dict[str, int]
    wall_s: float
    lowered: Lowered | None = field(default=None, repr=False)
    #: ms per part, adding up to step_ms: each pipeline stage's timeline cut into forward, backward, recompute,
    #: optimizer, exposed_communication (not overlapped by its compute), launch and idle (bubble with pp > 1),
    #: averaged over the stages (Lowered.partition). forward_ms and the others above are active time (unions),
    #: which overlap each other and need not add up.
    parts: dict[str, float] = field(default_factory=dict)
    tokens: int = 0            # tokens per optimizer step, all replicas: dp x microbatches x the graph's tokens
    model_flops: float = 0.0   # the model's FLOPs per step without recompute: 3 x the forward's (graph op FLOPs)
    dp_bytes: dict[str, int] = field(default_factory=dict)  # data-parallel collectives: buffer bytes per rank
    #: layers (of the main block), mode ("full" or "extrapolated"), simulated (layers per stage of each run,
    #: per model chunk with interleave > 1), ops (program ops of each run)
    reuse: dict[str, Any] = field(default_factory=dict)
    #: The same bubble as Megatron-LM states it: bubble time / ideal time. ``bubble_ratio`` is simulated: the
    #: stages' idle time over their compute time, summed over the stages (= bubble / (1 - bubble));
    #: ``bubble_ratio_analytic`` is (pp - 1) / (v M) (Narayanan et al. 2021; 1F1B: v = 1).
    bubble_ratio: float = 0.0
    bubble_ratio_analytic: float = 0.0
    #: Data-parallel time, per pipeline stage then averaged over the stages (as ``parts``): ``dp_ms`` is the time
    #: any of the stage's data-parallel collectives is in flight (the gradients' all-reduce or reduce-scatter per
    #: layer, and ZeRO's / FSDP's weight all-gathers: kernbench.workloads.sharding); ``dp_exposed_ms`` the part of
    #: it during which none of the stage's forward, backward or recompute kernels runs (a union over the stage's
    #: replicas and tensor-parallel ranks; tensor- and pipeline-parallel transfers hide nothing). The optimizer
    #: does not hide it: a framework runs Adam once every bucket is reduced (DDP, Megatron's
    #: finalize_model_grads), and where this lowering's per-layer Adam runs beside a later bucket that time counts
    #: in ``parts`` as optimizer but here as exposed. So the last bucket's reduction, which starts when the
    #: backward ends, is exposed whole; ``dp_exposed_by_stage`` gives each stage's figure (ms).
    dp_ms: float = 0.0
    dp_exposed_ms: float = 0.0
    dp_exposed_by_stage: list[float] = field(default_factory=list)
    #: Memory per rank (kernbench.workloads.memory, checked before the simulation): ``peak_gib`` (the stage that
    #: needs most), ``stage``, ``parts_gib`` (its weights, gradients, optimizer, activations, buffers),
    #: ``stages_gib`` (each stage's peak), ``budget_gib``, ``capacity_gib``, ``reserve_gib``, ``fits``,
    #: ``checked`` (False with ``check_memory=False``); or ``skipped`` with the reason (a graph without the
    #: model's dimensions).
    memory: dict[str, Any] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.plan.size

    @property
    def tokens_per_gpu_s(self) -> float:
        """Training throughput per GPU (tokens/s): tokens per step / step / GPUs."""
        return self.tokens / (self.step_ms * 1e-3) / self.gpus if self.step_ms > 0 else 0.0

    def mfu(self, peak_flops: float) -> float:
        """Model FLOPs utilisation: model FLOPs (without recompute) / (step x GPUs x ``peak_flops`` per GPU)."""
        return self.model_flops / (self.step_ms * 1e-3 * self.gpus * peak_flops)

    def row(self) -> dict[str, Any]:
        return {"dp": self.plan.dp, "tp": self.plan.tp, "pp": self.plan.pp, "cp": self.plan.cp,
                "microbatches": self.plan.microbatches,
                "interleave": self.plan.interleave,
                "sharding": self.plan.sharding, "recompute": self.plan.recompute,
                **{f"part_{k}_ms": v for k, v in sorted(self.parts.items())},
                "step_ms": self.step_ms, "forward_ms": self.forward_ms, "backward_ms": self.backward_ms,
                "optimizer_ms": self.optimizer_ms, "grad_allreduce_ms": self.grad_allreduce_ms,
                "gemm_flops_forward": self.gemm_flops.get("forward", 0.0),
                "gemm_flops_backward": self.gemm_flops.get("backward", 0.0),
                "gemm_flops_recompute": self.gemm_flops.get("recompute", 0.0),
                "tokens_per_gpu_s": self.tokens_per_gpu_s, "bubble": self.bubble,
                "bubble_analytic": self.bubble_analytic, "bubble_ratio": self.bubble_ratio,
                "bubble_ratio_analytic": self.bubble_ratio_analytic, "dp_ms": self.dp_ms,
                "dp_exposed_ms": self.dp_exposed_ms, "ops_simulated": sum(self.reuse.get("ops", [])),
                "wall_s": self.wall_s, "memory_peak_gib": self.memory.get("peak_gib"),
                "memory_stage": self.memory.get("stage"),
                **{f"memory_{k}_gib": v for k, v in self.memory.get("parts_gib", {}).items()}}


def _main_block(graph: WorkloadGraph) -> Block | None:
    return max(graph.blocks, key=lambda b: b.size * b.count) if graph.blocks else None


def with_layers(graph: WorkloadGraph, per_stage: list[int]) -> WorkloadGraph:
    """The graph with its main block cut to ``sum(per_stage)`` instances (the first ones; ops after the block
    read the last kept instance), the stages holding ``per_stage`` of them (``meta["stage_layers"]``)."""
    b = _main_block(graph)
    keep = sum(per_stage)
    if b is None or not 1 <= keep <= b.count:
        raise WorkloadError(f"{graph.name}: cannot keep {keep} layers of its main block")
    cut_lo, cut_hi = b.first + keep * b.size, b.first + b.count * b.size
    shift = cut_hi - cut_lo

    def remap(d):
        if d < cut_lo:
            return d
        if d < cut_hi:  # a removed instance: the same op of the last kept one
            return cut_lo - b.size + (d - b.first) % b.size
        return d - shift

    ops = [replace(op, deps=tuple(sorted({remap(d) for d in op.deps})))
           for i, op in enumerate(graph.ops) if not cut_lo <= i < cut_hi]
    blocks = [Block(b.prefix, b.first, b.end, keep)] + [x for x in graph.blocks if x is not b and x.end <= b.first]
    return WorkloadGraph(f"{graph.name} ({keep} layers)", ops, source=graph.source, inputs=graph.inputs,
                         blocks=blocks, meta={**graph.meta, "stage_layers": list(per_stage)})


def _measure(graph, system, plan, precision, optimizer, replicas, tp_ranks) -> tuple[dict[str, float], Lowered]:
    """One simulated step: every additive figure of it (ps, FLOPs, counts, bytes), by name."""
    lo = lower(graph, system, plan, phase="train", precision=precision, optimizer=optimizer, replicas=replicas,
               tp_ranks=tp_ranks)
    res = lo.run()
    q: dict[str, float] = {"step": float(res.makespan_ps), "ops": float(len(lo.program))}
    c = timeline.span_columns(lo)  # the selections below as arrays over the spans (the predicates they tabulate:
    dp = dp_collectives(c)         # is_dp_collective, a span's pass in COMPUTE, its kind in COMM_KINDS)
    compute, comm = c.pass_in(COMPUTE), c.kind_in(COMM_KINDS)
    q["forward"] = lo.intervals(res, c.pass_in(("forward",)))
    q["backward"] = lo.intervals(res, c.pass_in(("backward", "recompute")) & ~dp)
    q["optimizer"] = lo.intervals(res, c.pass_in(("optimizer",)))
    which, first, last = _in_flight(lo, res, dp)  # the data-parallel collectives, each from its first transfer
    gar = c.kind_code[which] == (c.kinds.index("grad_all_reduce") if "grad_all_reduce" in c.kinds else -1)
    q["grad_all_reduce"] = float(timeline.union_length(first[gar], last[gar]))  # ... to its last
    q["span"] = float(timeline.extent(lo, res, compute & ~dp))
    t0 = int(res._core.start_ps)
    for stage in range(plan.pp):
        on = c.stage == stage
        dp_iv = _merge(list(zip(first[on[which]].tolist(), last[on[which]].tolist())))
        hide = _op_intervals(lo, res, on & compute & ~comm, launches=True)
        q[f"dp.{stage}"], q[f"dpx.{stage}"] = float(_length(dp_iv)), float(_uncovered(dp_iv, hide))
        q[f"busy.{stage}"] = lo.intervals(res, on & compute & ~dp)
        cut = timeline.partition_codes(lo, res, np.where(on, c.pass_code, -1), c.passes, comm, t0,
                                       t0 + int(res.makespan_ps))
        for k, v in cut.items():
            k = "bubble" if k == "idle" and plan.pp > 1 else k
            q[f"part.{k}"] = q.get(f"part.{k}", 0.0) + v / plan.pp
    for k, v in lo.gemm_flops_by_pass.items():
        q[f"flops.{k}"] = v
    for k, v in lo.counts.items():
        q[f"count.{k}"] = float(v)
    for k, v in lo.dp_bytes.items():
        q[f"bytes.{k}"] = float(v)
    return q, lo


def _merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _op_intervals(lo: Lowered, res, select, launches: bool = False) -> list[tuple[int, int]]:
    """[start, end) ps of every op of the selected spans that ran, merged; a GPU kernel's host launch only with
    ``launches``."""
    return timeline.merged(lo, res, select, launches)


def _in_flight(lo: Lowered, res, dp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each data-parallel collective's time in flight: from the start of its first transfer or kernel to the end of
    its last (gaps inside, where a step waits, included). A GPU collective's host launch (``launch`` ops: the NCCL
    call, issued in program order, possibly long before its data is ready) is not. ``dp``: which spans are the
    collectives (a bool array over ``lo.spans``). Returns the indices of those that ran, their starts and ends."""
    t = timeline.op_times(lo, res)
    spans = np.flatnonzero(dp)
    ops = t.ops_of(dp)
    owner = np.repeat(spans, t.span_len[dp])
    keep = (t.start[ops] >= 0) & ~_launch_ops(res, len(t.start))[ops]
    ops, owner = ops[keep], owner[keep]
    if len(ops) == 0:
        return owner, ops, ops
    heads = np.flatnonzero(np.append(True, owner[1:] != owner[:-1]))  # each span's ops are consecutive
    return owner[heads], np.minimum.reduceat(t.start[ops], heads), np.maximum.reduceat(t.end[ops], heads)


def _launch_ops(res, n: int) -> np.ndarray:
    """Whether each of the run's ``n`` ops that ran is a host launch (a kernel's, or an NCCL call's): read off the
    op log's kinds."""
    out = np.zeros(n, dtype=bool)
    kinds = list(res._core.kind_names)
    if "launch" in kinds:
        log = res._core.log()
        out[np.asarray(log["op"])[np.asarray(log["kind"]) == kinds.index("launch")]] = True
    return out


def _length(iv: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in iv)


def _uncovered(iv: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """ps of the merged intervals ``iv`` that the merged intervals ``cover`` do not overlap."""
    out, k = 0, 0
    for a, b in iv:
        while k < len(cover) and cover[k][1] <= a:
            k += 1
        x, j = a, k
        while j < len(cover) and cover[j][0] < b:
            out += max(0, min(cover[j][0], b) - x)
            x = max(x, cover[j][1])
            j += 1
        out += max(0, b - x)
    return out


def _extend(measure, first: int, unit: int, target: int, *, budget: int | None, info: dict):
    """The step at ``target`` (layers per chunk, or microbatches) from the periodic schedule: ``measure(x)`` at
    x, x + unit and x + 2 unit (x = first, then a unit up, three windows at most); when the makespan's two
    increments agree (PERIODIC) every additive figure is extended from x + 2 unit to ``target`` (which must lie
    a whole number of units past it). ``budget``: the most of x summed over the simulations (they must cost
    less than ``target`` itself). None when no window agrees below ``target`` or within the budget."""
    sims: dict[int, tuple[dict, Lowered]] = {}

    def at(x):
        if x not in sims:
            sims[x] = measure(x)
        return sims[x][0]

    for k in range(3):
        x = first + k * unit
        new = [y for y in (x, x + unit, x + 2 * unit) if y not in sims]
        if x + 2 * unit >= target or (budget is not None and sum(sims) + sum(new) >= budget):
            return None
        a, b1, b2 = at(x), at(x + unit), at(x + 2 * unit)
        d1, d2 = b1["step"] - a["step"], b2["step"] - b1["step"]
        info["residual_ps"] = d2 - d1
        if abs(d2 - d1) <= PERIODIC * abs(d2):
            n = (target - (x + 2 * unit)) // unit
            q = {key: b2.get(key, 0.0) + n * (b2.get(key, 0.0) - b1.get(key, 0.0)) for key in set(b1) | set(b2)}
            q["ops"] = b2["ops"]
            return q, sims[x + 2 * unit][1]
    return None


def training_step(graph: WorkloadGraph, system, plan: ParallelPlan | None = None, *, precision: str | None = None,
                  optimizer: str = "adam", reuse: bool = True, mirror_replicas: bool = False,
                  replicas: str | None = None, check_memory: bool = True,
                  tp_ranks: str | None = None) -> TrainingEstimate:
    """One training step of ``graph`` (one microbatch's forward) at ``plan``: forward, backward (with the plan's
    recompute), the data-parallel exchange of the plan's sharding overlapping the backward, Adam, 1F1B over pp
    stages (interleaved over pp x v model chunks when plan.interleave = v > 1; kernbench.workloads.training,
    .sharding). ``reuse``: simulate a few layers per stage (per chunk) and extend the periodic schedule (the
    module doc), else every layer. ``replicas``: ``all``, ``mirror`` (``mirror_replicas=True``: replicas past the
    first reuse its compute and append only their collectives and transfers) or ``one`` (replica 0 alone, the
    others only in its data-parallel collectives); both approximations: the module doc. The default (None) is
    ``one`` on a GPU machine -- where it was measured within 0.5 % of every replica lowered, and a 1.7B step's
    904 s became 1 s -- and ``all`` elsewhere (a SIP machine's replicas share its mesh). ``tp_ranks``: ``all``, or
    ``one`` (rank 0 of each tensor-parallel group lowered, the others only in its group's collectives: the module
    doc); the default (None) is ``one`` on a GPU machine for a model without MoE layers, ``all`` elsewhere. Runs on
    ``system`` (advances its clock).

    Memory: before simulating, each stage's footprint per rank (kernbench.workloads.memory.training_footprint,
    from the model's dimensions the hand-built graph records) is checked against the rank's HBM less the
    training reserve; a plan that does not fit raises WorkloadError naming the stage, the rank, the need, the
    budget and the shortfall. ``check_memory=False`` reports the figure (``TrainingEstimate.memory``) without
    refusing."""
    plan = plan or ParallelPlan()
    if not graph.ops:  # nothing to run: no step time, and no gradient for the data-parallel exchange
        raise WorkloadError(f"training_step: the graph {graph.name!r} has no ops")
    if replicas is None and not mirror_replicas:
        replicas = "one" if getattr(system, "target", None) == "gpu" else "all"
    replicas = replicas_mode(replicas, mirror_replicas, "training_step")
    tp_ranks = tp_ranks_mode(tp_ranks, graph, system, "training_step")
    w0 = time.perf_counter()
    plan.place(system)
    context.check_cp(graph, plan, system)  # before any simulation: a clear error for a sequence cp cannot cut
    model_chunks(graph, plan)  # interleave: the layers must cut into pp x v equal chunks (a clear error first)
    mem = _memory_of(graph, system, plan, precision, check_memory)
    b = _main_block(graph)
    # layers per stage, or per model chunk when interleaved (the reuse keeps the chunks equal)
    full = stage_layers(b.count, plan.chunks) if b is not None and b.count >= plan.chunks else None
    info: dict[str, Any] = {"layers": b.count if b else 0, "mode": "full", "simulated": [], "ops": [],
                            "microbatches": [], "replicas": replicas, "tp_ranks": tp_ranks}
    # The microbatches' period: a group of pp (the interleaved schedule runs them in groups of pp; in 1F1B one
    # microbatch repeats the makespan, but the breakdown's launch, exposed communication and bubble trade places
    # from one microbatch to the next and repeat only over pp of them).
    M, u = plan.microbatches, plan.pp

    def one(g, counts):
        """The step of graph g (counts: its layers per stage, for the record): its microbatches extended from a
        window of fewer when that costs less than simulating them all (the module doc), else simulated."""
        def sim(m):
            got = _measure(g, system, replace(plan, microbatches=m), precision, optimizer, replicas, tp_ranks)
            info["simulated"].append(counts)
            info["ops"].append(int(got[0]["ops"]))
            info["microbatches"].append(m)
            return got
        first = max(2, u + M % u)
        if reuse and 3 * first + 3 * u < M:
            got = _extend(sim, first, u, M, budget=M, info=info)
            if got is not None:
                info["extended"].add("microbatches")
                return got
        return sim(M)

    def layers(c):  # the step with c layers on the smallest stage (chunk), each keeping its difference
        counts = [n - (min(full) - c) for n in full]
        return one(with_layers(graph, counts), counts)

    info["extended"] = set()
    got = None
    if reuse and full is not None and min(full) > 4:
        got = _extend(layers, 2, 1, min(full), budget=None, info=info)
        if got is not None:
            info["extended"] = {"layers"} | info["extended"]
    if got is None:
        info["extended"].clear()
        got = one(graph, full or [])
    q, lo = got
    info["extended"] = sorted(info["extended"])
    info["mode"] = "extrapolated" if info["extended"] else "full"
    pp, M, vM = plan.pp, plan.microbatches, plan.interleave * plan.microbatches
    span = max(q["span"], 1.0)
    idle = [1.0 - q.get(f"busy.{s}", 0.0) / span for s in range(pp)]
    bubble = sum(idle) / len(idle) if pp > 1 else 0.0
    tokens = plan.dp * M * int(graph.meta.get("tokens", 0) or _tokens(graph))
    fwd_flops = sum(op.flops for op in graph.ops)
    return TrainingEstimate(
        step_ms=q["step"] / 1e9, forward_ms=q["forward"] / 1e9, backward_ms=q["backward"] / 1e9,
        optimizer_ms=q["optimizer"] / 1e9, grad_allreduce_ms=q["grad_all_reduce"] / 1e9,
        gemm_flops={k[6:]: v for k, v in q.items() if k.startswith("flops.")},
        bubble=bubble, bubble_analytic=(pp - 1) / (vM + pp - 1), plan=plan,
        counts={k[6:]: int(round(v)) for k, v in q.items() if k.startswith("count.")},
        wall_s=time.perf_counter() - w0, lowered=lo,
        parts={k[5:]: v / 1e9 for k, v in q.items() if k.startswith("part.")},
        tokens=tokens, model_flops=3.0 * fwd_flops * M * plan.dp,
        dp_bytes={k[6:]: int(round(x)) for k, x in q.items() if k.startswith("bytes.")}, reuse=info,
        bubble_ratio=bubble / (1.0 - bubble) if bubble < 1.0 else float("inf"),
        bubble_ratio_analytic=(pp - 1) / vM,
        dp_ms=sum(q.get(f"dp.{s}", 0.0) for s in range(pp)) / pp / 1e9,
        dp_exposed_ms=sum(q.get(f"dpx.{s}", 0.0) for s in range(pp)) / pp / 1e9,
        dp_exposed_by_stage=[q.get(f"dpx.{s}", 0.0) / 1e9 for s in range(pp)], memory=mem)


def _memory_of(graph: WorkloadGraph, system, plan: ParallelPlan, precision: str | None, check: bool) -> dict:
    """The plan's memory per rank (TrainingEstimate.memory), refused when it does not fit and ``check``."""
    spec, held = _memory.spec_of_graph(graph)
    if spec is None:
        return {"skipped": held}
    fp = _memory.training_footprint(spec, plan, micro_batch=held["micro_batch"], seq=held["seq"],
                                    precision=precision or held["dtype"], layers=held["layers"],
                                    embed=held["embed"], head=held["head"])
    cp = int(getattr(plan, "cp", 1))
    what = (f"training {graph.name} at dp {plan.dp} x tp {plan.tp} x pp {plan.pp}" + (f" x cp {cp}" if cp > 1 else "")
            + (f" (ep {plan.ep})" if plan.ep > 1 else "") + (f", interleave {plan.interleave}" if plan.interleave > 1
                                                              else "")
            + f", micro-batch {held['micro_batch']} x {held['seq']} tokens, {plan.microbatches} "
            f"micro-batch{'es' if plan.microbatches != 1 else ''}, "
            f"sharding {plan.sharding}, recompute {plan.recompute}")
    return {**_memory.check_training(fp, system, plan, what, refuse=check), "checked": bool(check)}


def _tokens(graph: WorkloadGraph) -> int:
    """Tokens of one microbatch: the first embedding's, else the first matmul's rows."""
    for op in graph.ops:
        if op.kind == "embedding":
            return int(op.attrs["tokens"])
    for op in graph.ops:
        if op.kind == "matmul":
            return int(op.attrs["m"]) * int(op.attrs.get("batch", 1))
    return 0

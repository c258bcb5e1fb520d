"""A training step lowered into one Program: forward, backward, gradient all-reduce, optimizer, 1F1B.

The backward pass is derived from the forward graph, op by op in reverse
(docs/model-estimates.md):

* a matmul ``C[m,n] = A[m,k] B[k,n]`` has two backward GEMMs of the forward's
  size: dgrad ``dA = dC B^T`` (m x k, inner n) and wgrad ``dB = A^T dC``
  (k x n, inner m) -- 2x the forward GEMM FLOPs, exactly; the same
  tensor-parallel sharding (a column-parallel linear's dgrad is a partial sum:
  an all-reduce of ``m x k`` follows; a row-parallel one needs none); with
  sequence parallelism the conjugates of the forward's collectives and
  Megatron's re-gather of a column-parallel linear's input (``_linear_backward``);
* a conv: the same two GEMMs of its im2col shape;
* attention: the target's backward -- on a GPU one fused kernel of 2.5x the
  forward's FLOPs (dQ, dK, dV with the scores recomputed) at its own efficiency
  (kernbench.workloads.gpu_kernels); on a SIP PE two forward attention programs;
* elementwise, norm, softmax, reduce, embedding: the forward's vector pipeline
  with one more load stream (the incoming gradient) -- the saved activations
  re-read, the input gradient written; copies repeat their DMA; views are free.

Gradients and weights across the ``dp`` replicas: per layer (a block instance, or the ops outside the
blocks), as ``ParallelPlan.sharding`` says (kernbench.workloads.sharding): an all-reduce of the layer's
gradients (none), a reduce-scatter and an all-gather of the updated weights (zero1, zero2), or FSDP's
gathers before the layer's forward and backward and a reduce-scatter after it; each overlaps the backward
of the earlier layers, and the layer's optimizer step follows its reduction, on the rank's shard.

MoE layers (``moe`` ops, expert parallelism ``ParallelPlan.ep``): kernbench.workloads.moe_train -- a chunk
holding MoE ops runs its forward op-major over the data ranks, its backward with the data ranks in lockstep at each
MoE op (the op's backward lowered over every EP group at once), and the experts' gradients are reduced over
their expert-data-parallel groups (sharding.py; sharding ``none`` only). With context parallelism the same holds at
attention (kernbench.workloads.context), in the same chunk when the plan has both.

Recompute (``ParallelPlan.recompute``, Megatron-LM's): ``full`` lowers each layer's forward again right
before its backward, from the layer's input (an MoE layer's too: its dispatch and combine all-to-alls over the EP
groups again, every replica at once, as Megatron's checkpointed layer reruns them); ``selective`` the attention
op's forward before its backward. The recomputed ops are pass ``recompute``.

Optimizer (Adam, mixed precision; assumed, the usual Megatron layout): per
parameter a bf16/fp16 weight and gradient plus fp32 master weight, m and v
(16 bytes per parameter); the step reads gradient, master, m, v and writes
master, m, v and the 16-bit weight: the vector pipeline with 4 fp32 load
streams, 4 store streams and 4 passes over the parameter's elements.

Pipeline (pp > 1): 1F1B per stage -- stage s runs ``min(pp - s - 1, M)``
warm-up forwards, then alternates one forward and one backward, then the
remaining backwards; activations go forward and gradients back by DMA between
the stages' PEs.

Interleaved 1F1B (``ParallelPlan.interleave`` = v > 1; Megatron-LM's virtual
pipeline, Narayanan et al. 2021, ``forward_backward_pipelining_with_interleaving``
in megatron/core/pipeline_parallel/schedules.py): the main block's layers are
cut into pp x v equal model chunks (``model_chunks``), stage s holding chunks
s, s + pp, s + 2 pp, ...; a microbatch's forward runs chunk 0, 1, ..., pp v - 1
(crossing the stages v times, each crossing the same stage-to-stage DMA), its
backward the reverse. Each stage runs ``interleaved_1f1b``'s order: the
microbatches in groups of pp, ``(pp - s - 1) x 2 + (v - 1) x pp`` warm-up
forwards (at most v M), then one forward and one backward alternately, then the
remaining backwards. The pipeline's idle time falls from (pp - 1) (t_f + t_b)
to (pp - 1) (t_f + t_b) / v (t_f, t_b: a stage's forward and backward of one
microbatch), at the price of v times the stage-to-stage transfers.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Sequence

from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.lowerer import SEQ, SHARD, VECTOR_PASSES, Lowerer, forward_pass, stage_ranges
from kernbench.workloads import context
from kernbench.workloads.moe_lower import lower_moe
from kernbench.workloads.moe_train import MOE_RECOMPUTE, MOE_REQUEST, backward_moe, drive
from kernbench.workloads.sharding import ROOT, DataParallel

__all__ = ["lower_training", "one_f_one_b", "interleaved_1f1b", "warmup_forwards", "model_chunks",
           "ADAM_BYTES_PER_PARAM", "REPLICAS", "replicas_mode", "TP_RANKS", "tp_ranks_mode"]

#: How a step lowers its data-parallel replicas (lower_training).
REPLICAS = ("all", "mirror", "one")
#: How a step lowers the ranks of each tensor-parallel group (lower_training, Lowerer.represent_tp_ranks).
TP_RANKS = ("all", "one")

#: Adam with mixed precision (assumed): 16-bit weight + 16-bit grad + fp32 master, m, v.
ADAM_BYTES_PER_PARAM = 2 + 2 + 4 + 4 + 4


def replicas_mode(replicas: str | None, mirror_replicas: bool, where: str) -> str:
    """The REPLICAS mode a call asks for: ``replicas``, else ``mirror`` when ``mirror_replicas`` (its older
    spelling), else ``all``; WorkloadError naming ``where`` when the two disagree or the mode is unknown."""
    if mirror_replicas and replicas not in (None, "mirror"):
        raise WorkloadError(f"{where}: mirror_replicas=True and replicas={replicas!r} say different things")
    mode = replicas or ("mirror" if mirror_replicas else "all")
    if mode not in REPLICAS:
        raise WorkloadError(f"{where}: replicas {mode!r}: expected one of {', '.join(REPLICAS)}")
    return mode


def tp_ranks_mode(tp_ranks: str | None, graph, system, where: str) -> str:
    """The TP_RANKS mode a call asks for. None: ``one`` where it was measured equal to every rank lowered -- a GPU
    machine (one box, or a cluster of one scalable unit: its leaves one group in one pod) and a model without MoE
    layers -- else ``all``: MoE layers (a group's ranks route different token slices), the SIP machine, and three
    tiers of several pods, where every rail's transfers between pods cross the same spine-core links (there one
    rank lowered was 1.7-2.4 % fast: docs/model-estimates.md). WorkloadError naming ``where`` for an unknown mode,
    and for ``one`` with MoE layers (the SIP machine: Lowerer.represent_tp_ranks)."""
    moe = any(op.kind == "moe" for op in graph.ops)
    if tp_ranks is None:
        if getattr(system, "target", None) != "gpu" or moe:
            return "all"
        cluster = system.cluster()
        # one scalable unit (its leaves one group, one pod): the rails meet only in its own spines; across units
        # every rail's transfers share the spines (Llama-3.1-70B on 2,048 H100s, 8 units: one rank 1.2 % fast)
        groups = {leaf.get("group", 0) for leaf in cluster.get("leaves", [])} if cluster else set()
        return "all" if cluster and (int(cluster.get("pods", 1)) > 1 or len(groups) > 1) else "one"
    if tp_ranks not in TP_RANKS:
        raise WorkloadError(f"{where}: tp_ranks {tp_ranks!r}: expected one of {', '.join(TP_RANKS)}")
    if tp_ranks == "one" and moe:
        raise WorkloadError(f"{where}: tp_ranks='one' with MoE layers: the tensor-parallel ranks route different "
                            "token slices to the experts, so rank 0 does not stand for its group (use tp_ranks='all')")
    return tp_ranks


def one_f_one_b(pp: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """The 1F1B order of every stage: a list of ("F"|"B", microbatch)."""
    out = []
    for s in range(pp):
        warm = min(pp - s - 1, microbatches)
        order = [("F", j) for j in range(warm)]
        for j in range(microbatches - warm):
            order += [("F", warm + j), ("B", j)]
        order += [("B", j) for j in range(microbatches - warm, microbatches)]
        out.append(order)
    return out


def warmup_forwards(pp: int, v: int, microbatches: int, stage: int) -> int:
    """Warm-up forwards of stage ``stage``, before its steady state (a forward then a backward, repeated):
    1F1B's ``min(pp - s - 1, M)``, and with v > 1 model chunks Megatron-LM's
    ``min((pp - s - 1) x 2 + (v - 1) x pp, v M)``."""
    if v == 1:
        return min(pp - stage - 1, microbatches)
    return min((pp - stage - 1) * 2 + (v - 1) * pp, v * microbatches)


def interleaved_1f1b(pp: int, v: int, microbatches: int) -> list[list[tuple[str, int, int]]]:
    """Megatron-LM's interleaved 1F1B order of every stage: a list of ("F"|"B", microbatch, chunk), where chunk
    is the stage's own model chunk 0..v-1 (the model's chunk ``chunk x pp + stage``). The k-th forward of a stage
    runs chunk ``(k // pp) % v`` of microbatch ``(k // (pp v)) pp + k % pp``, its k-th backward chunk
    ``v - 1 - (k // pp) % v`` of the same microbatch; warm-up forwards (``warmup_forwards``), then one forward
    and one backward alternately, then the remaining backwards. v = 1 is ``one_f_one_b`` exactly (as Megatron
    runs its non-interleaved schedule then)."""
    for name, x in (("pp", pp), ("interleave", v), ("microbatches", microbatches)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise WorkloadError(f"interleaved_1f1b: {name} must be an integer >= 1, got {x!r}")
    if v == 1:
        return [[(what, j, 0) for what, j in order] for order in one_f_one_b(pp, microbatches)]
    if pp == 1:
        raise WorkloadError(f"interleaved_1f1b: interleave = {v} needs pp > 1 (pp = 1)")
    if microbatches % pp:
        raise WorkloadError(f"interleaved_1f1b: interleave = {v} runs the microbatches in groups of pp: "
                            f"microbatches = {microbatches} is not a multiple of pp = {pp}")
    total = v * microbatches

    def item(what: str, k: int) -> tuple[str, int, int]:
        chunk = (k // pp) % v
        return what, (k // (pp * v)) * pp + k % pp, chunk if what == "F" else v - 1 - chunk

    out = []
    for s in range(pp):
        warm = warmup_forwards(pp, v, microbatches, s)
        order = [item("F", k) for k in range(warm)]
        for k in range(total - warm):
            order += [item("F", warm + k), item("B", k)]
        order += [item("B", k) for k in range(total - warm, total)]
        out.append(order)
    return out


def model_chunks(graph, plan) -> list[int]:
    """Per op its model chunk (``plan.chunks`` = pp x interleave of them; chunk c runs on stage c % pp): the main
    block's layers cut into equal contiguous chunks, ops before it in chunk 0, after it in the last. Interleave 1:
    the pipeline stage (``stage_ranges``, uneven stages allowed). Interleave v > 1 needs the layers to divide into
    the pp x v chunks."""
    if plan.interleave == 1:
        return stage_ranges(graph, plan.pp)
    n = plan.chunks
    what = f"interleave = {plan.interleave} x pp = {plan.pp} = {n} model chunks"
    if not graph.blocks:
        raise WorkloadError(f"{graph.name}: {what} split repeated layers, and the graph declares no blocks")
    b = max(graph.blocks, key=lambda x: x.size * x.count)
    counts = graph.meta.get("stage_layers")
    if counts is None and b.count % n:
        raise WorkloadError(f"{graph.name}: {what}: the {b.count} layers of block {b.prefix!r} do not divide into "
                            f"{n} equal chunks")
    if counts is not None and (len(counts) != n or len(set(counts)) != 1):
        raise WorkloadError(f"{graph.name}: meta stage_layers {list(counts)}: {what} need {n} equal chunks")
    return stage_ranges(graph, n)


def _block_of(graph) -> list[str]:
    """Per op its block instance (``model.layers.3``), or ``outside``."""
    out = [ROOT] * len(graph.ops)
    for b in graph.blocks:
        for inst in range(b.count):
            for i in range(b.first + inst * b.size, b.first + (inst + 1) * b.size):
                out[i] = f"{b.prefix}.{inst}"
    return out


def _recompute_layers(graph) -> list[str]:
    """Per op the layer full recompute runs again (``model.layers.3``), or ``outside`` (not recomputed): the
    block instances, or where the graph stamps every layer out (DeepSeek-MoE's dense first layer: no repeated
    block), the layers its ``meta["layer_prefix"]`` names ``{prefix}.{i}.``."""
    prefix = graph.meta.get("layer_prefix")
    if graph.blocks or not prefix:
        return _block_of(graph)
    out = [ROOT] * len(graph.ops)
    for i, op in enumerate(graph.ops):
        head, _, rest = op.name.partition(prefix + ".")
        index = rest.split(".", 1)[0]
        if not head and rest and index.isdigit():
            out[i] = f"{prefix}.{index}"
    return out


def _layer_of(graph) -> list[str]:
    """Per op the gradient bucket it belongs to: the block instance (``model.layers.3``) or ``outside``; an MoE
    op (routed experts, reduced over their own group: sharding.py) is a unit of its own, named by the op."""
    out = _block_of(graph)
    for i, op in enumerate(graph.ops):
        if op.kind == "moe":
            out[i] = op.name
    return out


def backward_op(L: Lowerer, i: int, group, deps: list[list], state: dict, stage: int, mb: int) -> list[list]:
    """Lower the backward of forward op ``i``; ``deps`` per rank (its consumers' backward, its forward)."""
    g, tp = L.g, len(group)
    op, a = g.ops[i], g.ops[i].attrs
    first = len(L.prog)
    e = L.esize(op)
    sin = L.state_in(i, state)
    kind = op.kind
    res = deps
    if kind == "view":
        return deps
    if kind in ("matmul", "conv"):
        if kind == "conv":
            groups = int(a.get("groups", 1))
            m, n, k, b, rule, fused = int(a["gemm_m"]) * groups, int(a["gemm_n"]), int(a["gemm_k"]), 1, \
                "replicated", 1
        else:
            if i in L.leader_of:
                return deps  # computed by its leader's fused GEMMs
            m, n, k, b = L.tok(a["m"]), int(a["n"]), int(a["k"]), int(a.get("batch", 1))
            rule, fused = L.rule.get(i, ("replicated", 1))
            if fused > 1:
                n = sum(int(g.ops[j].attrs["n"]) for j in L.fused[i])
        M = b * m
        if rule == "column":
            n = -(-n // tp)
        elif rule == "row":
            k //= tp
        elif rule == "batch":
            M = b // tp * m
        return _linear_backward(L, i, group, deps, rule, M, n, k, e, sin, stage, mb)
    if kind == "attention":
        if L.cp > 1:
            raise L.err(i, "with cp > 1 an attention op's backward is lowered over its context-parallel group by "
                           "context.attention")
        if L.plan.recompute == "selective":  # Megatron's selective recompute: the attention core's forward again
            L.recomputing = True
            try:
                res = L.attention(i, group, deps, "forward")
                L.span(i, kind, first, stage, "forward", mb, op.name + " recompute")
            finally:
                L.recomputing = False
            first = len(L.prog)
        res = L.attention(i, group, res, "backward")  # the target's backward kernel(s) (targets.py)
    elif kind == "embedding":
        tokens, dim = L.tok(a["tokens"]), int(a["dim"])
        if tp > 1 and L.plan.sp:  # the forward reduce-scattered the lookups (g-bar): the gradient is all-gathered
            ag = L.collective("all_gather", group, tokens * dim * e, L.joined(deps), op.name + " grad all-gather")
            L.span(i, "all_gather", first, stage, "backward", mb, op.name + " grad all-gather")
            res = [d + ag for d in deps]
            first = len(L.prog)
        res = L.each_rank(group, lambda t, pe: L.vector(pe, tokens * dim, dim, e, 1, 1, 1, op.name + " backward",
                                                        res[t]))
    elif kind in VECTOR_PASSES:
        el = L.tok(a["elements"])
        split = tp if sin in (SHARD, SEQ) else 1
        el = -(-el // split)
        row = op.outputs[0].shape[-1] if op.outputs and op.outputs[0].shape else el
        loads = max(1, int(a.get("operands", 1))) + 1
        res = L.each_rank(group, lambda t, pe: L.vector(pe, el, row, e, loads, VECTOR_PASSES[kind], loads - 1,
                                                        op.name + " backward", deps[t]))
    elif kind == "copy":
        split = tp if sin in (SHARD, SEQ) else 1
        res = L.each_rank(group, lambda t, pe: L.copy(pe, -(-L.tok(a["bytes"]) // split), op.name + " backward",
                                                      deps[t]))
    L.span(i, kind, first, stage, "backward", mb)
    return res


def _linear_backward(L: Lowerer, i: int, group, deps: list[list], rule: str, M: int, n: int, k: int, e: int,
                     sin: str, stage: int, mb: int) -> list[list]:
    """The dgrad and wgrad GEMMs of linear ``i`` (per rank ``M x k x n``: its sharded sizes) and the tensor-parallel
    collectives of its backward. Without sp, a column-parallel linear's input gradient is a partial sum: an
    all-reduce of ``M x k`` follows (f's conjugate). With sp (Korthikanti et al. 2022, section 4.2.2, and
    Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication.backward``), every collective carries the
    whole ``M x k`` or ``M x n`` activation of the tp group:

    * a row-parallel linear's output was reduce-scattered (g-bar): its gradient is all-gathered first;
    * a column-parallel linear's input was all-gathered (g): Megatron keeps only the sequence shard and
      all-gathers it again for the wgrad, issued at the start of the backward so that it overlaps the dgrad GEMM,
      and the input gradient is reduce-scattered (g's conjugate) -- here after the wgrad, as the all-reduce."""
    tp, op = len(group), L.g.ops[i]
    first = len(L.prog)
    gemm_deps, regather = deps, [[] for _ in group]
    if rule == "row" and tp > 1 and L.plan.sp:
        ag = L.collective("all_gather", group, M * n * e, L.joined(deps), op.name + " grad all-gather")
        L.span(i, "all_gather", first, stage, "backward", mb, op.name + " grad all-gather")
        gemm_deps = [d + ag for d in deps]
        first = len(L.prog)
    gathered = rule == "column" and tp > 1 and sin == SEQ
    if gathered:
        ag = L.collective("all_gather", group, M * k * e, L.joined(deps), op.name + " input all-gather")
        L.span(i, "all_gather", first, stage, "backward", mb, op.name + " input all-gather")
        regather = [ag] * tp
        first = len(L.prog)

    def grads(t, pe):
        d = L.gemm(pe, M, k, n, op, gemm_deps[t], "backward")  # dgrad: dA = dC B^T
        return L.gemm(pe, k, n, M, op, d + regather[t], "backward")  # wgrad: dB = A^T dC (activation x activation)
    res = L.each_rank(group, grads)
    L.span(i, op.kind, first, stage, "backward", mb)
    if rule == "column" and tp > 1:  # the input gradient of a column-parallel linear is a partial sum
        first = len(L.prog)
        what = "reduce_scatter" if gathered else "all_reduce"
        r = L.collective(what, group, M * k * e, L.joined(res), op.name + " dgrad " + what)
        L.span(i, what, first, stage, "backward", mb, op.name + " dgrad " + what)
        res = [r] * tp
    return res


def _param_bytes_per_rank(L: Lowerer, ops: Sequence[int], tp: int) -> int:
    """Parameter elements one rank holds of these ops (each name once; tp-split where the op is sharded).

    A lowered op's rule is the one Lowerer.matmul gave it; an op not lowered yet (FSDP gathers a unit before its
    first forward) gets the rule the lowering will give it: the plan's, else a weight matmul is row- or
    column-parallel when tp > 1 -- both split its weight over the tp ranks."""
    seen: dict[str, int] = {}
    for i in ops:
        op = L.g.ops[i]
        lead = L.leader_of.get(i, i)
        if lead in L.rule:
            rule = L.rule[lead][0]
        elif op.kind == "matmul" and op.attrs.get("weight"):
            rule = L.rule_override(i) or ("column" if tp > 1 else "replicated")
        else:
            rule = "replicated"
        split = tp if (rule in ("column", "row") or op.kind == "embedding") else 1
        if op.kind == "moe":  # routed experts: a rank holds E / ep of them, whole (moe_lower)
            split = L.plan.ep
        for p in op.params:
            seen.setdefault(p.name, -(-p.spec.numel // split))
    return sum(seen.values())


def lower_training(L: Lowerer, chunks: Sequence[int], *, optimizer: str = "adam", replicas: str = "all",
                   tp_ranks: str = "all") -> None:
    """Append one training step to ``L``'s program. ``chunks``: per op its model chunk (``model_chunks``; with
    interleave 1 its pipeline stage). ``replicas`` (REPLICAS): ``all`` lowers every dp replica; ``mirror``:
    the replicas are identical, so replica r > 0 reuses replica 0's compute (Lowerer.mirror_replicas; with MoE
    layers replica r reuses replica r % ep's) and appends only its collectives and transfers; ``one``: only
    replica 0 is lowered (with MoE layers the ep replicas of EP group 0), the others join its data-parallel
    collectives (Lowerer.represent_replicas). ``tp_ranks`` (TP_RANKS): ``all`` lowers every rank of each
    tensor-parallel group, ``one`` rank 0 alone, the others only in its group's collectives
    (Lowerer.represent_tp_ranks)."""
    if optimizer != "adam":
        raise WorkloadError(f"training: optimizer {optimizer!r}: only 'adam' is modelled")
    g, plan = L.g, L.plan
    pp, M, C = plan.pp, plan.microbatches, plan.chunks
    stages = [c % pp for c in chunks]
    layer, block = _layer_of(g), _recompute_layers(g)
    if plan.recompute == "selective" and not any(op.kind == "attention" for op in g.ops):
        raise WorkloadError(f"{g.name}: recompute='selective' recomputes the attention core, and the graph has no "
                            "attention op (its attention is not one fused op); use 'full' or 'none'")
    if plan.recompute == "full" and all(b == ROOT for b in block):
        raise WorkloadError(f"{g.name}: recompute='full' recomputes each layer's forward, and the graph names no "
                            "layers (no repeated block, no meta['layer_prefix']); use 'selective' or 'none'")
    moe = any(op.kind == "moe" for op in g.ops)
    if moe and plan.sharding not in ("none", "zero1"):
        raise WorkloadError(f"{g.name}: sharding {plan.sharding!r} with MoE layers: only 'none' and 'zero1' (Megatron's "
                            "distributed optimizer) are lowered for a model with experts (ZeRO-2's and FSDP's sharding "
                            "of the expert gradients and weights over the expert-data-parallel group is not modelled)")
    order = interleaved_1f1b(pp, plan.interleave, M)
    replicas = replicas_mode(replicas, False, "training")
    # the data ranks (dp x cp: kernbench.workloads.plan): data rank r mirrors (or is represented by) r % period,
    # period = lcm(cp, ep) (ParallelPlan.period): the same cp rank (its attention's ring work), the same EP rank of
    # an EP group whose data ranks sit at the same cp ranks (its experts' tokens); with cp = 1 EP rank j of every
    # EP group mirrors data rank j, with ep = 1 cp rank c of every replica mirrors data rank c
    period = plan.period
    if replicas == "mirror" and plan.dp > 1:
        L.mirror_replicas(period)
    elif replicas == "one" and plan.dp > 1:
        L.represent_replicas(period)
    if tp_ranks_mode(tp_ranks, g, L.system, "training") == "one":
        L.represent_tp_ranks()
    ranks = plan.dp_cp
    memos = {(r, j): {"done": {}, "state": {}, "xfer": {}} for r in range(ranks) for j in range(M)}
    bdone = {(r, j): {} for r in range(ranks) for j in range(M)}
    bx = {}
    chunk_ops = [[i for i in range(len(g.ops)) if chunks[i] == c] for c in range(C)]
    moe_in = [any(g.ops[i].kind == "moe" for i in ops) for ops in chunk_ops]
    dp = DataParallel(L, stages, layer, lambda ops: _param_bytes_per_rank(L, ops, plan.tp))
    unit_ops: dict[tuple[str, int], list[int]] = {}  # (unit, chunk) -> its ops there, in graph order
    for i, u in enumerate(layer):
        unit_ops.setdefault((u, chunks[i]), []).append(i)
    unit_last: list[dict[str, int]] = [{} for _ in range(C)]  # per chunk, where each unit's backward ends
    for (u, ch), ops in unit_ops.items():
        unit_last[ch][u] = ops[0]
    block_ops: dict[tuple[str, int], list[int]] = {}  # (block instance, chunk) -> its ops there: full recompute
    for i, u in enumerate(block):
        block_ops.setdefault((u, chunks[i]), []).append(i)

    def forward(rep, c, j, ops=None):
        s = c % pp
        need = (lambda i: dp.need(rep, s, j, "forward", layer[i]) if g.ops[i].params else None)
        forward_pass(L, rep, j, stages, memo=memos[(rep, j)], extra=need, ops=chunk_ops[c] if ops is None else ops)

    def recompute(rep, chunk, j, unit, need):
        """Megatron's full recompute: the block's forward again, from its checkpointed input, before its backward.
        A generator: at an MoE op it yields ``(MOE_RECOMPUTE, op, view)`` and moe_train.drive lowers the op's
        forward again over the EP groups, every replica at once, into ``view`` (the recomputed handles first); with
        cp > 1 it yields at attention, which drive lowers over the cp groups (kernbench.workloads.context)."""
        memo, s = memos[(rep, j)], chunk % pp
        done, group, redone = memo["done"], L.out.placement.group(rep, s), {}

        def dep_of(d):
            return redone[d] if d in redone else done[d] if stages[d] == s else memo["xfer"][(d, s)]

        for i in block_ops[(unit, chunk)]:
            if g.ops[i].kind == "moe":  # its all-to-alls again (the view's writes land in redone)
                yield (MOE_RECOMPUTE, i, {"done": ChainMap(redone, done), "state": memo["state"]})
                continue
            if L.cp > 1 and g.ops[i].kind == "attention":
                redone[i] = yield (context.CP_RECOMPUTE, i,
                                   [sum((dep_of(d)[t] for d in g.ops[i].deps), []) for t in range(plan.tp)])
                continue
            L.recomputing = True  # set per op: the other replicas lower between this generator's yields
            try:
                redone[i], _ = L.forward(i, group, dep_of, memo["state"], s, j,
                                         extra=need if g.ops[i].params else None)
            finally:
                L.recomputing = False
        done.update(redone)  # the backward reads the recomputed activations

    def backward(rep, chunk, j):
        memo, bd, s = memos[(rep, j)], bdone[(rep, j)], chunk % pp
        group = L.out.placement.group(rep, s)
        tp = len(group)
        need: dict[str, list[list]] = {}
        grads: dict[str, list[list]] = {}
        last_of = unit_last[chunk]
        redone: set[str] = set()
        for i in reversed(chunk_ops[chunk]):
            unit = layer[i]
            if unit not in need:  # the unit's backward begins: its weights (FSDP)
                need[unit] = dp.need(rep, s, j, "backward", unit)
            if plan.recompute == "full" and block[i] != ROOT and block[i] not in redone:  # the block's begins
                redone.add(block[i])
                if block[i] not in need:  # an MoE op closing its block: the block's weights
                    need[block[i]] = dp.need(rep, s, j, "backward", block[i])
                yield from recompute(rep, chunk, j, block[i], need[block[i]])
            deps = [list(memo["done"][i][t]) for t in range(tp)]
            if g.ops[i].params:
                deps = [d + x for d, x in zip(deps, need[unit])]
            # a fused leader's GEMMs also wait for the gradients its siblings' consumers send back
            for j2 in L.fused.get(i, [])[1:]:
                if j2 in bd:
                    for t in range(tp):
                        deps[t] += bd[j2][t]
            for c in L.consumers[i]:
                if c not in bd:
                    continue
                if stages[c] == s:
                    for t in range(tp):
                        deps[t] += bd[c][t]
                else:  # the gradient comes back from the next stage
                    key = (rep, j, c, i)
                    if key not in bx:
                        src = L.out.placement.group(rep, stages[c])
                        nbytes = L.tok(sum(x.nbytes for x in g.ops[i].outputs))
                        if memo["state"].get(i) in (SHARD, SEQ):
                            nbytes = -(-nbytes // tp)
                        first = len(L.prog)
                        bx[key] = L.each_rank(group, lambda t, dst: [L.prog._dma_from_model(
                            dst, L.hbm(src[t]), L.hbm(dst), max(1, nbytes), bd[c][t], g.ops[i].name + " grad p2p",
                            "p2p")])
                        L.count("p2p", len(L.lowered_ranks(tp)))
                        L.span(i, "p2p", first, s, "backward", j, g.ops[i].name + " grad p2p")
                    for t in range(tp):
                        deps[t] += bx[key][t]
            if g.ops[i].kind == "moe":  # over the EP groups, once every replica is here (moe_train.drive)
                bd[i], wgrad = yield (MOE_REQUEST, i, deps)
            elif L.cp > 1 and g.ops[i].kind == "attention":  # over the cp groups (context.attention)
                bd[i], wgrad = (yield (context.CP_REQUEST, i, deps)), None
            else:
                bd[i] = wgrad = backward_op(L, i, group, deps, memo["state"], s, j)
            if g.ops[i].params:
                acc = grads.setdefault(unit, [[] for _ in range(tp)])
                for t in range(tp):
                    acc[t].extend(wgrad[t])
            if i == last_of[unit] and unit in grads:
                dp.gradients_done(rep, s, j, unit, grads[unit])
                yield  # the unit's backward is lowered: the other replicas lower theirs before the next unit

    def request(kind, i, j, got):
        """What drive asks of a spanning op ``i`` in microbatch ``j``'s backward: an MoE op's backward (``got``:
        each data rank's incoming gradients) or its forward again (``got``: each data rank's view of the recomputed
        handles); with cp > 1 an attention op's backward or forward again over the cp groups (context.attention)."""
        if kind in (context.CP_REQUEST, context.CP_RECOMPUTE):
            return context.attention(L, i, j, stages[i], got,
                                     "backward" if kind == context.CP_REQUEST else "recompute")
        memo = {r: memos[(r, j)] for r in L.replicas}
        if kind == MOE_REQUEST:
            return backward_moe(L, i, j, stages[i], got, memo)
        L.recomputing = True
        try:
            lower_moe(L, i, j, stages[i], {r: got.get(r, m) for r, m in memo.items()})
        finally:
            L.recomputing = False
        return {}

    # Append the items in an order that respects both the stages' (interleaved) 1F1B order and the data
    # dependences: a chunk's forward after the chunk before it, its backward after the chunk after it. The dp
    # replicas run the same order on their own ranks, so each item is appended for every replica at once, and a
    # backward unit by unit across them: a layer's gradient reduction is then appended as the last replica's
    # backward of it is, ahead of the next layer's backward in every rank's program order -- where a GPU's host
    # issues it, as DDP's bucket hook does (appended after the whole backward, its NCCL launch would queue behind
    # every backward kernel's launch and start only once the host had issued them all).
    nxt = [0] * pp
    appended = set()
    total = C * 2 * M
    while len(appended) < total:
        progressed = False
        for s in range(pp):
            while nxt[s] < len(order[s]):
                what, j, local = order[s][nxt[s]]
                c = local * pp + s
                need = (c - 1, "F", j) if what == "F" and c > 0 else \
                    (c + 1, "B", j) if what == "B" and c < C - 1 else None
                if need is not None and need not in appended:
                    break
                if what == "F" and (moe_in[c] or L.cp > 1):  # op-major at the spanning ops (context.forward_chunk)
                    context.forward_chunk(L, chunk_ops[c], j, stages, {r: memos[(r, j)] for r in L.replicas},
                                          lambda rep, ops, c=c, j=j: forward(rep, c, j, ops))
                elif what == "F":
                    for rep in L.replicas:
                        forward(rep, c, j)
                elif moe_in[c] or L.cp > 1:  # the data ranks in lockstep at the spanning ops (moe_train.drive)
                    drive(L, [backward(rep, c, j) for rep in L.replicas],
                          lambda kind, i, got, j=j: request(kind, i, j, got))
                else:
                    units = [backward(rep, c, j) for rep in L.replicas]
                    while units:  # one unit of each replica in turn, replica 0 first (mirror_replicas needs it)
                        units = [u for u in units if next(u, StopIteration) is not StopIteration]
                appended.add((c, what, j))
                nxt[s] += 1
                progressed = True
        if not progressed:  # cannot happen for a (interleaved) 1F1B order; a clear error rather than a hang
            raise WorkloadError(f"{g.name}: the 1F1B schedule could not be ordered")

    def adam(pe, elems, name, deps, s):
        # Adam over fp32 state: 4 load streams (grad, master, m, v), 4 stores, 4 passes.
        first = len(L.prog)
        h = L.vector(pe, elems, min(elems, 4096), 4, 4, 4, 4, name, deps)
        L.span(-1, "optimizer", first, s, "optimizer", M - 1, name)
        return h

    def norm(pe, elems, name, deps, s):
        # the gradient norm for clipping: the fp32 gradients read once
        first = len(L.prog)
        h = L.vector(pe, elems, min(elems, 4096), 4, 1, 1, 0, name, deps)
        L.span(-1, "grad_norm", first, s, "optimizer", M - 1, name)
        return h

    # The gradients' reductions (overlapping the rest of the backward where they can), the gradient norm (with
    # clipping), Adam, and with ZeRO the updated weights' all-gather (kernbench.workloads.sharding).
    dp.finish(adam, norm)
    L.out.dp_bytes = dict(dp.bytes)
    L.out.dp_params = dp.stage_params()

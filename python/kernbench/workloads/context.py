"""Context parallelism (``ParallelPlan.cp``), as Megatron-Core runs it: the sequence split over the cp ranks of a
replica, attention by a ring exchange of K/V (``cp_comm_type="p2p"``) or by all-to-alls (``"a2a"``).

Chunks. A microbatch's sequence of S tokens is cut into 2 cp chunks of ``c = S / (2 cp)`` tokens; cp rank i
holds chunks i and 2cp - 1 - i (Megatron-Core's ``get_batch_on_this_cp_rank``: under a causal mask the early
chunks attend few keys and the late ones many, so each rank takes one of each). Every op of a layer but attention
does 1/cp of the tokens on each cp rank (the lowering's ``Lowerer.tok``: GEMMs' M, elementwise ops, norms,
embeddings, the stage-to-stage transfers); the weights are whole on every cp rank, so the gradients are reduced
over the dp x cp ranks of each tensor-parallel rank (kernbench.workloads.sharding) and ZeRO shards over them.

Ring (``p2p``, TransformerEngine's ``AttnFuncWithCPAndKVP2P``). Rank i's queries (its two chunks, 2c tokens)
meet every rank's K/V in cp steps: at step k it holds the K/V pair of rank ``(i - k) mod cp`` and, for k < cp - 1,
sends it on to rank i + 1 while it computes (the send of step k overlaps the attention of step k; a receive
into the double buffer waits until the receiver's attention of step k - 1 has read the half it overwrites). Under a causal mask the work of
a step, in c x c blocks (``ring_steps``):

* step 0, its own pair: one causal attention of 2c queries over 2c keys -- two diagonal half blocks and one
  full block (chunk 2cp - 1 - i over chunk i);
* step k with ``j = (i - k) mod cp < i``: both query chunks over the first key chunk j (2c x c, no mask);
* step k with j > i: the second query chunk over both key chunks (c x 2c, no mask).

Each rank does 2 cp blocks, the whole causal attention's 2 cp^2 over cp ranks: the balance is exact, and with
the kernel model's causal count (each query attends (q + 1) / 2 of its own chunk's keys) the ranks' FLOPs add up
to the unsplit attention's exactly. Without a causal mask every step is 2c x 2c. The partial outputs are merged
by their log-sum-exp once the last step is done: one vector kernel reading the cp partial outputs and writing O
(the per-step log-sum-exp updates, cp x 2c x heads floats, are left out). Each step's K/V pair is
``2 x 2c x batch x kv_heads/tp x head_dim x bytes``, one DMA from rank i's HBM into rank i + 1's.

Backward (``AttnFuncWithCPAndKVP2P.backward``): the K/V pairs go round the ring again, the same way; step k
computes the block's gradients (one attention backward kernel of the step's shape, as the unsplit backward is:
kernbench.workloads.gpu_kernels), adds them to the dQ of the rank and to the dK/dV of the pair received from rank i - 1 (one vector
kernel from step 1: 2 loads, 1 store), and sends that pair's dK/dV on to rank i + 1 -- after step cp - 1 it
reaches the pair's owner. The dK/dV transfers carry the K/V bytes (in the activations' dtype; TE keeps them so).

All-to-all (``a2a``, DeepSpeed-Ulysses; TE's ``AttnFuncWithCPAndQKVOA2A``): before attention an all-to-all over
the cp group turns each rank's 2c tokens of every head (of its tp rank) into the whole sequence of a cp-th of the
heads; the attention runs whole (causal, S x S) on heads / (tp cp) query and kv_heads / (tp cp) KV heads; an
all-to-all takes the output back to 2c tokens of every head. The backward: an all-to-all of dO, the attention's
backward (one kernel), an all-to-all of dQ, dK, dV. Both head counts per tp rank must divide by cp (TE's check).

Scope: the GPU target (the SIP machine's GQA cases have no causal block split); prefill-shaped attention only
(q_len = kv_len: a training step, an inference prefill; a decode step or a prompt over a cached prefix with cp > 1
is refused); no convolutions or activation x activation matmuls (an unfused attention) with cp > 1. MoE layers run
with cp > 1: their EP groups are formed over the dp x cp data ranks (kernbench.workloads.plan), each cp rank
dispatching its share of the tokens (moe_lower), and ``forward_chunk`` lowers a chunk op-major at both attention
and MoE ops.
``Lowered.cp`` records each exchange and kernel (``record``), which the tests and the docs read.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError
from kernbench.workloads.lowerer import SHARD, Lowerer, dep_fn, forward_pass as plain_forward_pass
from kernbench.workloads.moe_lower import lower_moe

__all__ = ["check_cp", "ring_steps", "spans", "forward_chunk", "forward_pass", "attention", "CP_REQUEST",
           "CP_RECOMPUTE"]

#: What a data rank's backward generator yields at an attention op with cp > 1: ``(CP_REQUEST, op, deps)``, or
#: ``(CP_RECOMPUTE, op, deps)`` for full recompute's forward of it (moe_train.drive lowers it over the cp groups).
CP_REQUEST = "cp"
CP_RECOMPUTE = "cp recompute"


def check_cp(graph, plan, system) -> None:
    """WorkloadError when ``plan.cp`` > 1 cannot split ``graph``: no attention op, a sequence that does not cut
    into 2 x cp equal chunks, a decode-shaped attention, an op kind whose tokens are not split, a machine that is
    not a GPU's, or (a2a) heads that do not divide by cp."""
    cp = plan.cp
    if cp == 1:
        return
    where = f"{graph.name}: plan cp = {cp} (context parallelism)"
    atts = [i for i, op in enumerate(graph.ops) if op.kind == "attention"]
    if not atts:
        raise WorkloadError(f"{where} splits the sequence of attention, and the graph has no attention op (an "
                            "unfused attention, or a model without one)")
    if getattr(system, "target", None) != "gpu":
        raise WorkloadError(f"{where}: lowered for the GPU target only (this machine's PEs are "
                            f"{getattr(system, 'target', '?')!r})")
    for i, op in enumerate(graph.ops):
        a = op.attrs
        bad = {"conv": "a convolution's tokens are not split"}.get(op.kind)
        if op.kind == "matmul" and not a.get("weight"):
            bad = "an activation x activation matmul (an unfused attention) cannot be split by tokens"
        if bad:
            raise WorkloadError(f"{where}: op {i} {op.name!r} ({op.kind}): {bad}")
    for i in atts:
        op, a = graph.ops[i], graph.ops[i].attrs
        q, s = int(a["q_len"]), int(a["kv_len"])
        if q != s:
            raise WorkloadError(f"{where}: op {i} {op.name!r}: q_len {q} over kv_len {s}: context parallelism "
                                "splits a whole sequence (a training step, a prefill); a decode step or a prompt "
                                "over a cached prefix with cp > 1 is not modelled")
        if q % (2 * cp):
            raise WorkloadError(f"{where}: op {i} {op.name!r}: the sequence of {q} tokens does not cut into "
                                f"2 x cp = {2 * cp} equal chunks (seq must be a multiple of {2 * cp})")
        if plan.cp_comm_type == "a2a":
            H, KV, tp = int(a["heads"]), int(a["kv_heads"]), plan.tp
            per_q, per_kv = H // tp, max(1, KV // tp)
            if per_q % cp or per_kv % cp:
                raise WorkloadError(f"{where}, cp_comm_type 'a2a': op {i} {op.name!r}: {per_q} query and {per_kv} "
                                    f"KV heads per tensor-parallel rank (tp = {tp}) must each divide by cp = {cp} "
                                    "(each cp rank takes a cp-th of the heads)")


def ring_steps(cp: int, rank: int, chunk: int, causal: bool) -> list[tuple[int, int, bool]]:
    """The ring's attention work on cp rank ``rank``, per step: (queries, keys, causal mask), ``chunk`` tokens a
    chunk (the module doc)."""
    out = [(2 * chunk, 2 * chunk, causal)]
    for k in range(1, cp):
        j = (rank - k) % cp
        out.append((2 * chunk, 2 * chunk, False) if not causal else
                   (2 * chunk, chunk, False) if j < rank else (chunk, 2 * chunk, False))
    return out


class _Shape:
    """An attention op's figures on one rank of a tp x cp split."""

    def __init__(self, L: Lowerer, i: int):
        op, a = L.g.ops[i], L.g.ops[i].attrs
        tp, self.cp = L.plan.tp, L.plan.cp
        self.op, self.i = op, i
        self.B, self.S, self.d = int(a["batch"]), int(a["q_len"]), int(a["head_dim"])
        self.H, self.KV = int(a["heads"]) // tp, max(1, int(a["kv_heads"]) // tp)
        self.e = DTYPE_BYTES.get(op.dtype, 2)
        self.causal = bool(a.get("causal", self.S > 1))
        self.c = self.S // (2 * self.cp)
        self.kv_bytes = 2 * 2 * self.c * self.B * self.KV * self.d * self.e  # K and V of a rank's two chunks


def record(L: Lowerer, **row) -> None:
    """One row of ``Lowered.cp``: an exchange (``kind`` kv, dkv, alltoall: bytes) or a kernel (attention: FLOPs),
    with its op, microbatch, dp replica, tp rank, cp rank, ring step and pass (a recompute's: ``recompute``)."""
    if L.recomputing:
        row["pass"] = "recompute"
    L.out.cp.append(row)


def _kernel(L: Lowerer, pe: str, sh: _Shape, heads: int, kv_heads: int, q: int, s: int, causal: bool, deps: list,
            where: dict) -> list:
    """One attention kernel on ``pe`` after its previous step and ``deps`` (mirrored replicas: Lowerer.step)."""
    got = {}
    # 2c queries over one key chunk (no mask): the kernel model takes q_len <= kv_len (its mask sits on the last
    # keys), so the two query chunks run as a batch of two over the chunk -- the same CTAs and FLOPs (the key
    # chunk's bytes read twice)
    batch, rows = (sh.B * (q // s), s) if q > s else (sh.B, q)

    def run(d):
        h, got["flops"] = L.target.attention_kernel(L, pe, sh.op, batch, heads, kv_heads, rows, s, causal, d,
                                                    "backward" if where.get("pass") == "backward" else "forward")
        return h

    first = len(L.prog)
    h = L.step(pe, run, deps)
    _span(L, "attention", first, where)
    record(L, kind="attention", pe=pe, q=q, kv=s, causal=causal, flops=got.get("flops", 0.0), op=h[0], **where)
    return h


def _span(L: Lowerer, kind: str, first: int, where: dict, what: str = "") -> None:
    name = L.g.ops[where["i"]].name + (f" cp {what}" if what else "")
    L.span(where["i"], kind, first, where["stage"], where["pass"], where["mb"], name)


def _vector(L: Lowerer, pe: str, elements: int, sh: "_Shape", loads: int, what: str, deps: list, where: dict) -> list:
    first = len(L.prog)
    h = L.vector(pe, elements, sh.d, sh.e, loads, 1, 1, f"{sh.op.name} cp {what}", deps)
    _span(L, "attention", first, where, what)
    return h


def _send(L: Lowerer, src: str, dst: str, nbytes: int, deps: list, what: str, where: dict) -> list:
    first = len(L.prog)
    x = L.prog.dma(dst, src=L.hbm(src), dst=L.hbm(dst), bytes=int(nbytes), deps=deps,
                   name=f"{L.g.ops[where['i']].name} cp {what}", tag="p2p")
    L.count("p2p")
    _span(L, "p2p", first, where, what)
    record(L, kind=what, src=src, dst=dst, bytes=int(nbytes), op=x, **where)
    return [x]


def _ring(L: Lowerer, sh: _Shape, pes: Sequence[str], deps: list[list], pass_: str, where: dict) -> list[list]:
    """The ring's forward (pass_ ``forward``) or backward over the cp ranks ``pes``; per rank, what ends it."""
    cp, backward = len(pes), pass_ == "backward"
    steps = [ring_steps(cp, r, sh.c, sh.causal) for r in range(cp)]
    have = [list(d) for d in deps]  # the K/V pair each rank holds at this step
    last: list[list] = [[] for _ in range(cp)]  # each rank's compute at the step before (the buffer a receive fills)
    parts: list[list] = [[] for _ in range(cp)]
    dkv_in: list[list] = [[] for _ in range(cp)]  # the dK/dV partial arriving from rank r - 1
    for k in range(cp):
        w = {**where, "step": k, "pass": pass_}
        nxt: list[list] = [[] for _ in range(cp)]
        if k < cp - 1:  # pass the pair on, overlapping this step's attention
            for r in range(cp):
                to = (r + 1) % cp
                nxt[to] = _send(L, pes[r], pes[to], sh.kv_bytes, have[r] + last[to], "kv", {**w, "cp_rank": r})
        grads = [[] for _ in range(cp)]
        for r, pe in enumerate(pes):
            q, s, causal = steps[r][k]
            wr = {**w, "cp_rank": r}
            h = _kernel(L, pe, sh, sh.H, sh.KV, q, s, causal, have[r], wr)  # the backward kernel when backward
            if backward:
                if k > 0:  # the block's gradients added to dQ and to the pair's dK/dV from rank r - 1
                    el = (2 * sh.c * sh.H + 2 * 2 * sh.c * sh.KV) * sh.B * sh.d
                    h = _vector(L, pe, el, sh, 2, "dq dkv add", h + dkv_in[r], wr)
                grads[r] = h
            parts[r] = h
            last[r] = h
        if backward:  # the pair's dK/dV on to rank r + 1 (after the last step: to its owner)
            arrive: list[list] = [[] for _ in range(cp)]
            for r in range(cp):
                to = (r + 1) % cp
                arrive[to] = _send(L, pes[r], pes[to], sh.kv_bytes, grads[r], "dkv", {**w, "cp_rank": r})
            dkv_in = arrive
        have = nxt
    if backward:
        return [parts[r] + dkv_in[r] for r in range(cp)]
    out = []
    for r, pe in enumerate(pes):  # the partial outputs merged by their log-sum-exp
        out.append(_vector(L, pe, 2 * sh.c * sh.H * sh.d * sh.B, sh, cp, "merge", parts[r],
                           {**where, "pass": pass_, "cp_rank": r}))
    return out


def _a2a(L: Lowerer, sh: _Shape, pes: Sequence[str], deps: list[list], pass_: str, where: dict) -> list[list]:
    """DeepSpeed-Ulysses over the cp ranks ``pes``: all-to-all in, the whole sequence on a cp-th of the heads,
    all-to-all out (the backward: dO in, dQ/dK/dV out)."""
    cp, tokens = len(pes), 2 * sh.c
    qkv = (sh.H + 2 * sh.KV) * sh.d * tokens * sh.B * sh.e  # a rank's buffer: its tokens of its tp rank's heads
    o = sh.H * sh.d * tokens * sh.B * sh.e
    first_in, first_out = (o, qkv) if pass_ == "backward" else (qkv, o)
    w = {**where, "pass": pass_}
    first = len(L.prog)
    x = L.collective("alltoall", list(pes), first_in, [], f"{sh.op.name} cp all-to-all in",
                     rank_deps=[list(d) for d in deps], per_rank=True)
    _span(L, "alltoall", first, w, "all-to-all in")
    record(L, kind="alltoall", bytes=first_in, pes=list(pes), **w)
    done = []
    for r, pe in enumerate(pes):
        h = _kernel(L, pe, sh, sh.H // cp, sh.KV // cp, sh.S, sh.S, sh.causal, x, {**w, "cp_rank": r, "step": 0})
        done.append(h)
    first = len(L.prog)
    y = L.collective("alltoall", list(pes), first_out, [], f"{sh.op.name} cp all-to-all out", rank_deps=done,
                     per_rank=True)
    _span(L, "alltoall", first, w, "all-to-all out")
    record(L, kind="alltoall", bytes=first_out, pes=list(pes), **w)
    return [y] * cp


def attention(L: Lowerer, i: int, mb: int, stage: int, deps: dict[int, list[list]], pass_: str) -> dict[int, list]:
    """Attention op ``i`` of microbatch ``mb`` over every cp group of ``stage`` among the lowered data ranks:
    ``deps[r]`` is data rank r's input per tensor-parallel rank; ``pass_`` ``forward``, ``recompute`` (full
    recompute's forward again) or ``backward`` (with selective recompute the forward again first). Returns per data
    rank its handles per tensor-parallel rank."""
    sh, plan = _Shape(L, i), L.plan
    cp, tp = plan.cp, plan.tp
    run = _a2a if plan.cp_comm_type == "a2a" else _ring
    out: dict[int, list] = {}
    for d in sorted({r // cp for r in deps}):
        reps = [d * cp + c for c in range(cp)]
        if any(r not in deps for r in reps):
            raise WorkloadError(f"{L.g.name}: op {i}: the cp ranks of replica {d} reached attention out of step")
        for r in reps:
            out[r] = [None] * tp
        for t in L.lowered_ranks(tp):  # rank 0's ring stands for the others' (Lowerer.represent_tp_ranks)
            pes = L.out.placement.cp_group(d, stage, t)
            where = {"i": i, "mb": mb, "stage": stage, "replica": d, "t": t}
            into = [deps[r][t] for r in reps]
            if pass_ == "backward" and plan.recompute == "selective":  # the attention core's forward again
                L.recomputing = True
                try:
                    into = [list(h) + list(x) for h, x in zip(run(L, sh, pes, into, "forward", where), into)]
                finally:
                    L.recomputing = False
            L.recomputing = pass_ == "recompute"
            try:
                got = run(L, sh, pes, into, "forward" if pass_ == "recompute" else pass_, where)
            finally:
                L.recomputing = False
            for c, r in enumerate(reps):
                out[r][t] = list(got[c])
        for r in reps if L.tp_one else ():
            out[r][1:] = [list(out[r][0]) for _ in range(1, tp)]
    return out


def spans(L: Lowerer, i: int) -> bool:
    """Whether op ``i`` spans data ranks (lowered over them at once, not one data rank at a time): an MoE op (its EP
    group) and, with cp > 1, an attention op (its cp group)."""
    kind = L.g.ops[i].kind
    return kind == "moe" or (kind == "attention" and L.cp > 1)


def forward_chunk(L: Lowerer, ops: Sequence[int], mb: int, stages: Sequence[int], memos: Mapping[int, dict],
                  run: Callable[[int, Sequence[int]], None]) -> None:
    """The forward of the graph-ordered ``ops`` of microbatch ``mb`` on every lowered data rank, op-major at the
    ops that span data ranks (``spans``): ``run(rep, ops)`` lowers a run of other ops on data rank ``rep``; once
    every data rank has lowered the ops before it, an attention op (cp > 1) is lowered over the cp groups and an
    MoE op over the EP groups (kernbench.workloads.moe_lower) -- both in one chunk when the plan has cp and ep.
    ``memos[rep]``: data rank rep's memo of this microbatch."""
    seg: list[int] = []
    for i in list(ops) + [None]:
        if i is not None and not spans(L, i):
            seg.append(i)
            continue
        if seg:
            for rep in L.replicas:
                run(rep, seg)
        seg = []
        if i is None:
            continue
        if L.g.ops[i].kind == "moe":
            lower_moe(L, i, mb, stages[i], memos)
            continue
        s = stages[i]
        deps = {}
        for rep in L.replicas:
            dep_of = dep_fn(L, rep, mb, stages, memos[rep], s)
            deps[rep] = [sum((dep_of(d)[t] for d in L.g.ops[i].deps), []) for t in range(L.plan.tp)]
        got = attention(L, i, mb, s, deps, "forward")
        for rep, hs in got.items():
            memos[rep]["done"][i], memos[rep]["state"][i] = hs, SHARD


def moe_forward_pass(L: Lowerer, mb: int, stages: Sequence[int]) -> None:
    """The inference forward of microbatch ``mb`` on every data rank of a graph with MoE ops, each MoE op over its
    EP groups (and with cp > 1 each attention op over its cp groups): forward_chunk over the whole graph."""
    memos = {rep: {"done": {}, "state": {}, "xfer": {}} for rep in L.replicas}
    forward_chunk(L, range(len(L.g.ops)), mb, stages, memos,
                  lambda rep, ops: plain_forward_pass(L, rep, mb, stages, memo=memos[rep], ops=ops))


def forward_pass(L: Lowerer, replica: int, mb: int, stages: Sequence[int]) -> None:
    """An inference forward of microbatch ``mb`` on dp replica ``replica``'s cp ranks, attention over them."""
    plain = plain_forward_pass
    reps = [replica * L.plan.cp + c for c in range(L.plan.cp)]
    memos = {r: {"done": {}, "state": {}, "xfer": {}} for r in reps}
    saved, L.replicas = L.replicas, reps
    try:
        forward_chunk(L, range(len(L.g.ops)), mb, stages, memos,
                      lambda rep, ops: plain(L, rep, mb, stages, memo=memos[rep], ops=ops))
    finally:
        L.replicas = saved

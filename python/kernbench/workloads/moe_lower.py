"""Lowering an MoE layer's routed experts (the ``moe`` op) over an expert-parallel group.

The ``moe`` op of one microbatch runs on every EP group at once (``ParallelPlan.ep`` consecutive data-parallel
replicas of a stage, plan.py), so an inference pass with MoE layers lowers op-major within a microbatch
(``moe_forward_pass``): the ops up to an MoE op on every replica, then the MoE op over each EP group
(``lower_moe``), then on.

For tensor-parallel rank t of EP group g (PEs ``Placement.ep_group(g, stage, t)``; EP rank j holds experts
``j*E/ep .. (j+1)*E/ep - 1``):

* tokens: each tp rank routes its slice of the microbatch's tokens (``moe.split_counts`` of the op's per-expert
  ``counts``), so a tp group's ranks dispatch disjoint tokens; with ``sp`` the slice is already the rank's, else
  the layer ends with an all-gather of the tokens over the tp group (its output replicated again);
* capacity: a source sends expert e at most ``ceil(capacity_factor x slice tokens x top_k / E)`` tokens
  (``moe.capacity``); the rest are dropped and counted;
* dispatch: source i sends EP rank j its tokens for j's experts, ``tokens x hidden x element bytes``, as one
  DMA from i's HBM into j's (a per-pair transfer of the exact bytes: the Program's collective takes no per-pair
  counts); the tokens for i's own experts stay put;
* experts: rank j runs, for each of its experts e that received r > 0 tokens, the fused gate/up GEMM
  ``r x 2F x H`` (``{op}.{e}.gate_up``, named ``model.layers.3.mlp.experts.5.gate_up``), SiLU x up on
  ``r x F`` and the down GEMM ``r x H x F`` (``{op}.{e}.down``), after every transfer into j;
* combine: the reverse transfers (the same bytes, j back to i), then the weighted sum of each token's top_k
  outputs on i (``{op}.combine``, a vector op of ``tokens x hidden`` reading top_k streams).

A training step lowers the same forward (op-major over the replicas within a model chunk) and the op's backward
(kernbench.workloads.moe_train).

``Lowered.moe`` records, per (op, microbatch, group, tp rank) and ``pass`` (``forward``; ``recompute`` when a
training step's full recompute lowers it again): the PEs, the tokens each source sent each expert, the dispatch
and combine matrices (tokens and bytes, [source][destination], the diagonal local) with the program op id of each
transfer, the tokens each expert's GEMMs ran and the dropped tokens.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.lowerer import REP, SEQ, Lowerer, forward_pass
from kernbench.workloads.moe import capacity, split_counts

__all__ = ["moe_ops", "moe_forward_pass", "lower_moe", "check_ep", "record", "routes", "expert_op", "exchange"]


def moe_ops(graph) -> list[int]:
    """Indices of the graph's ``moe`` ops."""
    return [i for i, op in enumerate(graph.ops) if op.kind == "moe"]


def check_ep(graph, plan) -> None:
    """WorkloadError when ``plan.ep`` > 1 and the graph has no experts, or its experts do not split over ep."""
    moes = moe_ops(graph)
    if plan.ep > 1 and not moes:
        raise WorkloadError(f"{graph.name}: plan ep = {plan.ep} (expert parallelism) but the model has no experts "
                            "(no moe op)")
    for i in moes:
        E = int(graph.ops[i].attrs["experts"])
        if E % plan.ep:
            raise WorkloadError(f"{graph.name}: op {graph.ops[i].name!r}: {E} experts are not divisible by "
                                f"ep = {plan.ep} (each EP rank holds E / ep experts)")


def moe_forward_pass(L: Lowerer, mb: int, stages: Sequence[int]) -> None:
    """The forward ops of microbatch ``mb`` on every replica, each MoE op over its EP groups."""
    g, dp = L.g, L.plan.dp
    memos = [{"done": {}, "state": {}, "xfer": {}} for _ in range(dp)]
    start = 0
    for i in moe_ops(g) + [len(g.ops)]:
        for rep in range(dp):
            forward_pass(L, rep, mb, stages, memo=memos[rep], ops=range(start, i))
        if i < len(g.ops):
            lower_moe(L, i, mb, stages[i], memos)
        start = i + 1


def exchange(L: Lowerer, pes, nbytes, deps: list[list], label: str) -> tuple[list[list[int]], list[list]]:
    """One DMA from each rank's HBM into every other's, ``nbytes(src, dst)`` bytes (none when 0), after
    ``deps[src]``: the all-to-all of a dispatch or a combine as per-pair transfers. Returns the program op of
    each transfer ([src][dst], -1 where none) and, per destination, the transfers into it."""
    n = len(pes)
    ops = [[-1] * n for _ in range(n)]
    into: list[list] = [[] for _ in range(n)]
    for s in range(n):
        for d in range(n):
            b = nbytes(s, d) if s != d else 0
            if b:
                h = L.prog.dma(pes[s], src=L.hbm(pes[s]), dst=L.hbm(pes[d]), bytes=b, deps=deps[s],
                               name=f"{label} {s}->{d}", tag="alltoall")
                ops[s][d] = h
                into[d].append(h)
    L.count("alltoall", sum(1 for row in ops for h in row if h >= 0))
    return ops, into


def routes(L: Lowerer, i: int) -> dict:
    """What the ``moe`` op ``i`` moves and runs per tensor-parallel rank t (module doc): its dims (E, K, H, F, T),
    ``per`` (experts per EP rank), ``e_bytes``, and per t ``tok[t]`` (the rank's token slice), ``sent[t]`` (what
    each source sends expert e, after capacity), ``rows[t]`` (what each source sends EP rank j) and
    ``slices[t]`` (the slice's routed counts before capacity). The forward and the backward
    (kernbench.workloads.moe_train) read the same figures."""
    op, plan = L.g.ops[i], L.plan
    L.check_attrs(i)
    a = op.attrs
    E, K, H, F, T = (int(a[k]) for k in ("experts", "top_k", "hidden", "ffn", "tokens"))
    ep, tp = plan.ep, plan.tp
    if E % ep:
        raise L.err(i, f"{E} experts are not divisible by ep = {ep}")
    counts = [int(c) for c in a["counts"]]
    if len(counts) != E or sum(counts) != T * K:
        raise L.err(i, f"counts {counts}: expected {E} per-expert counts summing to tokens x top_k = {T * K}")
    per = E // ep
    slices = split_counts(counts, tp)
    tok = [T // tp + (1 if t < T % tp else 0) for t in range(tp)]
    sent, rows = [], []
    for t in range(tp):
        cap = capacity(tok[t], E, K, a.get("capacity_factor"))
        sent.append([c if cap is None else min(c, cap) for c in slices[t]])  # what each source sends expert e
        rows.append([sum(sent[t][j * per:(j + 1) * per]) for j in range(ep)])  # tokens any source sends rank j
    return {"E": E, "K": K, "H": H, "F": F, "T": T, "per": per, "e_bytes": L.esize(op), "tok": tok, "sent": sent,
            "rows": rows, "slices": slices}


def expert_op(op, memo: dict, nm: str):
    """The graph op renamed ``nm`` (cached in ``memo``): the program op's name (critical path, traces) says which
    expert."""
    if nm not in memo:
        memo[nm] = replace(op, name=nm, params=(), attrs={})
    return memo[nm]


def record(L: Lowerer, op, pass_: str, mb: int, grp: int, stage: int, t: int, pes, sent, rows, token_bytes: int,
           disp_ops, comb_ops, ran, dropped: int, tokens: int, K: int) -> None:
    """One ``Lowered.moe`` entry (module doc): EP rank j receives ``rows[j]`` tokens from every source, so the
    dispatch matrix has one row per source and its transpose is the combine's."""
    ep = len(pes)
    disp = [[rows[j] for j in range(ep)] for _ in range(ep)]
    L.out.moe.append({
        "op": op.name, "pass": pass_, "microbatch": mb, "group": grp, "stage": stage, "tp_rank": t,
        "pes": list(pes), "sent": list(sent), "dispatch_tokens": disp, "combine_tokens": [list(c) for c in zip(*disp)],
        "dispatch_bytes": [[x * token_bytes for x in row] for row in disp], "dispatch_ops": disp_ops,
        "combine_ops": comb_ops, "expert_tokens": ran, "dropped": dropped, "tokens": tokens, "top_k": K})


def lower_moe(L: Lowerer, i: int, mb: int, stage: int, memos: list[dict]) -> None:
    """The ``moe`` op ``i`` of microbatch ``mb`` on every EP group of ``stage`` (module doc); fills
    ``memos[rep]["done"][i]`` and its state for every replica."""
    op, plan = L.g.ops[i], L.plan
    R = routes(L, i)
    K, H, F, T, per, e_bytes = (R[k] for k in ("K", "H", "F", "T", "per", "e_bytes"))
    ep, tp = plan.ep, plan.tp
    slices, tok = R["slices"], R["tok"]
    named: dict = {}

    def as_op(nm):
        return expert_op(op, named, nm)

    sin = L.state_in(i, memos[0]["state"])
    for grp in range(len(L.replicas) // ep):  # every EP group, or group 0 alone (Lowerer.represent_replicas)
        reps = [grp * ep + j for j in range(ep)]
        outs = {r: [None] * tp for r in reps}
        for t in range(tp):
            pes = L.out.placement.ep_group(grp, stage, t)
            deps = [sum((memos[r]["done"][d][t] for d in op.deps), []) for r in reps]
            sent, rows = R["sent"][t], R["rows"][t]
            first = len(L.prog)
            disp_ops, arrive = exchange(L, pes, lambda s, j: rows[j] * H * e_bytes, deps, f"{op.name} dispatch")
            L.span(i, "alltoall", first, stage, "forward", mb, f"{op.name} dispatch")
            first = len(L.prog)
            done, ran = [], {}
            for j in range(ep):
                h = deps[j] + arrive[j]
                for e in range(j * per, (j + 1) * per):
                    r = ep * sent[e]  # every source of the group sends expert e the same share
                    ran[e] = r
                    if r:  # one span per expert, named model.layers.3.mlp.experts.5 (Lowered.critical_spans)
                        first = len(L.prog)
                        h = L.gemm(pes[j], r, 2 * F, H, as_op(f"{op.name}.{e}.gate_up"), h, "forward")
                        h = L.vector(pes[j], r * F, F, e_bytes, 2, 1, 1, f"{op.name}.{e}.act", h)
                        h = L.gemm(pes[j], r, H, F, as_op(f"{op.name}.{e}.down"), h, "forward")
                        L.span(i, "moe", first, stage, "forward", mb, f"{op.name}.{e}")
                done.append(h)
            first = len(L.prog)
            comb_ops, back = exchange(L, pes, lambda j, s: rows[j] * H * e_bytes, done, f"{op.name} combine")
            L.span(i, "alltoall", first, stage, "forward", mb, f"{op.name} combine")
            first = len(L.prog)
            for s in range(ep):
                outs[reps[s]][t] = L.vector(pes[s], tok[t] * H, H, e_bytes, K, 1, 1, f"{op.name}.combine",
                                            done[s] + back[s])
            L.span(i, "moe", first, stage, "forward", mb, f"{op.name}.combine")
            record(L, op, "recompute" if L.recomputing else "forward", mb, grp, stage, t, pes, sent, rows,
                   H * e_bytes, disp_ops, comb_ops, ran, (sum(slices[t]) - sum(sent)) * ep, tok[t] * ep, K)
        for r in reps:
            group = L.out.placement.group(r, stage)
            if tp > 1 and sin != SEQ:  # the tp ranks' token slices gathered: the output replicated again
                # (an all-gather's buffer is the whole T x H output, each rank's slice 1/tp of it: ccl.hpp)
                first = len(L.prog)
                ag = L.collective("all_gather", group, T * H * e_bytes, sum(outs[r], []),
                                  op.name + " all-gather")
                L.span(i, "all_gather", first, stage, "forward", mb, op.name + " all-gather")
                memos[r]["done"][i], memos[r]["state"][i] = [ag] * tp, REP
            else:
                memos[r]["done"][i], memos[r]["state"][i] = outs[r], (SEQ if tp > 1 else REP)

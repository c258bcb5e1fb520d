"""Lowering an MoE layer's routed experts (the ``moe`` op) over an expert-parallel group.

The ``moe`` op of one microbatch runs on every EP group at once (``ParallelPlan.ep`` consecutive data ranks of a
stage, plan.py: the dp x cp ranks, Megatron-Core's EP groups), so an inference pass with MoE layers lowers op-major
within a microbatch (context.moe_forward_pass, context.forward_chunk): the ops up to an MoE op on every data rank, then
the MoE op over each EP group (``lower_moe``), then on (with cp > 1 each attention op over its cp groups too).

For tensor-parallel rank t of EP group g (PEs ``Placement.ep_group(g, stage, t)``; EP rank j holds experts
``j*E/ep .. (j+1)*E/ep - 1``):

* tokens: each data rank holds 1/cp of the microbatch's tokens, cp rank c routing share c of each expert's count
  (``moe.split_counts`` of the op's per-expert ``counts`` over cp; ``routes``), and each tp rank routes its slice of
  those (split_counts over tp), so a tp group's ranks dispatch disjoint tokens; with ``sp`` the slice is already
  the rank's, else the layer ends with an all-gather of the tokens over the tp group (its output replicated
  again); the sources of an EP group (``sources``) route their own cp rank's share;
* capacity: a source sends expert e at most ``ceil(capacity_factor x slice tokens x top_k / E)`` tokens
  (``moe.capacity``); the rest are dropped and counted;
* dispatch: source i sends EP rank j its tokens for j's experts, ``tokens x hidden x element bytes``, as one
  DMA from i's HBM into j's (a per-pair transfer of the exact bytes: the Program's collective takes no per-pair
  counts); the tokens for i's own experts stay put; an expert runs what all the group's sources send it;
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
from typing import Mapping, Sequence

from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.lowerer import REP, SEQ, Lowerer
from kernbench.workloads.moe import capacity, split_counts

__all__ = ["moe_ops", "lower_moe", "check_ep", "record", "routes", "sources", "expert_op",
           "exchange"]


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
    """What the ``moe`` op ``i`` moves and runs (module doc): its dims (E, K, H, F, T), ``per`` (experts per EP
    rank), ``e_bytes``, and per cp rank c (``by_cp[c]``; one at cp = 1) and tensor-parallel rank t: ``tok[t]`` (the
    rank's token slice), ``sent[t]`` (what the rank sends expert e, after capacity), ``rows[t]`` (what it sends EP
    rank j) and ``slices[t]`` (the slice's routed counts before capacity). With cp > 1 a data rank holds 1/cp of
    the microbatch's tokens (kernbench.workloads.context): cp rank c routes share c of each expert's count
    (``moe.split_counts`` over cp, then over tp). The forward and the backward (kernbench.workloads.moe_train)
    read the same figures."""
    op, plan = L.g.ops[i], L.plan
    L.check_attrs(i)
    a = op.attrs
    E, K, H, F, T = (int(a[k]) for k in ("experts", "top_k", "hidden", "ffn", "tokens"))
    ep, tp, cp = plan.ep, plan.tp, plan.cp
    if E % ep:
        raise L.err(i, f"{E} experts are not divisible by ep = {ep}")
    counts = [int(c) for c in a["counts"]]
    if len(counts) != E or sum(counts) != T * K:
        raise L.err(i, f"counts {counts}: expected {E} per-expert counts summing to tokens x top_k = {T * K}")
    if T % cp:
        raise L.err(i, f"{T} tokens do not split over cp = {cp} ranks")
    per = E // ep
    by_cp = []
    for share in split_counts(counts, cp):
        slices = split_counts(share, tp)
        Tc = T // cp
        tok = [Tc // tp + (1 if t < Tc % tp else 0) for t in range(tp)]
        sent, rows = [], []
        for t in range(tp):
            cap = capacity(tok[t], E, K, a.get("capacity_factor"))
            sent.append([c if cap is None else min(c, cap) for c in slices[t]])  # what the rank sends expert e
            rows.append([sum(sent[t][j * per:(j + 1) * per]) for j in range(ep)])  # tokens it sends EP rank j
        by_cp.append({"tok": tok, "sent": sent, "rows": rows, "slices": slices})
    return {"E": E, "K": K, "H": H, "F": F, "T": T, "per": per, "e_bytes": L.esize(op), "by_cp": by_cp}


def sources(L: Lowerer, R: dict, reps: Sequence[int], t: int) -> list[dict]:
    """Per source of an EP group (its data ranks ``reps``) at tensor-parallel rank t: ``tok``, ``sent``, ``rows``,
    ``slices`` of its cp rank (``routes``)."""
    return [{k: v[t] for k, v in R["by_cp"][r % L.plan.cp].items()} for r in reps]


def expert_op(op, memo: dict, nm: str):
    """The graph op renamed ``nm`` (cached in ``memo``): the program op's name (critical path, traces) says which
    expert."""
    if nm not in memo:
        memo[nm] = replace(op, name=nm, params=(), attrs={})
    return memo[nm]


def record(L: Lowerer, op, pass_: str, mb: int, grp: int, stage: int, t: int, pes, src: list[dict],
           token_bytes: int, disp_ops, comb_ops, ran, K: int) -> None:
    """One ``Lowered.moe`` entry (module doc): source i sends EP rank j ``src[i]["rows"][j]`` tokens, so the
    dispatch matrix has one row per source and its transpose is the combine's. ``sent`` is what each source sends
    each expert when the sources agree (always at cp = 1), else None; ``sent_by_source`` is per source."""
    disp = [list(x["rows"]) for x in src]
    by = [list(x["sent"]) for x in src]
    L.out.moe.append({
        "op": op.name, "pass": pass_, "microbatch": mb, "group": grp, "stage": stage, "tp_rank": t,
        "pes": list(pes), "sent": by[0] if all(b == by[0] for b in by) else None, "sent_by_source": by,
        "dispatch_tokens": disp, "combine_tokens": [list(c) for c in zip(*disp)],
        "dispatch_bytes": [[x * token_bytes for x in row] for row in disp], "dispatch_ops": disp_ops,
        "combine_ops": comb_ops, "expert_tokens": ran,
        "dropped": sum(sum(x["slices"]) - sum(x["sent"]) for x in src), "tokens": sum(x["tok"] for x in src),
        "top_k": K})


def lower_moe(L: Lowerer, i: int, mb: int, stage: int, memos: Mapping[int, dict]) -> None:
    """The ``moe`` op ``i`` of microbatch ``mb`` on every EP group of ``stage`` (module doc); fills
    ``memos[rep]["done"][i]`` and its state for every lowered data rank."""
    op, plan = L.g.ops[i], L.plan
    R = routes(L, i)
    K, H, F, T, per, e_bytes = (R[k] for k in ("K", "H", "F", "T", "per", "e_bytes"))
    ep, tp = plan.ep, plan.tp
    named: dict = {}

    def as_op(nm):
        return expert_op(op, named, nm)

    sin = L.state_in(i, memos[L.replicas[0]]["state"])
    for grp in range(len(L.replicas) // ep):  # every EP group, or those of the period (Lowerer.represent_replicas)
        reps = [grp * ep + j for j in range(ep)]
        outs = {r: [None] * tp for r in reps}
        for t in range(tp):
            pes = L.out.placement.ep_group(grp, stage, t)
            deps = [sum((memos[r]["done"][d][t] for d in op.deps), []) for r in reps]
            src = sources(L, R, reps, t)
            first = len(L.prog)
            disp_ops, arrive = exchange(L, pes, lambda s, j: src[s]["rows"][j] * H * e_bytes, deps,
                                        f"{op.name} dispatch")
            L.span(i, "alltoall", first, stage, "forward", mb, f"{op.name} dispatch")
            first = len(L.prog)
            done, ran = [], {}
            for j in range(ep):
                h = deps[j] + arrive[j]
                for e in range(j * per, (j + 1) * per):
                    r = sum(x["sent"][e] for x in src)  # what every source of the group sends expert e
                    ran[e] = r
                    if r:  # one span per expert, named model.layers.3.mlp.experts.5 (Lowered.critical_spans)
                        first = len(L.prog)
                        h = L.gemm(pes[j], r, 2 * F, H, as_op(f"{op.name}.{e}.gate_up"), h, "forward")
                        h = L.vector(pes[j], r * F, F, e_bytes, 2, 1, 1, f"{op.name}.{e}.act", h)
                        h = L.gemm(pes[j], r, H, F, as_op(f"{op.name}.{e}.down"), h, "forward")
                        L.span(i, "moe", first, stage, "forward", mb, f"{op.name}.{e}")
                done.append(h)
            first = len(L.prog)
            comb_ops, back = exchange(L, pes, lambda j, s: src[s]["rows"][j] * H * e_bytes, done,
                                      f"{op.name} combine")
            L.span(i, "alltoall", first, stage, "forward", mb, f"{op.name} combine")
            first = len(L.prog)
            for s in range(ep):
                outs[reps[s]][t] = L.vector(pes[s], src[s]["tok"] * H, H, e_bytes, K, 1, 1, f"{op.name}.combine",
                                            done[s] + back[s])
            L.span(i, "moe", first, stage, "forward", mb, f"{op.name}.combine")
            record(L, op, "recompute" if L.recomputing else "forward", mb, grp, stage, t, pes, src, H * e_bytes,
                   disp_ops, comb_ops, ran, K)
        for r in reps:
            group = L.out.placement.group(r, stage)
            if tp > 1 and sin != SEQ:  # the tp ranks' token slices gathered: the output replicated again
                # (an all-gather's buffer is the whole output of the data rank's T / cp tokens, each rank's slice
                # 1/tp of it: ccl.hpp)
                first = len(L.prog)
                ag = L.collective("all_gather", group, L.tok(T) * H * e_bytes, sum(outs[r], []),
                                  op.name + " all-gather")
                L.span(i, "all_gather", first, stage, "forward", mb, op.name + " all-gather")
                memos[r]["done"][i], memos[r]["state"][i] = [ag] * tp, REP
            else:
                memos[r]["done"][i], memos[r]["state"][i] = outs[r], (SEQ if tp > 1 else REP)

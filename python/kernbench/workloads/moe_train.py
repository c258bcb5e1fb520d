"""A training step of MoE layers (kernbench.workloads.training drives it): the ``moe`` op's backward over the
expert-parallel groups, and the lockstep of the data ranks at the ops that span them.

Forward. An MoE op spans the ``ep`` data ranks of an EP group (and with cp > 1 an attention op the cp ranks of a
replica), so a model chunk's forward of microbatch j that holds such ops runs op-major across the data ranks
(kernbench.workloads.context.forward_chunk): the chunk's ops up to a spanning op on every data rank, the MoE op over
every EP group (moe_lower.lower_moe: dispatch, expert GEMMs, combine) or the attention over every cp group, then
on. A chunk without them runs replica by replica, as a dense model does.

Backward of the MoE op (``backward_moe``), per EP group and tensor-parallel rank t, the forward reversed, with the
token figures of the forward (moe_lower.routes):

* with tp > 1 and no sequence parallelism the forward ended with an all-gather of the tp ranks' token slices into
  a replicated output; its backward is a split (each rank takes its slice of the replicated gradient: no
  transfer, Megatron's ``gather_from_tensor_model_parallel_region``), and the forward's split of the replicated
  input turns into an all-gather of the input gradient over the tp group at the end
  (``{op} dgrad all-gather``, the forward all-gather's bytes);
* combine: on each source i, the weighted sum's backward (a vector op of ``tokens x hidden`` with top_k + 1 load
  streams and top_k stores: the gradient of each of a token's top_k expert outputs), then i sends EP rank j the
  gradients of the tokens j returned to it -- the forward combine's bytes, i -> j (``{op} combine backward``);
* experts: rank j runs, per expert e that ran r > 0 tokens in the forward, after every transfer into j, the down
  GEMM's dgrad ``r x F x H`` and wgrad ``F x H x r``, SiLU x up's backward (a vector op of ``r x F``, 3 loads,
  2 stores), the gate/up GEMM's dgrad ``r x H x 2F`` and wgrad ``H x 2F x r`` -- 2x the forward's GEMM FLOPs;
  one span per expert, named as in the forward (``model.layers.3.mlp.experts.5``, pass ``backward``), so the
  critical path names the slowest expert;
* dispatch: j sends each source i the input gradients of the tokens i dispatched to it -- the forward
  dispatch's bytes, j -> i (``{op} dispatch backward``).

``Lowered.moe`` gets a record per (op, microbatch, group, tp rank) and pass (``"pass": "backward"``) with the
same matrices as the forward's: ``dispatch_tokens[i][j]`` / ``dispatch_bytes[i][j]`` what i's tokens to j carry
(forward i -> j, backward j -> i: ``dispatch_ops[j][i]``), ``combine_tokens[j][i]`` (forward j -> i, backward
i -> j: ``combine_ops[i][j]``).

Lockstep. The backward of a model chunk runs as one generator per data rank (training.lower_training) advanced
unit by unit in turn; at an MoE op each data rank's generator yields ``("moe", op, deps)`` (its incoming
gradients per tp rank) instead of lowering it, and ``drive`` lowers the op's backward for every EP group once
every data rank has reached it, sending each its input gradients and expert weight gradients back; with cp > 1
the generators yield at attention too (context.CP_REQUEST), and drive has it lowered over the cp groups. Full
recompute runs the same way: a replica's recompute of a layer yields ``(MOE_RECOMPUTE, op, view)`` at the MoE op,
and ``drive`` has the op's forward lowered again (moe_lower.lower_moe, pass ``recompute``) into every replica's
view once all are there.

Gradients: the MoE op is its own gradient unit (named by the op: ``model.layers.3.mlp.experts``); a rank holds
E / ep experts' parameters, reduced over the expert-data-parallel group of dp x cp / ep data ranks
(kernbench.workloads.sharding, ``DataParallel.expert_group``) and updated there by Adam.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.lowerer import SEQ, Lowerer
from kernbench.workloads.moe_lower import exchange, expert_op, record, routes, sources

__all__ = ["backward_moe", "drive", "MOE_REQUEST", "MOE_RECOMPUTE"]

#: What a replica's backward generator yields at an MoE op: ``(MOE_REQUEST, op, deps)``.
MOE_REQUEST = "moe"
#: What it yields at an MoE op its full recompute runs again: ``(MOE_RECOMPUTE, op, view of its memo)``.
MOE_RECOMPUTE = "moe recompute"


def drive(L: Lowerer, gens: list[Iterator], lower_request: Callable[[str, int, dict], dict]) -> None:
    """Advance the replicas' backward generators in turn, replica 0 first (mirror_replicas needs it). When they
    yield a request ``(tag, op, payload)`` -- an MoE op's backward (MOE_REQUEST) or its forward again
    (MOE_RECOMPUTE), an attention op over its cp groups (kernbench.workloads.context) -- all of them must (the
    replicas run the same schedule): ``lower_request(tag, op, {rep: payload})`` lowers that op for every replica
    and returns ``{rep: what to send it}`` (backward_moe's (input gradients, weight gradients); nothing for a
    recompute)."""
    vals: list = [None] * len(gens)
    live = list(range(len(gens)))
    sends: dict[int, object] = {}
    while live:
        nxt = []
        for r in live:
            try:
                vals[r] = gens[r].send(sends.pop(r, None))
            except StopIteration:
                continue
            nxt.append(r)
        live = nxt
        reqs = {r: vals[r] for r in live if isinstance(vals[r], tuple)}
        if not reqs:
            continue
        ops = {v[:2] for v in reqs.values()}
        if len(reqs) != len(gens) or len(ops) != 1:
            raise WorkloadError(f"{L.g.name}: the replicas' backward reached spanning ops out of step "
                                f"({len(reqs)} of {len(gens)} replicas at {sorted(ops)})")
        tag, op = ops.pop()
        sends = lower_request(tag, op, {r: v[2] for r, v in reqs.items()})


def backward_moe(L: Lowerer, i: int, mb: int, stage: int, deps: dict[int, list[list]],
                 memos: Mapping[int, dict]) -> dict:
    """The backward of MoE op ``i`` of microbatch ``mb`` on every EP group of ``stage`` (module doc). ``deps[rep]``:
    data rank rep's incoming gradients per tp rank; ``memos[rep]`` its forward memo of this microbatch. Returns per
    data rank (the op's input gradients, its expert weight gradients), each per tp rank."""
    op, plan = L.g.ops[i], L.plan
    R = routes(L, i)
    K, H, F, T, per, eb = (R[k] for k in ("K", "H", "F", "T", "per", "e_bytes"))
    ep, tp = plan.ep, plan.tp
    named: dict = {}
    gathered = tp > 1 and L.state_in(i, memos[L.replicas[0]]["state"]) != SEQ  # the forward's tp all-gather
    out: dict[int, list] = {}
    wgrad: dict[int, list] = {}
    for grp in range(len(L.replicas) // ep):  # every EP group, or those of the period (represent_replicas)
        reps = [grp * ep + j for j in range(ep)]
        for t in range(tp):
            pes = L.out.placement.ep_group(grp, stage, t)
            src = sources(L, R, reps, t)
            first = len(L.prog)
            cb = [L.vector(pes[s], src[s]["tok"] * H, H, eb, K + 1, 1, K, f"{op.name}.combine backward",
                           deps[reps[s]][t]) for s in range(ep)]
            L.span(i, "moe", first, stage, "backward", mb, f"{op.name}.combine")
            first = len(L.prog)
            comb_ops, arrive = exchange(L, pes, lambda s, j: src[s]["rows"][j] * H * eb, cb,
                                        f"{op.name} combine backward")
            L.span(i, "alltoall", first, stage, "backward", mb, f"{op.name} combine backward")
            done, ran = [], {}
            for j in range(ep):
                h = cb[j] + arrive[j]
                for e in range(j * per, (j + 1) * per):
                    r = sum(x["sent"][e] for x in src)
                    ran[e] = r
                    if r:
                        first = len(L.prog)
                        down, gate_up = (expert_op(op, named, f"{op.name}.{e}.{x}") for x in ("down", "gate_up"))
                        h = L.gemm(pes[j], r, F, H, down, h, "backward")          # dgrad of down
                        h = L.gemm(pes[j], F, H, r, down, h, "backward")          # wgrad of down
                        h = L.vector(pes[j], r * F, F, eb, 3, 1, 2, f"{op.name}.{e}.act backward", h)
                        h = L.gemm(pes[j], r, H, 2 * F, gate_up, h, "backward")   # dgrad of gate/up
                        h = L.gemm(pes[j], H, 2 * F, r, gate_up, h, "backward")   # wgrad of gate/up
                        L.span(i, "moe", first, stage, "backward", mb, f"{op.name}.{e}")
                done.append(h)
            first = len(L.prog)
            disp_ops, back = exchange(L, pes, lambda j, s: src[s]["rows"][j] * H * eb, done,
                                      f"{op.name} dispatch backward")
            L.span(i, "alltoall", first, stage, "backward", mb, f"{op.name} dispatch backward")
            for s in range(ep):
                out.setdefault(reps[s], [None] * tp)[t] = done[s] + back[s]
                wgrad.setdefault(reps[s], [None] * tp)[t] = done[s]
            record(L, op, "backward", mb, grp, stage, t, pes, src, H * eb, disp_ops, comb_ops, ran, K)
    if gathered:  # the input gradient's token slices gathered over each data rank's tp group
        for r in L.replicas:
            group = L.out.placement.group(r, stage)
            first = len(L.prog)
            ag = L.collective("all_gather", group, L.tok(T) * H * eb, sum(out[r], []), op.name + " dgrad all-gather")
            L.span(i, "all_gather", first, stage, "backward", mb, op.name + " dgrad all-gather")
            out[r] = [ag] * tp
    return {r: (out[r], wgrad[r]) for r in out}

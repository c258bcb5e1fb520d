"""Tensor-parallel rank 0 standing for its group (``tp_ranks="one"`` of ``lower(..., phase="train")`` and
``estimate.training_step``; docs/model-estimates.md, "One tensor-parallel rank for all").

On a symmetric machine the ranks of a tensor-parallel group run the same kernels on the same shapes at the same
time: a layer's GEMMs are cut into equal shards, its norms and attention into equal heads or tokens. So a
training step need not lower them rank by rank. With ``Lowerer.represent_tp_ranks`` only rank 0 of each group
appends its ops (kernels, host launches, stage-to-stage transfers, context-parallel exchanges, data-parallel
collectives, optimizer); ranks 1 .. tp - 1 appear only where their GPUs must, in the tensor-parallel collectives of
their group and the gradient norm's all-reduce, entering with rank 0's handles. What that leaves out is what the
other ranks put on links rank 0's traffic does not cross: on a rail-optimised cluster each GPU has its own NIC on
its own rail, and inside a box the NVSwitch is non-blocking, so their data-parallel collectives, their transfers
between stages and their cp ring travel on links of their own; their host launch queues and SMs are their own too.

The lowering's loops over a group's ranks go through ``each_rank`` (rank-indexed results, the ranks not lowered
holding a copy of rank 0's handles), ``lowered_ranks`` (the ranks whose ops are appended) and ``joined`` (what a
collective waits for). Counts, GEMM FLOPs and data-parallel bytes of rank 0 stand for every rank
(``rank_weight``), as ``Lowerer.weight`` makes replica 0's stand for every replica.
"""

from __future__ import annotations

from typing import Any, Callable

from kernbench.workloads.graph import WorkloadError

__all__ = ["TpRanks"]


class TpRanks:
    """The Lowerer's side of tensor-parallel stand-ins (the module doc); ``tp_one``, ``rank_weight``, ``plan``,
    ``target``, ``g`` and ``out`` are the Lowerer's attributes."""

    tp_one: bool
    rank_weight: int
    g: Any
    plan: Any
    target: Any
    out: Any

    def represent_tp_ranks(self) -> None:
        """From now on only tensor-parallel rank 0 of each group is lowered (its kernels, stage-to-stage transfers,
        data-parallel collectives and optimizer) and ranks 1 .. tp - 1 are taken to be its copies: on a symmetric
        machine they run the same kernels at the same time. They appear only where their GPUs must, in their
        group's tensor-parallel collectives (and the gradient norm's all-reduce), entering with rank 0's handles;
        their ops there are left out of the step's readings (``Lowered.stand_ins``: they would launch early, with
        no kernels of their own queued). Counts, FLOPs and data-parallel bytes of rank 0 stand for every rank
        (``rank_weight``). GPU target only (docs/model-estimates.md, "One tensor-parallel rank for all")."""
        if self.target.name != "gpu":
            raise WorkloadError(f"{self.g.name}: tp_ranks='one' lowers tensor-parallel rank 0 for its group on a GPU "
                                f"machine; this machine's PEs are {self.target.name!r} (use tp_ranks='all')")
        self.tp_one = self.plan.tp > 1
        self.rank_weight = self.plan.tp
        self.out.stand_ins = frozenset(pe for rep in self.out.placement.groups for st in rep for pe in st[1:])

    def each_rank(self, group, fn: Callable[[int, str], list]) -> list[list]:
        """``fn(t, pe)`` on every rank of the tensor-parallel ``group``, rank-indexed; with represent_tp_ranks on
        rank 0 alone, the other ranks getting a copy of its handles."""
        if self.tp_one and len(group) > 1:
            h = fn(0, group[0])
            return [h] + [list(h) for _ in group[1:]]
        return [fn(t, pe) for t, pe in enumerate(group)]

    def lowered_ranks(self, tp: int) -> range:
        """The tensor-parallel ranks of a group of ``tp`` whose ops are appended (represent_tp_ranks: rank 0)."""
        return range(1 if self.tp_one else tp)

    def joined(self, per_rank: list[list]) -> list:
        """The handles of every lowered rank of a rank-indexed list, as one list (what a collective waits for)."""
        return [h for t in self.lowered_ranks(len(per_rank)) for h in per_rank[t]]

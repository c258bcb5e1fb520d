"""The data-parallel side of a training step: how the replicas hold and exchange weights, gradients and Adam.

``ParallelPlan.sharding`` (kernbench.workloads.plan.SHARDINGS) picks one of four layouts. The unit of
exchange is a *layer*: a block instance (``model.layers.3``), and the ops outside the blocks (embeddings,
final norm, LM head) as one more unit, the root. Every collective runs over the ``dp`` ranks that hold the
same tensor-parallel shard (replica r's rank t of the stage), on the machine's fabric. With context parallelism
(``ParallelPlan.cp`` > 1) the cp ranks of a replica hold the same weights too: the group is the dp x cp data
ranks (``Placement.dp_group``, Megatron's data-parallel group with context parallelism), and "dp" below reads
dp x cp -- the gradients are reduced and ZeRO's / FSDP's shards cut over dp x cp ranks.

A unit is exchanged per pipeline stage: with pp > 1 the root's ops sit on two stages (the embedding on the
first, the final norm and LM head on the last), and each stage gathers, reduce-scatters and updates only the
parameters of the ops it holds, on its own dp group and stream (Megatron-LM's and FSDP's per-stage modules).
The parameters of the stages add up to the model's, each name counted once per stage. A tied LM head (the
embedding table read by the head) is then held on both the first and the last stage, and exchanged and
updated on each, as Megatron-LM keeps the word embeddings on both; the all-reduce Megatron-LM adds between
the two copies' gradients (its embedding group) is not modelled. With pp = 1 the tied table is one
parameter of the one root unit, as before.

``none``
    Gradients stay whole on every replica. A layer's 16-bit gradients (one bucket) are all-reduced once its
    last microbatch's weight gradients are done on every replica (overlapping the backward of the layers
    before it); Adam updates all of the layer's parameters on every rank. The reduction is appended as
    the last replica reports the layer (the training lowering runs the replicas' backward layer by layer in
    lockstep), so in each rank's program order it sits between the layer's backward and the next one's: on
    a GPU the host issues its NCCL call there, as DDP's bucket hook does.
``zero1`` / ``zero2``
    ZeRO stages 1 and 2 (Rajbhandari et al. 2020), as Megatron-LM's distributed optimizer runs them: the
    gradients are reduce-scattered (zero1: once, after the last microbatch, the gradients accumulated in a
    whole buffer; zero2: after every microbatch, since a rank keeps only its shard), Adam updates the rank's
    1/dp of the parameters, and the updated 16-bit weights are all-gathered. The bytes on the fabric are
    an all-reduce's (a reduce-scatter then an all-gather); the optimizer's are 1/dp.
``fsdp``
    PyTorch FSDP's FULL_SHARD (ZeRO-3): a rank holds 1/dp of every layer's weights. Before a layer's
    forward, and again before its backward, its weights are all-gathered; after each microbatch's backward
    of the layer its gradients are reduce-scattered, and Adam updates the shard.
    The gathers run on their own stream in the order the layers need them, one after another, and a
    gather may start once the layer two before it has been used (FSDP's ``limit_all_gathers``: at most two
    layers' gathered weights live at once; the root's stay gathered through a pass and are not counted).
    That is the prefetch FSDP does: the next layer's gather overlaps this layer's compute (backward
    prefetch ``BACKWARD_PRE``: the gather of the layer before is issued as a layer's backward begins, ahead
    of its reduce-scatter).

MoE layers (sharding ``none`` or ``zero1``; the training lowering refuses the others): an MoE op's routed experts are
a unit of their own. A rank holds E / ep of them, whole, so their gradients are reduced not over the dp group but
over the expert-data-parallel group of its EP rank j (``expert_group``: rank j of each of the dp x cp / ep EP
groups, at every tensor-parallel rank), once after the last microbatch, on that group's own stream; Adam then
updates the rank's experts. ``none`` all-reduces them (bytes as ``expert_all_reduce``); ``zero1``, Megatron's
distributed optimizer, reduce-scatters them over that group, steps Adam on the rank's shard and all-gathers the
updated experts (``expert_reduce_scatter``, ``expert_all_gather``).

On a GPU a rank's data-parallel collectives run one after another, in the order they are issued: PyTorch's
ProcessGroupNCCL runs every collective of a process group on one NCCL stream per device, whichever stream
issued it (DDP's buckets, FSDP's gathers and reduce-scatters alike). Compute overlaps them; they do not
overlap each other. On the SIP machine each collective is its own IPCQ program and waits only for its data
(and, under FSDP, the rate limit), so the buckets' exchanges share the fabric at once, as they always did.

The gradients and gathered weights are 16-bit (the reduce dtype is the parameter dtype: FSDP's
``MixedPrecision(param_dtype=bf16, reduce_dtype=bf16)``; assumed). Adam (training.ADAM_BYTES_PER_PARAM)
reads and writes fp32 state of the rank's parameters.

The optimizer step (``DataParallel.finish``): a rank steps once every one of its reductions is done (Megatron-LM's
``finish_grad_sync``, FSDP's wait at the end of the backward), never layer by layer; with gradient clipping
(``ParallelPlan.clip_grad`` > 0) the gradient norm is computed on every rank and all-reduced first, so no rank
steps before every gradient of the model is reduced.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["DataParallel", "ROOT", "DP_KINDS", "is_dp_collective", "dp_collectives"]

#: The unit of the ops outside the repeated blocks.
ROOT = "outside"
#: Span kinds of the data-parallel collectives (``DataParallel._collective``): the gradients' all-reduce (named
#: ``grad_all_reduce`` apart from a tensor-parallel all-reduce), reduce-scatters and weight all-gathers.
DP_KINDS = frozenset({"grad_all_reduce", "reduce_scatter", "all_gather"})


def is_dp_collective(span) -> bool:
    """Whether a lowered span is one of the data-parallel collectives: those are the only collective spans not
    lowered from a graph op (``op == -1``); a tensor-parallel collective carries its op's index."""
    return span.op < 0 and span.kind in DP_KINDS


def dp_collectives(columns) -> np.ndarray:
    """``is_dp_collective`` of every span at once, from the spans' columns (timeline.SpanColumns)."""
    return (columns.op < 0) & columns.kind_in(DP_KINDS)


def _ops(handles) -> list[int]:
    """Program op ids of a handle list: an op id itself, a sub-program's Handle its sinks."""
    return [int(op) for h in handles for op in (h.sinks if hasattr(h, "sinks") else [h])]


class _Stream:
    """One dp group's collectives in issue order (one NCCL stream): each waits for the one issued before it.

    A place in the order is taken when the collective is issued (``reserve``); the collective itself may be
    appended later (``fill``: a reduce-scatter needs every replica's gradients, lowered later than the first
    replica's issue). Each collective starts behind gates, one barrier per rank, so what it waits for can be
    added after the fact."""

    def __init__(self, L, serial: bool):
        self.L, self.serial = L, serial
        self.entries: list[list] = []  # [gates, handle] (None until filled)

    def reserve(self) -> int:
        self.entries.append([None, None])
        return len(self.entries) - 1

    def fill(self, idx: int, gates: list[int], handle) -> None:
        self.entries[idx] = [gates, handle]
        if not self.serial:
            return
        if idx > 0 and self.entries[idx - 1][1] is not None:
            self._link(gates, self.entries[idx - 1][1])
        if idx + 1 < len(self.entries) and self.entries[idx + 1][0] is not None:
            self._link(self.entries[idx + 1][0], handle)

    def _link(self, gates: list[int], handle) -> None:
        for op in _ops(handle):
            self.L.prog.depend(gates[0], op)


class DataParallel:
    """One training step's data-parallel exchanges, appended to a Lowerer's program as the step is lowered.

    The training lowering calls ``need(...)`` before an op that reads a layer's weights (FSDP: the gather
    it waits for), ``gradients_done(...)`` after a layer's backward on a microbatch, and ``finish(...)``
    once every backward is lowered (the remaining reductions and the optimizer)."""

    def __init__(self, L, stages: Sequence[int], unit_of: Sequence[str], param_elems):
        self.L, self.plan = L, L.plan
        self.mode = L.plan.sharding
        self.active = L.plan.dp_cp > 1  # the dp x cp data ranks hold the same weights
        # a unit's parameterised ops per pipeline stage: (unit, stage) -> op ids; the root spans two stages at pp > 1
        self.units: dict[tuple[str, int], list[int]] = {}
        for i, op in enumerate(L.g.ops):
            if op.params:
                self.units.setdefault((unit_of[i], stages[i]), []).append(i)
        # per tensor-parallel rank, counted when first needed: by then the unit's ops are lowered (their
        # tensor-parallel rules known), except for FSDP's first gather of a unit (the rules it will get)
        self._param_elems, self._elems = param_elems, {}
        self.streams: dict[tuple[int, int], _Stream] = {}       # (s, t) -> the dp group's stream
        self.gathers: dict[tuple, tuple[list[int], list]] = {}   # (s, t, mb, pass, unit) -> (gates, handle)
        self.order: dict[tuple[int, int], list[tuple]] = {}      # (s, t) -> gather keys in issue order
        self.place_of: dict[tuple, int] = {}                     # gather key -> its index in that order
        self.started: dict[tuple, list] = {}                     # (key, rep) -> rank's chain when it began using it
        self.wgrads: dict[tuple, list] = {}                      # (rep, (unit, s), t, mb) -> backward handles
        self.reduce_at: dict[tuple, int] = {}                    # ((unit, s), t, mb) -> its reduction's place
        self.backward_order: list[tuple] = []                    # (unit, s) as the last microbatch's backward ends
        self.bytes: dict[str, int] = {}                          # per kind: bytes per rank the collectives carry
        # MoE: the units of routed experts (a moe op's own unit), reduced over their expert-data-parallel groups
        self.expert = {key for key, ops in self.units.items() if all(L.g.ops[i].kind == "moe" for i in ops)}

    def elems(self, key: tuple[str, int]) -> int:
        """Parameter elements one tensor-parallel rank of stage ``s`` holds of unit ``u``, ``key`` = (u, s)
        (counted once, on first use)."""
        if key not in self._elems:
            self._elems[key] = self._param_elems(self.units[key])
        return self._elems[key]

    def stage_params(self) -> dict[int, int]:
        """Per pipeline stage: the parameter elements one tensor-parallel rank holds, before dp sharding."""
        out: dict[int, int] = {}
        for key in self.units:
            out[key[1]] = out.get(key[1], 0) + self.elems(key)
        return out

    @property
    def sharded(self) -> bool:
        return self.mode != "none"

    def group(self, s: int, t: int) -> list[str]:
        """The dp group of tensor-parallel rank ``t`` of stage ``s``: that rank of every data rank (dp x cp PEs:
        Placement.dp_group)."""
        return list(self.L.out.placement.dp_group(s, t))

    def expert_group(self, s: int, j: int) -> list[str]:
        """The expert-data-parallel group of EP rank ``j`` on stage ``s``: every PE holding EP rank j's experts --
        rank j of each of the dp x cp / ep EP groups (Megatron-Core's expert-data-parallel group spans the data
        ranks, cp included), at every tensor-parallel rank (each tp rank runs whole experts on its token slice:
        moe_lower), dp x cp / ep x tp PEs."""
        pl, ep = self.L.out.placement, self.plan.ep
        return [pl.group(g * ep + j, s)[t] for g in range(self.plan.dp_cp // ep) for t in range(self.plan.tp)]

    def stream(self, s: int, t) -> _Stream:
        if (s, t) not in self.streams:
            self.streams[(s, t)] = _Stream(self.L, self.L.target.name == "gpu")
        return self.streams[(s, t)]

    def _collective(self, what: str, s: int, t, place: int, nbytes: int, deps: list, name: str, pass_: str,
                    mb: int, pes: list[str] | None = None, counted: str | None = None,
                    rank_deps: list[list] | None = None) -> tuple[list[int], list]:
        """One collective over the dp group (or ``pes``) at ``place`` on stream ``(s, t)``, after its data:
        ``deps`` (every rank waits for them) and ``rank_deps`` (per rank of the group, its own); its bytes counted
        under ``counted`` (default: ``what``). Returns the ranks' gates and the collective's handles."""
        L = self.L
        pes = pes or self.group(s, t)
        # the stream's order (the collective issued before this one: _Stream) gates every rank; each rank's own
        # gate then takes what that rank alone waits for (FSDP's rate limit: _gate), as do ``rank_deps``
        issue = L.prog._barrier_from_model(pes[0], [], name + " issue")
        gates = [L.prog._barrier_from_model(pe, [issue], name + " ready") for pe in pes]
        own = rank_deps or [[] for _ in pes]
        first = len(L.prog)
        # one collective of the whole dp group, whichever replicas are lowered; a dp group's (stream (s, t) with an
        # integer t) stands for every tensor-parallel rank's (Lowerer.represent_tp_ranks), an EP group's spans them
        per_rank = isinstance(t, int)
        weight, L.weight = L.weight, 1
        try:
            h = L.collective(what, pes, nbytes, list(deps), name, rank_deps=[[g] + list(d) for g, d in zip(gates, own)],
                             per_rank=per_rank)
        finally:
            L.weight = weight
        L.span(-1, "grad_all_reduce" if what == "all_reduce" else what, first, s, pass_, mb, name)
        n = int(nbytes) * (L.rank_weight if per_rank else 1)
        self.bytes[counted or what] = self.bytes.get(counted or what, 0) + n
        self.stream(s, t).fill(place, [issue], h)
        return gates, h

    # ---- FSDP: the weights gathered before use ------------------------------------------------------------
    def need(self, rep: int, s: int, mb: int, pass_: str, unit: str) -> list[list]:
        """Per tensor-parallel rank of replica ``rep``'s stage ``s``: what a use of ``unit``'s weights in
        ``pass_`` (forward, or backward and its recompute) of microbatch ``mb`` waits for. Only FSDP waits."""
        tp = self.plan.tp
        if self.mode != "fsdp" or not self.active or (unit, s) not in self.units:
            return [[] for _ in range(tp)]
        out = []
        for t in self.L.lowered_ranks(tp):  # rank 0 stands for the others (Lowerer.represent_tp_ranks)
            key = (s, t, mb, pass_, unit)
            if key not in self.gathers:
                self._gather(key)
            pe = self.L.out.placement.group(rep, s)[t]
            if (key, rep) not in self.started:
                # this rank begins using the unit: what it ran before is done with the unit two back
                self.started[(key, rep)] = list(self.L.chain.get(pe, []))
                self._gate_next(key, rep)
            out.append(list(self.gathers[key][1]))
        return out + [list(out[0]) for _ in range(tp - len(out))]

    def _gather(self, key: tuple) -> None:
        s, t, mb, pass_, unit = key
        place = self.stream(s, t).reserve()
        self.gathers[key] = self._collective("all_gather", s, t, place, 2 * self.elems((unit, s)), [],
                                             f"{unit} weights all-gather", pass_, mb)
        if unit == ROOT:
            return
        seq = self.order.setdefault((s, t), [])
        self.place_of[key] = len(seq)
        seq.append(key)
        if len(seq) >= 2:  # the rate limit: this gather waits until each rank has begun the previous one's unit
            for rep in range(self.plan.dp_cp):
                if (seq[-2], rep) in self.started:
                    self._gate(key, rep, self.started[(seq[-2], rep)])

    def _gate_next(self, key: tuple, rep: int) -> None:
        """Rank ``rep`` began ``key``'s unit: the gather after it may go once the rank got here."""
        seq = self.order.get(key[:2], [])
        if key in self.place_of:
            k = self.place_of[key]
            if k + 1 < len(seq):
                self._gate(seq[k + 1], rep, self.started[(key, rep)])

    def _gate(self, key: tuple, rep: int, handles: list) -> None:
        for r in self.L.stand_ins(rep):  # the replicas not lowered are gated as replica 0 is
            gate = self.gathers[key][0][r]
            for op in _ops(handles):
                self.L.prog.depend(gate, op)

    # ---- gradients --------------------------------------------------------------------------------------
    def gradients_done(self, rep: int, s: int, mb: int, unit: str, handles: list[list]) -> None:
        """Replica ``rep``'s weight gradients of ``unit`` on microbatch ``mb`` are ``handles`` (per tp rank).
        The first replica's report takes the reduction's place on the stream; it is appended once every
        replica's gradients are in (the training lowering reports a unit of every replica before the next unit,
        so it comes before the next unit's backward in each rank's program order): FSDP and zero2
        reduce-scatter each microbatch's gradients, none and zero1 reduce the last one's (the accumulated
        gradients)."""
        last = mb == self.plan.microbatches - 1
        per_mb = self.mode in ("fsdp", "zero2")
        key = (unit, s)
        for t, hs in enumerate(handles):
            self.wgrads.setdefault((rep, key, t, mb), []).extend(hs)
        if key in self.expert:
            return self._expert_done(rep, key, mb)
        if not self.active:
            return
        for t in self.L.lowered_ranks(self.plan.tp):
            if rep == 0 and (per_mb or last):
                self.reduce_at[(key, t, mb)] = self.stream(s, t).reserve()
        if rep == 0 and last:
            self.backward_order.append(key)
        if not (per_mb or last) or any((r, key, 0, mb) not in self.wgrads for r in self.L.replicas):
            return
        what = "all_reduce" if self.mode == "none" else "reduce_scatter"
        for t in self.L.lowered_ranks(self.plan.tp):
            self.wgrads[("rs", key, t, mb)] = self._reduce(what, key, t, mb)

    def _expert_done(self, rep: int, key: tuple[str, int], mb: int) -> None:
        """Routed experts' gradients: after the last microbatch, EP rank j's accumulated expert gradients are
        all-reduced (sharding none) or reduce-scattered (zero1: Megatron's distributed optimizer shards the expert
        parameters' optimizer state over the expert-data-parallel group) over its expert-data-parallel group
        (``expert_group``) once the last replica of it has reported, on that group's own stream (its own NCCL
        communicator, as Megatron-Core's expert-data-parallel group); a group of one PE reduces nothing."""
        plan = self.plan
        if mb != plan.microbatches - 1:
            return
        if rep == 0:
            self.backward_order.append(key)
        unit, s = key
        j = rep % plan.ep
        reps = [r for r in self.L.replicas if r % plan.ep == j]  # those lowered (represent_replicas: j alone)
        if any((r, key, 0, mb) not in self.wgrads for r in reps):
            return
        src = {r: q for q in reps for r in self.L.stand_ins(q)}  # replica -> the lowered one standing for it
        # per PE of expert_group's order: its own gradients
        own = [list(self.wgrads.get((src[g * plan.ep + j], key, t, mb), []))
               for g in range(plan.dp_cp // plan.ep) for t in range(plan.tp)]
        pes = self.expert_group(s, j)
        if len(pes) < 2:
            self.wgrads[("experts", key, j, mb)] = own[0]
            return
        nbytes = 2 * self.elems(key)
        what = "reduce_scatter" if self.sharded else "all_reduce"
        name = f"{unit} grad {what.replace('_', '-')} (EP rank {j})"
        self.wgrads[("experts", key, j, mb)] = self._collective(
            what, s, ("experts", j), self.stream(s, ("experts", j)).reserve(), nbytes, [], name,
            "backward", mb, pes=pes, counted="expert_" + what, rank_deps=own)[1]
        self.L.out.expert_dp.append({"unit": unit, "stage": s, "ep_rank": j, "pes": list(pes), "bytes": nbytes,
                                     "elements": self.elems(key)})

    def _reduce(self, what: str, key: tuple[str, int], t: int, mb: int) -> list:
        unit, s = key
        # each replica's rank enters the collective once its own gradients are ready (a replica not lowered:
        # those of the replica standing in for it)
        own: list[list] = [[] for _ in range(self.plan.dp_cp)]
        for q in self.L.replicas:
            for r in self.L.stand_ins(q):
                own[r].extend(self.wgrads.get((q, key, t, mb), []))
        name = f"{unit} grad " + ("all-reduce" if what == "all_reduce" else "reduce-scatter")
        return self._collective(what, s, t, self.reduce_at[(key, t, mb)], 2 * self.elems(key), [], name,
                                "backward", mb, rank_deps=own)[1]

    def finish(self, adam, norm) -> None:
        """The last reductions and the optimizer step, per unit and stage (in the order the backward finished them)
        and tensor-parallel rank: ``adam(pe, elements, name, deps, stage)`` lowers Adam over a rank's parameters,
        ``norm(pe, elements, name, deps, stage)`` the rank's gradient-norm kernel. A rank steps once all of its own
        gradients are reduced (Megatron-LM's ``finish_grad_sync``, FSDP's post-backward wait); with gradient
        clipping (``plan.clip_grad`` > 0) every rank first reads its gradients for their norm and the norms are
        all-reduced (``_clip``), so no rank steps before every rank's gradients are reduced."""
        plan, last = self.plan, self.plan.microbatches - 1
        dp = plan.dp_cp  # the optimizer state is sharded over the dp x cp data ranks (Megatron's distributed optimizer)
        self.L.weight = 1  # Adam and the gathers run on every replica's ranks, lowered or not
        order = self.backward_order + [k for k in self.units if k not in self.backward_order]
        steps: dict[str, list[tuple]] = {}  # pe -> (unit key, tp rank, elements, its gradients reduced)
        for key in order:
            unit, s = key
            if key in self.expert:  # each PE updates the experts it holds (zero1: its shard), once reduced
                for j in range(plan.ep):
                    ready = self.wgrads.get(("experts", key, j, last), [])
                    pes = self.expert_group(s, j)
                    shard = -(-self.elems(key) // len(pes)) if self.sharded else self.elems(key)
                    for pe in pes:
                        steps.setdefault(pe, []).append((key, ("experts", j), shard, ready))
                continue
            for t in self.L.lowered_ranks(plan.tp):
                elems = self.elems(key)
                if not self.active:
                    ready = self.wgrads.get((0, key, t, last), [])
                else:  # reduced as the last replica reported the gradients (gradients_done)
                    ready = self.wgrads[("rs", key, t, last)]
                shard = -(-elems // dp) if self.sharded else elems
                for pe in self.group(s, t):
                    steps.setdefault(pe, []).append((key, t, shard, ready))
        reduced = {pe: [h for *_, ready in items for h in ready] for pe, items in steps.items()}
        gate = self._clip(steps, reduced, norm) if plan.clip_grad > 0 else reduced
        done: dict[tuple, dict[str, list]] = {}
        for pe, items in steps.items():
            for key, t, elems, _ in items:
                done.setdefault((key, t), {})[pe] = adam(pe, elems, f"{key[0]} adam", gate[pe], key[1])
        if self.active and self.mode in ("zero1", "zero2"):  # the updated weights gathered, on the same stream
            for key in order:
                if key in self.expert:
                    self._gather_experts(key, done, last)
                    continue
                unit, s = key
                for t in self.L.lowered_ranks(plan.tp):  # each rank's part once its own Adam is done
                    self._collective("all_gather", s, t, self.stream(s, t).reserve(), 2 * self.elems(key), [],
                                     f"{unit} weights all-gather", "optimizer", last,
                                     rank_deps=[list(done[(key, t)][pe]) for pe in self.group(s, t)])

    def _gather_experts(self, key: tuple[str, int], done: dict[tuple, dict[str, list]], last: int) -> None:
        """zero1: EP rank j's updated expert weights all-gathered over its expert-data-parallel group, each PE's
        shard once its own Adam is done, on the group's stream."""
        unit, s = key
        for j in range(self.plan.ep):
            pes = self.expert_group(s, j)
            if len(pes) < 2:
                continue
            self._collective("all_gather", s, ("experts", j), self.stream(s, ("experts", j)).reserve(),
                             2 * self.elems(key), [], f"{unit} experts all-gather (EP rank {j})", "optimizer", last,
                             pes=pes, counted="expert_all_gather",
                             rank_deps=[list(done[(key, ("experts", j))][pe]) for pe in pes])

    def _clip(self, steps: dict[str, list[tuple]], reduced: dict[str, list], norm) -> dict[str, list]:
        """Gradient clipping: each rank's norm kernels over the gradients it steps (once they are all reduced:
        ``reduced``), then one
        all-reduce of the norms (fp32) per group that Megatron-LM reduces them over -- the model-parallel group of
        each replica (its tp x pp ranks) with plain data parallelism, every rank with sharded optimizer state
        (its distributed optimizer, FSDP). Returns what each rank's Adam waits for."""
        plan, L = self.plan, self.L
        pl = L.out.placement
        normed = {}
        for pe, items in steps.items():  # one kernel per unit (every unit alike: layer reuse stays exact)
            normed[pe] = [h for key, _, elems, _ in items
                          for h in norm(pe, elems, f"{key[0]} grad norm", reduced[pe], key[1])]
        # a tensor-parallel rank not lowered joins with its rank 0's norms (Lowerer.represent_tp_ranks)
        lead = {pe: grp[0] for rep in pl.groups for grp in rep for pe in grp if pe not in steps} if L.tp_one else {}
        if self.sharded:
            groups = [[pe for pe in pl.pes if lead.get(pe, pe) in steps]]
        else:
            groups = [[pl.group(r, s)[t] for s in range(plan.pp) for t in range(plan.tp)] for r in range(plan.dp_cp)]
        stage = {pe: items[0][0][1] for pe, items in steps.items()}
        gate = {}
        for g in groups:
            first = len(L.prog)
            h = L.collective("all_reduce", g, 4, [], "grad norm all-reduce",
                             rank_deps=[normed[lead.get(pe, pe)] for pe in g])
            for s in sorted({stage[lead.get(pe, pe)] for pe in g}):  # one span per stage it spans (the parts)
                L.span(-1, "all_reduce", first, s, "optimizer", plan.microbatches - 1, "grad norm all-reduce")
            for pe in g:
                gate[pe] = list(h)
        return gate

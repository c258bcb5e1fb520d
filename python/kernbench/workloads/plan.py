"""How a workload graph is spread over a machine's PEs: data, context, tensor and pipeline parallelism.

    plan = ParallelPlan(dp=2, tp=8, pp=2, microbatches=4)
    placement = plan.place(system)          # PE names per (data rank, stage, tp rank)

Placement: the plan takes the first ``dp x cp x pp x tp`` PEs in the machine's
rank order (``System.pes()``, or the ``pes=`` list given), in Megatron-LM's
order (its default ``--order tp-cp-ep-dp-pp``) -- tensor parallelism innermost,
then context, then data, then pipeline -- rank
``(((stage * dp) + replica) * cp + c) * tp + t``: a tensor-parallel group is
``tp`` consecutive PEs (one GPU box at tp 8 on a cluster, one cube when ``tp``
is at most the PEs of a cube), the context-parallel ranks of a replica follow
each other, then the replicas of a stage, and the stages come last, so a
pipeline spans the machine's boxes (nodes) while a stage's data-parallel group
stays as close as the plan allows. PEs past ``dp x cp x pp x tp`` idle; a plan
needing more PEs than the machine has is refused, naming dp, cp, tp, pp, their
product, the machine's count and the shortfall. With cp = 1 (the default) the
rank is ``((stage * dp) + replica) * tp + t``, as it always was.

Context parallelism (``cp``; kernbench.workloads.context lowers it): the ``cp`` ranks of a replica split its
sequence (Megatron-Core's context parallelism) and hold the same weights, so the ``dp x cp`` ranks of a stage's
tensor-parallel rank are its data-parallel group (Megatron's data-parallel group "with context parallel"): the
lowering numbers them ``r = replica x cp + c`` (the *data ranks*, ``ParallelPlan.dp_cp`` of them), and
``Placement.groups[r][stage]`` is data rank r's tensor-parallel group; with cp = 1 the data ranks are the
replicas. ``Placement.cp_group(replica, stage, t)`` is the context-parallel group of tensor-parallel rank t.

Expert parallelism (``ep``, for a graph with MoE layers: kernbench.workloads.moe) is carved out of the data
ranks: ``ep`` divides ``dp x cp`` (Megatron-Core's rule: its expert-data-parallel size ``world / (tp x ep x pp)``
must be whole) and the GPUs stay ``dp x cp x pp x tp``. An EP group is ``ep`` consecutive data ranks of the same
stage and tensor-parallel rank (in rank order ``tp`` apart): data ranks ``g*ep .. g*ep + ep - 1`` of stage s, rank
t (``Placement.ep_group(g, s, t)``); EP rank j is data rank ``g*ep + j`` and holds experts
``j*E/ep .. (j+1)*E/ep - 1``. These are the groups of Megatron-Core's expert rank generator
(``parallel_state.initialize_model_parallel``: ``RankGenerator(tp=expert tp, ep=ep, dp=world / (expert tp x ep x
pp), cp=1, order="tp-cp-ep-dp-pp")``, its ``get_ranks("ep")``) with the expert tensor-parallel size at its default,
the tp size: the expert grid lays ep innermost after tp over the same ranks the dense grid lays cp then dp over, so
with cp > 1 an EP group takes the cp ranks of a replica first (cp 2, ep 2: the two cp ranks of one replica; cp 2,
ep 4: the cp ranks of two replicas). The data ranks of a group run different tokens through the same experts, so
their attention and dense weights are still plain data-parallel copies.

Tensor parallelism follows Megatron-LM. Every activation is either
*replicated* (every rank of the group holds all of it) or *sharded* (each rank
holds 1/tp of its feature or head dimension). The rule for a matmul with a
weight (a linear) is read from the data flow, which is what "its place in the
block" means:

* a linear whose input is replicated is **column-parallel** (q/k/v, gate/up,
  fc1, the LM head): rank r computes ``n / tp`` output columns; its output is
  sharded;
* a linear whose input is sharded (the op after attention -- o_proj -- or the
  second of an MLP pair -- down_proj, fc2) is **row-parallel**: rank r
  multiplies its ``k / tp`` input columns by its rows of the weight, giving a
  partial sum; an **all-reduce** of the ``m x n`` output follows (with
  ``sp=True`` a reduce-scatter, and the all-gather before the next
  column-parallel linear), making it replicated again;
* attention takes sharded q/k/v: ``heads / tp`` query heads per rank, and the
  KV heads split with them (GQA: ``kv_heads / tp`` per rank when tp divides
  them, else each KV head replicated over the ``tp / kv_heads`` ranks of its
  group);
* elementwise ops keep their input's state (``silu(gate) * up`` stays sharded,
  a residual add stays replicated) and do 1/tp of the work when sharded;
* the embedding is vocab-parallel: each rank gathers from its ``rows / tp``
  rows, and an all-reduce combines the partial lookups.

``rules`` overrides the classification per op name (``{"lm_head":
"replicated"}``): ``column``, ``row`` or ``replicated`` (every rank runs the
whole op). A name matches an op when it equals the op's name or is a prefix of
it at a dot.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, field
from typing import Mapping, Sequence

from kernbench.workloads.graph import WorkloadError

__all__ = ["ParallelPlan", "Placement", "RULES", "SHARDINGS", "RECOMPUTES", "FIDELITIES", "CP_COMM_TYPES",
           "MAX_MICROBATCHES", "MAX_DEGREE"]

#: The most microbatches a plan may run (each is lowered and simulated op by op: a step of 10**6 of them ran
#: for over 12 minutes). A pipeline past a few thousand microbatches is its steady state repeated.
MAX_MICROBATCHES = 4096
#: The most ranks one parallel degree (dp, tp or pp) may name (no machine kernbench models has more PEs).
MAX_DEGREE = 1 << 20

#: The tensor-parallel rules an override may name.
RULES = ("column", "row", "replicated")
#: How the data-parallel replicas hold the training state (kernbench.workloads.training): ``none`` (every
#: replica all of it; gradients all-reduced), ``zero1``/``zero2`` (the optimizer state, and with zero2 the
#: gradients, sharded over dp: gradients reduce-scattered, Adam on the shard, the updated weights
#: all-gathered), ``fsdp`` (FULL_SHARD / ZeRO-3: the weights too; each layer all-gathered before its forward
#: and its backward, its gradients reduce-scattered).
SHARDINGS = ("none", "zero1", "zero2", "fsdp")
#: Activation recomputation in the backward, as Megatron-LM defines it (Korthikanti et al. 2022): ``selective``
#: recomputes the attention core, ``full`` the whole forward of every layer.
RECOMPUTES = ("none", "selective", "full")
#: How a GPU machine's collectives are simulated (kernbench.ccl.collective's ``fidelity``).
FIDELITIES = ("auto", "steps", "pipeline")
#: How context-parallel attention exchanges the sequence (Megatron-Core's ``--cp-comm-type``): ``p2p`` (the default)
#: passes K/V around the cp ranks' ring, overlapped with the attention of the chunk in hand; ``a2a``
#: (DeepSpeed-Ulysses) all-to-alls q/k/v to whole sequences of cp-th of the heads, and the output back.
CP_COMM_TYPES = ("p2p", "a2a")


@dataclass(frozen=True)
class Placement:
    """The PEs of a plan: ``groups[r][stage]`` is data rank r's tensor-parallel group at the stage (tp PE names);
    data rank ``r = replica x cp + c`` (the module doc; with cp = 1 the replica)."""

    plan: "ParallelPlan"
    groups: tuple[tuple[tuple[str, ...], ...], ...]

    def group(self, replica: int = 0, stage: int = 0) -> tuple[str, ...]:
        """Data rank ``replica``'s tensor-parallel group at ``stage`` (with cp > 1: data rank replica x cp + c)."""
        return self.groups[replica][stage]

    def cp_group(self, replica: int = 0, stage: int = 0, t: int = 0) -> tuple[str, ...]:
        """The context-parallel group of dp replica ``replica``'s tensor-parallel rank ``t`` at ``stage``: its cp
        ranks' PEs, in cp rank order (in rank order ``tp`` apart)."""
        cp = self.plan.cp
        return tuple(self.groups[replica * cp + c][stage][t] for c in range(cp))

    def dp_group(self, stage: int = 0, t: int = 0) -> tuple[str, ...]:
        """The data-parallel group of tensor-parallel rank ``t`` at ``stage``: that rank of every data rank (dp x cp
        PEs, the ranks holding the same weights)."""
        return tuple(rep[stage][t] for rep in self.groups)

    def ep_group(self, g: int, stage: int = 0, t: int = 0) -> tuple[str, ...]:
        """EP group ``g`` of ``stage`` at tensor-parallel rank ``t``: the PEs of data ranks g*ep .. g*ep + ep - 1
        (with cp = 1 the replicas; the module doc)."""
        ep = self.plan.ep
        return tuple(self.groups[g * ep + j][stage][t] for j in range(ep))

    @property
    def pes(self) -> list[str]:
        """The plan's PEs in rank order (stage-major, then data rank -- replica, then cp rank -- then tensor-parallel
        rank)."""
        return [pe for s in range(self.plan.pp) for rep in self.groups for pe in rep[s]]


@dataclass(frozen=True)
class ParallelPlan:
    """Data (``dp``), tensor (``tp``) and pipeline (``pp``) parallel degrees, sequence parallelism
    (``sp``: norms and residuals split over the tp ranks by tokens, reduce-scatter/all-gather instead of
    all-reduce), pipeline ``microbatches``, an explicit PE list (``pes``, else the machine's rank order),
    per-op rule overrides (``rules``: name -> column/row/replicated), the collectives' algorithm, and for a
    training step the data-parallel ``sharding`` (SHARDINGS), activation ``recompute`` (RECOMPUTES) and the
    pipeline's ``interleave``: 1 is plain 1F1B; v > 1 is Megatron-LM's interleaved 1F1B (virtual pipeline), the
    layers cut into pp x v model chunks, rank s holding chunks s, s + pp, ... (kernbench.workloads.training).
    Megatron needs pp > 1 and microbatches a multiple of pp to interleave, and so does the plan. ``ep``: expert
    parallelism for MoE layers, carved out of the dp x cp data ranks (it must divide dp x cp; the module doc gives
    the rank order).
    ``fidelity``: how a GPU machine's collectives are simulated (kernbench.ccl.collective, docs/ccl.md
    "Fidelity"): ``auto`` (every step unless one collective alone is too large to; in a training step NCCL's ring
    on a flow fabric runs as the pipeline: Lowerer.fidelity), ``steps``, or ``pipeline`` (one coflow per channel,
    on the flow fabric: a step of a thousand GPUs' data-parallel exchanges in reach).
    ``cp``: context parallelism (Megatron-Core's), the sequence split over cp ranks of each replica, and
    ``cp_comm_type`` (CP_COMM_TYPES) how attention exchanges it (kernbench.workloads.context); the GPUs are
    dp x cp x pp x tp.
    ``clip_grad``: the gradient-norm clipping threshold (Megatron-LM's ``--clip-grad``, default 1.0; 0: none). Its
    value does not change the time; clipping does: each rank's gradient norm is all-reduced before any rank steps
    the optimizer (kernbench.workloads.sharding, ``DataParallel.finish``)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    sp: bool = False
    microbatches: int = 1
    pes: Sequence[str] | None = None
    rules: Mapping[str, str] = field(default_factory=dict)
    algorithm: str = "ring"
    sharding: str = "none"
    recompute: str = "none"
    interleave: int = 1
    ep: int = 1
    fidelity: str = "auto"
    clip_grad: float = 1.0
    cp: int = 1
    cp_comm_type: str = "p2p"
    #: Megatron-LM's name for ``interleave`` (``--virtual-pipeline-model-parallel-size``): an alias, not a field.
    vp: InitVar[int | None] = None

    def __post_init__(self, vp: int | None = None):
        if vp is not None:
            if isinstance(vp, bool) or not isinstance(vp, int) or vp < 1:
                raise WorkloadError(f"plan: vp (virtual pipeline, an alias of interleave) must be an integer >= 1, "
                                    f"got {vp!r}")
            if self.interleave not in (1, vp):
                raise WorkloadError(f"plan: vp = {vp} and interleave = {self.interleave} name the same knob "
                                    "(Megatron's virtual pipeline size) and disagree: give one")
            object.__setattr__(self, "interleave", vp)
        for name in ("dp", "tp", "pp", "microbatches", "interleave", "ep", "cp"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise WorkloadError(f"plan: {name} must be an integer >= 1, got {v!r}")
            limit = MAX_MICROBATCHES if name in ("microbatches", "interleave") else MAX_DEGREE
            if v > limit:
                each = {"microbatches": "microbatch", "interleave": "model chunk"}.get(name, "rank")
                raise WorkloadError(f"plan: {name} = {v}: over the limit of {limit} (each {each} is lowered and "
                                    "simulated op by op)")
        if self.cp == 1 and self.dp % self.ep:
            raise WorkloadError(f"plan: ep = {self.ep} (expert parallelism, carved out of data parallelism) must "
                                f"divide dp = {self.dp}")
        if self.dp_cp % self.ep:
            # Megatron-Core's initialize_model_parallel: world_size must divide by expert tp x ep x pp (its
            # expert-data-parallel size world / (tp x ep x pp), expert tp at its default, the tp size): ep | dp x cp
            raise WorkloadError(f"plan: ep = {self.ep} (expert parallelism, carved out of the dp x cp data ranks) must "
                                f"divide dp x cp = {self.dp} x {self.cp} = {self.dp_cp} (Megatron-Core's "
                                f"expert-data-parallel size, world / (tp x ep x pp), must be whole)")
        if self.interleave > 1 and self.pp == 1:
            raise WorkloadError(f"plan: interleave = {self.interleave} interleaves the model chunks of a pipeline: "
                                "it needs pp > 1 (pp = 1)")
        if self.interleave > 1 and self.microbatches % self.pp:
            raise WorkloadError(f"plan: interleave = {self.interleave} (Megatron-LM's interleaved 1F1B) runs the "
                                f"microbatches in groups of pp: microbatches = {self.microbatches} is not a multiple "
                                f"of pp = {self.pp}")
        if not (isinstance(self.sp, bool) or type(self.sp).__name__ == "bool_"):  # 'no' would turn SP on
            raise WorkloadError(f"plan: sp must be True or False, got {self.sp!r}")
        object.__setattr__(self, "sp", bool(self.sp))
        if not isinstance(self.algorithm, str):
            raise WorkloadError(f"plan: algorithm must be a collective algorithm's name, got {self.algorithm!r}")
        if self.sp and self.tp == 1:
            raise WorkloadError("plan: sp (sequence parallelism) splits over the tensor-parallel ranks: it needs tp > 1")
        if isinstance(self.clip_grad, bool) or not isinstance(self.clip_grad, (int, float)) or not (
                0 <= self.clip_grad < float("inf")):
            raise WorkloadError(f"plan: clip_grad must be a number >= 0 (0: no clipping), got {self.clip_grad!r}")
        if self.sharding not in SHARDINGS:
            raise WorkloadError(f"plan: sharding {self.sharding!r}: expected one of {', '.join(SHARDINGS)}")
        if self.fidelity not in FIDELITIES:
            raise WorkloadError(f"plan: fidelity {self.fidelity!r}: expected one of {', '.join(FIDELITIES)}")
        if self.cp_comm_type not in CP_COMM_TYPES:
            raise WorkloadError(f"plan: cp_comm_type {self.cp_comm_type!r}: expected one of {', '.join(CP_COMM_TYPES)}")
        if self.recompute not in RECOMPUTES:
            raise WorkloadError(f"plan: recompute {self.recompute!r}: expected one of {', '.join(RECOMPUTES)}")
        for name, rule in dict(self.rules).items():
            if rule not in RULES:
                raise WorkloadError(f"plan: rules[{name!r}] = {rule!r}: expected one of {', '.join(RULES)}")
        if self.pes is not None:
            object.__setattr__(self, "pes", tuple(self.pes))
        object.__setattr__(self, "rules", dict(self.rules))

    @property
    def chunks(self) -> int:
        """Model chunks of the pipeline: pp x interleave (chunk c on stage c % pp)."""
        return self.pp * self.interleave

    @property
    def size(self) -> int:
        """PEs the plan uses: dp x cp x pp x tp."""
        return self.dp * self.cp * self.tp * self.pp

    @property
    def dp_cp(self) -> int:
        """The data ranks of a stage's tensor-parallel rank: dp x cp ranks holding the same weights (Megatron's
        data-parallel group with context parallelism), over which the gradients are reduced."""
        return self.dp * self.cp

    @property
    def period(self) -> int:
        """Data ranks r and r + period run the same compute (attention's ring work depends on the cp rank, an
        expert's tokens on the cp ranks of its EP group): lcm(cp, ep), a divisor of dp x cp."""
        return self.cp * self.ep // math.gcd(self.cp, self.ep)

    def rule_for(self, name: str) -> str | None:
        """The override for op ``name`` (the longest matching prefix), or None."""
        best = None
        for prefix, rule in self.rules.items():
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > len(best[0]):
                    best = (prefix, rule)
        return best[1] if best else None

    def rules_matching(self, graph) -> dict[str, str]:
        """The rules that name an op of ``graph`` (the op itself, or a prefix of its dotted name)."""
        names = [op.name for op in graph.ops]
        return {p: r for p, r in self.rules.items() if any(n == p or n.startswith(p + ".") for n in names)}

    def check_rules(self, graph) -> None:
        """A rule that names no op of ``graph`` is refused (it would be ignored without a word)."""
        unknown = sorted(set(self.rules) - set(self.rules_matching(graph)))
        if unknown:
            example = next((op.name for op in graph.ops if op.kind == "matmul"), graph.ops[0].name if graph.ops
                           else "")
            raise WorkloadError(f"plan: rules[{unknown[0]!r}] names no op of {graph.name} (an op's name or a prefix "
                                f"of its dotted name, e.g. {example!r})")

    def place(self, system) -> Placement:
        """The PE groups on ``system`` (WorkloadError when the plan does not fit)."""
        machine = system.pes()
        unit = "GPUs" if getattr(system, "target", None) == "gpu" else "PEs"
        cp = f" x cp={self.cp}" if self.cp > 1 else ""
        what = f"plan dp={self.dp}{cp} x pp={self.pp} x tp={self.tp} = {self.size} {unit}"
        if not machine:
            raise WorkloadError(f"{what}: the machine has no PEs")
        if self.pes is not None:
            known = set(machine)
            for p in self.pes:
                if p not in known:
                    raise WorkloadError(f"{what}: pes: {p!r} is not a PE of the machine")
            if len(set(self.pes)) != len(self.pes):
                raise WorkloadError(f"{what}: pes lists a PE twice")
            if len(self.pes) != self.size:
                raise WorkloadError(f"{what}: pes gives {len(self.pes)} PEs, the plan needs exactly {self.size}")
            order = list(self.pes)
        else:
            if self.size > len(machine):
                raise WorkloadError(f"{what} do not fit the machine's {len(machine)} {unit}: "
                                    f"{self.size - len(machine)} short (reduce dp, {'cp, ' if cp else ''}tp or pp, or "
                                    "load a larger machine)")
            order = machine[:self.size]
        # Megatron-LM's rank order (tp-cp-ep-dp-pp): tp innermost, then cp, then dp, then pp; data rank r = d cp + c
        ranks = self.dp_cp
        groups = tuple(tuple(tuple(order[((s * ranks) + r) * self.tp + t] for t in range(self.tp))
                             for s in range(self.pp)) for r in range(ranks))
        return Placement(self, groups)

    def check_stages(self, layers: int, what: str) -> None:
        if self.pp > max(layers, 1):
            raise WorkloadError(f"{what}: pp = {self.pp} pipeline stages but only {layers} repeated layers to split")

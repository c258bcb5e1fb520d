"""The machinery of a lowering: the Lowerer that appends one graph's ops to a Program, and its books.

kernbench.workloads.lower (``lower()``, and the table of what each op kind becomes) and
kernbench.workloads.training (the backward pass, the gradient all-reduce and the optimizer) both drive a
``Lowerer``: ``forward_pass`` lowers the forward ops of one microbatch, ``Lowerer.forward`` one op, and the
``Lowered`` it fills records the program op ids each graph op became (``Span``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kernbench.program import Program
from kernbench.workloads.graph import DTYPE_BYTES, Op, WorkloadError, WorkloadGraph
from kernbench.workloads.plan import ParallelPlan, Placement
from kernbench.workloads import timeline
from kernbench.workloads.targets import target_for
from kernbench.workloads.tp_ranks import TpRanks

__all__ = ["Lowerer", "Lowered", "Span", "forward_pass", "dep_fn", "VECTOR_PASSES", "COLLECTIVE_SHARE", "REP",
           "SHARD", "SEQ",
           "part_of", "stage_ranges", "stage_layers"]

#: Passes of an op's bytes through the vector engine, per kind (the llama layer's rmsnorm uses 2: the sum of
#: squares, then the scaling; softmax likewise max/sum then normalise; assumed 1 for pointwise and reduce).
VECTOR_PASSES = {"elementwise": 1, "norm": 2, "softmax": 2, "reduce": 1, "embedding": 1}
COLLECTIVE_SHARE = 512 * 1024  # most bytes per rank one collective stages through scratch (see collective())
REP, SHARD, SEQ = "replicated", "sharded", "seq"  # activation states over a tp group (plan.py)

_REQUIRED = {"matmul": ("m", "n", "k"), "conv": ("gemm_m", "gemm_n", "gemm_k", "kernel"),
             "attention": ("batch", "heads", "kv_heads", "q_len", "kv_len", "head_dim"),
             "elementwise": ("elements",), "norm": ("elements",), "softmax": ("elements",), "reduce": ("elements",),
             "embedding": ("rows", "dim", "tokens"), "view": (), "copy": ("bytes",),
             "moe": ("hidden", "experts", "top_k", "ffn", "tokens", "counts")}


def part_of(name: str, graph: WorkloadGraph | None = None) -> str:
    """The layer part an op belongs to: the module under the repeated block (``model.layers.3.mlp.down_proj``
    -> ``mlp``), else the first module under the model (``model.embed_tokens``, ``lm_head``)."""
    parts = name.split(".")
    for i in range(len(parts) - 1):
        if parts[i + 1].isdigit() and i + 2 < len(parts):
            return parts[i + 2]
    if parts[0] in ("model", "transformer", "bert", "resnet") and len(parts) > 1:
        return parts[1]
    return parts[0]


def stage_ranges(graph: WorkloadGraph, pp: int) -> list[int]:
    """Pipeline stage of every op: contiguous layer ranges of the graph's main block (the one with most ops),
    ``stage_layers`` of them per stage (or the graph's ``meta["stage_layers"]``); ops before it on stage 0,
    after it on the last stage."""
    n = len(graph.ops)
    if pp == 1:
        return [0] * n
    if not graph.blocks:
        raise WorkloadError(f"{graph.name}: pipeline parallelism (pp = {pp}) splits repeated layers, "
                            "and the graph declares no blocks")
    b = max(graph.blocks, key=lambda b: b.size * b.count)
    if pp > b.count:
        raise WorkloadError(f"{graph.name}: pp = {pp} pipeline stages but only {b.count} layers "
                            f"in block {b.prefix!r}")
    counts = graph.meta.get("stage_layers") or stage_layers(b.count, pp)
    if len(counts) != pp or sum(counts) != b.count or min(counts) < 1:
        raise WorkloadError(f"{graph.name}: meta stage_layers {list(counts)} do not split {b.count} layers "
                            f"over {pp} stages")
    stage_of = [s for s, c in enumerate(counts) for _ in range(c)]
    out = []
    for i in range(n):
        if i < b.first:
            out.append(0)
        elif i >= b.first + b.size * b.count:
            out.append(pp - 1)
        else:
            out.append(stage_of[(i - b.first) // b.size])
    return out


def stage_layers(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage: contiguous ranges, layer l on stage ``l * pp // layers``."""
    out = [0] * pp
    for layer in range(layers):
        out[layer * pp // layers] += 1
    return out


@dataclass
class Span:
    """Program op ids [first, end) that one graph op (or one collective or transfer it implies) lowered to."""

    op: int           # graph op index (-1: not one op, e.g. the optimizer)
    name: str
    kind: str         # the graph op kind, or "all_reduce" / "reduce_scatter" / "all_gather" / "p2p" / "optimizer"
    part: str
    first: int
    end: int
    stage: int = 0
    pass_: str = "forward"  # forward, backward, optimizer
    microbatch: int = 0


@dataclass
class Lowered:
    """A graph placed on a machine: the Program, the placement and which program ops each graph op became."""

    graph: WorkloadGraph
    program: Program
    plan: ParallelPlan
    placement: Placement
    spans: list[Span] = field(default_factory=list)
    gemm_flops: float = 0.0          # FLOPs of the GEMMs appended (all ranks, all passes)
    counts: dict[str, int] = field(default_factory=dict)  # kernel calls appended by kind (gemm, attention, ...)
    gemm_flops_by_pass: dict[str, float] = field(default_factory=dict)
    rules: dict[str, tuple[str, int]] = field(default_factory=dict)  # matmul name -> (tp rule, ops in its GEMM)
    launches: dict[int, str] = field(default_factory=dict)  # GPU target: host-side launch op -> its GPU
    dp_bytes: dict[str, int] = field(default_factory=dict)  # training: data-parallel collectives' bytes per rank
    dp_params: dict[int, int] = field(default_factory=dict)  # training: per stage, a tp rank's parameters
    moe: list[dict] = field(default_factory=list)  # MoE ops' routing, transfers and expert tokens (moe_lower)
    expert_dp: list[dict] = field(default_factory=list)  # training: expert gradients' reductions (sharding.py)
    cp: list[dict] = field(default_factory=list)  # context parallelism's exchanges and kernels (context.record)
    stand_ins: frozenset = frozenset()  # PEs whose ops the step's readings leave out (Lowerer.represent_tp_ranks)

    def run(self):
        return self.program.run()

    def critical_spans(self, res) -> list[str]:
        """The names of the spans (graph ops, collectives, MoE experts) the run's critical path runs through, in
        path order, each once."""
        owner = {o: s.name for s in self.spans for o in range(s.first, s.end)}
        out: list[str] = []
        for st in res.critical_path().steps:
            name = owner.get(int(st.get("op", -1)))
            if name is not None and name not in out:
                out.append(name)
        return out

    def intervals(self, res, select: Callable[[Span], bool]) -> int:
        """Active time (ps) of the union of the selected spans' op intervals (a GPU kernel's host-side launch
        is not activity of the machine: it overlaps the kernels before it)."""
        return timeline.intervals(self, res, select)

    def partition(self, res, label: Callable[[Span], str | None], t0: int, t1: int,
                  comm: Callable[[Span], bool] = lambda s: s.kind in COMM_KINDS) -> dict[str, float]:
        """[t0, t1) cut into parts that add up to t1 - t0 exactly (ps): at each instant the labels of the compute
        spans active then share it equally; with none, a communication span active makes it
        ``exposed_communication``; with neither, a GPU's host launch in flight makes it ``launch``; else it is
        ``idle`` (dependencies, a SIP PE_CPU's dispatch). ``label(span)`` names a span's part (None: left out)."""
        return timeline.partition(self, res, label, t0, t1, comm)

    def breakdown(self, res) -> dict[str, dict[str, float]]:
        """The run's makespan in us, cut by op kind and by layer part (partition(): the parts add up to the
        makespan, with exposed_communication, launch and idle named)."""
        t0 = int(res._core.start_ps)  # the run's start on the system's clock
        t1 = t0 + int(res.makespan_ps)
        return {"by_kind": {k: v / 1e6 for k, v in self.partition(res, lambda s: s.kind, t0, t1).items()},
                "by_part": {p: v / 1e6 for p, v in self.partition(res, lambda s: s.part, t0, t1).items()}}


#: Span kinds that are communication (their time counts in a partition only where no compute overlaps it).
COMM_KINDS = frozenset({"all_reduce", "reduce_scatter", "all_gather", "broadcast", "alltoall", "p2p",
                        "grad_all_reduce"})


class Lowerer(TpRanks):
    """Appends ops of one graph to one Program; one instance per lower() call."""

    def __init__(self, graph: WorkloadGraph, system, plan: ParallelPlan, program: Program, *, precision: str | None,
                 fuse: bool, attention_tiles: tuple[int, int], launch: str | None = None):
        self.g, self.system, self.plan, self.prog = graph, system, plan, program
        plan.check_rules(graph)
        self.target = target_for(system, launch)
        if self.target.name == "k200":
            raise WorkloadError(f"{graph.name}: the K200 host runs a workload as one stream of its own steps (the "
                                "k200 target): kernbench.k200.run_ops(system, graph.ops), not lower()")
        self.precision, self.fuse, self.tiles = precision, fuse, attention_tiles
        self.ring_pipeline = False  # a training step on a flow fabric (set by lower(phase="train")): fidelity()
        lay = system.layout()
        self.where = {n: (int(p), int(g), int(i)) for n, p, g, i in
                      zip(lay["ranks"], lay["package"], lay["group"], lay["pe"])}
        self.mem: dict[str, str] = {}
        self._parts: dict[str, str] = {}  # span name -> its part_of
        self._precs = {id(op): self._prec_of(op) for op in graph.ops}  # prec() per kernel: the graph op's, once
        self.chain: dict[str, list] = {}
        self.key = -1
        self.out = Lowered(graph, program, plan, plan.place(system))
        self.consumers: list[list[int]] = [[] for _ in graph.ops]
        for i, op in enumerate(graph.ops):
            for d in op.deps:
                self.consumers[d].append(i)
        self.fused = self._fusion() if fuse else {}
        self.leader_of: dict[int, int] = {}
        self.fused_out: dict[int, tuple] = {}
        self.rule: dict[int, tuple[str, int]] = {}  # matmul -> (tp rule, ops fused into its GEMM)
        self.recomputing = False  # a training step's recompute: its spans and GEMM FLOPs are pass "recompute"
        self.mirror = False       # mirror_replicas(): replicas > 0 reuse replica 0's compute
        self.replicas = range(plan.dp_cp)  # the data ranks lowered (represent_replicas(): replica 0's)
        self.cp = plan.cp         # context parallelism: each op of a data rank does 1/cp of the tokens (tok())
        self.weight = 1           # replicas each appended op stands for in the counts and FLOPs
        self.tp_one = False       # represent_tp_ranks(): rank 0 stands for its tp group (tp_ranks.py)
        self.rank_weight = 1      # tensor-parallel ranks each per-rank op stands for in the counts and FLOPs

    # ---- helpers -------------------------------------------------------------------------
    def err(self, i: int, msg: str) -> WorkloadError:
        op = self.g.ops[i]
        return WorkloadError(f"{self.g.name}: op {i} {op.name!r} ({op.kind}, {op.target}): {msg}")

    def hbm(self, pe: str) -> str:
        if pe not in self.mem:
            m = self.system.memory_of(pe)
            if m is None:
                raise WorkloadError(f"PE {pe!r} has no memory node (HBM slice) to hold its operands")
            self.mem[pe] = m
        return self.mem[pe]

    def prec(self, op: Op) -> str:
        got = self._precs.get(id(op))  # the graph's ops' (alive with it: their ids are theirs)
        return got if got is not None else self._prec_of(op)

    def _prec_of(self, op: Op) -> str:
        return self.precision or ("fp32" if op.dtype in ("fp32", "tf32", "fp64") else
                                  op.dtype if op.dtype in ("fp16", "bf16", "fp8", "int8") else "fp16")

    def esize(self, op: Op) -> int:
        return DTYPE_BYTES.get(op.dtype, 2)

    def span(self, i, kind, first, stage, pass_, mb, name=None):
        op = self.g.ops[i] if i >= 0 else None
        if self.recomputing:
            pass_ = "recompute"
        nm = name or (op.name if op else kind)
        end = len(self.prog)
        if end > first:
            part = self._parts.get(nm) or self._parts.setdefault(nm, part_of(nm))  # a name recurs per microbatch
            self.out.spans.append(Span(i, nm, kind, part, first, end, stage, pass_, mb))

    def tok(self, x) -> int:
        """A token-proportional size (rows, elements, bytes) on one cp rank: 1/cp of it (context.check_cp makes the
        sequence divide); ``x`` itself at cp = 1."""
        return int(x) if self.cp == 1 else -(-int(x) // self.cp)

    def count(self, what: str, n: int = 1, per_rank: bool = True):
        """``n`` more of ``what``, for every replica (``weight``) and, ``per_rank``, every tp rank it stands for."""
        w = self.weight * (self.rank_weight if per_rank else 1)
        self.out.counts[what] = self.out.counts.get(what, 0) + n * w

    def step(self, pe: str, fn: Callable[..., Any], deps: list, *args) -> list:
        """A compute step on ``pe``, ``fn(*args, d)``: after its previous step and ``deps`` (``d``); becomes the PE's
        chain."""
        if self.mirror:
            return self._mirrored(pe, lambda: [fn(*args, self.chain.get(pe, []) + deps)])
        h = fn(*args, self.chain.get(pe, []) + deps)
        self.chain[pe] = [h]
        return [h]

    def mirror_replicas(self, period: int = 1) -> None:
        """From now on replica r >= ``period`` runs no compute of its own: its k-th compute step on rank (stage, t)
        is replica ``r % period``'s k-th there (the same kernel at the same time, since those replicas are
        identical), and only its collectives and transfers are appended. Replicas below ``period`` must be
        lowered ahead of the others. Period 1: every replica mirrors replica 0; an MoE step mirrors with period
        ``ep`` (EP rank j of every EP group runs the same experts on the same tokens as EP rank j of group 0)."""
        self.mirror = True
        self._period = period
        self._rank = {pe: (r, s, t) for r, rep in enumerate(self.out.placement.groups)
                      for s, st in enumerate(rep) for t, pe in enumerate(st)}
        self._record: dict[tuple[int, int], list] = {}
        self._at: dict[tuple[int, int, int], int] = {}

    def represent_replicas(self, lowered: int = 1) -> None:
        """From now on only replica 0 is lowered and the others are taken to be its copies: they appear only in
        the data-parallel collectives (whose groups span every replica's ranks), which wait for replica 0's
        gradients. Counts and FLOPs of what replica 0 appends stand for every replica (``weight``). What no
        other replica then puts on the fabric (its tensor-parallel collectives, its stage-to-stage transfers)
        neither contends with replica 0's traffic nor delays the data-parallel collectives. ``lowered`` > 1 (an
        MoE step: ep, the replicas of EP group 0): replicas 0 .. lowered - 1 are lowered, replica r standing for
        r, r + lowered, r + 2 lowered, ..."""
        self.replicas = range(lowered)
        self.weight = self.plan.dp_cp // lowered

    def stand_ins(self, rep: int) -> range | list[int]:
        """The replicas replica ``rep``'s lowering stands for: itself, or with represent_replicas every replica
        it represents (replica 0 all of them when it alone is lowered)."""
        n, total = len(self.replicas), self.plan.dp_cp
        return range(rep, total, n) if n < total and rep < n else [rep]

    def _mirrored(self, pe: str, run: Callable[[], list], counted: dict[str, int] | None = None) -> list:
        """Replica 0: ``run()`` and record its handles and the kernel counts it added (or ``counted``).
        Another replica: the record, its counts added again."""
        r, s, t = self._rank[pe]
        src = r % self._period
        rec = self._record.setdefault((src, s, t), [])
        counts = self.out.counts
        if r == src:
            before = dict(counts)
            hs = run()
            delta = counted if counted is not None else {k: v - before.get(k, 0) for k, v in counts.items()
                                                         if v != before.get(k, 0)}
            rec.append((hs, delta))
        else:
            k = self._at.get((r, s, t), 0)
            if k >= len(rec):
                raise WorkloadError(f"{self.g.name}: replica {r} ran ahead of replica {src} on stage {s} rank {t} "
                                    f"(mirrored replicas need replica {src} lowered first)")
            self._at[(r, s, t)] = k + 1
            hs, delta = rec[k]
            for name, n in delta.items():  # counted as recorded (for every tp rank it stands for)
                self.count(name, n, per_rank=False)
        self.chain[pe] = list(hs)
        return list(hs)

    def gemm(self, pe, m, n, k, op, deps, pass_):
        if min(m, n, k) < 1:
            return deps
        f = 2.0 * m * n * k
        if self.recomputing:
            pass_ = "recompute"
        f *= self.weight * self.rank_weight
        self.out.gemm_flops += f
        self.out.gemm_flops_by_pass[pass_] = self.out.gemm_flops_by_pass.get(pass_, 0.0) + f
        self.count("gemm")
        return self.step(pe, self.target.gemm, deps, self, pe, int(m), int(n), int(k), op)

    def vector(self, pe, elements, row, esize, loads, passes, stores, name, deps):
        """A memory-bound op of ``elements`` (rows of ``row``): ``loads`` streams in, ``passes`` over the
        bytes, ``stores`` streams out -- as the target runs one (targets.py)."""
        if elements < 1:
            return deps
        self.count("vector")
        return self.step(pe, self.target.vector, deps, self, pe, elements, row, esize, loads, passes, stores, name)

    def copy(self, pe, nbytes, name, deps):
        """A layout copy or an im2col of ``nbytes``, HBM to HBM (targets.py)."""
        if nbytes < 1:
            return deps
        return self.step(pe, self.target.copy, deps, self, pe, int(nbytes), name)

    def collective(self, what, group, nbytes, deps, name, rank_deps=None, per_rank=False):
        """``what`` over ``group`` after ``deps`` (every rank) and ``rank_deps`` (per rank of ``group``: what that
        rank alone waits for; see Program.collective). ``per_rank``: one collective of each tensor-parallel rank
        (a data-parallel or cp group), counted for every rank it stands for. Returns its handles."""
        if len(group) < 2 or nbytes < 1:
            return deps + [h for d in rank_deps or () for h in d]
        # SIP: a ring stages each rank's share (bytes / ranks) through scratch in one move: a large buffer (a
        # layer's gradients) is all-reduced in sequential buckets of at most 512 KiB per rank. A GPU collective
        # is one NCCL call whatever its size: NCCL moves it in its own steps through the channels' buffers.
        n = len(group)
        parts = 1 if self.target.name == "gpu" else max(1, -(-int(nbytes) // (n * COLLECTIVE_SHARE)))
        h = deps
        for j in range(parts):
            b = int(nbytes) // parts + (1 if j < int(nbytes) % parts else 0)
            self.count(what, per_rank=per_rank)
            algorithm = "pairwise" if what == "alltoall" else self.plan.algorithm
            fid = self.fidelity(what, algorithm) if self.target.name == "gpu" else "auto"
            h = [self.prog._collective_from_model(what, group, b, algorithm=algorithm, buffer="hbm", fidelity=fid,
                                                  deps=h, name=name, rank_deps=rank_deps if j == 0 else None)]
        return h

    def fidelity(self, what: str, algorithm: str) -> str:
        """The plan's fidelity; in a training step ``auto`` is the channel pipeline (docs/ccl.md "Fidelity") for
        NCCL's ring on a flow fabric: at every step a GPT-3 175B TP 4 step overran the 2^24 ops of a Program, and the
        two agree within a few per cent in a box. Elsewhere ``auto`` is kernbench.ccl's own choice."""
        f = self.plan.fidelity
        if f == "auto" and self.ring_pipeline and what != "alltoall" and algorithm == "ring":
            return "pipeline"
        return f

    # ---- fusion of sibling linears (q/k/v, gate/up) -------------------------------------------
    def _fusion(self) -> dict[int, list[int]]:
        """leader op -> the sibling linears it computes too (same input, same m and k, all column-parallel)."""
        groups: dict[tuple, list[int]] = {}
        for i, op in enumerate(self.g.ops):
            a = op.attrs
            if op.kind == "matmul" and a.get("weight") and len(op.deps) == 1 and int(a.get("batch", 1)) == 1:
                groups.setdefault((op.deps[0], a["m"], a["k"], op.dtype), []).append(i)
        return {v[0]: v for v in groups.values() if len(v) > 1}

    # ---- one op ------------------------------------------------------------------------------
    def state_in(self, i, state) -> str:
        op = self.g.ops[i]
        sts = [state[d] for d in op.deps if d in state]
        return sts[0] if sts else REP

    def rule_override(self, i: int) -> str | None:
        """The tensor-parallel rule op ``i`` does not take from the data flow: the plan's ``rules``, else the op's
        ``tp_rule`` attr (MLA's latent projections are replicated, its absorbed products column-parallel)."""
        return self.plan.rule_for(self.g.ops[i].name) or self.g.ops[i].attrs.get("tp_rule")

    def check_attrs(self, i):
        op = self.g.ops[i]
        if op.kind not in _REQUIRED:
            raise self.err(i, f"no lowering for op kind {op.kind!r}")
        miss = [a for a in _REQUIRED[op.kind] if a not in op.attrs]
        if miss:
            raise self.err(i, f"no lowering: attrs {', '.join(miss)} missing")

    def forward(self, i, group, dep_of, state, stage, mb, extra=None):
        """Lower graph op ``i`` on ``group``; ``dep_of(d)`` gives rank-indexed handle lists of op d, ``extra``
        (rank-indexed) what else it waits for (FSDP: its weights' gather). Returns (rank-indexed handles,
        output state)."""
        op, tp, a = self.g.ops[i], len(group), self.g.ops[i].attrs
        self.check_attrs(i)
        ins = [dep_of(d) for d in op.deps]
        deps = [[h for x in ins for h in x[t]] for t in range(tp)]
        if extra:
            deps = [d + list(x) for d, x in zip(deps, extra)]
        sin = self.state_in(i, state)
        first = len(self.prog)
        e = self.esize(op)
        kind = op.kind
        out_state = sin
        res = deps
        if kind == "view":
            return deps, sin
        if kind == "moe":  # spans the replicas of an EP group: kernbench.workloads.moe_lower, not one group
            raise self.err(i, "an MoE op is lowered over its EP group by context.moe_forward_pass")
        if kind == "matmul":
            return self.matmul(i, group, deps, sin, stage, mb, first)
        elif kind == "conv":
            res, out_state = self.conv(i, group, deps)
        elif kind == "attention":
            if self.cp > 1:  # spans the cp ranks of a replica: kernbench.workloads.context, not one group
                raise self.err(i, "with cp > 1 an attention op is lowered over its context-parallel group by "
                                  "context.forward_chunk")
            res = self.attention(i, group, deps, "forward")
            out_state = SHARD
        elif kind == "embedding":
            tokens, dim = self.tok(a["tokens"]), int(a["dim"])
            part = self.each_rank(group, lambda t, pe: self.vector(pe, tokens * dim, dim, e, 1, 1, 1, op.name, deps[t]))
            if tp > 1:  # vocab-parallel: the ranks' partial lookups summed (sp: each rank keeps its tokens' rows)
                what = "reduce_scatter" if self.plan.sp else "all_reduce"
                self.span(i, kind, first, stage, "forward", mb)
                first_c = len(self.prog)
                # a collective's buffer is the whole tensor (ccl.hpp CollectiveSpec::bytes_per_pe): a
                # reduce-scatter leaves each rank 1/tp of it, as an all-gather starts from 1/tp of it
                r = self.collective(what, group, tokens * dim * e, self.joined(part), op.name + " " + what)
                self.span(i, what, first_c, stage, "forward", mb, op.name + " " + what)
                return [r] * tp, (SEQ if self.plan.sp else REP)
            res, out_state = part, REP
        elif kind in VECTOR_PASSES:
            el = self.tok(a["elements"])
            split = tp if sin in (SHARD, SEQ) else 1
            el = -(-el // split)
            row = op.outputs[0].shape[-1] if op.outputs and op.outputs[0].shape else el
            if sin == SHARD and kind in ("norm", "softmax", "reduce") and row % split == 0 and el >= row:
                pass  # a per-head norm/softmax over sharded heads: whole rows per rank
            loads = max(1, int(a.get("operands", 1)))
            res = self.each_rank(group, lambda t, pe: self.vector(pe, el, row, e, loads, VECTOR_PASSES[kind], 1,
                                                                  op.name, deps[t]))
        elif kind == "copy":
            nbytes = self.tok(a["bytes"])
            split = tp if sin in (SHARD, SEQ) else 1
            res = self.each_rank(group, lambda t, pe: self.copy(pe, -(-nbytes // split), op.name, deps[t]))
        self.span(i, kind, first, stage, "forward", mb)
        return res, out_state

    def matmul(self, i, group, deps, sin, stage, mb, first):
        op, tp, a = self.g.ops[i], len(group), self.g.ops[i].attrs
        e = self.esize(op)
        if i in self.leader_of:  # a sibling computed by its leader's fused GEMM
            lead = self.leader_of[i]
            return self.fused_out[lead]
        m, n, k, b = int(a["m"]), int(a["n"]), int(a["k"]), int(a.get("batch", 1))
        want = 2 * m * n * k * b + int(a.get("bias_flops", 0))
        if op.flops and op.flops != want:  # the GEMM timed is the attrs': a count that disagrees is not run silently
            raise self.err(i, f"flops = {op.flops}, but its attrs m x n x k = {m} x {n} x {k} (batch {b}) make 2 m n "
                              f"k batch{' + bias_flops' if 'bias_flops' in a else ''} = {want}: the lowering times the "
                              "attrs (give flops=0 or the matching count)")
        m = self.tok(m)  # a cp rank's tokens
        rule = self.rule_override(i)
        if a.get("weight"):
            rule = rule or (("row" if sin == SHARD else "column") if tp > 1 else "replicated")
        else:
            rule = rule or ("batch" if sin == SHARD else "replicated")
        members = self.fused.get(i, [i])
        if len(members) > 1 and rule in ("column", "replicated") and all(
                self.rule_override(j) in (None, rule) for j in members):
            n = sum(int(self.g.ops[j].attrs["n"]) for j in members)
        else:
            members = [i]
        pre = deps
        gather = rule == "column" or (rule == "replicated" and a.get("tp_rule") == "replicated")
        if gather and sin == SEQ:  # sp: gather the token shards before a column-parallel (or an MLA latent) linear
            # the whole b x m x k input (each rank contributes its m / tp tokens): Korthikanti et al. 2022's g
            allg = self.collective("all_gather", group, b * m * k * e, self.joined(deps), op.name + " all-gather")
            self.span(i, "all_gather", first, stage, "forward", mb, op.name + " all-gather")
            first = len(self.prog)
            pre = [allg] * tp
        if rule == "column":
            # n not a multiple of tp (GPT-2's 50257-word LM head): padded to one, as Megatron pads the vocab
            res = self.each_rank(group, lambda t, pe: self.gemm(pe, b * m, -(-n // tp), k, op, pre[t], "forward"))
            out = res, SHARD
        elif rule == "row":
            if k % tp:
                raise self.err(i, f"row-parallel: tp = {tp} does not divide k = {k}")
            part = self.joined(self.each_rank(group, lambda t, pe: self.gemm(pe, b * m, n, k // tp, op, deps[t],
                                                                             "forward")))
            what = "reduce_scatter" if self.plan.sp else "all_reduce"
            self.span(i, "matmul", first, stage, "forward", mb)
            self.rule[i] = (rule, 1)
            self.out.rules[op.name] = (rule, 1)
            first = len(self.prog)
            # sp: the whole b x m x n partial sums reduce-scattered, each rank keeping m / tp tokens (g-bar)
            r = self.collective(what, group, b * m * n * e, part, op.name + " " + what)
            self.span(i, what, first, stage, "forward", mb, op.name + " " + what)
            return [r] * tp, (SEQ if self.plan.sp else REP)
        elif rule == "batch":  # activation x activation, heads in the batch: each rank its heads
            if b % tp:
                raise self.err(i, f"tp = {tp} does not divide the batch {b} (heads) of this matmul")
            out = self.each_rank(group, lambda t, pe: self.gemm(pe, b // tp * m, n, k, op, deps[t], "forward")), SHARD
        else:  # replicated: every rank runs the whole op
            out = self.each_rank(group, lambda t, pe: self.gemm(pe, b * m, n, k, op, pre[t], "forward")), \
                (REP if sin == SEQ else sin)
        self.span(i, "matmul", first, stage, "forward", mb)
        for j in members[1:]:
            self.leader_of[j] = i
        self.fused_out[i] = out
        self.rule[i] = (rule, len(members))
        self.out.rules[op.name] = (rule, len(members))
        return out

    def conv(self, i, group, deps):
        op, a = self.g.ops[i], self.g.ops[i].attrs
        kern = list(a["kernel"])
        if len(kern) != 2:
            raise self.err(i, f"no lowering for a {len(kern)}-D convolution (the im2col GEMM lowering is 2-D)")
        if a.get("transposed"):
            raise self.err(i, "no lowering for a transposed convolution")
        dil = a.get("dilation", 1)
        if any(int(x) != 1 for x in (dil if isinstance(dil, (list, tuple)) else [dil])):
            raise self.err(i, f"no lowering for a dilated convolution (dilation {dil})")
        groups = int(a.get("groups", 1))
        m, n, k = int(a["gemm_m"]), int(a["gemm_n"]), int(a["gemm_k"])
        stride = a.get("stride", 1)
        strided = any(int(s) != 1 for s in (stride if isinstance(stride, (list, tuple)) else [stride]))
        e = self.esize(op)
        def run(t, pe):  # a conv runs whole on every rank (no tensor-parallel conv rule)
            d = deps[t]
            if kern != [1, 1] or strided:  # im2col: the lowered A written once
                d = self.copy(pe, m * groups * k * e, op.name + " im2col", d)
            return self.gemm(pe, m * groups, n, k, op, d, "forward")
        return self.each_rank(group, run), REP

    def attention(self, i, group, deps, pass_):
        """The attention op ``i`` on ``group`` (its checks and placement are the target's)."""
        if self.mirror and self._rank[group[0]][0] >= self._period:  # a mirrored replica: replica 0's kernels, per rank
            return self.each_rank(group, lambda t, pe: self._mirrored(pe, lambda: []))
        before = dict(self.out.counts)
        res = self.target.attention(self, i, group, deps, pass_)
        if self.mirror:  # the group's kernel counts recorded with its first rank
            delta = {k: v - before.get(k, 0) for k, v in self.out.counts.items() if v != before.get(k, 0)}
            for t in self.lowered_ranks(len(group)):
                self._mirrored(group[t], lambda hs=res[t]: list(hs), delta if t == 0 else {})
        return res


def forward_pass(L: Lowerer, rep: int, mb: int, stages: Sequence[int], only_stage: int | None = None,
                 memo: dict | None = None, extra: Callable[[int], list | None] | None = None,
                 ops: Sequence[int] | None = None) -> dict:
    """The forward ops of one microbatch on replica ``rep`` (all stages, or ``only_stage``; all ops, or the
    graph-ordered ``ops``: one model chunk); returns the memo of per-op handles and states (shared across calls
    of one microbatch). ``extra(i)``: rank-indexed handles op ``i`` waits for besides its inputs (or None)."""
    g = L.g
    memo = memo if memo is not None else {"done": {}, "state": {}, "xfer": {}}
    done, state, xfer = memo["done"], memo["state"], memo["xfer"]
    for i in (range(len(g.ops)) if ops is None else ops):
        s = stages[i]
        if only_stage is not None and s != only_stage:
            continue
        group = L.out.placement.group(rep, s)
        dep_of = dep_fn(L, rep, mb, stages, memo, s)
        done[i], state[i] = L.forward(i, group, dep_of, state, s, mb, extra=extra(i) if extra else None)
    return memo


def dep_fn(L: Lowerer, rep: int, mb: int, stages: Sequence[int], memo: dict, s: int) -> Callable[[int], list]:
    """``dep_of(d)`` for an op of stage ``s`` on data rank ``rep``: op d's rank-indexed handles from ``memo``, or
    (d on another stage) the DMAs that bring its activation to this stage, appended on first use."""
    g, done, state, xfer = L.g, memo["done"], memo["state"], memo["xfer"]
    group = L.out.placement.group(rep, s)

    def dep_of(d):
        if stages[d] == s:
            return done[d]
        key = (d, s)
        if key not in xfer:  # the activation crosses to this stage: a DMA per rank into this stage's HBM
            src = L.out.placement.group(rep, stages[d])
            first = len(L.prog)
            nbytes = L.tok(sum(t.nbytes for t in g.ops[d].outputs))
            if state.get(d) in (SHARD, SEQ):
                nbytes = -(-nbytes // len(group))
            hs = L.each_rank(group, lambda t, dst: [L.prog._dma_from_model(
                dst, L.hbm(src[t]), L.hbm(dst), max(1, int(nbytes)), done[d][t], g.ops[d].name + " p2p", "p2p")])
            L.count("p2p", len(L.lowered_ranks(len(group))))
            L.span(d, "p2p", first, s, "forward", mb, g.ops[d].name + " p2p")
            xfer[key] = hs
        return xfer[key]

    return dep_of

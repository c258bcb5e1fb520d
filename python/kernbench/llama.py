"""One LLaMA-3.1-70B decoder layer as a single Program, tensor-parallel on the machine.

The model lives in C++ (``src/workloads/llama.hpp`` documents the sharding, the
GQA case per KV group, the chunked schedule that overlaps the all-reduces
with compute, and what is counted)::

    import kernbench
    from kernbench import llama

    system = kernbench.System.load()
    r = llama.layer(system, phase="prefill", tokens=2048, tp=8)
    r.latency_us, r.tokens_per_s, r.phases["allreduce1"], r.flops_model

``llama.plan(...)`` gives the sharding and the analytic counts without
running. ``r.run`` is the RunResult (op log, engines, traces) for the
critical-path and energy breakdowns.

On a machine whose PEs are GPUs (``pe.target: gpu``) the same layer is the
hand-built graph of kernbench.workloads.handbuilt at these dims, lowered
onto the GPU target (kernels, fused attention, the all-reduces of the ccl
layer): the C++ layer tiles through SIP PE engines, which a GPU does not
have. Its row has the same fields; ``gqa_case`` is ``"fused"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kernbench import _core

__all__ = ["LayerResult", "plan", "layer", "PHASES", "DIMS_70B"]

#: Phases of the layer, in program order (see llama.hpp).
PHASES = ("norm", "qkv", "attention", "relayout", "o_proj", "allreduce1", "mlp", "allreduce2")
#: LLaMA-3.1-70B (Meta's config.json): the defaults of ``dims``.
DIMS_70B = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "intermediate": 28672, "elem_bytes": 2}


def _core_system(system):
    return system._core if hasattr(system, "_core") else system


def _args(phase, tokens, s_kv, tp, replicas, first_pe, chunks, precision, allreduce, tile_q, tile_s, dims, pes):
    return (phase, int(tokens), int(s_kv), int(tp), int(replicas), int(first_pe), int(chunks), precision, allreduce,
            int(tile_q), int(tile_s), dict(dims or {}), list(pes or []))


def plan(system, phase: str = "prefill", tokens: int = 2048, *, s_kv: int = 0, tp: int = 8, replicas: int = 1,
         first_pe: int = 0, chunks: int = 0, precision: str = "bf16", allreduce: str = "ring", tile_q: int = 256,
         tile_s: int = 256, dims: dict | None = None, pes: Sequence[int | str] | None = None) -> dict:
    """The layer's plan as a dict: ranks, KV-group placement and GQA case, analytic FLOPs and bytes."""
    return _core.llama_plan(_core_system(system), *_args(phase, tokens, s_kv, tp, replicas, first_pe, chunks,
                                                         precision, allreduce, tile_q, tile_s, dims, pes))


@dataclass
class LayerResult:
    """One simulated decoder layer. Times in ps (``latency_us`` in microseconds)."""

    phase: str
    tokens: int
    s_kv: int
    tp: int
    replicas: int
    latency_ps: int
    tokens_per_s: float
    plan: dict
    phases: dict[str, dict]
    flops_program: float
    link_bytes: dict[str, int]
    op_counts: dict[str, int]
    op_bytes: dict[str, int]
    run: Any = field(default=None, repr=False)  # kernbench.program.RunResult
    idle_ps: float = 0.0  # of the latency, no phase at work: with the phases' share_ps it adds up to it

    @property
    def latency_us(self) -> float:
        return self.latency_ps / 1e6

    @property
    def flops_model(self) -> float:
        """FLOPs of the model's dims (GEMM-engine work, all replicas)."""
        return self.plan["flops_model"]

    @property
    def achieved_tflops(self) -> float:
        """Model FLOPs per second of the layer's latency, in TFLOP/s."""
        return self.flops_model / (self.latency_ps * 1e-12) / 1e12 if self.latency_ps else 0.0

    def row(self) -> dict:
        """A flat record (one CSV row): per phase its active time (union of its ops' intervals, us; phases
        overlap) and its share of the latency (share_us_*: with share_us_idle they add up to latency_us)."""
        p = self.plan
        r = {"phase": self.phase, "tokens": self.tokens, "s_kv": self.s_kv, "tp": self.tp,
             "replicas": self.replicas, "pes": self.tp * self.replicas, "chunks": p["chunks"],
             "gqa_case": p["gqa_case"], "group_pes": p["group_pes"], "latency_us": self.latency_us,
             "tokens_per_s": self.tokens_per_s, "achieved_tflops": self.achieved_tflops,
             "flops_model": p["flops_model"], "flops_executed": p["flops_executed"],
             "flops_program": self.flops_program, "weight_bytes_per_rank": p["weight_bytes_per_rank"],
             "allreduce_bytes": p["allreduce_bytes"], "dma_bytes": self.op_bytes.get("dma", 0),
             "ipcq_bytes": self.op_bytes.get("send", 0)}
        for name in PHASES:
            ph = self.phases.get(name)
            r[f"active_us_{name}"] = ph["active_ps"] / 1e6 if ph else 0.0
        for name in PHASES:
            ph = self.phases.get(name)
            r[f"share_us_{name}"] = ph.get("share_ps", 0.0) / 1e6 if ph else 0.0
        r["share_us_idle"] = self.idle_ps / 1e6
        for k, v in sorted(self.link_bytes.items()):
            r[f"link_bytes_{k}"] = v
        return r


def layer(system, phase: str = "prefill", tokens: int = 2048, *, s_kv: int = 0, tp: int = 8, replicas: int = 1,
          first_pe: int = 0, chunks: int = 0, precision: str = "bf16", allreduce: str = "ring", tile_q: int = 256,
          tile_s: int = 256, dims: dict | None = None, pes: Sequence[int | str] | None = None) -> LayerResult:
    """Build and run one decoder layer on ``system`` (advances its clock).

    prefill: ``tokens`` prompt tokens attend each other (S_kv = tokens);
    decode: ``tokens`` sequences each add one token against ``s_kv`` cached
    ones. ``tp`` ranks per replica (divides 64), ``replicas`` data-parallel
    copies; ``chunks`` micro-batches (0: auto) let the all-reduces overlap
    later chunks' compute. ``pes`` places the ranks explicitly (names or ids,
    tp x replicas, rank-major) instead of ``first_pe`` in placement order.
    """
    from kernbench.program import RunResult

    if getattr(system, "target", "sip") == "gpu":
        return _gpu_layer(system, phase, tokens, s_kv=s_kv, tp=tp, replicas=replicas, precision=precision,
                          allreduce=allreduce, dims=dims)
    d = _core.llama_run(_core_system(system), *_args(phase, tokens, s_kv, tp, replicas, first_pe, chunks, precision,
                                                     allreduce, tile_q, tile_s, dims, pes))
    p = dict(d["plan"])
    return LayerResult(phase=phase, tokens=int(tokens), s_kv=int(p["s_kv"]), tp=int(tp), replicas=int(replicas),
                       latency_ps=int(d["latency_ps"]), tokens_per_s=float(d["tokens_per_s"]), plan=p,
                       phases={k: dict(v) for k, v in d["phases"].items()},
                       flops_program=float(d["flops_program"]), link_bytes=dict(d["link_bytes"]),
                       op_counts=dict(d["op_counts"]), op_bytes=dict(d["op_bytes"]),
                       run=RunResult(d["run"], system, d["program"]), idle_ps=float(d["idle_ps"]))


#: The layer's phases (PHASES) by the lowered graph op each span came from (the hand-built graph's names).
_GPU_PHASE = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "q_proj": "qkv", "k_proj": "qkv",
              "v_proj": "qkv", "sdpa": "attention", "view": "attention", "o_proj": "o_proj", "add": "o_proj",
              "gate_proj": "mlp", "up_proj": "mlp", "act_fn": "mlp", "mul": "mlp", "down_proj": "mlp",
              "add_1": "mlp"}


def _gpu_layer(system, phase, tokens, *, s_kv, tp, replicas, precision, allreduce, dims) -> LayerResult:
    """The layer on the GPU target: the hand-built decoder layer lowered (kernbench.workloads.lower)."""
    from kernbench.workloads import ParallelPlan, WorkloadError, handbuilt, lower

    d = {**DIMS_70B, **(dims or {})}
    hd = {"hidden": d["hidden"], "heads": d["heads"], "kv_heads": d["kv_heads"], "head_dim": d["head_dim"],
          "intermediate": d["intermediate"], "layers": 1}
    if phase == "prefill":
        batch, seq, kv = 1, int(tokens), int(tokens)
    elif phase == "decode":
        if s_kv < 1:
            raise WorkloadError("llama decode: s_kv (cached tokens per sequence) must be >= 1")
        batch, seq, kv = int(tokens), 1, int(s_kv)
    else:
        raise WorkloadError(f"llama layer: phase {phase!r}: expected 'prefill' or 'decode'")
    dtype = precision if precision in ("bf16", "fp16", "fp8") else "bf16"
    g = handbuilt.llama_graph(batch, seq, kv, dims=hd, layers=1, dtype=dtype, embed=False, head=False,
                              name=f"llama-layer-{phase}")
    lo = lower(g, system, ParallelPlan(dp=int(replicas), tp=int(tp), algorithm=allreduce),
               launch="host" if phase == "prefill" else "graph")
    res = lo.run()
    phases: dict[str, list] = {}
    for sp in lo.spans:
        if sp.kind in ("all_reduce", "reduce_scatter"):
            name = "allreduce1" if "o_proj" in sp.name else "allreduce2"
        else:
            name = _GPU_PHASE.get(sp.name.rsplit(".", 1)[-1], "mlp")
        phases.setdefault(name, []).append(sp)
    out = {}
    phase_of = {id(s): name for name, spans in phases.items() for s in spans}
    t0 = int(res._core.start_ps)
    cut = lo.partition(res, lambda s: phase_of.get(id(s)), t0, t0 + int(res.makespan_ps), comm=lambda s: False)
    for name, spans in phases.items():
        ids = {id(s) for s in spans}
        out[name] = {"active_ps": int(lo.intervals(res, lambda s, ids=ids: id(s) in ids)), "ops": sum(
            s.end - s.first for s in spans), "share_ps": float(cut.get(name, 0.0))}
    flops = float(sum(op.flops for op in g.ops if op.kind in ("matmul", "attention"))) * replicas
    latency = int(res.makespan_ps)
    cnt = dict(res._core.op_counts)
    e = 2 if dtype in ("bf16", "fp16") else 1
    plan = {"chunks": 0, "gqa_case": "fused", "group_pes": int(tp), "flops_model": flops, "flops_executed": flops,
            "weight_bytes_per_rank": int(sum(p.spec.numel for op in g.ops for p in op.params) * e // tp),
            "allreduce_bytes": int(2 * batch * seq * d["hidden"] * e), "s_kv": kv}
    return LayerResult(phase=phase, tokens=int(tokens), s_kv=kv, tp=int(tp), replicas=int(replicas),
                       latency_ps=latency, tokens_per_s=float(tokens) * replicas / (latency * 1e-12) if latency else 0.0,
                       plan=plan, phases=out, flops_program=float(lo.gemm_flops), link_bytes={},
                       op_counts=cnt, op_bytes=dict(res._core.op_bytes), run=res,
                       idle_ps=float(cut.get("idle", 0.0) + cut.get("launch", 0.0)))

"""What a plan holds in each GPU's memory, for inference as for training, and whether it fits.

    need = memory.inference_footprint(spec, tp=8, pp=1, batch=8, prompt=128, tokens=160, dtype="bf16")
    memory.check_fits(need, system, gpu)         # WorkloadError naming the shortfall
    fp = memory.training_footprint(spec, plan, micro_batch=1, seq=2048)
    memory.check_training(fp, system, plan)      # WorkloadError naming the stage, the rank and the shortfall

Weights (both). A rank holds the layers of its pipeline stage (``lowerer.stage_layers``: the lowering's own
split; with ``interleave`` = v the model chunks s, s + pp, ... of ``stage_layers(L, pp v)``), each layer's linear
weights split over ``tp`` (Megatron-LM's column/row-parallel linears; biases with their weights) and its norms
whole; an MoE layer's routed experts ``ceil(E / ep)`` per rank (expert parallelism), each split over ``tp``
(Megatron's expert tensor parallelism at its default, the tp size), its router and norms whole, its attention
and shared experts over ``tp``. The token table (vocab-parallel, over tp; a learned position table whole) sits on
the first stage, the final norm and the LM head (over tp) on the last; a tied LM head is the token table, held
a second time on the last stage when pp > 1 (Megatron's shared embedding copy). Every parameter of
``ModelSpec.params`` is counted once over the stages (MoE experts included: Mixtral-8x7B's 46.7 B in BF16 are
87 GiB at tp 1).

Inference (``inference_footprint``), per GPU of the stage that needs most:

* weights: as above, in the serving dtype;
* KV cache: batch x tokens x ``spec.kv_bytes_per_token(dtype, tp=, layers=)`` over the stage's layers
  (ceil(layers / pp); GQA: K and V of KV heads / tp, at least one, x head_dim; MLA: the latent and the rotary
  key, whole on each rank);
* activations: the live tensors of one layer for the prompt's tokens (the residual, the MLP's inner
  activations and the attention output: tokens x (4 x hidden + 2 x ffn / tp) elements), what a framework's
  profiling pass reserves.

Its budget (``check_fits``) is the GPU's memory capacity (``pe.hbm.capacity``, the datasheet's) times
``gpu.memory_utilization`` (the framework's share, vLLM's ``gpu_memory_utilization``).

Training (``training_footprint``), per rank of each pipeline stage, by part:

* weights and gradients: the stage's parameters (above) at the precision's element size each (2 B in BF16);
* optimizer: Adam's fp32 m and v (8 B per parameter) and, below fp32, the fp32 master weights (4 B): 12 B, so
  weights + gradients + optimizer = 16 B per parameter in BF16 (training.ADAM_BYTES_PER_PARAM; Rajbhandari et al.
  2020, "ZeRO", section 3.1). ``plan.sharding`` splits them over the data-parallel group of dp x cp ranks
  (Megatron's distributed optimizer spans dp x cp): ``none`` keeps all; ``zero1`` (Megatron's distributed
  optimizer) shards the optimizer state with its fp32 master weights; ``zero2`` also the gradients; ``fsdp``
  (ZeRO-3) also the weights. An MoE layer's routed experts are sharded over their expert-data-parallel group,
  dp x cp / ep ranks;
* buffers (transient, at the peak): under ``fsdp`` two layers' gathered weights (FSDP's ``limit_all_gathers``:
  at most two layers gathered at once, kernbench.workloads.sharding); under ``zero2``/``fsdp`` one layer's whole
  gradients before their reduce-scatter; under ``recompute="full"`` the recomputed layer's activations (the
  no-recompute figure of one layer, one micro-batch);
* activations: per layer and micro-batch, Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
  Transformer Models", arXiv:2205.05198), section 4 and Table 2, with s the sequence, b the micro-batch, h the
  hidden size, a the heads, t = tp, in 16-bit elements and 1-byte dropout masks. Without parallelism a GPT layer
  keeps s b h (34 + 5 a s / h) bytes (eq. 1): the two norms' inputs 4 sbh, the QKV input 2 sbh, Q and K 4 sbh, V 2
  sbh, the output projection's input 2 sbh, the attention dropout's mask sbh (11 sbh with those four), the MLP's
  input 2 sbh, GeLU's input 8 sbh, the second linear's input 8 sbh, its dropout mask sbh (19 sbh), and the score
  matrix's softmax output 2 a s^2 b, its dropout mask a s^2 b and the dropout's output 2 a s^2 b. With TP (eq. 2)
  the 24 sbh of the projections and the score terms are split over t and the 10 sbh of the norms, the two linear
  inputs and the masks are not: s b h (10 + 24 / t + 5 a s / (h t)); sequence parallelism splits those too: s b h
  / t (34 + 5 a s / h); selective recompute drops the score terms (s b h 34 / t with SP), and so does flash
  attention (``flash=True``, the default: no score matrix is stored; its per-row softmax statistics, 4 a s b
  bytes, under 0.1 % of a layer, are left out); full recompute keeps the layer's input, 2 sbh (/ t with SP, as
  Megatron stores the sequence-parallel shard). Other architectures by the same parts: Q and K are
  2 s b (q + kv) with GQA's narrower K/V (q = heads x head_dim, kv = kv heads x head_dim), V 2 s b kv, the
  output projection's input 2 s b q; a SwiGLU MLP keeps its gate and up outputs and their product (3 x 2 s b
  ffn, Megatron's swiglu keeps its input and output), a GeLU MLP 2 x 2 s b ffn; only the ``gpt`` family has
  dropout (Megatron's GPT, GPT-2/3: 0.1; LLaMA and MPT train without); an MoE layer keeps top_k x (its
  permuted token copy 2 sbh + the expert's SwiGLU 3 x 2 s b expert_ffn / t), its shared experts' SwiGLU and the
  router's fp32 logits 4 s b E. Context parallelism (``plan.cp``) splits s over the cp ranks (the score terms
  keep the full keys: a s/cp x s). The element size is the precision's, at least 2 (FP8 recipes keep BF16
  activations between GEMMs);
* micro-batches in flight: a stage keeps the activations of every forward whose backward has not run. 1F1B
  runs ``warmup_forwards(pp, 1, M, s)`` = min(pp - s - 1, M) forwards, then one more before its first backward:
  min(pp - s, M) micro-batches on stage s (pp on the first). Interleaved 1F1B (v model chunks per stage) runs
  ``warmup_forwards(pp, v, M, s)`` chunk forwards, then one more, each of L / (pp v) layers: on the first stage
  (2 (pp - 1) + (v - 1) pp + 1) x L / (pp v) = L (1 + (pp - 1) / (pp v)) layers' worth, Megatron's factor
  (Korthikanti et al. section 4.2.3; Narayanan et al. 2021) derived from the schedule itself;
* the input and output layers (Korthikanti section 4.3): the embedding's dropout mask, s b h / t with SP (gpt
  family only), for each micro-batch in flight on the first stage; the output layer on the last stage, for one
  micro-batch: the final norm's input and the projection's input 2 sbh each (/ t with SP) and the fp32 logits
  of the cross-entropy 4 s b v / t: 4 s b h / t (1 + v / h) with SP.

Training's budget (``training_budget``) is the rank's HBM capacity (``pe.hbm.capacity``: a GPU's datasheet
memory, a SIP PE's HBM slice) less ``TRAINING_RESERVE_BYTES`` and ``TRAINING_FRAGMENTATION`` of the capacity on a
GPU (not serving's ``gpu.memory_utilization``); ``check_training`` refuses a plan whose peak stage exceeds it,
naming the stage, a rank (its first GPU), the need, the budget and the shortfall in GiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from kernbench import _core
from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError

__all__ = ["Footprint", "inference_footprint", "check_fits", "StageMemory", "TrainingFootprint",
           "training_footprint", "layer_activation_bytes", "training_budget", "check_training", "spec_of_graph",
           "TRAINING_RESERVE_BYTES", "TRAINING_FRAGMENTATION", "GIB"]

GIB = 1 << 30
#: What a training process holds on a GPU besides its model state and activations (assumed): the CUDA context
#: with its kernel images and the cuBLAS / cuDNN / Transformer Engine workspaces (about 0.5 GiB on an H100), and
#: NCCL's communicator buffers (NCCL_BUFFSIZE 4 MiB per channel and peer, for the tp, dp and pp communicators:
#: about 1 GiB).
TRAINING_RESERVE_BYTES = 3 * GIB // 2
#: The share of a GPU's capacity PyTorch's caching allocator loses to fragmentation (assumed: blocks rounded to
#: 512 B and split from 2 MiB / 20 MiB segments; a few per cent with ``expandable_segments``).
TRAINING_FRAGMENTATION = 0.05


def _whole(x, name: str, least: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < least:
        raise WorkloadError(f"{name} must be an integer >= {least}, got {x!r}")
    return x


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _dtype_bytes(d: str) -> int:
    e = DTYPE_BYTES.get(d)
    if e is None:
        raise WorkloadError(f"unknown dtype {d!r} (known: {', '.join(DTYPE_BYTES)})")
    return e


# ---- weights: what a rank of a stage holds ------------------------------------------------------------------
def _is_moe(spec, layer: int) -> bool:
    return bool(spec.experts) and layer >= min(spec.dense_layers, spec.layers)


def _layer_params(spec, layer: int, tp: int, ep: int) -> tuple[int, int]:
    """(parameters of the data-parallel replicas, routed-expert parameters) one rank holds of ``layer``."""
    norms = 2 * spec.norm_params
    if not _is_moe(spec, layer):
        return _ceil(spec.layer_params - norms, tp) + norms, 0
    router = spec.hidden * spec.experts
    rest = spec.moe_layer_params(0) - router - norms  # attention and the shared experts
    routed = 3 * spec.hidden * spec.expert_ffn
    return _ceil(rest, tp) + router + norms, _ceil(spec.experts, ep) * _ceil(routed, tp)


def _stage_layers(layers: int, pp: int, v: int = 1) -> list[list[int]]:
    """The layer indices each stage holds: ``stage_layers(layers, pp v)``'s chunks, chunk c on stage c % pp."""
    from kernbench.workloads.lowerer import stage_layers
    out: list[list[int]] = [[] for _ in range(pp)]
    start = 0
    for c, n in enumerate(stage_layers(layers, pp * v)):
        out[c % pp].extend(range(start, start + n))
        start += n
    return out


def _edge_params(spec, tp: int, pp: int, first: bool, last: bool, embed: bool, head: bool) -> int:
    """The embeddings on the first stage, the final norm and the LM head on the last (the module doc)."""
    table = _ceil(spec.vocab * spec.hidden, tp)
    n = 0
    if first and embed:
        n += table + (spec.max_positions * spec.hidden if spec.positions == "learned" else 0)
    if last and head:
        n += spec.norm_params
        if not spec.tied or pp > 1 or not embed:
            n += table
    return n


@dataclass(frozen=True)
class Footprint:
    """Bytes per GPU, by part."""

    weights: int
    kv_cache: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations

    def row(self) -> dict[str, int]:
        return {"weights": self.weights, "kv_cache": self.kv_cache, "activations": self.activations,
                "total": self.total}


def inference_footprint(spec, *, tp: int, pp: int, batch: int, prompt: int, tokens: int,
                        dtype: str | None = None, ep: int = 1) -> Footprint:
    """Per GPU: ``spec`` (a catalog ModelSpec) served at tp x pp (MoE experts over ``ep``), ``batch`` sequences of
    up to ``tokens`` tokens in the cache (prompt + output; 0: no cache), a prefill of ``prompt`` tokens each.
    The weights are those of the stage holding most (every parameter, experts included: the module doc)."""
    for name, x, least in (("tp", tp, 1), ("pp", pp, 1), ("ep", ep, 1), ("batch", batch, 1),
                           ("prompt", prompt, 1), ("tokens", tokens, 0)):
        _whole(x, f"inference_footprint: {name}", least)
    d = dtype or spec.dtype
    e = _dtype_bytes(d)
    if pp > spec.layers:
        raise WorkloadError(f"inference_footprint: pp = {pp} stages but {spec.name} has {spec.layers} layers")
    stages = _stage_layers(spec.layers, pp)
    weights = max(sum(sum(_layer_params(spec, x, tp, ep)) for x in ids)
                  + _edge_params(spec, tp, pp, s == 0, s == pp - 1, True, True) for s, ids in enumerate(stages)) * e
    layers = -(-spec.layers // pp)
    kv = batch * tokens * spec.kv_bytes_per_token(d, tp=tp, layers=layers)
    act = batch * prompt * (4 * spec.hidden + 2 * spec.ffn // tp) * e
    return Footprint(int(weights), int(kv), int(act))


def check_fits(need: Footprint, system, gpu: str, what: str = "the plan") -> dict:
    """Raise WorkloadError when ``need`` exceeds the budget of ``gpu``; returns the budget figures."""
    sp = _core.gpu_spec(system._core, gpu)
    budget = int(sp["memory_capacity"] * sp["memory_utilization"])
    info = {"capacity": int(sp["memory_capacity"]), "budget": budget, **need.row()}
    if need.total > budget:
        gib = 1 << 30
        raise WorkloadError(
            f"{what} does not fit in {gpu}'s memory: weights {need.weights / gib:.2f} GiB + KV cache "
            f"{need.kv_cache / gib:.2f} GiB + activations {need.activations / gib:.2f} GiB = {need.total / gib:.2f} "
            f"GiB per GPU, over the {budget / gib:.2f} GiB the framework may use ({sp['memory_utilization']:g} of "
            f"{sp['memory_capacity'] / gib:.2f} GiB, gpu.memory_utilization): {(need.total - budget) / gib:.2f} GiB "
            "short (raise tp or pp, or lower batch or tokens)")
    return info


# ---- training -------------------------------------------------------------------------------------------------
def layer_activation_bytes(spec, *, seq: int, micro_batch: int, tp: int = 1, sp: bool = False, cp: int = 1,
                           recompute: str = "none", flash: bool = True, moe: bool = False,
                           dtype: str = "bf16") -> int:
    """Bytes one rank keeps of one layer's forward for one micro-batch until its backward (the module doc:
    Korthikanti et al. 2022, section 4 and Table 2, by part)."""
    s, b, t = _ceil(seq, cp), micro_batch, tp
    e = max(2, _dtype_bytes(dtype))
    m = 1 if spec.family == "gpt" else 0  # 1-byte dropout masks (Megatron's GPT trains with dropout 0.1)
    sbh = s * b * spec.hidden
    rep_t = t if sp else 1  # what SP splits over the tp ranks
    if recompute == "full":
        return _ceil(e * sbh, rep_t)
    q, kv = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    # whole on every tp rank unless SP: the two norms' inputs, the QKV and the MLP's input, two dropout masks
    rep = 4 * e * sbh + 2 * m * sbh
    if moe:  # the permuted token copies and the router's fp32 logits
        rep += spec.top_k * e * sbh + 4 * s * b * spec.experts
        inner = 3 * e * s * b * spec.expert_ffn * (spec.top_k + spec.shared_experts)
    else:
        inner = (3 if spec.mlp == "swiglu" else 2) * e * s * b * spec.ffn
    # split over tp: Q and K, V, the output projection's input, the MLP's inner activations
    split = e * s * b * (q + kv) + e * s * b * kv + e * s * b * q + inner
    if not flash and recompute == "none":  # the score matrix: softmax output, its dropout mask and output
        split += spec.heads * s * seq * b * (e + m * (1 + e))
    return _ceil(rep, rep_t) + _ceil(split, t)


@dataclass(frozen=True)
class StageMemory:
    """Bytes one rank of a pipeline stage holds at its peak, by part (the module doc)."""

    stage: int
    layers: int
    in_flight: float      # micro-batches' worth of the stage's layers kept (chunk forwards / v)
    weights: int
    gradients: int
    optimizer: int
    activations: int
    buffers: int

    PARTS = ("weights", "gradients", "optimizer", "activations", "buffers")

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.buffers

    def gib(self) -> dict[str, float]:
        """The parts and the total in GiB."""
        return {**{k: getattr(self, k) / GIB for k in self.PARTS}, "total": self.total / GIB}


@dataclass(frozen=True)
class TrainingFootprint:
    """Per pipeline stage what one of its ranks holds; ``peak`` is the stage that needs most."""

    stages: tuple[StageMemory, ...]
    layer_activations: int            # one layer, one micro-batch (a dense layer; an MoE model's MoE layer)
    notes: tuple[str, ...] = field(default=())

    @property
    def peak(self) -> StageMemory:
        return max(self.stages, key=lambda x: (x.total, -x.stage))

    def summary(self) -> dict[str, Any]:
        """GiB: the peak stage, its total and parts, and each stage's total."""
        p = self.peak
        return {"peak_gib": p.total / GIB, "stage": p.stage, "parts_gib": {k: v for k, v in p.gib().items()
                                                                          if k != "total"},
                "stages_gib": [x.total / GIB for x in self.stages]}


def training_footprint(spec, plan, *, micro_batch: int, seq: int, precision: str | None = None,
                       layers: int | None = None, embed: bool = True, head: bool = True,
                       flash: bool = True) -> TrainingFootprint:
    """Per rank of each pipeline stage of ``plan`` training ``spec`` (a ModelSpec) on micro-batches of
    ``micro_batch`` sequences of ``seq`` tokens: weights, gradients, Adam's state by ``plan.sharding``,
    activations by ``plan.recompute`` (split by tp, SP, cp), times the micro-batches in flight of the plan's
    (interleaved) 1F1B, and the transient buffers; ``layers`` (default the spec's), ``embed``/``head``: what the
    trained graph holds; ``flash``: attention stores no score matrix. The module doc gives each term's source."""
    from kernbench.workloads.training import warmup_forwards

    _whole(micro_batch, "training_footprint: micro_batch")
    _whole(seq, "training_footprint: seq")
    L = _whole(spec.layers if layers is None else layers, "training_footprint: layers")
    tp, pp, v, M, ep = plan.tp, plan.pp, plan.interleave, plan.microbatches, plan.ep
    cp = int(getattr(plan, "cp", 1))
    if pp > L:
        raise WorkloadError(f"training_footprint: pp = {pp} stages but {L} layers to split")
    d = precision or spec.dtype
    e = _dtype_bytes(d)
    opt_e = 8 + (4 if e < 4 else 0)      # Adam's m and v, and the fp32 master weights below fp32
    shard = plan.sharding
    group = plan.dp * cp                  # the data-parallel group the state is sharded over
    egroup = max(1, group // ep)          # an expert's: dp x cp / ep

    def part(dense: int, expert: int, per: int, sharded: bool) -> int:
        return _ceil(dense, group) * per + _ceil(expert, egroup) * per if sharded else (dense + expert) * per

    act_kw = dict(seq=seq, micro_batch=micro_batch, tp=tp, sp=plan.sp, cp=cp, flash=flash, dtype=d)
    act = {moe: layer_activation_bytes(spec, recompute=plan.recompute, moe=moe, **act_kw) for moe in (False, True)}
    redo = {moe: layer_activation_bytes(spec, recompute="none", moe=moe, **act_kw) for moe in (False, True)}
    ae, s_loc = max(2, e), _ceil(seq, cp)
    sbh, rep_t = s_loc * micro_batch * spec.hidden, tp if plan.sp else 1
    out = []
    for s, ids in enumerate(_stage_layers(L, pp, v)):
        first, last = s == 0, s == pp - 1
        per_layer = [_layer_params(spec, x, tp, ep) for x in ids]
        dense = sum(a for a, _ in per_layer) + _edge_params(spec, tp, pp, first, last, embed, head)
        expert = sum(b for _, b in per_layer)
        weights = part(dense, expert, e, shard == "fsdp")
        grads = part(dense, expert, e, shard in ("zero2", "fsdp"))
        optim = part(dense, expert, opt_e, shard != "none")
        chunks = min(warmup_forwards(pp, v, M, s) + 1, v * M)   # chunk forwards held at the peak
        kept = sum(act[_is_moe(spec, x)] for x in ids)
        acts = _ceil(chunks * kept, v)
        if first and embed and spec.family == "gpt":  # the embedding's dropout mask, each micro-batch in flight
            acts += _ceil(chunks, v) * _ceil(sbh, rep_t)
        if last and head:  # the final norm's and the projection's inputs, the fp32 logits: one micro-batch
            acts += _ceil(2 * ae * sbh, rep_t) + _ceil(4 * s_loc * micro_batch * spec.vocab, tp)
        biggest = max((a + b for a, b in per_layer), default=0)
        buffers = (2 * biggest * e if shard == "fsdp" else 0) + (biggest * e if shard in ("zero2", "fsdp") else 0)
        if plan.recompute == "full" and ids:
            buffers += max(redo[_is_moe(spec, x)] for x in ids)
        out.append(StageMemory(s, len(ids), chunks / v, weights, grads, optim, acts, buffers))
    notes = ("flash attention: no score matrix",) if flash else ()
    return TrainingFootprint(tuple(out), act[bool(spec.experts)], notes)


def training_budget(system, pe: str) -> dict[str, int]:
    """The bytes a training rank on ``pe`` may use: its HBM capacity (``pe.hbm.capacity``) less, on a GPU,
    TRAINING_RESERVE_BYTES and TRAINING_FRAGMENTATION of the capacity (the module doc)."""
    if getattr(system, "target", None) == "gpu":
        capacity = int(_core.gpu_spec(system._core, pe)["memory_capacity"])
        reserve = TRAINING_RESERVE_BYTES + int(TRAINING_FRAGMENTATION * capacity)
    else:  # a SIP PE's HBM slice: no CUDA context, NCCL or caching allocator to reserve for
        capacity, reserve = int(_core.HbmAllocator(system._core).capacity), 0
    return {"capacity": capacity, "reserve": reserve, "budget": capacity - reserve}


def check_training(fp: TrainingFootprint, system, plan, what: str = "the plan", *,
                   refuse: bool = True) -> dict[str, Any]:
    """Raise WorkloadError when the peak stage of ``fp`` exceeds the budget of its rank (training_budget),
    naming the stage, the rank (its first GPU), the need by part, the budget and the shortfall in GiB (with
    ``refuse=False`` only say so: ``fits``); returns ``fp.summary()`` with the budget figures."""
    placement = plan.place(system)
    pes = placement.pes
    p = fp.peak
    pe = placement.group(0, p.stage)[0]
    b = training_budget(system, pe)
    info = {**fp.summary(), "capacity_gib": b["capacity"] / GIB, "reserve_gib": b["reserve"] / GIB,
            "budget_gib": b["budget"] / GIB, "fits": p.total <= b["budget"]}
    if p.total > b["budget"] and refuse:
        parts = " + ".join(f"{k} {getattr(p, k) / GIB:.2f}" for k in StageMemory.PARTS)
        unit = "GPU" if getattr(system, "target", None) == "gpu" else "PE"
        reserve = (f" less a {b['reserve'] / GIB:.2f} GiB reserve (CUDA context, NCCL buffers, allocator "
                   "fragmentation)" if b["reserve"] else "")
        raise WorkloadError(
            f"{what} does not fit in memory: pipeline stage {p.stage} needs {p.total / GIB:.2f} GiB per {unit} "
            f"on rank {pes.index(pe)} ({pe}): {parts} GiB; the budget is {b['budget'] / GIB:.2f} GiB "
            f"(pe.hbm.capacity {b['capacity'] / GIB:.2f} GiB{reserve}): {(p.total - b['budget']) / GIB:.2f} GiB "
            "short (raise tp, pp or ep, turn on sequence parallelism, shard the state (sharding zero1, zero2, fsdp), "
            "recompute activations, "
            "or lower the micro-batch or sequence)")
    return info


def spec_of_graph(graph) -> tuple[Any, dict[str, Any]] | tuple[None, str]:
    """The ModelSpec a hand-built decoder graph was made from (its ``meta["dims"]``, kernbench.workloads.handbuilt)
    and what the graph holds (``layers``, ``embed``, ``head``, ``micro_batch``, ``seq``, ``dtype``); else
    (None, the reason)."""
    from kernbench.workloads.catalog import ModelSpec
    meta = graph.meta
    dims = meta.get("dims")
    if not isinstance(dims, dict) or "hidden" not in dims:
        return None, (f"{graph.name}: the graph records no model dimensions (meta['dims']: an imported or "
                      "hand-made graph), so its memory is not estimated")
    known = {f.name for f in fields(ModelSpec)}
    kw = {("ffn" if k == "intermediate" else k): v for k, v in dims.items()
          if ("ffn" if k == "intermediate" else k) in known}
    if "expert_linears" in kw:
        kw["expert_linears"] = tuple(kw["expert_linears"])
    kw.setdefault("layers", int(meta.get("layers", 1)))
    defaults = {"family": "llama", "norm": "rms", "mlp": "swiglu", "positions": "rotary"}
    dtype = meta.get("dtype") or "bf16"
    try:
        spec = ModelSpec(name=str(meta.get("model", graph.name)), **{**defaults, **kw, "dtype": dtype})
    except (TypeError, WorkloadError) as e:
        return None, f"{graph.name}: meta['dims'] do not make a model spec ({e})"
    names = {op.name for op in graph.ops}
    kinds = {op.kind for op in graph.ops}
    held = {"layers": int(meta.get("layers", spec.layers)), "embed": "embedding" in kinds,
            "head": "lm_head" in names, "micro_batch": int(meta.get("batch", 1)), "seq": int(meta.get("seq", 1)),
            "dtype": dtype}
    return spec, held

"""The GPU target's training kernels beyond GEMMs: fused attention forward and backward by implementation, and
the memory-bound kernels of a layer and of the optimizer as their byte streams (docs/gpu-target.md, "Training
kernels").

Attention (``attention_plan``). The C++ model (src/kernels/gpu/attention.hpp) prices a prefill kernel as waves of
CTAs of ``kQueryTile`` query rows, each doing ``4 x 128 x keys x d`` FLOPs at ``gpu.attention_efficiency`` of one
SM's sustained tensor rate. A measured kernel also pays, per CTA, what does not grow with the keys (loading Q,
the softmax's final rescale, writing O: ``fixed_keys`` key-equivalents), per score element the softmax itself
(``softmax_flops`` tensor-FLOP equivalents: the exponentials run on the SFU, not the tensor cores, so head dim 64
pays twice as much of it per FLOP as 128), and under a causal mask whole key tiles up to the diagonal (a
diagonal tile is computed in full and masked). The backward (FlashAttention-2's ``dQ, dK, dV``, with the
scores recomputed from the saved log-sum-exp) does 2.5x the forward's FLOPs -- five matmuls of the forward's
two (``BACKWARD_FLOPS``) -- at its own efficiency and fixed cost. All of it is a rescaling of the C++ plan's own
compute term, so no C++ change: ``duration = kernel_latency + max(compute, memory)`` as there.

Implementations (``ATTENTION_KERNELS``): ``fa2`` (FlashAttention-2, the model's reference: its forward efficiency
is ``gpu.attention_efficiency``), ``fa3`` (FlashAttention-3, Hopper) and ``cudnn`` (cuDNN's fused attention, what
Transformer Engine picks on Hopper). Each value's provenance is beside it: fitted by
scripts/calibrate_training_parts.py on the named rows of configs/machines/h100-training-parts.measured.yaml.
"""

from __future__ import annotations

from typing import Any

from kernbench import _core
from kernbench.workloads.graph import WorkloadError

__all__ = ["ATTENTION_KERNELS", "ATTENTION_PASSES", "BACKWARD_FLOPS", "QUERY_TILE", "attention_plan",
           "scale_attention", "DEFAULT_ATTENTION"]

#: Query rows per prefill CTA and keys per key tile (src/kernels/gpu/attention.hpp kQueryTile).
QUERY_TILE = 128
#: The backward's FLOPs over the forward's: dS = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q and the
#: recomputed S = Q K^T -- five matmuls of the forward's two (Dao 2023, FlashAttention-2, section 3.1.2; the
#: FlashAttention benchmarks count the backward as 2.5x the forward).
BACKWARD_FLOPS = 2.5
ATTENTION_PASSES = ("forward", "backward")
DEFAULT_ATTENTION = "fa2"

_FIT = {"by": "scripts/calibrate_training_parts.py", "data": "h100-training-parts.measured.yaml"}

#: Per implementation: ``efficiency`` per pass relative to gpu.attention_efficiency, ``fixed_keys`` per pass (a
#: CTA's cost independent of the keys, in keys), ``softmax_flops`` per score element (both passes). FA3's and
#: cuDNN's efficiencies exceed the sustained tensor rate once the softmax is charged: they overlap the softmax with
#: the matmuls (FA3's ping-pong warpgroups), which this additive form folds into its two values.
def _rows(impl: str) -> list[str]:
    """The row ids of ``impl``'s five groups in h100-training-parts.measured.yaml (what its values were fitted on)."""
    return [f"att-{impl}-{g}" for g in ("fwd", "fwd-causal", "fwd-hd64", "bwd", "bwd-hd64")]


ATTENTION_KERNELS: dict[str, dict[str, Any]] = {
    "fa2": {
        "efficiency": {"forward": 1.0, "backward": 0.8915},
        "fixed_keys": {"forward": 131.5, "backward": 259.2},
        "softmax_flops": 59.15,
        "fitted": {**_FIT, "rows": _rows("fa2")},
    },
    "fa3": {
        "efficiency": {"forward": 1.9739, "backward": 1.8036},
        "fixed_keys": {"forward": 188.6, "backward": 403.8},
        "softmax_flops": 128.06,
        "fitted": {**_FIT, "rows": _rows("fa3")},
    },
    "cudnn": {
        "efficiency": {"forward": 1.9751, "backward": 1.9224},
        "fixed_keys": {"forward": 99.2, "backward": 352.6},
        "softmax_flops": 207.24,
        "fitted": {**_FIT, "rows": _rows("cudnn")},
    },
}


def _impl(impl: str) -> dict[str, Any]:
    if impl not in ATTENTION_KERNELS:
        raise WorkloadError(f"attention implementation {impl!r}: expected one of {', '.join(ATTENTION_KERNELS)}")
    return ATTENTION_KERNELS[impl]


def run_keys(q: int, s: int, causal: bool) -> float:
    """Keys a query tile runs on average: all ``s``; under a causal mask (the queries the last ``q`` keys) the
    cache before them plus every key tile up to the diagonal, the diagonal tile whole."""
    if not causal:
        return float(s)
    n = -(-q // QUERY_TILE)
    return min(float(s), float(s - q) + QUERY_TILE * (n + 1) / 2.0)


def scale_attention(plan: dict, q: int, s: int, d: int, causal: bool, impl: str, pass_: str,
                    params: dict[str, Any] | None = None) -> dict:
    """The C++ prefill plan ``plan`` (a forward at gpu.attention_efficiency) as implementation ``impl`` runs pass
    ``pass_``: its compute term rescaled by the run keys and fixed cost over the useful keys, the softmax's share
    and the pass's efficiency, times BACKWARD_FLOPS for the backward (``flops`` too). A decode plan is returned
    as it is (memory-bound: split-KV over the cache). ``params`` replaces the table's entry (the fit)."""
    if pass_ not in ATTENTION_PASSES:
        raise WorkloadError(f"attention pass {pass_!r}: expected one of {', '.join(ATTENTION_PASSES)}")
    if plan["decode"]:
        if pass_ == "backward":
            raise WorkloadError(f"attention backward of {q} queries: the decode kernel has no backward")
        return plan
    p = params if params is not None else _impl(impl)
    useful = float(s - q) + (q + 1) / 2.0 if causal else float(s)
    work = (run_keys(q, s, causal) + p["fixed_keys"][pass_]) / useful * (4.0 * d + p["softmax_flops"]) / (4.0 * d)
    flops_x = BACKWARD_FLOPS if pass_ == "backward" else 1.0
    compute = int(round(int(plan["compute_ps"]) * work * flops_x / p["efficiency"][pass_]))
    memory = int(plan["memory_ps"]) * (2 if pass_ == "backward" else 1)  # + dO read, dQ dK dV written
    latency = int(plan["duration_ps"]) - max(int(plan["compute_ps"]), int(plan["memory_ps"]))
    out = dict(plan)
    out.update(flops=float(plan["flops"]) * flops_x, compute_ps=compute, memory_ps=memory,
               bytes=int(plan["bytes"]) * (2 if pass_ == "backward" else 1),
               duration_ps=latency + max(compute, memory), bound="compute" if compute >= memory else "memory")
    return out


def attention_plan(system, pe, B, H, KV, q, s, d, e, causal, prec, impl: str = DEFAULT_ATTENTION,
                   pass_: str = "forward") -> dict:
    """One fused attention kernel of ``impl`` for pass ``pass_`` on ``pe``: ``_core.gpu_attention`` rescaled by
    ``scale_attention``."""
    plan = _core.gpu_attention(system._core, pe, B, H, KV, q, s, d, e, causal, prec)
    return scale_attention(plan, q, s, d, causal, impl, pass_)

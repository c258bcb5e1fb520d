"""What an inference plan holds in each GPU's memory, and whether it fits.

    need = memory.inference_footprint(spec, plan, batch=8, tokens=160, dtype="bf16")
    memory.check_fits(need, system, plan)        # WorkloadError naming the shortfall

Per GPU of a tensor-parallel group of ``tp`` and a pipeline stage of ``layers / pp`` layers:

* weights: the stage's layers / tp (and the embeddings and LM head, split over tp, on the first and last
  stage: counted whole on every stage, the bound for the stage that holds them);
* KV cache: 2 (K and V) x batch x tokens x KV heads / tp (at least one: replicated) x head_dim x the
  stage's layers, at the element size;
* activations: the live tensors of one layer for the prompt's tokens (the residual, the MLP's inner
  activations and the attention output: tokens x (4 x hidden + 2 x ffn / tp) elements), what a framework's
  profiling pass reserves.

The budget is the GPU's memory capacity (``pe.hbm.capacity``, the datasheet's) times
``gpu.memory_utilization`` (the framework's share, vLLM's ``gpu_memory_utilization``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench import _core
from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError, whole

__all__ = ["Footprint", "inference_footprint", "check_fits"]


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
                        dtype: str | None = None) -> Footprint:
    """Per GPU: ``spec`` (a catalog ModelSpec) served at tp x pp, ``batch`` sequences of up to ``tokens``
    tokens in the cache (prompt + output), a prefill of ``prompt`` tokens each."""
    for name, v, low in (("tp", tp, 1), ("pp", pp, 1), ("batch", batch, 0), ("prompt", prompt, 0), ("tokens", tokens, 0)):
        whole(v, f"inference_footprint: {name}", low)  # a negative size would give negative bytes
    d = dtype or spec.dtype
    e = DTYPE_BYTES.get(d)
    if e is None:
        raise WorkloadError(f"unknown dtype {d!r}")
    layers = -(-spec.layers // pp)
    weights = (layers * spec.layer_params + spec.embedding_params + spec.norm_params) * e // tp
    kv_heads = max(1, spec.kv_heads // tp)
    kv = 2 * batch * tokens * kv_heads * spec.head_dim * layers * e
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

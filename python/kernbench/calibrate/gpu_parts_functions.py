"""Measurement functions for the parts of a training step beyond GEMMs and collectives (imported, and so
registered, by the package; rows in configs/machines/h100-training-parts.measured.yaml):

  gpu.kernel     kernel impl direction tokens hidden vocab dtype -> time [us], bandwidth [TB/s]
  gpu.optimizer  params impl state_bytes                         -> time [ms], bandwidth [TB/s]
  gpu.clock      (none)                                          -> sustained [MHz]

A memory-bound kernel is what the implementation launches for it (``KERNEL_RECIPES``): each of its kernels
streams the tensors it reads and writes once at the GPU's achievable rate (``_core.gpu_stream``:
gpu.stream_efficiency of the memory bandwidth, plus gpu.kernel_latency), the kernels back to back from the host
as the benchmarks loop them. No parameter of these recipes is fitted: they are read from the implementations
(each entry names what it counts), so every gpu.kernel row is a prediction of the streaming mechanism fitted on
BabelStream.
"""

from __future__ import annotations

from kernbench._core import UsageError
from kernbench.calibrate.gpu_functions import back_to_back, first_gpu
from kernbench.calibrate.registry import measurement

#: Bytes per element by dtype name.
ELEM = {"bf16": 2, "fp16": 2, "fp32": 4}

#: (kernel, impl) -> {direction: [(reads, writes), ...]}: one pair per launched kernel, in tensors of the
#: kernel's unit shape (norms: [tokens, hidden] in the input dtype; swiglu: [tokens, hidden] the output, its input
#: two of them; cross_entropy: [tokens, vocab] bf16 units, an fp32 tensor counting 2). ``forward_backward`` is
#: what Liger-Kernel's Megatron scripts time: the forward, ``out.sum()`` (one read of the output) and the
#: backward.
KERNEL_RECIPES: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {
    # Transformer Engine / Liger / torch's fused norm: one kernel reads x and writes y (and the per-row rstd);
    # the backward reads x and dy, writes dx (dgamma's per-CTA partials are a second, small kernel: not counted)
    ("rmsnorm", "fused"): {"forward": [(1, 1)], "backward": [(2, 1)]},
    # torch.nn.LayerNorm (ATen's layer_norm kernels): the backward's dgamma/dbeta read x and dy again
    ("layernorm", "fused"): {"forward": [(1, 1)], "backward": [(2, 1), (2, 0)]},
    # SwiGLU in one kernel (Megatron's bias_swiglu_impl, Liger's): reads a and b, writes y; the backward reads a,
    # b and dy and writes da and db
    ("swiglu", "fused"): {"forward": [(2, 1)], "backward": [(3, 2)]},
    # eager F.silu(a) * b: silu (a -> s), mul (s, b -> y); autograd's backward: dy * b -> ds, dy * s -> db,
    # silu_backward (ds, a -> da)
    ("swiglu", "eager"): {"forward": [(1, 1), (2, 1)], "backward": [(2, 1), (2, 1), (2, 1)]},
    # Megatron's vocab_parallel_cross_entropy over logits.float() (fp32 = 2 units): the cast (r 1, w 2), max
    # (r 2), subtract (r 2, w 2), exp (r 2, w 2), sum (r 2), divide into the softmax kept for the backward (r 2,
    # w 2); the backward: softmax - one-hot scaled by the loss gradient (r 2, w 2), the cast's backward (r 2, w 1)
    ("cross_entropy", "megatron"): {"forward": [(1, 2), (2, 0), (2, 2), (2, 2), (2, 0), (2, 2)],
                                    "backward": [(2, 2), (2, 1)]},
    # cross_entropy_loss_fusion: the subtract and exp fused with the sum (one read, one write), the rest as above
    ("cross_entropy", "megatron_fused"): {"forward": [(1, 2), (2, 0), (2, 2), (2, 2)],
                                          "backward": [(2, 2), (2, 1)]},
    # Liger's fused linear-free cross-entropy: one kernel per row reads the logits twice (online max / sum, then
    # the gradient) and writes the gradient in place; the backward scales it (r 1, w 1)
    ("cross_entropy", "liger"): {"forward": [(2, 1)], "backward": [(1, 1)]},
}
DIRECTIONS = ("forward", "backward", "forward_backward")


def kernel_list(kernel: str, impl: str, direction: str) -> list[tuple[float, float]]:
    """The (reads, writes) per launched kernel of ``kernel`` as ``impl`` runs ``direction``."""
    if (kernel, impl) not in KERNEL_RECIPES:
        known = ", ".join(f"{k}/{i}" for k, i in KERNEL_RECIPES)
        raise UsageError(f"kernel {kernel!r} impl {impl!r}: no recipe (known: {known})")
    if direction not in DIRECTIONS:
        raise UsageError(f"direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
    r = KERNEL_RECIPES[(kernel, impl)]
    if direction == "forward_backward":
        return r["forward"] + [(1, 0)] + r["backward"]  # out.sum() between them
    return list(r[direction])


@measurement("gpu.kernel", metrics={"time": "us", "bandwidth": "TB/s"}, config="machines/h100-8x-nvswitch.yaml",
             doc="a named memory-bound kernel (rmsnorm, layernorm, swiglu, cross_entropy) as an implementation "
                 "launches it, forward, backward or both, back to back on the first GPU; bandwidth: the bytes "
                 "its kernels move over the time")
def gpu_kernel(ctx, kernel: str, impl: str = "fused", direction: str = "forward", tokens: int = 4096,
               hidden: int = 4096, dtype: str = "bf16"):
    from kernbench import _core

    if dtype not in ELEM:
        raise UsageError(f"dtype {dtype!r}: expected one of {', '.join(ELEM)}")
    if tokens < 1 or hidden < 1:
        raise UsageError(f"tokens and hidden must be >= 1, got {tokens} and {hidden}")
    unit = tokens * hidden * ELEM[dtype]
    system = ctx.load()
    gpu = first_gpu(system)
    t, moved = 0.0, 0
    for reads, writes in kernel_list(kernel, impl, direction):
        nbytes = int(round((reads + writes) * unit))
        t += back_to_back(system, gpu, _core.gpu_stream(system._core, gpu, nbytes), 0.0, "fp32")
        moved += nbytes
    return {"time": t * 1e6, "bandwidth": moved / t / 1e12}


#: Bytes per parameter an Adam step moves: read p, g, m, v and write p, m, v, in the state's element size
#: (torch.optim.Adam(fused=True) over bf16 parameters keeps bf16 state: 14 B; Megatron's distributed optimizer
#: over fp32 main grads and master weights: read g, master, m, v (16), write master, m, v (12), the bf16 param (2)).
OPTIMIZER_BYTES = {"adam_bf16": 7 * 2, "adam_fp32_master": 16 + 12 + 2}
#: torch's multi_tensor_apply launches a kernel per at most 320 chunks of 65536 elements (ATen's
#: MultiTensorApply.cuh: kChunkSize, depth_to_max_blocks; assumed as read, the tensor-count limit left out)
MTA_CHUNK = 65536 * 320


@measurement("gpu.optimizer", metrics={"time": "ms", "bandwidth": "TB/s"}, config="machines/h100-8x-nvswitch.yaml",
             doc="one fused (multi-tensor) Adam step over `params` parameters on the first GPU: its kernels stream "
                 "OPTIMIZER_BYTES per parameter at the achievable rate")
def gpu_optimizer(ctx, params: int, state: str = "adam_bf16"):
    from kernbench import _core

    if state not in OPTIMIZER_BYTES:
        raise UsageError(f"state {state!r}: expected one of {', '.join(OPTIMIZER_BYTES)}")
    if params < 1:
        raise UsageError(f"params must be >= 1, got {params}")
    system = ctx.load()
    gpu = first_gpu(system)
    launches = -(-params // MTA_CHUNK)
    per = -(-params // launches)
    t = launches * back_to_back(system, gpu, _core.gpu_stream(system._core, gpu, per * OPTIMIZER_BYTES[state]), 0.0,
                                 "fp32")
    return {"time": t * 1e3, "bandwidth": params * OPTIMIZER_BYTES[state] / t / 1e12}


@measurement("gpu.clock", metrics={"sustained": "MHz"}, config="machines/h100-8x-nvswitch.yaml",
             doc="the SM clock the first GPU's tensor mainloop sustains under a whole step's power: pe.clock x "
                 "gpu.sustained_clock_ratio")
def gpu_clock(ctx):
    from kernbench import _core

    system = ctx.load()
    return {"sustained": float(_core.gpu_spec(system._core, first_gpu(system))["sustained_hz"]) / 1e6}

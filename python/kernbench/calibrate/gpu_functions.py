"""The GPU target's built-in measurement functions (imported, and so registered, by the package).

  gpu.gemm         m n k precision                     -> tflops [TFLOPS], time [us]
  gpu.stream       kernel elements precision           -> bandwidth [TB/s], time [us]
  gpu.attention    batch heads seq head_dim causal impl direction precision
                                                       -> tflops [TFLOPS] (FlashAttention's counting), time [us]
  gpu.kernel       (gpu_parts_functions.py) a named memory-bound kernel of a layer, as an implementation runs it
  gpu.optimizer    (gpu_parts_functions.py) the optimizer step over a rank's parameters
  gpu.clock        (gpu_parts_functions.py) the SM clock a GPU sustains under a whole step's load
  gpu.nccl         collective bytes ranks algorithm threads
                                                       -> busbw [GB/s], algbw [GB/s], time [us]
  model.inference  model tp pp batch prompt output precision
                                                       -> latency [ms], ttft [ms], tpot [ms],
                                                          throughput [tokens/s], throughput_per_gpu [tokens/s]
  model.training   model dp tp pp seq micro_batch grad_accum precision sharding recompute sp interleave ep
                   clip_grad cp cp_comm_type check_memory vp fidelity replicas tp_ranks
                                                       -> tokens_per_gpu [tokens/s], step [ms], mfu,
                                                          memory [GiB] (peak per GPU; a plan that does not
                                                          fit is refused: kernbench.workloads.memory)

A ``model`` is what ``kernbench.workloads.get_model`` takes: a catalog name, or a path to a Hugging Face
config.json or to a YAML model spec (docs/workloads.md, "Models by config").

Each runs on the machine of ``--config`` (or the row's / the data file's config); gpu.gemm and gpu.stream use
its first GPU. Kernels are timed as the benchmarks that measured them time them: back to back
(``REPEATS`` calls launched from the host, the time per call in steady state, so a kernel shorter than its
launch shows the launch), which is what torch.matmul loops and BabelStream's mean per call see. gpu.nccl runs nccl-tests' way: REPEATS
calls back to back on one stream, the kernels launched by ``threads`` host threads (nccl-tests ``-t``; the ranks
split evenly over them), the time per call in steady state, its bandwidths by nccl-tests' conventions.
"""

from __future__ import annotations

from kernbench._core import UsageError
from kernbench.calibrate.registry import measurement

REPEATS = 4
#: BabelStream's kernels: arrays each touches (copy c = a and mul b = s c read one, write one; add c = a + b and
#: triad a = b + s c read two, write one; dot reads two) -- its own byte counting.
STREAM_ARRAYS = {"copy": 2, "mul": 2, "add": 3, "triad": 3, "dot": 2}
STREAM_BYTES = {"fp64": 8, "fp32": 4}


def first_gpu(system) -> str:
    pes = system.pes()
    if not pes:
        raise UsageError("the machine has no PE to run a GPU kernel on")
    return pes[0]


def back_to_back(system, gpu: str, plan: dict, flops: float, precision: str) -> float:
    """Seconds per call of REPEATS identical kernels launched from the host, in steady state."""
    from kernbench import _core
    from kernbench.program import Program

    prog = Program(system, "back-to-back")
    sp = _core.gpu_spec(system._core, gpu)
    ks = []
    for _ in range(REPEATS):
        ks.append(prog.kernel(gpu, int(plan["duration_ps"]), launch_ps=int(sp["launch_host_ps"]), flops=flops,
                              precision=precision, bytes=int(plan.get("bytes", 0)), deps=ks[-1:], name="call"))
    res = prog.run()
    end = res._core.ops()["end_ps"]
    return float(end[ks[-1]] - end[ks[0]]) / (REPEATS - 1) * 1e-12


@measurement("gpu.gemm", metrics={"tflops": "TFLOPS", "time": "us"}, config="machines/h100-8x-nvswitch.yaml",
             doc="one GEMM kernel called back to back on the first GPU (kernels/gpu/gemm.hpp)")
def gpu_gemm(ctx, m: int, n: int, k: int, precision: str = "bf16"):
    from kernbench import _core

    system = ctx.load()
    gpu = first_gpu(system)
    plan = _core.gpu_gemm(system._core, gpu, m, n, k, precision)
    t = back_to_back(system, gpu, plan, plan["flops"], precision)
    return {"tflops": plan["flops"] / t / 1e12, "time": t * 1e6}


@measurement("gpu.stream", metrics={"bandwidth": "TB/s", "time": "us"}, config="machines/h100-8x-nvswitch.yaml",
             doc="a BabelStream kernel (copy, mul, add, triad, dot) on the first GPU, its byte counting")
def gpu_stream(ctx, kernel: str = "copy", elements: int = 1 << 25, precision: str = "fp64"):
    from kernbench import _core

    if kernel not in STREAM_ARRAYS:
        raise UsageError(f"kernel {kernel!r}: expected one of {', '.join(STREAM_ARRAYS)}")
    if precision not in STREAM_BYTES:
        raise UsageError(f"precision {precision!r}: expected one of {', '.join(STREAM_BYTES)}")
    if elements < 1:
        raise UsageError(f"elements must be >= 1, got {elements}")
    system = ctx.load()
    gpu = first_gpu(system)
    nbytes = STREAM_ARRAYS[kernel] * elements * STREAM_BYTES[precision]
    plan = _core.gpu_stream(system._core, gpu, nbytes)
    t = back_to_back(system, gpu, plan, 0.0, "fp32")
    return {"bandwidth": nbytes / t / 1e12, "time": t * 1e6}


#: gpu.attention's passes: FlashAttention's benchmarks count 4 b s^2 h d FLOPs for the forward (halved when causal),
#: 2.5x that for the backward and 3.5x for both (benchmarks/benchmark_flash_attention.py)
ATTENTION_PASSES = {"forward": ("forward",), "backward": ("backward",), "forward_backward": ("forward", "backward")}


@measurement("gpu.attention", metrics={"tflops": "TFLOPS", "time": "us"}, config="machines/h100-8x-nvswitch.yaml",
             doc="one fused attention (impl fa2, fa3 or cudnn) forward, backward or both, called back to back on "
                 "the first GPU (kernbench.workloads.gpu_kernels); tflops by FlashAttention's counting")
def gpu_attention(ctx, batch: int, heads: int, seq: int, head_dim: int = 128, causal: bool = False,
                  impl: str = "fa2", direction: str = "forward", precision: str = "bf16"):
    from kernbench.workloads.gpu_kernels import BACKWARD_FLOPS, attention_plan

    if direction not in ATTENTION_PASSES:
        raise UsageError(f"direction {direction!r}: expected one of {', '.join(ATTENTION_PASSES)}")
    if min(batch, heads, seq, head_dim) < 1:
        raise UsageError(f"batch, heads, seq and head_dim must be >= 1, got {batch}, {heads}, {seq}, {head_dim}")
    system = ctx.load()
    gpu = first_gpu(system)
    t = 0.0
    for p in ATTENTION_PASSES[direction]:
        plan = attention_plan(system, gpu, batch, heads, heads, seq, seq, head_dim, 2, bool(causal), precision,
                              impl, p)
        t += back_to_back(system, gpu, plan, plan["flops"], precision)
    fwd = 4.0 * batch * seq * seq * heads * head_dim / (2 if causal else 1)
    counted = fwd * {"forward": 1.0, "backward": BACKWARD_FLOPS, "forward_backward": 1.0 + BACKWARD_FLOPS}[direction]
    return {"tflops": counted / t / 1e12, "time": t * 1e6}


#: nccl-tests' collective names -> kernbench's (reduce and sendrecv have no model: refused naming these).
NCCL_COLLECTIVES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
                    "broadcast": "broadcast", "alltoall": "alltoall"}


@measurement("gpu.nccl", metrics={"busbw": "GB/s", "algbw": "GB/s", "time": "us"},
             config="machines/h100-8x-nvswitch.yaml",
             doc="one NCCL collective on the first `ranks` GPUs, called back to back as nccl-tests does (src/ccl/nccl.hpp)")
def gpu_nccl(ctx, collective: str = "all_reduce", bytes: int = 1 << 20, ranks: int = 8, algorithm: str = "auto",
             threads: int = 0):
    from kernbench import ccl
    from kernbench.nccl import busbw_factor, canonical

    name = canonical(collective)
    if name not in NCCL_COLLECTIVES:
        raise UsageError(f"collective {collective!r}: modelled are {', '.join(NCCL_COLLECTIVES)} (nccl-tests' names)")
    if algorithm not in ("auto", "ring", "tree", "nvls", "pairwise"):
        raise UsageError(f"algorithm {algorithm!r}: expected auto, ring, tree, nvls or pairwise (alltoall)")
    system = ctx.load()
    pes = system.pes()
    if not 2 <= ranks <= len(pes):
        raise UsageError(f"ranks = {ranks}: the machine has {len(pes)} GPUs (a collective needs 2 or more)")
    r = ccl.collective(system, NCCL_COLLECTIVES[name], int(bytes), algorithm=algorithm, pes=pes[:ranks],
                       buffer="hbm", calls=REPEATS, host_threads=threads, verify="off")
    t = r.latency_ps * 1e-12
    algbw = bytes / t / 1e9
    return {"busbw": algbw * busbw_factor(name, ranks), "algbw": algbw, "time": t * 1e6}


@measurement("model.inference", metrics={"latency": "ms", "ttft": "ms", "tpot": "ms", "throughput": "tokens/s",
                                          "throughput_per_gpu": "tokens/s"},
             config="machines/h100-8x-nvswitch.yaml",
             doc="batch prompts: one prefill then output - 1 decode steps (vLLM benchmark_latency); cp > 1: the "
                 "prefill split over cp GPUs (context parallelism; decode is not modelled then: output 1)")
def model_inference(ctx, model: str, tp: int = 1, pp: int = 1, batch: int = 1, prompt: int = 32, output: int = 128,
                    precision: str = "bf16", cp: int = 1):
    from kernbench.workloads import ParallelPlan, estimate, get_model
    from kernbench.workloads.memory import check_fits, inference_footprint

    if output < 1:
        raise UsageError(f"output must be >= 1 token, got {output}")
    spec = get_model(model)
    system = ctx.load()
    plan = ParallelPlan(tp=tp, pp=pp, cp=cp)
    placement = plan.place(system)
    need = inference_footprint(spec, tp=tp, pp=pp, batch=batch, prompt=prompt, tokens=prompt + output,
                               dtype=precision)
    check_fits(need, system, placement.group(0, 0)[0], f"{spec.name} at tp {tp} pp {pp}, batch {batch}")
    est = estimate.inference(spec.builder(dtype=precision), system, plan, batch=batch, prompt=prompt,
                             decode_steps=output - 1)
    latency = est.ttft_ms + est.decode_ms
    tput = batch * output / (latency * 1e-3)
    return {"latency": latency, "ttft": est.ttft_ms, "tpot": est.tpot_ms, "throughput": tput,
            "throughput_per_gpu": tput / plan.size}


@measurement("model.training", metrics={"tokens_per_gpu": "tokens/s", "step": "ms", "mfu": "", "memory": "GiB"},
             config="machines/h100-8x-nvswitch.yaml",
             doc="one optimizer step: grad_accum micro-batches per dp rank (the pipeline's m with pp > 1; interleave "
                 "v > 1: Megatron's interleaved 1F1B over pp x v model chunks; ep: expert parallelism carved out "
                 "of the dp x cp data ranks; clip_grad: Megatron's --clip-grad, 0 for none: with clipping the "
                 "optimizer waits for the all-reduced gradient norm; cp: context parallelism, the sequence split over cp GPUs, "
                 "cp_comm_type p2p (ring) or a2a), on the first dp x cp x tp x pp GPUs of the machine in Megatron's "
                 "rank order (tp-cp-ep-dp-pp), the optimizer and the exposed communication included; memory: the "
                 "peak GiB per GPU (a plan that does not fit its GPUs' memory is refused); vp: Megatron's name of "
                 "interleave; fidelity (auto, steps, pipeline), replicas (auto: one on a GPU machine; one, "
                 "mirror, all) and tp_ranks (auto: one tensor-parallel rank lowered for its group where that is "
                 "exact; one, all) as estimate.training_step takes them")
def model_training(ctx, model: str, dp: int = 1, tp: int = 1, pp: int = 1, seq: int = 2048, micro_batch: int = 1,
                   grad_accum: int = 1, precision: str = "bf16", sharding: str = "none", recompute: str = "none",
                   sp: bool = False, interleave: int = 1, ep: int = 1, clip_grad: float = 1.0, cp: int = 1,
                   cp_comm_type: str = "p2p", check_memory: bool = True, vp: int = 0, fidelity: str = "auto",
                   replicas: str = "auto", tp_ranks: str = "auto"):
    from kernbench import _core
    from kernbench.workloads import ParallelPlan, estimate, get_model

    spec = get_model(model)
    system = ctx.load()
    if replicas not in ("auto", "one", "mirror", "all"):
        raise UsageError(f"replicas {replicas!r}: expected auto, one, mirror or all")
    if tp_ranks not in ("auto", "one", "all"):
        raise UsageError(f"tp_ranks {tp_ranks!r}: expected auto, one or all")
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, sp=bool(sp), microbatches=grad_accum, sharding=sharding,
                        recompute=recompute, interleave=interleave, ep=ep, clip_grad=clip_grad, cp=cp,
                        cp_comm_type=cp_comm_type, fidelity=fidelity, vp=vp or None)
    gpu = plan.place(system).group(0, 0)[0]  # the first dp x cp x tp x pp GPUs in rank order, else a WorkloadError
    peak = _core.gpu_spec(system._core, gpu)["peak_flops"].get(precision)
    if peak is None:
        raise UsageError(f"precision {precision!r}: the GPU has no peak for it")
    # check_memory=False: the step of a plan that does not fit its GPUs is still simulated (memory reported)
    tr = estimate.training_step(spec.graph(micro_batch, seq, dtype=precision), system, plan, precision=precision,
                                check_memory=bool(check_memory), replicas=None if replicas == "auto" else replicas,
                                tp_ranks=None if tp_ranks == "auto" else tp_ranks)
    return {"tokens_per_gpu": tr.tokens_per_gpu_s, "step": tr.step_ms, "mfu": tr.mfu(peak),
            "memory": tr.memory["peak_gib"]}

"""The GPU execution target (issue 27): kernels with launch costs on an SM array, lowered through one target
interface, measured by gpu.gemm / gpu.stream / model.inference, calibrated on configs/machines/h100.measured.yaml.

The closed forms of the kernel models themselves are checked in tests/cpp/test_gpu.cpp; these tests check what
Python adds: the lowering, the launch modes, the measurement functions, the memory check and the presets.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from kernbench import _core
from kernbench.calibrate import REGISTRY, Context
from kernbench.system import System, config_path
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, get_model, handbuilt, lower
from kernbench.workloads.targets import GpuTarget, SipTarget, target_for

H100 = "machines/h100-8x-nvswitch.yaml"
PRESETS = ["h100-8x-nvswitch", "h200-8x-nvswitch", "a100-8x-nvswitch", "l40s-8x-pcie"]


def _fn(name: str, config: str = H100, **params):
    return REGISTRY.get(name).fn(Context(config=config, sets={}), **params)


def test_the_machine_names_its_target():
    """pe.target: the NVIDIA presets say gpu (through nvidia-gpu.yaml), the default machine sip; the lowering
    picks its target from it, and an unknown value is a config error naming the key and the choices."""
    assert System.load(H100).target == "gpu"
    assert System.load().target == "sip"
    assert isinstance(target_for(System.load(H100)), GpuTarget)
    assert isinstance(target_for(System.load()), SipTarget)
    with pytest.raises(_core.ConfigError, match=r"pe.target.*sip, gpu"):
        System.load(set={"pe.target": "tpu"})


def test_the_gpu_target_charges_no_pe_cpu_dispatch():
    """A LLaMA layer lowered on the H100 box is kernels only: no PE_CPU dispatch, no DMA channel, no scratch;
    every op a launch or a kernel, the SM array busy for the sum of the kernels' modelled durations."""
    s = System.load(H100)
    lo = lower(handbuilt.llama_graph(1, 64, layers=1, embed=False, head=False), s, ParallelPlan(tp=1))
    res = lo.run()
    assert res._core.op_counts == {"kernel": lo.counts["kernel"], "launch": lo.counts["kernel"]}
    eng = res.engines_df().set_index("engine")
    for idle in ("pe_cpu", "dma", "gemm", "vector"):
        assert eng.loc[idle, "grants"] == 0 and eng.loc[idle, "busy_ps"] == 0
    t = res._core.ops()
    kernels = [o for o in range(len(t["end_ps"])) if o not in lo.launches]
    assert eng.loc["sm", "busy_ps"] == sum(int(t["end_ps"][o] - t["start_ps"][o]) for o in kernels)
    assert eng.loc["launch", "grants"] == len(lo.launches) == len(kernels)


def test_decode_replays_graphs_and_prefill_launches_from_the_host():
    """estimate.inference launches prefill kernels from the host (gpu.launch_host each) and decode kernels as a
    CUDA graph replay (gpu.launch_graph each), as vLLM does; the launch ops carry those costs."""
    s = System.load(H100)
    sp = _core.gpu_spec(s._core, "gpu0")
    for launch, key in (("host", "launch_host_ps"), ("graph", "launch_graph_ps")):
        lo = lower(handbuilt.llama_graph(1, 1, 65, layers=1, embed=False, head=False), s, ParallelPlan(tp=1),
                   launch=launch)
        res = lo.run()
        t = res._core.ops()
        lengths = {int(t["end_ps"][o] - t["start_ps"][o]) for o in lo.launches}
        assert lengths == {int(sp[key])}
    with pytest.raises(WorkloadError, match="launch 'lazy'"):
        GpuTarget("lazy")


def test_host_bound_layers_pace_at_their_launches():
    """When a layer's launches take longer than its kernels (a tiny decode step launched eagerly), the
    estimate's layer time is the host's: at least the layer's launches end to end on one GPU."""
    s = System.load(H100, set={"gpu.launch_host": "50 us"})
    p = estimate.simulate(handbuilt.llama_graph(1, 1, 65, layers=4, embed=False, head=False), s,
                          ParallelPlan(tp=1), launch="host")
    kernels_per_layer = p.lowered.counts["kernel"] // 1  # one layer simulated (the block reused)
    assert p.layer_ps >= 50e6 * 9  # norm, qkv, attention, o, add, norm, gate/up, act, mul, down, add (fused qkv...)
    assert kernels_per_layer >= 9


def test_gpu_gemm_is_host_bound_at_1024_and_compute_bound_at_8192():
    """gpu.gemm times calls back to back: at 1024^3 the kernel is shorter than its host launch, so a call takes
    gpu.launch_host; at 8192^3 it takes the kernel's own time, within the tensor peak at the sustained clock."""
    s = System.load(H100)
    sp = _core.gpu_spec(s._core, "gpu0")
    small = _fn("gpu.gemm", m=1024, n=1024, k=1024, precision="bf16")
    assert small["time"] == pytest.approx(sp["launch_host_ps"] / 1e6, rel=1e-9)
    big = _fn("gpu.gemm", m=8192, n=8192, k=8192, precision="bf16")
    plan = _core.gpu_gemm(s._core, "gpu0", 8192, 8192, 8192, "bf16")
    assert big["time"] == pytest.approx(plan["duration_ps"] / 1e6, rel=1e-9)
    assert big["tflops"] < sp["peak_flops"]["bf16"] * sp["sustained_hz"] / sp["clock_hz"] / 1e12
    assert plan["bound"] == "compute" and plan["waves"] == 16  # 2048 CTAs of 128 x 256 over 132 SMs


def test_gpu_stream_counts_bytes_as_babelstream():
    """gpu.stream: copy/mul move 2 arrays, add/triad 3, dot 2; at 2^25 doubles the rate is within the kernel
    latency of the configured achievable rate; bad kernels and precisions are refused by name."""
    s = System.load(H100)
    rate = _core.gpu_spec(s._core, "gpu0")["stream_bytes_per_s"] / 1e12
    got = {k: _fn("gpu.stream", kernel=k, elements=1 << 25) for k in ("copy", "mul", "add", "triad", "dot")}
    for k, arrays in (("copy", 2), ("mul", 2), ("add", 3), ("triad", 3), ("dot", 2)):
        assert got[k]["bandwidth"] == pytest.approx(arrays * (1 << 25) * 8 / (got[k]["time"] * 1e-6) / 1e12)
        assert 0.95 * rate < got[k]["bandwidth"] < rate
    assert got["triad"]["bandwidth"] > got["copy"]["bandwidth"]  # more bytes per fixed latency
    with pytest.raises(ValueError, match="kernel 'scale'"):
        _fn("gpu.stream", kernel="scale")
    with pytest.raises(ValueError, match="precision 'fp16'"):
        _fn("gpu.stream", precision="fp16")


def test_model_inference_metrics_follow_vllm_benchmark_latency():
    """model.inference: latency = TTFT + (output - 1) decode steps; throughput = batch x output / latency over
    all GPUs, per GPU divided by tp x pp; TP 8 of LLaMA-3-70B runs (and fits) on the H100 box."""
    r = _fn("model.inference", model="llama3-8b", tp=1, batch=8, prompt=32, output=16)
    assert r["latency"] == pytest.approx(r["ttft"] + 15 * r["tpot"], rel=1e-9)
    assert r["throughput"] == pytest.approx(8 * 16 / (r["latency"] * 1e-3))
    big = _fn("model.inference", model="llama3-70b", tp=8, batch=8, prompt=32, output=8)
    assert big["throughput_per_gpu"] == pytest.approx(big["throughput"] / 8)
    assert big["tpot"] > r["tpot"]  # 70B over 8 GPUs reads more weights per GPU than 8B on one, plus all-reduces


def test_a_plan_that_does_not_fit_is_refused_with_its_shortfall():
    """LLaMA-2-70B in BF16 on one 80 GB H100 does not fit: the error names the parts and the shortfall; at tp 8
    it fits."""
    with pytest.raises(WorkloadError, match=r"does not fit in gpu0's memory: weights 1[23]\d\.\d\d GiB.*GiB short"):
        _fn("model.inference", model="llama2-70b", tp=1, batch=1, prompt=32, output=2)
    assert _fn("model.inference", model="llama2-70b", tp=8, batch=1, prompt=32, output=2)["latency"] > 0


@pytest.mark.parametrize("name", PRESETS)
def test_every_nvidia_preset_runs_the_kernels_and_a_model(name):
    """Every NVIDIA preset runs the GEMM, stream and attention kernels and LLaMA-3-8B as shipped; each gets its
    mechanism parameters from the shared file and adds only datasheet facts (sms, L2) in its own gpu: section."""
    cfg = f"machines/{name}.yaml"
    doc = yaml.safe_load(config_path(cfg).read_text())
    assert doc["include"] == "nvidia-gpu.yaml"
    assert set(doc["gpu"]) <= {"sms", "l2_bytes_per_clock"}
    assert _fn("gpu.gemm", config=cfg, m=4096, n=4096, k=4096)["tflops"] > 0
    assert _fn("gpu.stream", config=cfg)["bandwidth"] > 0
    r = _fn("model.inference", config=cfg, model="llama3-8b", tp=1, batch=1, prompt=32, output=4)
    assert r["ttft"] > 0 and r["tpot"] > 0


def test_h200_is_the_h100_with_more_memory_bandwidth():
    """The H200 preset differs from the H100's only in memory (4.8 TB/s, 141 GB): compute-bound GEMMs take the
    same time, the stream and decode scale with the bandwidth."""
    h100 = {"gemm": _fn("gpu.gemm", m=8192, n=8192, k=8192)["tflops"], "stream": _fn("gpu.stream")["bandwidth"]}
    h200 = {"gemm": _fn("gpu.gemm", config="machines/h200-8x-nvswitch.yaml", m=8192, n=8192, k=8192)["tflops"],
            "stream": _fn("gpu.stream", config="machines/h200-8x-nvswitch.yaml")["bandwidth"]}
    assert h200["gemm"] == pytest.approx(h100["gemm"], rel=1e-9)
    assert h200["stream"] / h100["stream"] == pytest.approx(4.8 / 3.35, rel=0.02)


def test_calibrate_check_on_the_h100_data_passes():
    """The CI command: every row of configs/machines/h100.measured.yaml within its group's 10 % at the committed
    mechanism parameters (exit 0)."""
    cfg = str(config_path(H100))
    data = str(config_path("machines/h100.measured.yaml"))
    r = subprocess.run([sys.executable, "-m", "kernbench", "calibrate", "--check", cfg, "--config", cfg, "--data",
                        data], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("error") >= 13


def test_fp8_and_tf32_gemms_run_at_their_own_peaks():
    """FP8 doubles the BF16 tensor rate on an H100, TF32 halves it: a large GEMM's time follows (compute-bound),
    and the A100, which has no FP8, refuses it naming the key."""
    bf16 = _fn("gpu.gemm", m=8192, n=8192, k=8192, precision="bf16")["time"]
    fp8 = _fn("gpu.gemm", m=8192, n=8192, k=8192, precision="fp8")["time"]
    tf32 = _fn("gpu.gemm", m=8192, n=8192, k=8192, precision="tf32")["time"]
    assert 0.45 < fp8 / bf16 < 0.6 and 1.9 < tf32 / bf16 < 2.1
    with pytest.raises(_core.ConfigError, match="pe.gemm.fp8 is 0"):
        _fn("gpu.gemm", config="machines/a100-8x-nvswitch.yaml", m=1024, n=1024, k=1024, precision="fp8")


def test_the_k200_host_is_a_target_of_the_same_interface():
    """The K200 host's lowering is the third target: target_for gives it for a machine with a k200: section,
    it lowers op kinds by the same method names (gemm, vector, copy, attention), kernbench.k200.lower_ops is
    it, and lower() on a K200 machine says to run the op list as a K200 stream instead."""
    from kernbench import k200
    from kernbench.k200_lowering import K200Target

    s = k200.load_system()
    t = target_for(s)
    assert isinstance(t, K200Target) and t.name == "k200"
    for method in ("gemm", "vector", "copy", "attention"):
        assert callable(getattr(t, method))
    g = handbuilt.llama_graph(1, 16, layers=1, embed=False, head=False)
    steps = k200.lower_ops(g.ops, precision="fp16")
    assert steps == K200Target(precision="fp16").lower(g.ops)
    assert [st["name"] for st in steps if st["name"].endswith((".scores", ".softmax", ".context"))] == [
        "model.layers.0.self_attn.sdpa.scores", "model.layers.0.self_attn.sdpa.softmax",
        "model.layers.0.self_attn.sdpa.context"]
    with pytest.raises(WorkloadError, match=r"kernbench.k200.run_ops\(system, graph.ops\)"):
        lower(g, s)


def test_a_gpu_trace_shows_the_launches_and_the_sms_on_tracks_of_their_own(tmp_path):
    """In the Chrome trace of a GPU-target run every GPU has a `launch`, an `sm` and an `nccl` track (tp 2: the
    tensor-parallel all-reduces); every compute kernel event sits on the `sm` one and every NCCL kernel on the
    `nccl` one, its stream beside the compute stream (the launches run ahead of both on theirs)."""
    import json

    s = System.load(H100)
    lo = lower(handbuilt.llama_graph(1, 64, layers=1, embed=False, head=False), s, ParallelPlan(tp=2))
    res = lo.run()
    res.to_chrome_trace(tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    gpus = {e["pid"] for e in kernels}
    assert len(gpus) == 2  # tp 2: two GPUs ran kernels
    for pid in gpus:
        assert {"launch", "sm", "nccl"} <= {n for (p, _), n in names.items() if p == pid}
    nccl = [e for e in kernels if e["name"].startswith("nccl ")]
    assert nccl and all(names[(e["pid"], e["tid"])] == "nccl" for e in nccl)
    assert all(names[(e["pid"], e["tid"])] == "sm" for e in kernels if e not in nccl)
    launches = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "launch"]
    assert launches and all(names[(e["pid"], e["tid"])] == "launch" for e in launches)

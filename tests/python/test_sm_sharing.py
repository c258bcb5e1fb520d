"""A collective's kernels hold SMs (one CTA per NCCL channel) for as long as the collective runs on their GPU, and
a compute-bound kernel started meanwhile runs its CTAs in the waves the remaining SMs give
(``ceil(ctas / (sms - held))`` over ``ceil(ctas / sms)``): the mechanism by which communication overlapped
with compute slows the compute (docs/gpu-target.md "SMs shared with collectives")."""

from __future__ import annotations

import math

import pytest

import kernbench
from kernbench import _core, ccl
from kernbench._core import UsageError

BOX = "machines/h100-8x-nvswitch.yaml"


@pytest.fixture()
def box():
    return kernbench.System.load(BOX)


def gemm_plan(system, pe, m=4096, n=4096, k=4096):
    return _core.gpu_gemm(system._core, pe, m, n, k, "bf16")


def kernel_times(res, op) -> tuple[int, int]:
    t = res._core.ops()
    return int(t["start_ps"][int(op)]), int(t["end_ps"][int(op)])


def test_a_gemm_during_an_all_gather_runs_the_waves_of_the_sms_left(box):
    """GPU 0's GEMM (512 CTAs priced on 132 SMs: 4 waves) starts while an all-gather over four GPUs holds one
    SM per channel of it: its duration is the plan's x ceil(512 / (132 - channels)) / 4, exactly; the same GEMM
    after the all-gather, and one on a GPU outside it, take the plan's duration."""
    pes = box.pes()
    size = 1 << 28
    channels = ccl.all_gather(kernbench.System.load(BOX), size, algorithm="auto", pes=pes[:4]).channels
    sms = _core.gpu_spec(box._core, pes[0])["sms"]
    plan = gemm_plan(box, pes[0])
    assert plan["bound"] == "compute" and plan["ctas"] == 512 and sms == 132
    prog = kernbench.Program(box)
    ag = prog.all_gather(pes[:4], size, algorithm="auto")
    # launched after the all-gather's kernel (the host issues GPU 0's launches in program order)
    during = prog.kernel(pes[0], plan["duration_ps"], launch_ps=20_000_000, ctas=plan["ctas"], sms=sms,
                         name="during")
    after = prog.kernel(pes[0], plan["duration_ps"], ctas=plan["ctas"], sms=sms, deps=[ag], name="after")
    elsewhere = prog.kernel(pes[5], plan["duration_ps"], ctas=plan["ctas"], sms=sms, name="elsewhere")
    res = prog.run()
    a, b = kernel_times(res, during)
    ag_end = max(int(res._core.ops()["end_ps"][o]) for o in ag.ops)
    assert b <= ag_end  # it ran inside the collective
    waves = math.ceil(plan["ctas"] / (sms - channels))
    assert b - a == plan["duration_ps"] * waves // 4 > plan["duration_ps"]
    a, b = kernel_times(res, after)
    assert a >= ag_end and b - a == plan["duration_ps"]
    a, b = kernel_times(res, elsewhere)
    assert b - a == plan["duration_ps"]


def test_memory_bound_kernels_do_not_stretch(box):
    """A kernel without CTAs (a memory-bound stream: its time is HBM's, not the SMs') keeps its duration while a
    collective holds SMs of its GPU."""
    pes = box.pes()
    prog = kernbench.Program(box)
    prog.all_reduce(pes, 1 << 28, algorithm="auto")
    k = prog.kernel(pes[0], 50_000_000, launch_ps=20_000_000, name="stream")
    a, b = kernel_times(prog.run(), k)
    assert b - a == 50_000_000


def test_training_compute_overlapped_with_fsdp_collectives_slows_by_the_waves():
    """An FSDP step on the H100 box: the forward and backward GEMMs that overlap the gathers and reduce-scatters
    run on fewer SMs, so the step is longer than with the GEMMs priced on all 132 (the same step, its kernels given
    no CTAs), and the lowered GEMMs carry their CTAs."""
    from kernbench.workloads import ParallelPlan, estimate, handbuilt

    dims = {"hidden": 2048, "heads": 16, "kv_heads": 16, "head_dim": 128, "intermediate": 8192, "vocab": 4096,
            "layers": 4}
    g = handbuilt.decoder_graph(4, 1024, dims=dims, embed=False, head=False, name="fsdp")
    step = estimate.training_step(g, kernbench.System.load(BOX), ParallelPlan(dp=8, sharding="fsdp"), reuse=False)
    from kernbench.workloads import targets

    orig = targets.GpuTarget._kernel

    def no_ctas(self, L, pe, gpu, cost, *a):  # cost: (duration, bytes, CTAs when compute-bound)
        return orig(self, L, pe, gpu, (cost[0], cost[1], 0), *a)

    targets.GpuTarget._kernel = no_ctas
    try:
        free = estimate.training_step(g, kernbench.System.load(BOX), ParallelPlan(dp=8, sharding="fsdp"),
                                      reuse=False)
    finally:
        targets.GpuTarget._kernel = orig
    assert step.step_ms > free.step_ms * 1.01
    assert step.counts == free.counts


def test_kernel_ctas_and_sms_come_together(box):
    """ctas without the SMs they were priced on (or the reverse) is refused naming both."""
    prog = kernbench.Program(box)
    with pytest.raises(UsageError, match=r"kernel 'k': ctas 8 and sms 0 must be both 0 or both > 0"):
        prog.kernel(box.pes()[0], 1000, ctas=8, name="k")
    with pytest.raises(UsageError, match=r"Program.kernel: sms"):
        prog.kernel(box.pes()[0], 1000, ctas=8, sms=-1, name="k")

"""The NCCL model on the GPU presets (src/ccl/nccl.hpp, docs/ccl.md "On a GPU machine"): a 1 GiB all-reduce runs
with the preset's own scratch and verifies, the tuning table and the auto choice agree, the measurement function
follows nccl-tests' conventions, and a collective appended after a kernel waits for it."""

from __future__ import annotations

import pytest

from kernbench import _core, ccl
from kernbench.calibrate.registry import REGISTRY
from kernbench.system import System

H100 = "machines/h100-8x-nvswitch.yaml"


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


@pytest.mark.parametrize("algorithm", ["ring", "nvls", "auto"])
def test_one_gib_all_reduce_runs_with_the_presets_own_scratch_and_verifies(h100, algorithm):
    """1 GiB per GPU, buffer in HBM, the preset's 50 MB scratch untouched: it runs, steps through NCCL's buffers,
    and the symbolic check passes with the channels and steps."""
    r = ccl.all_reduce(h100, 1 << 30, algorithm=algorithm, buffer="hbm")
    assert r.model == "nccl" and r.verified
    assert 0 < r.step_bytes < 50_000_000
    assert r.protocol == "simple"
    busbw = (1 << 30) / (r.latency_ps * 1e-12) * 2 * 7 / 8
    assert busbw < 2 * 7 / 8 * 450e9  # never above the GPU's NVLink rate, by 2(n-1)/n


def test_auto_takes_the_smallest_time_of_the_tuning_table(h100):
    """The table weighs ring and tree with LL, LL128 and Simple, and nvls (Simple) on the reducing NVSwitches;
    auto runs the row of the smallest predicted time, at every size."""
    for size in (8, 1 << 16, 1 << 20, 1 << 24, 1 << 28):
        table = _core.nccl_tune(h100._core, "all_reduce", size)
        assert {(r["algorithm"], r["protocol"]) for r in table} == {
            (a, p) for a in ("ring", "tree") for p in ("ll", "ll128", "simple")} | {("nvls", "simple")}
        best = min(table, key=lambda r: r["time_ps"])
        r = ccl.all_reduce(h100, size, algorithm="auto", buffer="hbm", verify="off")
        assert (r.algorithm, r.protocol) == (
            "double_binary_tree" if best["algorithm"] == "tree" else best["algorithm"], best["protocol"])
        assert r.predicted_ps == best["time_ps"]
    # all_gather: ring only (nvls and tree reduce), as in NCCL's table for these collectives
    assert {r["algorithm"] for r in _core.nccl_tune(h100._core, "all_gather", 1 << 20)} == {"ring"}


def test_protocol_and_channels_can_be_asked_for(h100):
    """An explicit protocol and channel count are honoured; LL's format doubles the bytes on the wire."""
    ll = ccl.all_reduce(h100, 1 << 20, algorithm="ring", protocol="ll", channels=4, buffer="hbm")
    simple = ccl.all_reduce(h100, 1 << 20, algorithm="ring", protocol="simple", channels=4, buffer="hbm")
    assert (ll.protocol, ll.channels, simple.protocol) == ("ll", 4, "simple")
    assert ll.link_bytes["nvlink"] == pytest.approx(2 * simple.link_bytes["nvlink"], rel=0.02)
    with pytest.raises(_core.UsageError, match="unknown protocol 'll64'"):
        ccl.all_reduce(h100, 1 << 20, protocol="ll64")
    sip = System.load()
    with pytest.raises(_core.UsageError, match="protocol=ll is for GPU machines"):
        ccl.all_reduce(sip, 1 << 10, protocol="ll")


def test_gpu_nccl_measurement_follows_nccl_tests_conventions():
    """gpu.nccl: busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather; time = size / algbw; bad
    collectives and rank counts are refused naming what is allowed."""
    fn = REGISTRY.get("gpu.nccl")

    class Ctx:
        def load(self):
            return System.load(H100)

    ar = fn.fn(Ctx(), collective="all_reduce", bytes=1 << 20, ranks=4, algorithm="ring", threads=1)
    assert ar["busbw"] == pytest.approx(ar["algbw"] * 2 * 3 / 4)
    assert ar["time"] == pytest.approx((1 << 20) / (ar["algbw"] * 1e9) * 1e6)
    ag = fn.fn(Ctx(), collective="allgather", bytes=1 << 20, ranks=8)
    assert ag["busbw"] == pytest.approx(ag["algbw"] * 7 / 8)
    # One host thread launching 4 GPUs' kernels is slower at 8 B than one thread per GPU (host-bound).
    one = fn.fn(Ctx(), collective="all_reduce", bytes=8, ranks=4, algorithm="ring", threads=1)["time"]
    each = fn.fn(Ctx(), collective="all_reduce", bytes=8, ranks=4, algorithm="ring", threads=0)["time"]
    assert one > each
    a2a = fn.fn(Ctx(), collective="alltoall", bytes=1 << 20, ranks=8)
    assert a2a["busbw"] == pytest.approx(a2a["algbw"] * 7 / 8)
    with pytest.raises(_core.UsageError, match="modelled are all_reduce"):
        fn.fn(Ctx(), collective="sendrecv")
    with pytest.raises(_core.UsageError, match="ranks = 9: the machine has 8 GPUs"):
        fn.fn(Ctx(), ranks=9)


def test_a_collective_appended_after_a_kernel_waits_for_it(h100):
    """prog.all_reduce(deps=[k]) on a GPU: the collective's kernels start after kernel k ends (their launches may
    run ahead), on every rank."""
    prog = h100.program("overlap")
    pes = h100.pes()
    k = prog.kernel(pes[0], 50_000_000, launch_ps=1_000_000, name="gemm")  # 50 us on gpu0
    h = prog.all_reduce(pes, 1 << 20, algorithm="ring", buffer="hbm", deps=[k])
    df = prog.run().ops_df()
    kernel_end = df.loc[k, "end_ps"]
    mine = df.loc[list(h.ops)]
    starts = mine[mine["kind"] == "kernel"]["start_ps"]
    assert len(starts) == len(pes)  # one collective kernel per rank
    assert starts.min() >= kernel_end
    launches = mine[mine["kind"] == "launch"]["start_ps"]
    assert launches.min() < kernel_end  # the host ran ahead

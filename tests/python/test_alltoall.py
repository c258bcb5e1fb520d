"""alltoall (src/ccl/algorithms/pairwise.cpp): NCCL's grouped send/recv on the GPU presets, the same pattern on any other
machine; every block lands where it belongs (the symbolic check tracks which slice of which rank each cell
holds), bytes are conserved, and the torch.distributed and Program fronts reach it."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench import _core, ccl
from kernbench.ccl import dist
from kernbench.system import System

H100 = "machines/h100-8x-nvswitch.yaml"


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


def test_alltoall_on_the_h100_box_takes_nccls_p2p_protocol_by_size_and_conserves_bytes(h100):
    """LL while a peer's bytes fit channels x 16 KiB, Simple above; each payload byte crosses two NVLinks (GPU to
    switch, switch to GPU), at the wire's efficiency; nothing is priced by the tuner."""
    n = 8
    small = ccl.alltoall(h100, 64 * 1024)  # 8 KiB a peer
    big = ccl.alltoall(h100, 64 << 20)     # 8 MiB a peer
    assert (small.algorithm, small.protocol, small.verified) == ("pairwise", "ll", True)
    assert (big.algorithm, big.protocol, big.verified) == ("pairwise", "simple", True)
    assert small.predicted_ps == 0 and big.predicted_ps == 0
    eff = _core.nccl_config(h100._core)["link_efficiency"]
    payload = n * (n - 1) * (64 << 20) // n
    # (plus, back over the same links, a few bytes of slot credit per segment: pe.ipcq.credit fabric)
    assert 2 * payload / eff <= big.link_bytes["nvlink"] <= 2 * payload / eff * (1 + 1e-3)
    # busbw by nccl-tests' convention never exceeds the GPU's NVLink rate (18 x 25 GB/s a direction).
    busbw = (64 << 20) / (big.latency_ps * 1e-12) * (n - 1) / n
    assert busbw < 450e9
    # Larger messages amortise the fixed cost: busbw grows with size.
    assert busbw > (64 * 1024) / (small.latency_ps * 1e-12) * (n - 1) / n


def test_alltoall_verifies_on_the_sip_machine_and_moves_each_block_once():
    """The default SIP machine (routers, no switch): 16 ranks, sram buffers; (n-1) blocks of bytes/n per rank are
    sent, none twice."""
    s = System.load()
    pes = s.pes()[:16]
    r = ccl.alltoall(s, 16 * 1024, pes=pes, buffer="sram", verify="on")
    assert r.model == "sip" and r.verified and r.algorithm == "pairwise"
    assert r.run.op_bytes["send"] == 16 * 15 * 1024
    with pytest.raises(_core.UsageError, match="ring has no alltoall"):
        ccl.collective(s, "alltoall", 4096, algorithm="ring", pes=pes)
    # Out of place: the receive buffer needs the scratch too (2 x 96 KiB in a 128 KiB scratch).
    small = System.load(set={"pe.scratch": "128 KiB"})
    ccl.alltoall(small, 64 * 1024, pes=pes, buffer="sram")
    with pytest.raises(_core.CapacityError, match="buffer=sram needs 192 KiB per PE but the scratch is 128 KiB"):
        ccl.alltoall(small, 96 * 1024, pes=pes, buffer="sram")


def test_dist_and_program_fronts_run_the_same_alltoall():
    """dist.all_to_all_single and prog.alltoall build the collective kernbench.ccl runs."""
    direct = ccl.alltoall(System.load(H100), 1 << 20)  # each front on a fresh machine, from time 0
    dist.init_process_group(system=System.load(H100))
    try:
        via_dist = dist.all_to_all_single(np.zeros(1 << 18, np.float32), np.zeros(1 << 18, np.float32))
        assert via_dist.latency_ps == direct.latency_ps
        with pytest.raises(_core.UsageError, match="only equal splits"):
            dist.all_to_all_single(None, np.zeros(8), output_split_sizes=[1] * 8)
        with pytest.raises(_core.UsageError, match="one equal-sized input tensor per rank"):
            dist.all_to_all(None, [np.zeros(4)] * 3)
    finally:
        dist.destroy_process_group()
    prog = System.load(H100).program("a2a")
    prog.alltoall(None, 1 << 20)
    assert prog.run().makespan_ns * 1e3 == pytest.approx(direct.latency_ps, abs=1)

"""Collectives from Python: results, errors, the dist front, IPCQ modes."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
from kernbench import ccl
from kernbench.ccl import dist

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 2}  # 32 PEs


def small():
    return kernbench.System.load(set=SMALL)


@pytest.mark.parametrize("algorithm", [a["name"] for a in ccl.algorithms() if "all_reduce" in a["collectives"]])
def test_every_algorithm_all_reduces_and_is_verified(algorithm):
    """Every registered all-reduce algorithm completes with verified data on 32 ranks, its phases start in order
    within the run, each rank's buffer crosses its PE port both ways and algbw is bytes over latency (nvls refuses a
    machine without a reducing switch, nvls_tree one without boxes)."""
    if algorithm == "nvls":  # a generated machine has no switch (nvls: tests/python/test_nvls.py)
        with pytest.raises(kernbench.KernbenchError, match="nvls needs an in-network reducing switch"):
            ccl.all_reduce(small(), 64 * 1024, algorithm=algorithm, verify="on")
        return
    if algorithm == "nvls_tree":  # nor a NIC: one box (NVLS across boxes: tests/python/test_cluster_nvls.py)
        with pytest.raises(kernbench.KernbenchError, match="nvls_tree is NCCL's NVLS across boxes"):
            ccl.all_reduce(small(), 64 * 1024, algorithm=algorithm, verify="on")
        return
    r = ccl.all_reduce(small(), 64 * 1024, algorithm=algorithm, verify="on")
    assert r.verified and r.ranks == 32 and r.latency_ps > 0
    # Phases are ordered by start and lie inside the run.
    starts = [r.phase_windows[p][0] for p in r.phases]
    assert starts == sorted(starts)
    assert all(0 <= r.phase_windows[p][0] <= r.phase_windows[p][1] <= r.latency_ps for p in r.phases)
    # Every rank's buffer crosses its PE port at least once, out and in.
    assert r.link_bytes["pe"] >= 2 * 32 * 64 * 1024
    assert r.summary()["algbw_GBps"] == pytest.approx(64 * 1024 / (r.latency_ps * 1e-12) / 1e9)


def test_hierarchical_phases_and_pcie_traffic_only_from_centre_cubes():
    """lrab with an inter-SIP ring runs its five phases in pattern order, ends with the broadcast, and puts on PCIe
    exactly the centre lanes' ring halves plus one 64 B credit per message."""
    system = kernbench.System.load(set={"system.sips.w": 2, "system.sips.h": 1, "system.cubes.w": 3,
                                        "system.cubes.h": 1, "system.pes_per_cube": 2})
    r = ccl.all_reduce(system, 48 * 1024, algorithm="lrab", inter="ring")
    # Phases overlap (a piece moves on as soon as its data is ready) but start in order of the pattern.
    assert set(r.phases) == {"intra-reduce", "centre-reduce-scatter", "inter-sip", "centre-all-gather", "broadcast"}
    assert r.phases[0] == "intra-reduce"
    w = r.phase_windows
    assert w["intra-reduce"][0] < w["centre-reduce-scatter"][0] < w["inter-sip"][0] < w["centre-all-gather"][0]
    assert w["broadcast"][1] == r.latency_ps
    # Across 2 SIPs, each of the 2 centre lanes moves its half of the buffer in a
    # 2-rank ring: reduce-scatter and all-gather, 1/2 of the half each way.
    # Each of those 8 messages fits one 32 KiB slot; its slot's credit (64 B) comes back over PCIe.
    assert r.link_bytes["pcie"] == 2 * 2 * 2 * (48 * 1024 // 2 // 2) + 8 * 64


def test_errors_name_what_is_wrong():
    """Bad collective inputs (an unknown algorithm, a non-power-of-two rank count for halving-doubling, an SRAM
    buffer too large, a PE that is not a name or not a PE) each raise the kernbench error that names the problem."""
    with pytest.raises(kernbench.UsageError, match=r"unknown collective algorithm 'nope' \(known: ring"):
        ccl.all_reduce(small(), 1024, algorithm="nope")
    with pytest.raises(kernbench.UsageError, match="power-of-two number of ranks, got 24"):
        ccl.all_reduce(small(), 1024, algorithm="halving_doubling",
                       pes=[f"sip0.cube{c}.pe{i}" for c in range(3) for i in range(8)])
    with pytest.raises(kernbench.CapacityError, match="buffer=sram needs 2 MiB per PE"):
        ccl.all_reduce(small(), 2 << 20, algorithm="ring", buffer="sram")
    with pytest.raises(kernbench.UsageError, match="collective: pes\\[1\\]"):
        ccl.all_reduce(small(), 1024, pes=["sip0.cube0.pe0", 10 ** 9])
    with pytest.raises(kernbench.KernbenchError, match="sip0.cube0.r0c0 is not a PE"):
        ccl.all_reduce(small(), 1024, pes=["sip0.cube0.pe0", "sip0.cube0.r0c0"])


def test_reduce_scatter_all_gather_broadcast():
    """reduce_scatter, all_gather (torus2d) and broadcast (double binary tree by default, from a non-zero root) run
    with their data verified."""
    for what in (ccl.reduce_scatter, ccl.all_gather):
        assert what(small(), 32 * 1024, algorithm="torus2d", verify="on").verified
    r = ccl.broadcast(small(), 32 * 1024, root=3, verify="on")
    assert r.verified and r.algorithm == "double_binary_tree"


def test_dist_front_runs_on_a_world_clock():
    """The torch.distributed-like front keeps one world clock: after each collective elapsed_us() is where the fabric
    went quiet, a barrier adds its latency, only ReduceOp.SUM is accepted, and a call after destroy_process_group()
    asks for init_process_group."""
    world = small()
    dist.init_process_group(system=world)
    try:
        assert dist.is_initialized() and dist.get_world_size() == 32
        a = dist.all_reduce(np.zeros(16 * 1024, np.float32), algorithm="lrab")
        t1 = dist.elapsed_us()
        # The world clock is where the fabric went quiet: the last ops' slot
        # credits (pe.ipcq.credit: fabric) land a little after the collective ends.
        assert t1 * 1e6 == pytest.approx(float(world.transfers()["end_ps"].max()))
        assert a.latency_us <= t1 < a.latency_us + 0.1
        b = dist.barrier()
        assert a.bytes_per_pe == 64 * 1024 and b.bytes_per_pe == 1
        assert t1 + b.latency_us <= dist.elapsed_us() < t1 + b.latency_us + 0.1
        assert dist.elapsed_us() * 1e6 == pytest.approx(float(world.transfers()["end_ps"].max()))
        with pytest.raises(kernbench.UsageError, match="only ReduceOp.SUM"):
            dist.all_reduce(1024, op="max")
    finally:
        dist.destroy_process_group()
    with pytest.raises(kernbench.UsageError, match="init_process_group"):
        dist.all_reduce(1024)


def test_ipcq_modes_from_python():
    """recv_no_consume skips the slot reads; consume pays them; both see the same send."""
    times = {}
    for mode in ("consume", "no_consume", "reduce"):
        system = small()
        prog = system.program(mode)
        r = prog.recv("sip0.cube1.pe0", "sip0.cube0.pe0", 7, mode=mode)
        s = prog.send("sip0.cube0.pe0", "sip0.cube1.pe0", 256 * 1024, 7)
        res = prog.run()
        ops = res.ops()
        times[mode] = (int(ops["end_ps"][r]), int(ops["end_ps"][s]))
    assert times["no_consume"][0] == times["no_consume"][1]        # done when the data is there
    assert times["consume"][0] > times["no_consume"][0]           # slot reads cost time
    with pytest.raises(kernbench.ConfigError, match="unknown recv mode 'peek'"):
        small().program("x").recv("sip0.cube0.pe1", "sip0.cube0.pe0", 1, mode="peek")

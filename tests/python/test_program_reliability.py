"""What the Program builder and the executor refuse (issue 22, round 2), from Python.

Each case asserts the exact error class and message fragments naming the op, the node and the
limit; the C++ side is tests/cpp/test_program_reliability.cpp."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import kernbench
from kernbench._core import CapacityError, DeadlockError, UsageError

BASE_SYSTEM = Path(__file__).resolve().parents[1] / "bad_inputs" / "configs" / "_base_system.yaml"
PE0, PE1 = "sip0.cube0.pe0", "sip0.cube0.pe1"
HBM0, HBM1 = "sip0.cube0.hbm_ctrl.pe0", "sip0.cube0.hbm_ctrl.pe1"
ROUTER = "sip0.cube0.r0c0"
GIB, MIB, KIB = 1 << 30, 1 << 20, 1 << 10


def _program(name: str = "p", **kw):
    return kernbench.System.load(BASE_SYSTEM, **kw).program(name)


def _raises(error, call, *words):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# ---- 1. capacity --------------------------------------------------------------------------------


def test_composite_load_larger_than_scratch():
    """A composite whose double-buffered load tiles (2 x 1 GiB) exceed the PE's scratch is a CapacityError naming the
    op, its PE, the buffers' size and the pe.scratch budget."""
    p = _program("big tiles")
    p.composite(PE0, 4, [(HBM0, PE0, GIB)], 1e3, name="huge load")
    _raises(CapacityError, p.run, "op 0 'huge load' (composite) on sip0.cube0.pe0",
            "2 buffers x 1048576 KiB of loads", "budget pe.scratch = 1024 KiB")


def test_composite_buffers_count():
    """The composite's scratch check counts its `buffers`: 4 x 300 KiB is refused naming that product, while 3 x 300
    KiB fits and runs."""
    p = _program()
    p.composite(PE0, 8, [(HBM0, PE0, 300 * KIB)], 1e3, buffers=4, name="deep")
    _raises(CapacityError, p.run, "'deep'", "4 buffers x 300 KiB of loads")
    ok = _program()
    ok.composite(PE0, 8, [(HBM0, PE0, 300 * KIB)], 1e3, buffers=3, name="fits")
    assert ok.run().makespan_ps > 0


def test_dma_larger_than_scratch_or_past_hbm():
    """A DMA of more than the scratch into a PE's scratch, or of more than an HBM slice between slices, is a
    CapacityError naming the op and the pe.scratch or pe.hbm.capacity budget it breaks."""
    p = _program()
    p.dma(PE0, HBM0, PE0, 2 * MIB, name="into scratch")
    _raises(CapacityError, p.run, "'into scratch' (dma) on sip0.cube0.pe0",
            "scratch of sip0.cube0.pe0 exceed its budget pe.scratch = 1024 KiB")
    q = _program()
    q.dma(PE0, HBM0, HBM1, 2 * GIB, name="hbm to hbm")
    _raises(CapacityError, q.run, "'hbm to hbm'", "HBM slice sip0.cube0.hbm_ctrl.pe0", "pe.hbm.capacity")


def test_ipcq_slots_larger_than_scratch():
    """IPCQ receive slots that do not fit the receiver's scratch (pe.ipcq.slots = 512) are a CapacityError naming the
    recv, the sender whose slots they are and the budget."""
    p = _program(set={"pe.ipcq.slots": 512})
    p.send(PE0, PE1, 64, 1, name="s")
    p.recv(PE1, PE0, 1, name="r")
    _raises(CapacityError, p.run, "op 1 'r' (recv) on sip0.cube0.pe1", "the IPCQ slots from sip0.cube0.pe0",
            "budget pe.scratch = 1024 KiB")


# ---- 2. pairing ----------------------------------------------------------------------------------


def test_send_without_recv():
    """A send that no recv matches is a DeadlockError naming the send, its PE, the destination, the key and that no
    recv takes it."""
    p = _program("orphan")
    p.send(PE0, PE1, 64, 7, name="lonely")
    _raises(DeadlockError, p.run, "'lonely' (send on sip0.cube0.pe0)", "to sip0.cube0.pe1", "key 7",
            "no recv")


def test_two_recvs_for_one_send():
    """Two recvs matching one send are a UsageError naming both recvs, the send and the key."""
    p = _program("two takers")
    p.send(PE0, PE1, 64, 3, name="the send")
    p.recv(PE1, PE0, 3, name="r1")
    p.recv(PE1, PE0, 3, name="r2")
    _raises(UsageError, p.run, "op 2 'r2'", "op 1 'r1'", "op 0 'the send'", "key 3")


# ---- 3. node kinds -------------------------------------------------------------------------------


def test_dma_to_a_router_and_from_an_hbm_agent():
    """A DMA to a router, or one issued by an HBM controller instead of a PE, is a UsageError naming the op and what
    the node is."""
    p = _program()
    p.dma(PE0, HBM0, ROUTER, 64, name="to router")
    _raises(UsageError, p.run, "'to router' (dma)", "sip0.cube0.r0c0 is a router, not a memory")
    q = _program()
    q.dma(HBM0, HBM0, PE0, 64, name="hbm issues")
    _raises(UsageError, q.run, "'hbm issues' (dma)", "agent sip0.cube0.hbm_ctrl.pe0 is a hbm_ctrl, not a PE")


# ---- 4. huge counts ------------------------------------------------------------------------------


@pytest.mark.parametrize("call, words", [
    (lambda p: p.composite(PE0, 2**31 - 1, [(HBM0, PE0, 64)], 1e3, name="endless"),
     ("composite 'endless'", "tiles = 2147483647", "limit of 16777216")),
    (lambda p: (p.send(PE0, PE1, 1 << 40, 1, name="tebibyte"), p.recv(PE1, PE0, 1), p.run()),
     ("'tebibyte' (send)", "268435456 segments", "limit of 4194304 per send")),
])
def test_huge_counts_fail_fast(call, words):
    """A composite of 2**31 - 1 tiles or a 1 TiB send is refused within seconds with a UsageError naming the count
    and its limit, instead of allocating or running for ever."""
    t0 = time.monotonic()
    _raises(UsageError, lambda: call(_program()), *words)
    assert time.monotonic() - t0 < 5.0

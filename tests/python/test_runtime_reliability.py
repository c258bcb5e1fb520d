"""Issue 22, the fabric/System/argument half: the time range, one user of a
System at a time, one rule for numeric arguments, collective and DMA entry
checks, and guarded counts. Every case asserts the exact error class and a
fragment of its message."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import kernbench
from kernbench import _core, ccl
from kernbench._core import CapacityError, TopologyError, UsageError

PE0, PE1 = "sip0.cube0.pe0", "sip0.cube0.pe1"
HBM0 = "sip0.cube0.hbm_ctrl.pe0"
ROUTER = "sip0.cube0.r0c0"
SMALL = {"system.sips.w": 1, "system.sips.h": 1}


def _system(**set_):
    return kernbench.System.load(set={**SMALL, **set_})


def _exact(excinfo, cls, *words):
    assert type(excinfo.value) is cls, f"raised {type(excinfo.value).__name__}: {excinfo.value}"
    for w in words:
        assert w in str(excinfo.value), f"{w!r} not in {excinfo.value}"


# ---- 1. time overflow: one clear error, up front ---------------------------------

@pytest.mark.parametrize("model", ["packet", "flow"])
@pytest.mark.parametrize("nbytes", [10_000_000_000, 5_000_000_000])  # past 2^63 ps, and between 2^62 and 2^63
def test_transfer_past_the_time_range_is_refused_alike(model, nbytes):
    """Under both fabric models a transfer whose duration would pass 2^62 ps is one UsageError naming its bytes and
    rate, raised before anything is scheduled, so the System still runs a normal transfer afterwards."""
    s = _system(**{"links.pe.bandwidth": "1 KB/s", "fabric.model": model})
    with pytest.raises(UsageError) as e:
        s.transfer(PE0, PE1, nbytes)
    _exact(e, UsageError, f"{nbytes} B at 1000 B/s", "2^62 ps")
    # Refused before anything was scheduled: the System runs on.
    s.transfer(PE0, PE1, 1000)
    s.run()
    assert s.failure == "" and len(s.transfers()["id"]) == 1


@pytest.mark.parametrize("model", ["packet", "flow"])
def test_huge_latency_is_a_usage_error_and_the_system_stays_usable(model):
    """A wire latency past the simulator's time range makes a transfer and a DMA each a UsageError saying so, and the
    System stays usable (it runs, still at time 0, with no failure)."""
    s = _system(**{"links.pe.latency": "9000000 s", "fabric.model": model})
    for call in (lambda: s.transfer(PE0, PE1, 1000), lambda: s.dma("read", PE0, HBM0, 64)):
        with pytest.raises(UsageError) as e:
            call()
        _exact(e, UsageError, "wire latency", "past the simulator's time range")
    s.run()
    assert s.now == 0 and s.failure == ""


def test_start_time_past_the_range():
    """A transfer starting after 2^62 ps is a UsageError saying it is past the simulator's time range."""
    s = _system()
    with pytest.raises(UsageError) as e:
        s.transfer(PE0, PE1, 64, at_ps=2**62 + 1)
    _exact(e, UsageError, "past the simulator's time range")


def test_a_failed_run_makes_the_system_refuse_with_the_reason():
    """A run stopped by a limit leaves the System usable, but after a program deadlocks part-way the System records
    the failure and every later call is a UsageError telling to build a new System."""
    s = _system()
    s.transfer(PE0, PE1, 64)
    s.set_limits(max_events=1)
    with pytest.raises(_core.LimitError):
        s.run()  # a limit stops between events: the System stays usable
    assert s.failure == ""
    s.set_limits()
    s.run()
    # A program that deadlocks fails part-way: later calls say why.
    p = s.program("stuck")
    p.recv(PE0, PE1, key=1)
    with pytest.raises(_core.DeadlockError):
        s.run_program(p)
    assert "stuck" in s.failure
    with pytest.raises(UsageError) as e:
        s.transfer(PE0, PE1, 64)
    _exact(e, UsageError, "can no longer be used", "build a new System")
    with pytest.raises(UsageError):
        s.run()


def test_cli_transfer_past_the_range_fails_fast_and_clearly(tmp_path):
    """pe-dma-perf with a transfer past the time range exits 1 (it used to crash with SIGSEGV) and records every
    failure in sweep.json as a UsageError naming the 2^62 ps limit."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench", "run", "--bench", "pe-dma-perf", "--smoke", "--set",
         "links.pe.bandwidth=1 KB/s", "--set", "bench.bytes=10000000000", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # was 139 (SIGSEGV) after 17 s
    failures = json.loads((out / "sweep.json").read_text())["failures"]
    assert failures and all("UsageError" in f["error"] and "2^62 ps" in f["error"] for f in failures)


# ---- 2. one user of a System at a time -------------------------------------------

def _dma_system():
    s = _system()
    for i in range(8):
        s.dma("read", PE0, HBM0, 16384, address=i * 16384)
    return s


def _serial_transfers():
    s = _dma_system()
    s.run()
    return s.transfers()["end_ps"].tolist()


def test_threads_on_one_system_are_serialised():
    """Four threads running one System at once raise nothing and leave the same transfer end times as one serial run:
    calls on a System are serialised."""
    s = _dma_system()
    errors = []

    def go():
        try:
            s.run()
        except Exception as exc:  # noqa: BLE001 -- collected and reported below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert s.transfers()["end_ps"].tolist() == _serial_transfers()


def _program(s, name):
    p = s.program(name)
    a = p.dma(PE0, HBM0, PE0, 65536)
    p.compute(PE0, 1e6, deps=[a])
    return p


def test_programs_from_threads_on_one_system_equal_serial_runs():
    """Programs run from four threads on one System get the makespans of serial runs (each sees the machine idle)."""
    serial_sys = _system()
    serial = [serial_sys.run_program(_program(serial_sys, f"p{i}")).makespan_ps for i in range(4)]
    s = _system()
    progs = [_program(s, f"p{i}") for i in range(4)]
    spans = {}

    def go(i):
        spans[i] = s.run_program(progs[i]).makespan_ps

    threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Serialised: each run sees the machine idle, as a serial run does.
    assert sorted(spans.values()) == sorted(serial)


def test_threads_on_separate_systems_equal_serial():
    """Threads each running their own System give exactly the serial transfer end times: no state is shared between
    Systems."""
    serial = [_serial_transfers() for _ in range(4)]
    results = {}

    def go(i):
        s = _dma_system()
        s.run()
        results[i] = s.transfers()["end_ps"].tolist()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(4)] == serial


def test_collectives_from_threads_on_one_system():
    """All-reduces from three threads on one System each have the latency of one all-reduce on a fresh machine."""
    s = _system()
    ref = ccl.all_reduce(_system(), 4096).latency_ps
    out = []
    threads = [threading.Thread(target=lambda: out.append(ccl.all_reduce(s, 4096).latency_ps)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [ref] * 3


# ---- 3. one rule for numeric arguments -------------------------------------------

BAD_COUNTS = [
    (1.5, "whole number"), (True, "bool"), ("64", "string"), (float("nan"), "finite"), (float("inf"), "finite"),
    (2**70, "out of range"), (np.bool_(True), "bool"), (1000.9, "whole number"),
]


@pytest.mark.parametrize("value, words", BAD_COUNTS)
def test_system_byte_counts(value, words):
    """A byte count that is fractional, a bool, text, NaN or infinite, or past 64 bits is a UsageError naming the
    argument (transfer, dma) and what is wrong with it."""
    s = _system()
    for name, call in (("transfer: bytes", lambda: s.transfer(PE0, PE1, value)),
                       ("dma: bytes", lambda: s.dma("read", PE0, HBM0, value))):
        with pytest.raises(UsageError) as e:
            call()
        _exact(e, UsageError, name, words)


@pytest.mark.parametrize("value, words", BAD_COUNTS)
def test_program_byte_counts(value, words):
    """The Program builder's dma, vector, alloc, send and composite refuse the same bad counts as the System, each a
    UsageError naming the call and argument: one rule for numeric arguments."""
    s = _system()
    p = s.program()
    for name, call in (("dma: bytes", lambda: p.dma(PE0, HBM0, PE0, value)),
                       ("vector: bytes", lambda: p.vector(PE0, value)),
                       ("alloc: bytes", lambda: p.alloc(PE0, value)),
                       ("send: bytes", lambda: p.send(PE0, PE1, value, key=1)),
                       ("composite: tiles", lambda: p.composite(PE0, value, [(HBM0, PE0, 64)]))):
        with pytest.raises(UsageError) as e:
            call()
        _exact(e, UsageError, name, words)


@pytest.mark.parametrize("value, words", [("1e6", "string"), (True, "bool"), (None, "number")])
def test_gemm_flops_is_a_number(value, words):
    """compute()'s flops must be a number: a string, a bool or None is a UsageError naming gemm: flops and the type
    given."""
    p = _system().program()
    with pytest.raises(UsageError) as e:
        p.compute(PE0, value)
    _exact(e, UsageError, "gemm: flops", words)


@pytest.mark.parametrize("value, words", [(1000.9, "whole number"), (True, "bool"), ("4096", "string")])
def test_ccl_counts(value, words):
    """A collective's bytes_per_pe and pieces must be whole numbers: a fraction, a bool or text is a UsageError
    naming the argument."""
    s = _system()
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(s, value)
    _exact(e, UsageError, "bytes_per_pe", words)
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(s, 4096, pieces=value)
    _exact(e, UsageError, "pieces", words)


def test_dist_byte_counts():
    """dist.all_reduce refuses a fractional or bool byte count with a UsageError."""
    ccl.dist.init_process_group(system=_system())
    try:
        with pytest.raises(UsageError) as e:
            ccl.dist.all_reduce(2.5)
        _exact(e, UsageError, "byte count", "whole number")
        with pytest.raises(UsageError):
            ccl.dist.all_reduce(True)
    finally:
        ccl.dist.destroy_process_group()


def test_integral_floats_and_numpy_ints_are_accepted():
    """Integral floats and numpy integers are accepted as byte counts and times (4096.0, np.int64, np.int32) and
    recorded as the integers they are."""
    s = _system()
    s.transfer(PE0, PE1, 4096.0)
    s.transfer(PE0, PE1, np.int64(4096), at_ps=np.int32(10))
    p = s.program()
    p.dma(PE0, HBM0, PE0, 1024.0)
    p.compute(PE0, 1e6)
    s.run()
    s.run_program(p)
    assert s.transfers()["bytes"].tolist()[:2] == [4096, 4096]


# ---- 4. collective and DMA entry checks ------------------------------------------

def test_ccl_empty_pes_is_an_error_none_is_all():
    """pes=[] for a collective is a UsageError, while pes=None means every PE of the machine."""
    s = _system()
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(s, 4096, pes=[])
    _exact(e, UsageError, "pes is an empty list")
    assert ccl.all_reduce(s, 4096, pes=None).ranks == len(s.pes())


def test_ccl_negative_grid():
    """A grid2d all-reduce given a grid with negative sides is a UsageError saying so."""
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(_system(), 4096, algorithm="grid2d", grid=(-4, -8))
    _exact(e, UsageError, "negative side")


def test_ccl_hbm_buffer_larger_than_the_slice():
    """An HBM-buffered all-reduce of more per PE than its HBM slice is a CapacityError naming both sizes and
    pe.hbm.capacity."""
    with pytest.raises(CapacityError) as e:
        ccl.all_reduce(_system(**{"pe.hbm.capacity": "1 GiB"}), 4 * 2**30, buffer="hbm")
    _exact(e, CapacityError, "4096 MiB per PE", "HBM slice is 1024 MiB", "pe.hbm.capacity")


def test_dma_router_memory_and_hbm_issuer():
    """System.dma to a router, or issued by an HBM controller, is a TopologyError naming the node and what it is, and
    no DMA is recorded."""
    s = _system()
    with pytest.raises(TopologyError) as e:
        s.dma("read", PE0, ROUTER, 64)
    _exact(e, TopologyError, ROUTER, "is a router")
    with pytest.raises(TopologyError) as e:
        s.dma("write", HBM0, "sip0.cube0.hbm_ctrl.pe1", 64)
    _exact(e, TopologyError, f"the issuer {HBM0}", "hbm_ctrl")
    assert len(s.dma_ops()["kind"]) == 0


# ---- 5. huge counts: a clear error, up front, never MemoryError ------------------

def test_huge_composite_tiles():
    """A composite of 2**31 - 1 tiles is a UsageError naming the count and the 16777216 limit, the same rule as in
    C++."""
    p = _system().program()
    with pytest.raises(UsageError) as e:  # the Program builder's one rule, for C++ and Python alike
        p.composite(PE0, 2**31 - 1, [(HBM0, PE0, 64)])
    _exact(e, UsageError, "tiles = 2147483647", "limit of 16777216")


def test_huge_ccl_pieces():
    """A collective cut into 1e9 pieces (int or integral float) is a UsageError saying it is too many."""
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(_system(), 4096, pieces=int(1e9))
    _exact(e, UsageError, "pieces = 1000000000 is too many")
    with pytest.raises(UsageError):
        ccl.all_reduce(_system(), 4096, pieces=1e9)  # an integral float: same rule, same error


def test_terabyte_send():
    """A 1 TiB send over 4 KiB IPCQ slots is refused by the executor before running (268435456 segments over the
    per-send limit), leaving the System without a failure."""
    s = _system(**{"pe.ipcq.slot": "4 KiB"})
    p = s.program()
    p.send(PE0, PE1, 2**40, key=1)
    p.recv(PE1, PE0, key=1)
    with pytest.raises(UsageError) as e:  # checked by the executor before anything runs
        s.run_program(p)
    _exact(e, UsageError, "(send)", "268435456 segments", "limit of 4194304 per send")
    assert s.failure == ""  # refused before running

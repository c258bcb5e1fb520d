"""A collective's kernel runs on its rank's NCCL stream, beside the compute stream: each rank's kernel starts once
that rank's own inputs are ready (``Program.collective(..., rank_deps=)``) and waits in the kernel for its peers,
and a compute kernel neither waits behind it nor it behind one (docs/gpu-target.md "SMs shared with
collectives")."""

from __future__ import annotations

import pytest

import kernbench
from kernbench._core import UsageError

BOX = "machines/h100-8x-nvswitch.yaml"
SIZE = 1 << 26


@pytest.fixture()
def box():
    return kernbench.System.load(BOX)


def times(res, ops) -> list[tuple[int, int]]:
    t = res._core.ops()
    return [(int(t["start_ps"][int(o)]), int(t["end_ps"][int(o)])) for o in ops]


def entries(prog, res, handle, agents) -> list[tuple[int, int]]:
    """Each agent's NCCL kernel of ``handle`` (start, end) ps."""
    cols = prog._core.op_columns()
    out = []
    for a in agents:
        ops = [o for o in range(handle.first, handle.end)
               if cols["kind"][o] == "kernel" and cols["agent"][o] == a and cols["name"][o].startswith("nccl ")]
        assert len(ops) == 1
        out.extend(times(res, ops))
    return out


def collective(box, rank_wise: bool):
    """GPU 0's input is ready after 10 us, GPU 1's after 300 us; the all-reduce waits for them per rank or
    for both on every rank."""
    pes = box.pes()[:2]
    prog = kernbench.Program(box)
    early = prog.kernel(pes[0], 10_000_000, name="early")
    late = prog.kernel(pes[1], 300_000_000, name="late")
    if rank_wise:
        h = prog.all_reduce(pes, SIZE, algorithm="ring", rank_deps=[[early], [late]])
    else:
        h = prog.all_reduce(pes, SIZE, algorithm="ring", deps=[early, late])
    return prog, h, (early, late), [box.node_id(p) for p in pes]


def test_a_rank_enters_a_collective_once_its_own_inputs_are_ready(box):
    """With rank_deps GPU 0's NCCL kernel starts when GPU 0's input is done (10 us), GPU 1's when its own is
    (300 us); GPU 1 does nothing of it before then, while GPU 0 may stage its first chunks, so the collective
    ends no later than, and within a microsecond of, the one where both ranks wait for both inputs (the late rank
    sets the pace)."""
    prog, h, (early, late), agents = collective(box, True)
    res = prog.run()
    (_, early_end), (_, late_end) = times(res, [early, late])
    (s0, _), (s1, _) = entries(prog, res, h, agents)
    assert s0 == early_end < late_end == s1
    t, cols = res._core.ops(), prog._core.op_columns()
    on_late = [int(t["start_ps"][o]) for o in range(h.first, h.end)
               if cols["agent"][o] == agents[1] and cols["kind"][o] != "launch"]
    assert len(on_late) > 1 and min(on_late) == late_end
    both, hb, _, _ = collective(kernbench.System.load(BOX), False)
    rb = both.run()
    (b0, _), (b1, _) = entries(both, rb, hb, agents)
    assert b0 == b1 == late_end
    assert rb.makespan_ps - 1_000_000 < res.makespan_ps <= rb.makespan_ps


def test_a_compute_kernel_runs_beside_a_collective_kernel(box):
    """GPU 0's compute kernel, ready at 0 and queued after an all-reduce whose NCCL kernel is ready too, starts
    at 0 and runs its whole duration while the NCCL kernel runs: neither waits for the other's stream."""
    pes = box.pes()[:2]
    prog = kernbench.Program(box)
    h = prog.all_reduce(pes, SIZE, algorithm="ring")
    compute = prog.kernel(pes[0], 200_000_000, name="compute")
    res = prog.run()
    [(a, b)] = times(res, [compute])
    (s0, e0), _ = entries(prog, res, h, [box.node_id(p) for p in pes])
    assert a == 0 and b == 200_000_000
    assert a < s0 < e0 < b  # the NCCL kernel ran inside the compute kernel's time


def test_rank_deps_give_one_list_per_rank(box):
    """rank_deps of another length than pes is refused, naming the call and both counts."""
    pes = box.pes()[:4]
    prog = kernbench.Program(box)
    k = prog.kernel(pes[0], 1_000, name="k")
    with pytest.raises(UsageError, match=r"Program.all_reduce: rank_deps has 2 lists for 4 PEs"):
        prog.all_reduce(pes, SIZE, rank_deps=[[k], [k]])
    with pytest.raises(UsageError, match=r"rank_deps\[1\]"):
        prog.all_reduce(pes[:2], SIZE, rank_deps=[[k], "k"])

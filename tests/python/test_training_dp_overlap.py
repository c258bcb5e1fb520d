"""The data-parallel gradient buckets overlap the backward (issue 35): TrainingEstimate.dp_exposed_ms.

Each layer's gradients are one bucket, all-reduced over the dp ranks as soon as the layer's backward is done
(kernbench.workloads.sharding), while the backward of the layers before it runs. The figures here are read back
from the simulated trace itself (each bucket's NCCL call from its first transfer or kernel to its last, and the
end of the stage's last forward/backward kernel), not from the estimate's own bookkeeping.
"""

from __future__ import annotations

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, estimate, handbuilt
from kernbench.workloads.lower import lower

H100 = "machines/h100-8x-nvswitch.yaml"
#: A small decoder with equal layers (no embedding, no LM head: every bucket the same size); 4 x 1024 tokens per
#: microbatch make each layer's backward (about 260 us) longer than its bucket's all-reduce at dp 2 (about 55 us).
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096, "layers": 4}
COMM = {"grad_all_reduce", "all_reduce", "reduce_scatter", "all_gather", "p2p"}


def graph(layers=4):
    return handbuilt.llama_graph(4, 1024, dims=SMALL, layers=layers, embed=False, head=False)


def machine(nvlink=None):
    return System.load(H100, set={"links.nvlink.bandwidth": nvlink} if nvlink else {})


def trace(system, plan, layers=4):
    """From the step's own trace: each gradient bucket's (start, end) ps in flight, in issue order, and the end
    of the last forward or backward kernel."""
    lo = lower(graph(layers), system, plan, phase="train")
    df = lo.run().ops_df()
    kind, start, end = list(df["kind"]), list(df["start_ps"]), list(df["end_ps"])
    buckets = []
    for s in lo.spans:
        if s.kind == "grad_all_reduce":
            ops = [o for o in range(s.first, s.end) if kind[o] != "launch" and start[o] >= 0]
            buckets.append((min(int(start[o]) for o in ops), max(int(end[o]) for o in ops)))
    compute_end = max(int(end[o]) for s in lo.spans if s.pass_ in ("forward", "backward") and s.kind not in COMM
                      for o in range(s.first, s.end) if start[o] >= 0)
    return sorted(buckets), compute_end


def test_buckets_shorter_than_the_backward_left_expose_only_the_last_one():
    """dp 2 on the H100 box: every bucket but the last is all-reduced while the backward runs (it starts before
    the backward ends and is done by then), so it exposes nothing; the last bucket (layer 0's, reduced once
    its backward, the step's last, is done) has no backward left to hide behind, and the step's exposed
    data-parallel time is exactly its time past the backward's end, to the picosecond. So "exposed DP = 0" holds
    for every bucket but the last one, which is exposed whole, as in DDP and Megatron-LM. (Before the buckets
    were appended in program order during the backward, their NCCL launches queued behind every backward
    kernel's: all four started after the backward ended.)"""
    plan = ParallelPlan(dp=2)
    tr = estimate.training_step(graph(), machine(), plan, reuse=False)
    buckets, compute_end = trace(machine(), plan)
    assert len(buckets) == 4
    *hidden, last = buckets
    for a, b in hidden:
        assert a < compute_end and b <= compute_end
    tail = last[1] - max(last[0], compute_end)
    assert tail > 0
    assert round(tr.dp_exposed_ms * 1e9) == tail
    assert tr.dp_exposed_by_stage == [tr.dp_exposed_ms]
    # all four buckets were in flight, three of them hidden: the exposed time is a quarter-ish of it, not all
    assert tr.dp_ms * 1e9 == pytest.approx(sum(b - a for a, b in buckets), abs=1)
    assert tr.dp_exposed_ms < 0.5 * tr.dp_ms


def test_reuse_extends_the_exposed_time_exactly():
    """On 7 layers the reused step (2, 3, 4 layers simulated) gives the fully simulated step's dp_ms and
    dp_exposed_ms to the picosecond: one more hidden bucket adds its time to dp_ms and nothing to the exposed."""
    full = estimate.training_step(graph(7), machine(), ParallelPlan(dp=2), reuse=False)
    fast = estimate.training_step(graph(7), machine(), ParallelPlan(dp=2), reuse=True)
    assert fast.reuse["mode"] == "extrapolated"
    assert round(fast.dp_exposed_ms * 1e9) == round(full.dp_exposed_ms * 1e9)
    assert round(fast.dp_ms * 1e9) == round(full.dp_ms * 1e9)


def test_slow_buckets_are_exposed_and_more_so_as_links_slow():
    """The same step with NVLink at 25 (the preset), 2, 1 and 0.5 GB/s per link: once a bucket outlasts the layer
    behind it the buckets queue on the dp group's one NCCL stream and the backward no longer hides them. The
    exposed time grows with every slowdown, and at 1 and 0.5 GB/s exceeds what the last bucket alone exposes
    (earlier buckets' time is exposed too); the step grows with it."""
    plan = ParallelPlan(dp=2)
    rows = []
    for bw in (None, "2 GB/s", "1 GB/s", "0.5 GB/s"):
        tr = estimate.training_step(graph(), machine(bw), plan, reuse=False)
        buckets, compute_end = trace(machine(bw), plan)
        last_tail = buckets[-1][1] - max(buckets[-1][0], compute_end)
        rows.append((tr.dp_exposed_ms * 1e9, last_tail, tr.step_ms))
    exposed = [r[0] for r in rows]
    assert exposed == sorted(exposed) and len(set(exposed)) == 4
    assert rows[0][0] == pytest.approx(rows[0][1], abs=1)  # the preset: the last bucket only
    for e, last_tail, _ in rows[2:]:
        assert e > 1.5 * last_tail
    steps = [r[2] for r in rows]
    assert steps == sorted(steps) and steps[-1] > steps[0] + rows[-1][0] / 1e9 * 0.5


@pytest.mark.parametrize("plan", [ParallelPlan(dp=2), ParallelPlan(dp=4, microbatches=2, sharding="zero2"),
                                  ParallelPlan(dp=2, microbatches=2, sharding="fsdp"),
                                  ParallelPlan(dp=2, pp=2, microbatches=2, sharding="zero1")])
@pytest.mark.parametrize("nvlink", [None, "1 GB/s"])
def test_exposed_dp_time_is_bounded_by_the_dp_time_and_the_non_compute_parts(plan, nvlink):
    """Invariants of the figure, fast links or slow, for every sharding: 0 <= dp_exposed_ms <= dp_ms; with
    unsharded gradients dp_ms <= grad_allreduce_ms (a stage's buckets in flight, against all stages' in the
    step); the mean of the stages' figures is dp_exposed_ms; and an exposed instant runs none of the stage's
    forward, backward or recompute, so the exposed time fits in the step less those parts."""
    tr = estimate.training_step(graph(), machine(nvlink), plan, reuse=False)
    assert 0 < tr.dp_exposed_ms <= tr.dp_ms + 1e-12
    if plan.sharding == "none":
        assert tr.dp_ms <= tr.grad_allreduce_ms + 1e-12
    assert sum(tr.dp_exposed_by_stage) / plan.pp == pytest.approx(tr.dp_exposed_ms, rel=1e-12)
    compute = sum(tr.parts.get(k, 0.0) for k in ("forward", "backward", "recompute"))
    assert tr.dp_exposed_ms <= tr.step_ms - compute + 1e-9


def test_one_replica_has_no_data_parallel_time():
    """dp 1: no data-parallel collective runs, so nothing of it is in flight or exposed, on any stage."""
    tr = estimate.training_step(graph(), machine(), ParallelPlan(), reuse=False)
    assert tr.dp_ms == 0 and tr.dp_exposed_ms == 0 and tr.dp_exposed_by_stage == [0.0]

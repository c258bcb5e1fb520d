"""The optimizer step of a training step (kernbench.workloads.sharding, ``DataParallel.finish``): a rank steps
Adam once all of its gradients are reduced (Megatron-LM's ``finish_grad_sync``, FSDP's post-backward wait), and
with gradient clipping (``ParallelPlan.clip_grad`` > 0, Megatron's default 1.0) only after every rank's gradient
norm is all-reduced, so no rank steps before every gradient of the model is reduced."""

from __future__ import annotations

import pytest

import kernbench
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, handbuilt
from kernbench.workloads.lower import lower

SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096, "layers": 4}


@pytest.fixture(scope="module")
def box():
    return kernbench.System.load("machines/h100-8x-nvswitch.yaml")


def graph():
    return handbuilt.llama_graph(2, 512, dims=SMALL, embed=False, head=False)


def run(box, **plan):
    lo = lower(graph(), box.twin(), ParallelPlan(**plan), phase="train")
    res = lo.run()
    t = res._core.ops()
    return lo, t["start_ps"], t["end_ps"]


def spans(lo, start, end, select, skip=("launch",)):
    """(span, first start, last end) of the selected spans' ops that ran, ops of the kinds ``skip`` left out (a
    host launch runs ahead of its kernel)."""
    kind = lo.program._core.op_columns()["kind"]
    out = []
    for s in lo.spans:
        if select(s):
            ran = [o for o in range(s.first, s.end) if start[o] >= 0 and kind[o] not in skip]
            out.append((s, min(int(start[o]) for o in ran), max(int(end[o]) for o in ran)))
    return out


def test_with_clipping_no_rank_steps_before_every_gradient_is_reduced(box):
    """dp 2 x pp 2, clip_grad 1: one gradient-norm all-reduce per replica over its tp x pp ranks, which ends after
    every reduction of the replica's stages (a rank enters it once its own norm is computed: the first stage's
    after its last reduction), and every Adam kernel on every stage starts after it ends -- though the last
    stage's backward, and its reductions, end long before the first stage's."""
    lo, start, end = run(box, dp=2, pp=2, microbatches=2)
    reductions = spans(lo, start, end, lambda s: s.kind == "grad_all_reduce")
    norms = spans(lo, start, end, lambda s: s.name == "grad norm all-reduce")
    adams = spans(lo, start, end, lambda s: s.kind == "optimizer")
    assert {s.stage for s, _, _ in norms} == {0, 1} and len({(s.first, s.end) for s, _, _ in norms}) == 2
    last = {st: max(e for s, _, e in reductions if s.stage == st) for st in (0, 1)}
    assert last[1] < last[0]
    assert min(e for _, _, e in norms) > max(last.values())
    assert min(a for _, a, _ in adams) >= max(e for _, _, e in norms)


def test_without_clipping_a_rank_steps_once_its_own_gradients_are_reduced(box):
    """clip_grad 0: no norm; the last stage's Adam starts once its own reductions are done, before the first
    stage's last reduction ends, and each stage's Adam after all of its own reductions (not unit by unit)."""
    lo, start, end = run(box, dp=2, pp=2, microbatches=2, clip_grad=0)
    assert not any("grad norm" in s.name for s in lo.spans)
    reductions = spans(lo, start, end, lambda s: s.kind == "grad_all_reduce")
    adams = spans(lo, start, end, lambda s: s.kind == "optimizer")
    last = {st: max(e for s, _, e in reductions if s.stage == st) for st in (0, 1)}
    for st in (0, 1):
        assert min(a for s, a, _ in adams if s.stage == st) >= last[st]
    assert min(a for s, a, _ in adams if s.stage == 1) < last[0]


def test_clipping_reads_the_gradients_once_more_and_lengthens_the_step(box):
    """Clipping adds one norm kernel per Adam kernel (each rank reads the gradients it steps once), the norm
    all-reduces, and time: the step with clip_grad 1 is longer than with 0, the same GEMM FLOPs."""
    plan = dict(dp=2, pp=2, microbatches=2)
    on = estimate.training_step(graph(), box.twin(), ParallelPlan(**plan), reuse=False)
    off = estimate.training_step(graph(), box.twin(), ParallelPlan(**plan, clip_grad=0), reuse=False)
    lo, _, _ = run(box, **plan)
    n_adam = sum(1 for s in lo.spans if s.kind == "optimizer")
    assert sum(1 for s in lo.spans if s.kind == "grad_norm") == n_adam
    assert on.counts["vector"] - off.counts["vector"] == n_adam
    assert on.counts["all_reduce"] - off.counts["all_reduce"] == 2  # one per replica
    assert on.step_ms > off.step_ms and on.gemm_flops == off.gemm_flops


def test_sharded_optimizer_state_reduces_the_norm_over_every_rank(box):
    """With FSDP (sharded optimizer state) the norms are all-reduced once, over every rank of the plan."""
    lo, start, end = run(box, dp=4, sharding="fsdp")
    norms = [s for s in lo.spans if s.name == "grad norm all-reduce"]
    assert len(norms) == 1
    cols = lo.program._core.op_columns()
    agents = {cols["agent"][o] for o in range(norms[0].first, norms[0].end) if cols["kind"][o] == "kernel"}
    assert len(agents) == 4


@pytest.mark.parametrize("bad", [-1.0, True, "1", float("inf")])
def test_clip_grad_refusals(bad):
    """clip_grad must be a finite number >= 0: the refusal names the field and the value."""
    with pytest.raises(WorkloadError, match=r"plan: clip_grad must be a number >= 0 \(0: no clipping\), got"):
        ParallelPlan(clip_grad=bad)

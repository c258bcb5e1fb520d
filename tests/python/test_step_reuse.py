"""A training step's run graph grows with what differs (kernbench.workloads.step): the microbatches of a periodic
schedule are simulated in a window of a few and extended, and the extended step equals the full lowering (every
microbatch simulated) within 0.1 % -- for 1F1B and the interleaved schedule, with context parallelism, expert
parallelism and ZeRO. Each case also checks that the extension really ran (a case that silently simulated every
microbatch would prove nothing), and that it simulated fewer microbatches than the step has."""

from __future__ import annotations

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, estimate, get_model

H100 = "machines/h100-8x-nvswitch.yaml"
#: The tolerance the issue sets for a reused or extended step against the full lowering.
EXACT = 1e-3

#: name -> (model, layers, seq, plan keywords). Small enough to lower in full in a second or two on the H100 box.
CASES = {
    "1f1b": ("gpt3-175b", 4, 256, dict(tp=2, pp=2, microbatches=16)),
    "1f1b-pp4": ("gpt3-175b", 4, 256, dict(tp=2, pp=4, microbatches=28)),
    "interleaved": ("gpt3-175b", 4, 256, dict(tp=2, pp=2, interleave=2, microbatches=16)),
    "cp": ("llama3-8b", 4, 512, dict(tp=2, cp=2, pp=2, microbatches=16)),
    "cp-interleaved": ("llama3-8b", 4, 512, dict(tp=2, cp=2, pp=2, interleave=2, microbatches=16)),
    "ep": ("mixtral-8x7b", 4, 256, dict(dp=2, ep=2, pp=2, microbatches=16)),
    "zero1": ("gpt3-175b", 4, 256, dict(dp=2, tp=2, pp=2, sharding="zero1", microbatches=16)),
}


def _step(model: str, layers: int, seq: int, plan: dict, reuse: bool):
    graph = get_model(model).graph(1, seq, layers=layers)
    return estimate.training_step(graph, System.load(H100), ParallelPlan(**plan), reuse=reuse, replicas="all")


@pytest.mark.parametrize("case", sorted(CASES))
def test_extended_step_equals_full_lowering(case):
    """The step with its microbatches extended from a window equals every microbatch simulated, within 0.1 %, and
    its figures that add up over microbatches (FLOPs, kernel counts) are those of the full step."""
    model, layers, seq, plan = CASES[case]
    ext, full = _step(model, layers, seq, plan, True), _step(model, layers, seq, plan, False)
    assert "microbatches" in ext.reuse["extended"], ext.reuse
    assert sum(ext.reuse["microbatches"]) < plan["microbatches"] * 3, ext.reuse["microbatches"]
    assert full.reuse["microbatches"] == [plan["microbatches"]]
    assert ext.step_ms == pytest.approx(full.step_ms, rel=EXACT)
    assert ext.gemm_flops == pytest.approx(full.gemm_flops, rel=1e-9)
    assert ext.counts == full.counts
    assert sum(ext.parts.values()) == pytest.approx(ext.step_ms, rel=1e-9)  # the breakdown adds up to the step
    for part in ("forward", "backward", "optimizer"):  # the compute parts; idle time's split drifts (module doc)
        assert ext.parts.get(part, 0.0) == pytest.approx(full.parts.get(part, 0.0), abs=EXACT * full.step_ms), part



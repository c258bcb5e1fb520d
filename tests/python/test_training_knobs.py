"""One set of knobs for a training step's front ends: ``model.training`` takes what ``estimate.training_step`` and
the training-scale bench take (``vp`` as Megatron's name of ``interleave``, ``fidelity``, ``replicas``), and the
defaults make a step cheap without changing its answer: one replica lowered on a GPU machine, NCCL's ring as the
channel pipeline on a flow fabric."""

from __future__ import annotations

import pytest

from kernbench._core import UsageError
from kernbench.calibrate import REGISTRY, Context
from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, get_model

H100 = "machines/h100-8x-nvswitch.yaml"


def _fn():
    return REGISTRY.get("model.training").fn


def test_vp_is_interleave():
    """ParallelPlan(vp=v) is interleave v (Megatron's --virtual-pipeline-model-parallel-size); giving both with
    different values is refused naming both; model.training's vp reaches the plan."""
    assert ParallelPlan(pp=2, vp=3, microbatches=4).interleave == 3
    assert ParallelPlan(pp=2, vp=3, interleave=3, microbatches=4).interleave == 3
    with pytest.raises(WorkloadError, match="vp = 3 and interleave = 2"):
        ParallelPlan(pp=2, vp=3, interleave=2, microbatches=4)
    with pytest.raises(WorkloadError, match="vp .* must be an integer >= 1"):
        ParallelPlan(pp=2, vp=0, microbatches=4)
    ctx = Context(config=H100, sets={})
    a = _fn()(ctx, model="gpt2", tp=2, pp=2, seq=128, grad_accum=4, vp=2)
    b = _fn()(ctx, model="gpt2", tp=2, pp=2, seq=128, grad_accum=4, interleave=2)
    assert a == b


def test_model_training_takes_fidelity_and_replicas():
    """model.training passes fidelity and replicas to the step: steps and pipeline differ (two models of NCCL's
    steps), the default equals the pipeline at a ring's collectives on a flow fabric, and an unknown replicas mode
    is refused."""
    ctx = Context(config=H100, sets={})
    kw = dict(model="gpt2", dp=2, tp=2, seq=128, grad_accum=2)
    auto = _fn()(ctx, **kw)
    pipe = _fn()(ctx, fidelity="pipeline", **kw)
    steps = _fn()(ctx, fidelity="steps", **kw)
    assert auto["step"] == pipe["step"] != steps["step"]
    assert steps["step"] == pytest.approx(pipe["step"], rel=0.05)
    every = _fn()(ctx, replicas="all", **kw)
    assert every["step"] == pytest.approx(auto["step"], rel=5e-3)
    with pytest.raises(UsageError, match="replicas 'some'"):
        _fn()(ctx, replicas="some", **kw)


def test_training_step_defaults_to_one_replica_on_a_gpu():
    """replicas=None is ``one`` on a GPU machine (reuse["replicas"] says so), fewer program ops than every replica
    for the same step within 0.5 %."""
    g = get_model("gpt2").graph(1, 128, layers=2)
    plan = ParallelPlan(dp=4, tp=2)
    one = estimate.training_step(g, System.load(H100), plan)
    every = estimate.training_step(g, System.load(H100), plan, replicas="all")
    assert one.reuse["replicas"] == "one" and every.reuse["replicas"] == "all"
    assert sum(one.reuse["ops"]) < sum(every.reuse["ops"]) / 2
    assert one.step_ms == pytest.approx(every.step_ms, rel=5e-3)

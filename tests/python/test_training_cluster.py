"""Training steps on cluster machines (issue 35): the plan takes the first dp x tp x pp GPUs in Megatron-LM's rank
order (tp innermost, then dp, then pp: a tp group is one box, the stages span the nodes), a step runs on two DGX
H100 boxes, and a plan larger than the machine is refused naming the shortfall. model.training takes interleave
and ep."""

from __future__ import annotations

import pytest

from kernbench.calibrate import REGISTRY, Context
from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, handbuilt

CLUSTER = "machines/dgx-h100-cluster.yaml"
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096, "layers": 2}


def cluster(nodes=2):
    return System.load(CLUSTER, set={"cluster.nodes": nodes})


def graph(layers=2):
    return handbuilt.llama_graph(2, 256, dims=SMALL, layers=layers, embed=False, head=False)


def box(pe: str) -> str:
    return pe.split(".")[0]


def nic_bytes(system) -> int:
    """Bytes the run moved over channels that touch a NIC: the traffic that left a box."""
    ch = system.channels()
    names = system.nodes()["name"]
    return sum(int(b) for s, d, b in zip(ch["src"], ch["dst"], ch["bytes"])
               if ".nic" in names[int(s)] or ".nic" in names[int(d)])


@pytest.mark.parametrize("dp,tp,pp", [(1, 8, 2), (2, 8, 1), (2, 4, 2), (2, 2, 2), (4, 2, 2)])
def test_placement_is_megatrons_rank_order_on_the_first_gpus(dp, tp, pp):
    """Rank ((stage x dp) + replica) x tp + t of the machine's rank order (n0.gpu0 .. n0.gpu7, n1.gpu0, ...): a tp
    group is tp consecutive GPUs (one box at tp 8), the replicas of a stage follow each other, then the next stage;
    only the first dp x tp x pp GPUs are used."""
    system = cluster()
    ranks = system.pes()
    pl = ParallelPlan(dp=dp, tp=tp, pp=pp).place(system)
    for s in range(pp):
        for d in range(dp):
            first = (s * dp + d) * tp
            assert pl.group(d, s) == tuple(ranks[first:first + tp])
    assert sorted(pl.pes, key=ranks.index) == ranks[:dp * tp * pp] and pl.pes == ranks[:dp * tp * pp]
    if tp == 8:  # a tensor-parallel group is one box
        assert all(len({box(pe) for pe in pl.group(d, s)}) == 1 for d in range(dp) for s in range(pp))
    if dp * tp == 8 and pp == 2:  # a stage fills a box: the pipeline spans the two nodes
        assert {box(pe) for d in range(dp) for pe in pl.group(d, 0)} == {"n0"}
        assert {box(pe) for d in range(dp) for pe in pl.group(d, 1)} == {"n1"}


@pytest.mark.parametrize("plan", [ParallelPlan(tp=8, pp=2, microbatches=2), ParallelPlan(tp=8, dp=2),
                                  ParallelPlan(tp=8, pp=2, microbatches=2, interleave=2)])
def test_a_training_step_runs_on_two_nodes_across_the_nics(plan):
    """tp 8 with pp 2 (the stage-to-stage transfers) or dp 2 (the gradient all-reduce) on 16 GPUs of two DGX H100
    boxes: the step runs, the traffic between the two stages or replicas leaves the boxes through the NICs, and the
    tensor-parallel all-reduces stay inside a box -- the same step on one box's 8 GPUs (tp 8 alone) moves nothing
    over a NIC."""
    g = graph(layers=4)
    system = cluster()
    tr = estimate.training_step(g, system, plan)
    assert tr.step_ms > 0 and tr.gpus == 16
    assert set(tr.lowered.placement.pes) == set(system.pes())
    assert nic_bytes(system) > 0
    if plan.dp == 2:
        assert tr.dp_bytes["all_reduce"] > 0 and tr.dp_ms > 0
    else:
        assert tr.counts["p2p"] > 0
    alone = cluster()
    one = estimate.training_step(g, alone, ParallelPlan(tp=8, microbatches=plan.microbatches))
    assert one.step_ms > 0 and nic_bytes(alone) == 0


def test_a_plan_larger_than_the_cluster_names_the_shortfall():
    """dp 4 x tp 8 x pp 1 = 32 GPUs on two boxes (16): refused before any lowering, naming dp, pp, tp, the
    product, the machine's GPU count and how many are missing -- for a plan and for model.training."""
    system = cluster()
    msg = r"plan dp=4 x pp=1 x tp=8 = 32 GPUs do not fit the machine's 16 GPUs: 16 short"
    with pytest.raises(WorkloadError, match=msg):
        ParallelPlan(dp=4, tp=8).place(system)
    with pytest.raises(WorkloadError, match=msg):
        estimate.training_step(graph(), system, ParallelPlan(dp=4, tp=8))
    fn = REGISTRY.get("model.training").fn
    ctx = Context(config=CLUSTER, sets={"cluster.nodes": 2})
    with pytest.raises(WorkloadError, match=r"dp=2 x pp=2 x tp=8 = 32 GPUs do not fit the machine's 16 GPUs: 16 short"):
        fn(ctx, model="llama3-8b", dp=2, tp=8, pp=2, seq=128)
    # the same plan fits four boxes
    assert len(ParallelPlan(dp=2, tp=8, pp=2).place(cluster(4)).pes) == 32


def test_model_training_passes_interleave_and_ep_to_the_plan():
    """model.training's ep reaches ParallelPlan (ep must divide dp; a dense model has no experts to place) and
    interleave its pipeline (refused without pp > 1), each with the plan's own message."""
    fn = REGISTRY.get("model.training").fn
    ctx = Context(config=CLUSTER, sets={"cluster.nodes": 2})
    with pytest.raises(WorkloadError, match=r"ep = 3 .* must divide dp = 2"):
        fn(ctx, model="llama3-8b", dp=2, tp=8, ep=3, seq=128)
    with pytest.raises(WorkloadError, match=r"ep = 2 .*no experts"):
        fn(ctx, model="llama3-8b", dp=2, tp=8, ep=2, seq=128)
    with pytest.raises(WorkloadError, match=r"interleave = 2 .* needs pp > 1"):
        fn(ctx, model="llama3-8b", tp=8, interleave=2, seq=128)


@pytest.mark.slow
def test_model_training_runs_on_two_nodes():
    """model.training of GPT-2 (12 layers, seq 128) at dp 2 x tp 4 x pp 2 = all 16 GPUs of two DGX H100 boxes (about
    7 s wall on 2 shared cores): tokens per GPU = dp x micro-batch x grad_accum x seq / step / GPUs, MFU in (0, 1).
    (LLaMA-3-8B at tp 8 x pp 2, seq 128: 13 s; with interleave 2 the reuse finds no periodic window and simulates
    the whole step: 80 s -- docs/model-estimates.md.)"""
    fn = REGISTRY.get("model.training").fn
    ctx = Context(config=CLUSTER, sets={"cluster.nodes": 2})
    r = fn(ctx, model="gpt2", dp=2, tp=4, pp=2, seq=128, grad_accum=2)
    assert r["tokens_per_gpu"] == pytest.approx(2 * 2 * 128 / (r["step"] * 1e-3) / 16)
    assert 0 < r["mfu"] < 1

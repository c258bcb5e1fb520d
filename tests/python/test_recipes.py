"""The published recipes (kernbench.workloads.recipes): each names a plan Megatron would accept, fits its GPUs'
memory with the distributed optimizer by kernbench's check, and its dp and micro-batches follow from its GPUs and
global batch as Megatron derives them. Bad recipes are named errors. (Their steps are timed by the training-scale
bench: ``kernbench run --bench training-scale --set bench.recipes=all``.)"""

from __future__ import annotations

import pytest

from kernbench.workloads import WorkloadError, recipes
from kernbench.workloads.memory import check_training, spec_of_graph, training_footprint

GIB = 1 << 30


@pytest.mark.parametrize("name", recipes.names())
def test_every_recipe_fits_its_gpus_with_the_distributed_optimizer(name):
    """The recipe's plan, placed on its machine, fits each rank's HBM less the training reserve (the check
    training_step makes before simulating); every recipe shards its optimizer state as Megatron's distributed
    optimizer does (zero1)."""
    r = recipes.get(name)
    assert r.sharding == "zero1"
    plan = r.plan()
    graph = r.graph()
    spec, held = spec_of_graph(graph)
    fp = training_footprint(spec, plan, micro_batch=held["micro_batch"], seq=held["seq"], precision=held["dtype"],
                            layers=held["layers"], embed=held["embed"], head=held["head"])
    info = check_training(fp, r.system(), plan, name)
    assert info["fits"] and 0 < info["peak_gib"] <= info["budget_gib"] < 80e9 / GIB


def test_dp_and_microbatches_follow_megatron():
    """dp = GPUs / (tp x pp x cp); micro-batches = global batch / (dp x micro-batch); the plan carries them."""
    r = recipes.get("nemo-llama3.1-405b-2304")
    assert (r.dp, r.microbatches) == (2304 // (8 * 9 * 2), 63)
    plan = r.plan()
    assert (plan.dp, plan.tp, plan.pp, plan.cp, plan.interleave, plan.microbatches, plan.sp) == (16, 8, 9, 2, 7, 63,
                                                                                                  True)
    assert plan.size == 2304
    gpt = recipes.get("nemo-gpt3-175b-512")
    assert (gpt.dp, gpt.microbatches, gpt.global_batch) == (16, 64, 1024)


def test_bad_recipe_is_named():
    """An unknown name lists the known ones; GPUs that tp x pp x cp do not divide are refused with both figures."""
    with pytest.raises(WorkloadError, match="unknown recipe 'nope'.*nemo-gpt3-175b-128"):
        recipes.get("nope")
    from dataclasses import replace
    bad = replace(recipes.get("nemo-gpt3-175b-128"), gpus=100)
    with pytest.raises(WorkloadError, match="100 GPUs are not a multiple of tp x pp x cp = 32"):
        bad.plan()

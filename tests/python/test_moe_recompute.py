"""Full recompute with MoE layers (issue 53 item 6): as Megatron-LM's checkpointed layer, the recomputed forward of
an MoE layer repeats its dispatch and combine all-to-alls over the EP group and its experts' GEMMs, every replica at
once (kernbench.workloads.training, moe_train.drive), right before the layer's backward. Small steps on the H100
box: Mixtral-8x7B (every layer MoE, one repeated block) and DeepSeek-MoE-16B (a dense first layer: the layers are
stamped out, no repeated block)."""

from __future__ import annotations

import pytest

import kernbench
from kernbench.workloads import WorkloadError, estimate, get_model, handbuilt
from kernbench.workloads.graph import WorkloadGraph
from kernbench.workloads.lower import lower
from kernbench.workloads.plan import ParallelPlan

H100 = "machines/h100-8x-nvswitch.yaml"


def transfers(lw, pass_: str) -> dict[tuple, list[int]]:
    """(op, microbatch, group, tp rank) -> the program ops of the dispatch and combine transfers of ``pass_``."""
    return {(r["op"], r["microbatch"], r["group"], r["tp_rank"]):
            [o for mat in (r["dispatch_ops"], r["combine_ops"]) for row in mat for o in row if o >= 0]
            for r in lw.moe if r["pass"] == pass_}


@pytest.mark.parametrize("model, dp", [("mixtral-8x7b", 2), ("deepseek-moe-16b", 4)])
def test_full_recompute_repeats_each_moe_layers_forward_and_all_to_alls(model, dp):
    """dp = ep, two layers, no embedding or head (every op in a layer): with recompute='full' the recomputed GEMM
    FLOPs equal the forward's (the experts' included), the forward and backward FLOPs are unchanged, the
    all-to-all transfers are the no-recompute step's plus the forward's again, the recomputed dispatch and combine
    carry the forward's tokens, and the step is longer."""
    g = get_model(model).graph(1, 64, layers=2, embed=False, head=False)
    plan = ParallelPlan(dp=dp, ep=dp)
    none = estimate.training_step(g, kernbench.System.load(H100), plan, reuse=False)
    full = estimate.training_step(g, kernbench.System.load(H100), ParallelPlan(dp=dp, ep=dp, recompute="full"),
                                  reuse=False)
    assert full.gemm_flops["recompute"] == full.gemm_flops["forward"] == none.gemm_flops["forward"] > 0
    assert full.gemm_flops["backward"] == none.gemm_flops["backward"]
    fwd, again = transfers(full.lowered, "forward"), transfers(full.lowered, "recompute")
    # one EP group, tp 1, one microbatch: a record per MoE op (Mixtral's 2 layers; DeepSeek's layer 1, its layer 0
    # dense)
    assert set(again) == set(fwd) and len(fwd) == {"mixtral-8x7b": 2, "deepseek-moe-16b": 1}[model]
    moved = sum(len(v) for v in fwd.values())
    assert moved > 0 and sum(len(v) for v in again.values()) == moved
    assert full.counts["alltoall"] == none.counts["alltoall"] + moved
    for f, r in zip(sorted((x for x in full.lowered.moe if x["pass"] == "forward"), key=_key),
                    sorted((x for x in full.lowered.moe if x["pass"] == "recompute"), key=_key)):
        assert r["dispatch_tokens"] == f["dispatch_tokens"] and r["expert_tokens"] == f["expert_tokens"]
    assert full.step_ms > none.step_ms


def _key(rec):
    return rec["op"], rec["microbatch"], rec["group"], rec["tp_rank"]


def test_the_recomputed_all_to_alls_run_between_the_forward_and_the_layers_backward():
    """Mixtral, dp = ep = 2, tp 2, two microbatches: each MoE op's recomputed transfers start after its forward's
    transfers end and end before its backward's begin (the recompute runs right before the layer's backward); and
    at tp 2 without sp the recompute gathers the output's token slices again, as the forward does."""
    g = get_model("mixtral-8x7b").graph(1, 64, layers=2, embed=False, head=False)
    lw = lower(g, kernbench.System.load(H100), ParallelPlan(dp=2, ep=2, tp=2, microbatches=2, recompute="full"),
               phase="train")
    ops = lw.run()._core.ops()
    start, end = ops["start_ps"], ops["end_ps"]
    fwd, again, back = (transfers(lw, p) for p in ("forward", "recompute", "backward"))
    assert set(fwd) == set(again) == set(back) and len(fwd) == 2 * 2 * 2  # ops x microbatches x tp ranks
    for key in fwd:
        assert max(end[o] for o in fwd[key]) <= min(start[o] for o in again[key])
        assert max(end[o] for o in again[key]) <= min(start[o] for o in back[key])
    gathers = [s for s in lw.spans if s.kind == "all_gather" and ".experts" in s.name]
    assert sum(1 for s in gathers if s.pass_ == "recompute") == sum(1 for s in gathers if s.pass_ == "forward") > 0


def test_full_recompute_of_a_graph_naming_no_layers_is_refused():
    """A graph with neither a repeated block nor meta['layer_prefix'] has no layer to recompute: full recompute is
    refused rather than silently recomputing nothing."""
    g = handbuilt.llama_graph(1, 16, dims={"hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64,
                                           "intermediate": 512, "vocab": 1024}, layers=2, embed=False, head=False)
    flat = WorkloadGraph("flat", g.ops, source=g.source, inputs=g.inputs, meta=g.meta)
    with pytest.raises(WorkloadError, match="recompute='full' recomputes each layer's forward, and the graph names "
                                            "no layers"):
        lower(flat, kernbench.System.load(H100), ParallelPlan(recompute="full"), phase="train")

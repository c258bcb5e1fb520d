"""MoE layers with expert parallelism (kernbench.workloads.moe, moe_lower): routing counts, the catalog's MoE
models, the dispatch/combine transfers, load skew on the critical path, and the refusals."""

from __future__ import annotations

import json

import pytest

import kernbench
from kernbench.workloads import WorkloadError, get_model, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.moe import capacity, routing_counts
from kernbench.workloads.plan import ParallelPlan

SIP = {"system.sips.w": 1, "system.sips.h": 1}
# A small Mixtral-like model: 8 experts, top-2 (fast to simulate)
SMALL = {"hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64, "intermediate": 512, "vocab": 1024, "layers": 2,
         "experts": 8, "top_k": 2, "expert_ffn": 512}


@pytest.fixture(scope="module")
def sip():
    return kernbench.System.load(set=SIP)


def small(batch=2, seq=64, **moe):
    return handbuilt.decoder_graph(batch, seq, dims={**SMALL, **moe}, embed=False, head=False, name="small-moe")


def test_catalog_parameter_counts():
    """Mixtral-8x7B (46.7 B total, 12.9 B active) and DeepSeek-MoE-16B (16.4 B, 2.8 B) within 3 %, and the
    hand-built graph holds exactly the spec's parameters."""
    for name, total, active in (("mixtral-8x7b", 46.7e9, 12.9e9), ("deepseek-moe-16b", 16.4e9, 2.8e9)):
        spec = get_model(name)
        assert abs(spec.params / total - 1) < 0.03, (name, spec.params)
        assert abs(spec.active_params / active - 1) < 0.03, (name, spec.active_params)
        assert spec.graph(1, 16).param_count == spec.params
    ds = get_model("deepseek-moe-16b").graph(1, 16)
    assert [op.name for op in ds.ops if op.kind == "moe"][0] == "model.layers.1.mlp.experts"  # layer 0 is dense
    assert any(op.name == "model.layers.0.mlp.down_proj" and op.attrs["k"] == 10944 for op in ds.ops)
    assert get_model("llama3-8b").active_params == get_model("llama3-8b").params


@pytest.mark.parametrize("name", ["mixtral-8x7b", "deepseek-moe-16b"])
def test_moe_prefill_flops_are_twice_the_active_parameters_per_token(name):
    """An MoE prefill's GEMMs (the linears and the experts' three GEMMs per routed token) do 2 x the active
    non-embedding parameters FLOPs per token (dropless); the LM head adds 2 x vocab x hidden."""
    spec = get_model(name)
    seq = 512
    body = spec.graph(1, seq, head=False)
    H, F = spec.hidden, spec.expert_ffn
    experts = sum(sum(op.attrs["counts"]) * 6 * H * F for op in body.ops if op.kind == "moe")
    gemm = body.by_kind()["matmul"]["flops"] + experts
    assert gemm == pytest.approx(2 * (spec.active_params - spec.embedding_params) * seq, rel=0.01)
    full = spec.graph(1, seq)
    assert full.by_kind()["matmul"]["flops"] - body.by_kind()["matmul"]["flops"] == 2 * spec.vocab * H * seq
    assert full.by_kind()["attention"]["ops"] == spec.layers


def test_routing_counts_are_exact_and_seeded(tmp_path):
    """Every distribution gives whole counts summing to tokens x top_k, none over tokens; the same seed gives the
    same counts; a hot expert gets factor x the others' share; a count file is read as given."""
    for kw in ({}, {"skew": {"kind": "zipf", "s": 1.1}}, {"hot": {"expert": 3, "factor": 4}},
               {"skew": {"kind": "zipf", "s": 4.0}}):
        c = routing_counts(1000, 8, 2, seed=7, **kw)
        assert sum(c) == 2000 and max(c) <= 1000 and min(c) >= 0, (kw, c)
        assert c == routing_counts(1000, 8, 2, seed=7, **kw)
    assert routing_counts(1000, 8, 2) == [250] * 8
    hot = routing_counts(1100, 8, 2, hot={"expert": 3, "factor": 4})
    assert hot[3] == 800 and all(c == 200 for i, c in enumerate(hot) if i != 3)
    z = [routing_counts(1000, 8, 2, skew={"kind": "zipf", "s": 1.1}, seed=s) for s in (0, 1)]
    assert z[0] != z[1] and sorted(z[0]) == sorted(z[1])  # the seed permutes which experts are popular
    f = tmp_path / "counts.csv"
    f.write_text("10,20,30,40\n")
    assert routing_counts(50, 4, 2, counts=str(f)) == [10, 20, 30, 40]
    assert capacity(1000, 8, 2, 1.25) == 313 and capacity(1000, 8, 2, None) is None


def test_dropless_dispatch_equals_combine(sip):
    """With a capacity that drops nothing, the tokens the lowering dispatched and combined (its transfer records,
    whose transfers ran) and the tokens the expert GEMMs ran are batch x seq x top_k per replica."""
    B, S, K, dp = 2, 64, 2, 4
    g = small(B, S, routing={"skew": {"kind": "zipf", "s": 1.1}, "seed": 3}, capacity_factor=8.0)
    lw = lower(g, sip, ParallelPlan(dp=dp, ep=2, tp=2))
    res = lw.run()
    ops = res._core.ops()
    per_layer: dict[str, list[int]] = {}
    for rec in lw.moe:
        d, c = rec["dispatch_tokens"], rec["combine_tokens"]
        acc = per_layer.setdefault(rec["op"], [0, 0, 0, 0])
        acc[0] += sum(map(sum, d))
        acc[1] += sum(map(sum, c))
        acc[2] += sum(rec["expert_tokens"].values())
        acc[3] += rec["dropped"]
        for mat in (rec["dispatch_ops"], rec["combine_ops"]):
            for s, row in enumerate(mat):
                for j, o in enumerate(row):
                    assert (o >= 0) == (s != j)  # a transfer per off-diagonal pair (every pair has tokens here)
                    if o >= 0:
                        assert ops["end_ps"][o] > ops["start_ps"][o] >= 0
    assert len(per_layer) == 2
    for name, (disp, comb, ran, dropped) in per_layer.items():
        assert disp == comb == ran == B * S * K * dp, name
        assert dropped == 0
    # a tight capacity drops tokens and the lowering counts them
    tight = lower(small(B, S, routing={"hot": {"expert": 0, "factor": 8}}, capacity_factor=1.0), sip,
                  ParallelPlan(dp=2, ep=2))
    drops = sum(r["dropped"] for r in tight.moe)
    assert drops > 0
    assert sum(sum(r["expert_tokens"].values()) for r in tight.moe) == 2 * 2 * B * S * K - drops


def test_alltoall_bytes_follow_the_routing(sip):
    """Each dispatch transfer carries the tokens its source routes to the destination's experts x hidden x 2 bytes
    (bf16), and the combine returns the same bytes the other way; EP rank j holds experts j*E/ep ..."""
    g = small(1, 128, routing={"hot": {"expert": 5, "factor": 4}})
    counts = next(op for op in g.ops if op.kind == "moe").attrs["counts"]
    lw = lower(g, sip, ParallelPlan(dp=4, ep=4))
    assert {r["group"] for r in lw.moe} == {0}
    for rec in lw.moe:
        assert rec["sent"] == counts and rec["pes"] == list(lw.placement.ep_group(0, 0, 0))
        for s in range(4):
            for j in range(4):
                want = (counts[2 * j] + counts[2 * j + 1]) * 256 * 2
                assert rec["dispatch_bytes"][s][j] == want
                assert rec["combine_tokens"][j][s] * 256 * 2 == want
        assert rec["expert_tokens"] == {e: 4 * c for e, c in enumerate(counts)}
    assert lw.counts["alltoall"] == 2 * 12 * 2  # 2 layers x (dispatch + combine) x 12 off-diagonal pairs


def test_hot_expert_lengthens_the_step_by_its_gemms(sip):
    """Mixtral, one layer, dp = ep = 4: expert 3 given 4x its share lengthens the step by the extra time of the
    expert GEMMs on its rank (EP rank 1: experts 2, 3), within 5 %: the other ranks wait at the combine for it,
    and what else changes (more bytes into rank 1, fewer elsewhere) is a few percent of that. The critical
    path runs through experts.3."""
    spec = get_model("mixtral-8x7b")
    out = {}
    for key, routing in (("uniform", None), ("hot", {"hot": {"expert": 3, "factor": 4}})):
        g = spec.graph(1, 256, layers=1, embed=False, head=False, routing=routing)
        lw = lower(g, sip, ParallelPlan(dp=4, ep=4))
        res = lw.run()
        rank1 = lw.intervals(res, lambda s: s.name.endswith((".experts.2", ".experts.3")))
        out[key] = (res.makespan_ps, rank1, lw.critical_spans(res))
    extra_step = out["hot"][0] - out["uniform"][0]
    extra_gemms = out["hot"][1] - out["uniform"][1]
    assert extra_gemms > 0.3 * out["uniform"][0]
    assert abs(extra_step / extra_gemms - 1) < 0.05, (extra_step, extra_gemms)
    assert "model.layers.0.block_sparse_moe.experts.3" in out["hot"][2]
    assert "model.layers.0.block_sparse_moe.experts.3" not in out["uniform"][2]


def test_refusals(sip, tmp_path):
    """ep not dividing dp, ep on a dense model, experts not divisible by ep, a training step of MoE layers with a
    sharding other than none, and a malformed count file are WorkloadErrors naming the values and the file."""
    with pytest.raises(WorkloadError, match="ep = 3 .* must divide dp = 4"):
        ParallelPlan(dp=4, ep=3)
    dense = handbuilt.decoder_graph(1, 16, dims={k: v for k, v in SMALL.items() if k not in ("experts", "top_k",
                                                                                            "expert_ffn")})
    with pytest.raises(WorkloadError, match="ep = 2 .* has no experts"):
        lower(dense, sip, ParallelPlan(dp=2, ep=2))
    with pytest.raises(WorkloadError, match="8 experts are not divisible by ep = 3"):
        lower(small(1, 16), sip, ParallelPlan(dp=3, ep=3))
    with pytest.raises(WorkloadError, match="sharding 'zero2' with MoE layers"):  # training: sharding none only
        lower(small(1, 16), sip, ParallelPlan(dp=2, ep=2, sharding="zero2"), phase="train")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2,")
    with pytest.raises(WorkloadError, match="bad.json.*not valid JSON"):
        small(1, 16, routing={"counts": str(bad)})
    bad.write_text(json.dumps({"counts": [4] * 8}))
    assert routing_counts(16, 8, 2, counts=str(bad)) == [4] * 8  # well formed: read as given
    bad.write_text(json.dumps([5] * 8))
    with pytest.raises(WorkloadError, match=r"bad.json.*sum to 40, not tokens x top_k = 16 x 2 = 32"):
        small(1, 16, routing={"counts": str(bad)})
    bad.write_text(json.dumps([4] * 7))
    with pytest.raises(WorkloadError, match="bad.json.*7 counts for 8 experts"):
        small(1, 16, routing={"counts": str(bad)})
    csvf = tmp_path / "bad.csv"
    csvf.write_text("4,4,4,x,4,4,4,4\n")
    with pytest.raises(WorkloadError, match=r"bad.csv.*row 1 column 4 = 'x' is not a whole number"):
        small(1, 16, routing={"counts": str(csvf)})
    with pytest.raises(WorkloadError, match="routing and capacity_factor are MoE inputs"):
        get_model("llama2-7b").graph(1, 16, routing={"skew": {"kind": "zipf"}})

"""The workload lowering (kernbench.workloads.plan / lower / estimate / training) on hand-built op graphs."""

from __future__ import annotations

import pytest

import kernbench
from kernbench import llama
from kernbench.workloads import Op, TensorSpec, WorkloadError, WorkloadGraph, estimate, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.plan import ParallelPlan
from kernbench.workloads.training import one_f_one_b

SIP = {"system.sips.w": 1, "system.sips.h": 1}
# A small LLaMA-like model (fast to simulate): 8 heads of 64, 8 KV heads (tp 8 gives each rank one group).
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 1024, "vocab": 4096, "layers": 2}


@pytest.fixture()
def sip():
    return kernbench.System.load(set=SIP)


# ---- plan ---------------------------------------------------------------------------------
def test_plan_errors_name_what_does_not_fit(sip):
    """A plan that needs more PEs than the machine has, a bad tp, sp without tp, an unknown rule or PE, more pipeline
    stages than layers, or a tp that does not divide the heads is a WorkloadError naming the numbers."""
    n = len(sip.pes())
    with pytest.raises(WorkloadError, match=rf"dp=2 x pp=1 x tp={n} = {2 * n} PEs do not fit the machine's {n} PEs: {n} short"):
        ParallelPlan(dp=2, tp=n).place(sip)
    with pytest.raises(WorkloadError, match="tp must be an integer >= 1"):
        ParallelPlan(tp=0)
    with pytest.raises(WorkloadError, match="sp .* needs tp > 1"):
        ParallelPlan(sp=True)
    with pytest.raises(WorkloadError, match=r"rules\['x'\] = 'diagonal'"):
        ParallelPlan(rules={"x": "diagonal"})
    with pytest.raises(WorkloadError, match="is not a PE of the machine"):
        ParallelPlan(tp=2, pes=["nope", sip.pes()[0]]).place(sip)
    g = handbuilt.llama_graph(1, 16, dims=SMALL, layers=2)
    with pytest.raises(WorkloadError, match="pp = 4 pipeline stages but only 2 layers"):
        lower(g, sip, ParallelPlan(pp=4))
    with pytest.raises(WorkloadError, match="tp = 16 does not divide the 8 query heads"):
        lower(g, sip, ParallelPlan(tp=16))


def test_placement_is_megatron_rank_order(sip):
    """ParallelPlan.place fills ranks in Megatron-LM's order, tp innermost, then dp, then pp: a replica's stage is
    tp consecutive PEs, the replicas of a stage follow each other, then the next stage's."""
    pl = ParallelPlan(dp=2, tp=4, pp=2).place(sip)
    pes = sip.pes()
    assert pl.group(0, 0) == tuple(pes[0:4]) and pl.group(1, 0) == tuple(pes[4:8])
    assert pl.group(0, 1) == tuple(pes[8:12]) and pl.group(1, 1) == tuple(pes[12:16]) and len(pl.pes) == 16


# ---- lowering -------------------------------------------------------------------------------
def test_megatron_rules_and_counts(sip):
    """At tp 8 a LLaMA layer lowers by Megatron's rules (fused column-parallel qkv and gate/up, row-parallel o and
    down) to 4 GEMMs per rank, one attention per KV group and 2 all-reduces, executing every GEMM FLOP once; a rule
    override replaces the data-flow rule."""
    g = handbuilt.llama_graph(1, 32, dims=SMALL, layers=1, embed=False, head=False)
    lo = lower(g, sip, ParallelPlan(tp=8))
    rules = {name.rsplit(".", 1)[-1]: r for name, r in lo.rules.items()}
    assert rules == {"q_proj": ("column", 3), "o_proj": ("row", 1), "gate_proj": ("column", 2),
                     "down_proj": ("row", 1)}
    # per rank: fused qkv, o, fused gate/up, down = 4 GEMMs; one attention program per KV group; 2 all-reduces
    assert lo.counts["gemm"] == 4 * 8 and lo.counts["attention"] == 8 and lo.counts["all_reduce"] == 2
    # every GEMM FLOP of the graph is executed exactly once over the ranks
    assert lo.gemm_flops == sum(op.flops for op in g.ops if op.kind == "matmul")
    # the override map wins over the data-flow rule
    lo2 = lower(g, sip, ParallelPlan(tp=8, rules={"model.layers.0.mlp": "replicated"}))
    assert lo2.counts["all_reduce"] == 1


def test_same_as_hand_built_llama_layer(sip):
    """LLaMA-3.1-70B decoder layer at tp 8: op counts and time vs the hand-built llama-layer (chunks = 1,
    the same schedule; the vector ops differ by construction -- docs/model-estimates.md)."""
    T = 128
    g = handbuilt.llama_graph(1, T, dims=handbuilt.LLAMA3_70B, layers=1, embed=False, head=False)
    lo = lower(g, sip, ParallelPlan(tp=8), precision="bf16")
    res = lo.run()
    ref_sys = kernbench.System.load(set=SIP)
    ref = llama.layer(ref_sys, "prefill", T, tp=8, chunks=1)
    df = ref.run.ops_df()
    assert lo.counts["gemm"] == 4 * 8
    assert lo.counts["attention"] == 8  # one GQA program per KV group, as the hand-built layer
    assert lo.counts["all_reduce"] == 2
    assert lo.gemm_flops == pytest.approx(ref.plan["flops_model"] - ref.plan["flops_attention"], rel=1e-12)
    rel = abs(res.makespan_ps - ref.latency_ps) / ref.latency_ps
    assert rel < 0.02, (res.makespan_ps, ref.latency_ps, len(df))


def test_unlowerable_op_names_op_and_module(sip):
    """An op with no lowering (a 3-D convolution, a matmul missing an attr) is a WorkloadError naming the op, its
    kind and target and what is missing, never a silent zero."""
    x = TensorSpec((1, 8, 16, 16, 16), "fp16")
    ops = [Op("model.encoder.conv3d", "conv", "aten.convolution.default", (x,), (x,), flops=10,
              attrs={"kernel": [3, 3, 3], "gemm_m": 1, "gemm_n": 1, "gemm_k": 1, "batch": 1})]
    with pytest.raises(WorkloadError, match=r"'model.encoder.conv3d' \(conv, aten.convolution.default\): "
                                            r"no lowering for a 3-D convolution"):
        lower(WorkloadGraph("bad", ops), sip)
    ops = [Op("model.blk.mm", "matmul", "aten.mm.default", (x,), (x,), flops=10, attrs={"m": 4, "k": 4})]
    with pytest.raises(WorkloadError, match=r"'model.blk.mm' .*no lowering: attrs n missing"):
        lower(WorkloadGraph("bad", ops), sip)


def test_determinism_bit_identical():
    """Lowering and running the same graph and plan on two fresh machines gives the same makespan to the picosecond."""
    def once():
        s = kernbench.System.load(set=SIP)
        g = handbuilt.llama_graph(2, 16, dims=SMALL, layers=2)
        return lower(g, s, ParallelPlan(tp=4, dp=2)).run().makespan_ps
    assert once() == once()


# ---- estimates --------------------------------------------------------------------------------
def test_block_reuse_matches_full_lowering():
    """Simulating one repeated layer and scaling (reuse=True) gives the full lowering's GEMM FLOPs exactly and its
    time within 2 %."""
    g = handbuilt.llama_graph(1, 32, dims=SMALL, layers=4)
    full = estimate.simulate(g, kernbench.System.load(set=SIP), ParallelPlan(tp=8), reuse=False)
    one = estimate.simulate(g, kernbench.System.load(set=SIP), ParallelPlan(tp=8), reuse=True)
    assert one.layers == 4 and one.gemm_flops == full.gemm_flops
    assert one.time_ps == pytest.approx(full.time_ps, rel=0.02)


def test_inference_kv_cache_grows_and_decode_is_monotone(sip):
    """estimate.inference grows the KV length by one per decode step with the cache bytes that follow, reports
    positive TTFT and TPOT, tokens/s from them, and non-decreasing step times; a decode graph not at q_len 1 is
    refused."""
    build = lambda b, s, kv: handbuilt.llama_graph(b, s, kv, dims=SMALL)  # noqa: E731
    est = estimate.inference(build, sip, ParallelPlan(tp=8), batch=2, prompt=64, decode_steps=4, kv_samples=None)
    kv = [s["kv_len"] for s in est.steps]
    assert kv == [65, 66, 67, 68]
    cache = [s["kv_cache_bytes"] for s in est.steps]
    # K and V, 2 layers, batch 2, 8 KV heads of 64, bf16
    assert cache == [2 * 2 * 2 * k * 8 * 64 * 2 for k in kv]
    assert est.ttft_ms > 0 and est.tpot_ms > 0
    assert est.tokens_per_s == pytest.approx(2 * 5 / ((est.ttft_ms + est.decode_ms) * 1e-3))
    times = [s["time_ms"] for s in est.steps]
    assert times == sorted(times)
    with pytest.raises(WorkloadError, match="decode needs the graph at q_len = 1"):
        estimate.inference(build(1, 8, 8), sip, batch=1, prompt=8, decode_steps=2)


def test_training_backward_is_twice_forward_gemm_flops(sip):
    """A training step's backward GEMM FLOPs are twice the forward's (dgrad and wgrad), the gradient all-reduce and
    optimizer take time, and the step is shorter than the sum of its parts because the all-reduce overlaps the
    backward."""
    g = handbuilt.llama_graph(1, 32, dims=SMALL, layers=2)
    tr = estimate.training_step(g, sip, ParallelPlan(tp=4, dp=2))
    f, b = tr.gemm_flops["forward"], tr.gemm_flops["backward"]
    assert f == sum(op.flops for op in g.ops if op.kind == "matmul") * 2  # two replicas
    assert b == 2 * f
    assert tr.grad_allreduce_ms > 0 and tr.optimizer_ms > 0
    # the gradient all-reduce overlaps the backward: the step is shorter than the sum of its parts
    assert tr.step_ms < tr.forward_ms + tr.backward_ms + tr.grad_allreduce_ms + tr.optimizer_ms


def test_one_f_one_b_order_and_bubble():
    """one_f_one_b gives each stage its warm-up forwards then alternating F/B, and a 2-stage, 4-microbatch step's
    simulated bubble is within 0.08 of the analytic 1/5."""
    assert one_f_one_b(2, 3) == [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("B", 2)],
                                 [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]]
    s = kernbench.System.load(set=SIP)
    g = handbuilt.llama_graph(1, 32, dims=SMALL, layers=4, embed=False, head=False)
    tr = estimate.training_step(g, s, ParallelPlan(tp=2, pp=2, microbatches=4))
    assert tr.bubble_analytic == pytest.approx(1 / 5)
    assert tr.bubble == pytest.approx(tr.bubble_analytic, abs=0.08)


# ---- K200: an op list through the platform's interface -------------------------------------------
def _c1_name(n):
    """The hand-written C1 layer name -> the HF ResNetModel module of the same conv."""
    if n == "conv1":
        return "embedder.embedder.convolution"
    blk, part = n.split(".")
    s, b = blk[1:].split("b")
    sub = {"conv1": "layer.0", "conv2": "layer.1", "conv3": "layer.2", "down": "shortcut"}[part]
    return f"encoder.stages.{int(s) - 1}.layers.{int(b) - 1}.{sub}.convolution"


def test_k200_run_ops_matches_hand_written_c1_layers():
    """k200.lower_ops turns ResNet-50's graph into the hand-written C1 layers' GEMMs and im2cols plus its adds and
    pools and runs them; attention becomes score GEMM, softmax, context GEMM; an op kind with no K200 lowering is a
    ConfigError naming the op."""
    from kernbench import k200

    batch = 1
    g = handbuilt.resnet50_graph(batch)
    steps = {st["name"]: st["kernel"] for st in k200.lower_ops(g.ops, framework_op_us=10)}
    low = k200.resnet50_lowering(batch)
    hand = k200.resnet50_layers(batch)
    for name, m, n, k, _ in hand[:-1]:  # every conv: the same GEMM and im2col (ResNetModel has no fc)
        st = steps[_c1_name(name)]
        assert (st["m"], st["n"], st["k"], st["lowered_from"]) == (m, n, k, low.get(name, 0)), name
    adds = [s for s in steps.values() if s["kind"] == "elementwise"]
    assert len(adds) == 16 + 2  # the residual adds and the two pools
    out = k200.run_ops(k200.load_system("k200.yaml"), g.ops, framework_op_us=10, input_bytes=batch * 3 * 224 * 224 * 4,
                       output_bytes=batch * 2048 * 4)
    assert out["latency_ms"] > 0
    # Attention: no fused K200 kernel -- the score GEMM, the softmax over the scores, the context GEMM.
    sdpa = [Op("model.attn.sdpa", "attention", "aten.scaled_dot_product_attention.default",
               attrs={"batch": 2, "heads": 4, "kv_heads": 4, "q_len": 16, "kv_len": 48, "head_dim": 8})]
    parts = {st["name"]: st["kernel"] for st in k200.lower_ops(sdpa)}
    assert [(p["kind"], p.get("m"), p.get("n"), p.get("k"), p.get("elements")) for p in parts.values()] == [
        ("gemm", 2 * 4 * 16, 48, 8, None), ("elementwise", None, None, None, 2 * 4 * 16 * 48),
        ("gemm", 2 * 4 * 16, 8, 48, None)]
    assert list(parts) == ["model.attn.sdpa.scores", "model.attn.sdpa.softmax", "model.attn.sdpa.context"]
    # A kind with no K200 lowering names the op.
    bad = [Op("model.odd", "reduce", "aten.sum.default", attrs={"elements": 4}), Op("x", "view", "aten.view")]
    object.__setattr__(bad[0], "kind", "unknown")  # every kind the format knows lowers; a newer one might not
    with pytest.raises(kernbench.ConfigError, match=r"op 0 'model.odd' \(unknown, aten.sum.default\): no K200 lowering"):
        k200.lower_ops(bad)


def test_with_kv_len_reshapes_attention_only():
    """with_kv_len(g, 100) gives exactly the attrs and FLOPs of the graph built at kv_len 100: only attention is
    reshaped."""
    g = handbuilt.llama_graph(2, 1, 1, dims=SMALL)
    g2 = estimate.with_kv_len(g, 100)
    ref = handbuilt.llama_graph(2, 1, 100, dims=SMALL)
    assert [op.attrs for op in g2.ops] == [op.attrs for op in ref.ops]
    assert g2.flops == ref.flops

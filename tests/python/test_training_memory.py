"""Memory per rank, for training as for inference (kernbench.workloads.memory; issue 53 item 4, issue 54 items 1-2).

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198),
Table 2: a GPT layer's activations per micro-batch, in bytes, for each case; the footprint reproduces them
exactly on GPT-3 175B's dimensions (s 2048, b 1, h 12288, a 96, t 8). A plan 1 GiB over its GPU's budget is
refused with that shortfall; Mixtral-8x7B's weights are its 46.7 B parameters in BF16 (~87 GiB); and the
regressions of issue 54: Mixtral at tp 1 does not fit one H100 anywhere (serving, model.inference), nor do
GPT-3 175B and LLaMA-3-70B train on one.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from kernbench import System, serving
from kernbench.calibrate import REGISTRY, Context
from kernbench.serving import ServingError
from kernbench.workloads import ParallelPlan, estimate, get_model
from kernbench.workloads import memory
from kernbench.workloads.graph import WorkloadError
from kernbench.workloads.training import warmup_forwards

H100 = "machines/h100-8x-nvswitch.yaml"
GIB = 1 << 30
GPT3 = get_model("gpt3-175b")
S, B, T = 2048, 1, 8
H, A = GPT3.hidden, GPT3.heads
SBH = S * B * H


def _layer(**kw) -> int:
    return memory.layer_activation_bytes(GPT3, seq=S, micro_batch=B, **kw)


# Korthikanti et al. 2022, Table 2 (bytes per layer; eq. 1 is the first row, eq. 2 the second)
TABLE2 = {
    "no parallelism": (dict(tp=1, flash=False), SBH * (34 + Fraction(5 * A * S, H))),
    "tensor parallel": (dict(tp=T, flash=False), SBH * (10 + Fraction(24, T) + Fraction(5 * A * S, H * T))),
    "tensor + sequence parallel": (dict(tp=T, sp=True, flash=False), SBH * Fraction(34 + Fraction(5 * A * S, H), T)),
    "tensor parallel + selective recompute": (dict(tp=T, recompute="selective", flash=False),
                                              SBH * (10 + Fraction(24, T))),
    "tensor + sequence parallel + selective recompute": (dict(tp=T, sp=True, recompute="selective", flash=False),
                                                         SBH * Fraction(34, T)),
    "full recompute": (dict(tp=T, recompute="full", flash=False), 2 * SBH),
}


@pytest.mark.parametrize("case", list(TABLE2))
def test_gpt_layer_activations_are_korthikanti_table_2_exactly(case):
    """Each row of Korthikanti et al.'s Table 2 (activation bytes per layer by parallelism and recompute) comes out of
    layer_activation_bytes exactly, on GPT-3 175B's dimensions."""
    kw, want = TABLE2[case]
    assert want.denominator == 1
    assert _layer(**kw) == want


def test_flash_attention_keeps_no_score_matrix():
    """Flash attention stores no s x s scores: the selective-recompute figure, with or without recompute."""
    for sp in (False, True):
        flash = _layer(tp=T, sp=sp)
        assert flash == _layer(tp=T, sp=sp, recompute="selective", flash=False)
        assert flash == _layer(tp=T, sp=sp, recompute="selective")
    assert _layer(tp=T, sp=True) == 34 * SBH // T


def test_context_parallelism_splits_the_sequence():
    """Context parallelism divides the sequence, so a layer's activations with TP, SP and cp 2 are half of TP + SP's."""
    assert _layer(tp=T, sp=True, cp=2) == 34 * SBH // (2 * T)


def test_stage_activations_are_the_micro_batches_in_flight_of_the_schedule():
    """1F1B keeps min(pp - s, M) micro-batches on stage s; interleaved 1F1B (v chunks) keeps on the first stage
    L (1 + (pp - 1) / (pp v)) layers' worth (Megatron's factor), derived from warmup_forwards."""
    L, pp, M = 96, 4, 8
    a = _layer(tp=T, sp=True)
    plain = memory.training_footprint(GPT3, ParallelPlan(tp=T, pp=pp, sp=True, microbatches=M), micro_batch=B,
                                      seq=S, embed=False, head=False)
    assert plain.layer_activations == a
    for s, st in enumerate(plain.stages):
        assert st.activations == min(pp - s, M) * (L // pp) * a
    for v in (2, 3):
        inter = memory.training_footprint(GPT3, ParallelPlan(tp=T, pp=pp, sp=True, microbatches=M, interleave=v),
                                          micro_batch=B, seq=S, embed=False, head=False)
        first = inter.stages[0]
        assert Fraction(first.activations, a) == L * (1 + Fraction(pp - 1, pp * v))
        assert first.activations > plain.stages[0].activations
        for s, st in enumerate(inter.stages):
            assert st.activations == (warmup_forwards(pp, v, M, s) + 1) * (L // (pp * v)) * a
    # fewer micro-batches than stages: no more than M are ever in flight
    few = memory.training_footprint(GPT3, ParallelPlan(tp=T, pp=pp, sp=True, microbatches=2), micro_batch=B,
                                    seq=S, embed=False, head=False)
    assert [st.activations for st in few.stages] == [2 * 24 * a, 2 * 24 * a, 2 * 24 * a, 24 * a]


def test_output_layer_activations_follow_korthikanti_section_4_3():
    """The last stage adds the output layer: 4 s b h / t (1 + v / h) with SP (v the vocabulary)."""
    plan = ParallelPlan(tp=T, pp=2, sp=True, microbatches=4)
    bare = memory.training_footprint(GPT3, plan, micro_batch=B, seq=S, embed=False, head=False)
    headed = memory.training_footprint(GPT3, plan, micro_batch=B, seq=S, embed=False, head=True)
    out = headed.stages[-1].activations - bare.stages[-1].activations
    assert out == 4 * SBH * (1 + Fraction(GPT3.vocab, H)) / T


def test_state_bytes_follow_adam_mixed_precision_and_sharding():
    """16 B per parameter unsharded (2 + 2 + 12); the per-rank state falls none > zero1 > zero2 > fsdp at
    dp > 1, each part divided by dp x cp exactly where its sharding says."""
    spec = get_model("llama3-8b")
    P = spec.params
    plain = memory.training_footprint(spec, ParallelPlan(), micro_batch=1, seq=1024).stages[0]
    assert (plain.weights, plain.gradients, plain.optimizer) == (2 * P, 2 * P, 12 * P)
    state = {}
    for sh in ("none", "zero1", "zero2", "fsdp"):
        st = memory.training_footprint(spec, ParallelPlan(dp=8, sharding=sh), micro_batch=1, seq=1024).stages[0]
        state[sh] = st.weights + st.gradients + st.optimizer
        assert st.activations == plain.activations
        assert st.optimizer == (12 * P if sh == "none" else 12 * -(-P // 8))
        assert st.gradients == (2 * -(-P // 8) if sh in ("zero2", "fsdp") else 2 * P)
        assert st.weights == (2 * -(-P // 8) if sh == "fsdp" else 2 * P)
    assert state["none"] > state["zero1"] > state["zero2"] > state["fsdp"]
    # context parallelism joins the group the distributed optimizer shards over (dp x cp); ParallelPlan's cp is
    # another change's, read with getattr(plan, "cp", 1)
    with_cp = ParallelPlan(dp=8, sharding="zero1")
    object.__setattr__(with_cp, "cp", 2)
    assert memory.training_footprint(spec, with_cp, micro_batch=1, seq=1024).stages[0].optimizer == 12 * -(-P // 16)


def test_moe_experts_are_counted_on_the_ranks_that_hold_them():
    """A rank holds E / ep routed experts: the weights per rank fall with ep while the dense parts stay."""
    spec = get_model("mixtral-8x7b")
    one = memory.training_footprint(spec, ParallelPlan(pp=4, microbatches=4), micro_batch=1, seq=1024)
    ep8 = memory.training_footprint(spec, ParallelPlan(dp=8, ep=8, pp=4, microbatches=4), micro_batch=1, seq=1024)
    routed = 3 * spec.hidden * spec.expert_ffn * 2  # bytes of one expert of one layer in BF16
    for a, b in zip(one.stages, ep8.stages):
        assert a.weights - b.weights == b.layers * (spec.experts - 1) * routed
    assert sum(st.weights for st in one.stages) == spec.weight_bytes()  # every parameter once over the stages


def test_mixtral_weights_are_its_46_7b_parameters_in_bf16():
    """Mixtral-8x7B's inference weights count every expert: 46.7 B parameters in BF16 (87 GiB), not the 13.5 GiB of its
    dense parts alone."""
    spec = get_model("mixtral-8x7b")
    w = memory.inference_footprint(spec, tp=1, pp=1, batch=1, prompt=1, tokens=1).weights
    assert w == pytest.approx(46.7e9 * 2, rel=0.01)
    assert w / GIB == pytest.approx(87.0, abs=0.05)
    # experts over ep: the other weights stay whole on the rank
    ep8 = memory.inference_footprint(spec, tp=1, pp=1, batch=1, prompt=1, tokens=1, ep=8).weights
    assert w - ep8 == spec.layers * 7 * 3 * spec.hidden * spec.expert_ffn * 2


@pytest.mark.parametrize("kw,name", [(dict(batch=-1), "batch"), (dict(prompt=-128), "prompt"),
                                     (dict(batch=0), "batch"), (dict(tokens=-1), "tokens"), (dict(tp=0), "tp"),
                                     (dict(batch=1.5), "batch")])
def test_inference_footprint_refuses_bad_sizes_by_name(kw, name):
    """A negative or zero size is refused naming the argument (it once gave negative bytes)."""
    args = {**dict(tp=1, pp=1, batch=1, prompt=16, tokens=16), **kw}
    with pytest.raises(WorkloadError, match=f"inference_footprint: {name} must be an integer"):
        memory.inference_footprint(get_model("llama3-8b"), **args)


def _one_gib_over(spec, plan, **kw) -> int:
    """The pe.hbm.capacity (bytes) at which ``plan``'s peak is exactly 1 GiB over the training budget."""
    need = memory.training_footprint(spec, plan, **kw).peak.total
    c = int((need - GIB + memory.TRAINING_RESERVE_BYTES) / (1 - memory.TRAINING_FRAGMENTATION))
    while c - memory.TRAINING_RESERVE_BYTES - int(memory.TRAINING_FRAGMENTATION * c) < need - GIB:
        c += 1
    while c - memory.TRAINING_RESERVE_BYTES - int(memory.TRAINING_FRAGMENTATION * c) > need - GIB:
        c -= 1
    return c


def test_a_plan_one_gib_over_the_budget_is_refused_with_that_shortfall():
    """A plan whose peak stage needs exactly 1 GiB more than the budget is refused with '1.00 GiB short', naming the
    stage and the rank's GPU; check_memory=False reports the same figure."""
    spec = get_model("llama3-8b")
    plan = ParallelPlan(tp=2, pp=2, microbatches=2)
    g = spec.graph(1, 256, layers=4)
    cap = _one_gib_over(spec, plan, micro_batch=1, seq=256, layers=4)
    system = System.load(H100, set={"pe.hbm.capacity": f"{cap} B"})
    with pytest.raises(WorkloadError) as e:
        estimate.training_step(g, system, plan)
    msg = str(e.value)
    # the last stage needs most (its final norm and the fp32 logits: 4 s b v / t); its first GPU is rank
    # 1 x dp x tp = 2 in Megatron's order
    assert memory.training_footprint(spec, plan, micro_batch=1, seq=256, layers=4).peak.stage == 1
    for part in ("does not fit in memory", "pipeline stage 1", "rank 2 (gpu2)", "1.00 GiB short", "weights",
                 "optimizer", "activations", "pe.hbm.capacity", "reserve"):
        assert part in msg, (part, msg)
    # 2 GiB more capacity: it fits, and the budget is the capacity less the stated reserve
    estimate.training_step(g, System.load(H100, set={"pe.hbm.capacity": f"{cap + 2 * GIB} B"}), plan)
    roomy = System.load(H100, set={"pe.hbm.capacity": f"{cap + 2 * GIB} B"})
    budget = memory.training_budget(roomy, "gpu0")
    assert budget["budget"] == cap + 2 * GIB - memory.TRAINING_RESERVE_BYTES - int(
        memory.TRAINING_FRAGMENTATION * (cap + 2 * GIB))
    # check_memory=False: simulated, the figure reported, not refused
    tr = estimate.training_step(g, system.twin(), plan, check_memory=False)
    assert tr.memory["fits"] is False and tr.memory["checked"] is False
    assert tr.memory["peak_gib"] - tr.memory["budget_gib"] == pytest.approx(1.0, abs=1e-6)
    assert tr.row()["memory_peak_gib"] == tr.memory["peak_gib"] and tr.step_ms > 0


@pytest.mark.parametrize("model", ["gpt3-175b", "llama3-70b"])
def test_big_models_do_not_train_on_one_h100(model):
    """Issue 54 item 2: estimate.training_step and model.training refuse them, naming the shortfall."""
    spec = get_model(model)
    with pytest.raises(WorkloadError, match=r"stage 0 needs [\d.]+ GiB per GPU on rank 0 \(gpu0\).*GiB short"):
        estimate.training_step(spec.graph(1, 2048), System.load(H100), ParallelPlan())
    fn = REGISTRY.get("model.training").fn
    with pytest.raises(WorkloadError, match="does not fit in memory.*GiB short"):
        fn(Context(config=H100, sets={}), model=model, seq=2048)


def test_llama3_8b_fits_at_tp_8_with_zero1():
    """LLaMA-3-8B at tp 8 with the distributed optimizer fits one H100's training budget."""
    fp = memory.training_footprint(get_model("llama3-8b"), ParallelPlan(tp=8, dp=1, sharding="zero1"),
                                   micro_batch=1, seq=8192)
    info = memory.check_training(fp, System.load(H100), ParallelPlan(tp=8, sharding="zero1"))
    assert info["fits"] and info["peak_gib"] < info["budget_gib"]


def test_model_training_reports_the_peak_memory_per_gpu():
    """model.training reports the peak GiB per GPU of its plan beside the step."""
    fn = REGISTRY.get("model.training").fn
    r = fn(Context(config=H100, sets={}), model="gpt2", dp=2, seq=128, grad_accum=2, sharding="zero1")
    fp = memory.training_footprint(get_model("gpt2"), ParallelPlan(dp=2, microbatches=2, sharding="zero1"),
                                   micro_batch=1, seq=128, precision="bf16")
    assert r["memory"] == pytest.approx(fp.peak.total / GIB, rel=1e-12) and r["memory"] > 0


def test_an_imported_graph_without_dims_is_not_checked_and_says_why():
    """A graph that records no model dimensions is stepped without the memory check, and the estimate says why."""
    from kernbench.workloads.graph import WorkloadGraph

    g = get_model("llama3-8b").graph(1, 64, layers=2)
    bare = WorkloadGraph.from_dict({**g.to_dict(), "meta": {}})
    tr = estimate.training_step(bare, System.load(H100), ParallelPlan())
    assert "records no model dimensions" in tr.memory["skipped"] and tr.row()["memory_peak_gib"] is None


# ---- issue 54 item 1: Mixtral at tp 1 is refused wherever inference checks memory --------------------------------
def test_kv_capacity_gives_mixtral_fewer_blocks_than_llama3_8b_or_refuses_it():
    """serving.kv_capacity refuses Mixtral at tp 1 on one H100 (its weights leave no KV cache) and gives it fewer
    blocks than LLaMA-3-8B at tp 8."""
    system = System.load(H100)
    with pytest.raises(ServingError, match="mixtral-8x7b at tp 1 pp 1 leaves no KV cache"):
        serving.kv_capacity(get_model("mixtral-8x7b"), system)
    llama = serving.kv_capacity(get_model("llama3-8b"), system, tp=8)
    mixtral = serving.kv_capacity(get_model("mixtral-8x7b"), system, tp=8)
    assert mixtral["kv_bytes_per_token"] == llama["kv_bytes_per_token"]  # 32 layers x 8 KV heads x 128 each
    assert mixtral["weights_bytes"] > 5 * llama["weights_bytes"] / 2 and mixtral["blocks"] < llama["blocks"]


def test_serving_mixtral_at_tp_1_is_refused():
    """serving.run refuses Mixtral at tp 1 on one H100, naming the shortfall."""
    with pytest.raises(ServingError, match="mixtral-8x7b.*leaves no KV cache.*GiB short"):
        serving.run("mixtral-8x7b", config=H100, tp=1, requests=2, prompt=16, output=4)


def test_model_inference_refuses_mixtral_at_tp_1():
    """model.inference's fit check refuses Mixtral at tp 1: 86.99 GiB of weights on one 80 GB GPU."""
    fn = REGISTRY.get("model.inference").fn
    with pytest.raises(WorkloadError, match=r"does not fit in gpu0's memory: weights 86\.99 GiB.*GiB short"):
        fn(Context(config=H100, sets={}), model="mixtral-8x7b", tp=1, prompt=32, output=2)

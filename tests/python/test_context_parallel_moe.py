"""Context parallelism with MoE layers (issue 53, item 2): the EP groups formed over the dp x cp data ranks as
Megatron-Core forms them, each cp rank dispatching its half of the tokens over its EP group, the attention ring in
the same step, the data ranks in lockstep at both kinds of spanning op, the experts' gradients reduced over
dp x cp / ep ranks, replicas 'one' / 'mirror' and the extended step against the full lowering, memory, and the
plans Megatron refuses. On the H100 box (8 GPUs)."""

from __future__ import annotations

import itertools
import math

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, get_model, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.memory import training_footprint
from kernbench.workloads.moe_lower import check_ep

H100 = "machines/h100-8x-nvswitch.yaml"
SMALL = {"hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64, "intermediate": 512, "vocab": 1024, "layers": 2,
         "experts": 8, "top_k": 2, "expert_ffn": 512}


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


def megatron_groups(sizes: dict[str, int], order: str, token: str) -> list[list[int]]:
    """The rank groups of Megatron-Core's ``RankGenerator(...).get_ranks(token)`` (megatron/core/parallel_state.py,
    ``generate_masked_orthogonal_rank_groups``), written from its definition: a global rank is the mixed-radix
    number of its coordinates in ``order`` (the first dimension fastest); a group fixes the dimensions not in
    ``token`` and runs over those in it, groups in mixed-radix order of the fixed ones, ranks in mixed-radix order
    of the varying ones."""
    dims = order.split("-")
    radix = [sizes[d] for d in dims]
    stride = [math.prod(radix[:k]) for k in range(len(dims))]
    vary = [k for k, d in enumerate(dims) if d in token.split("-")]
    fixed = [k for k in range(len(dims)) if k not in vary]

    def mixed(ks):  # every coordinate tuple of dims ks, the first fastest
        return [dict(zip(ks, reversed(c))) for c in itertools.product(*(range(radix[k]) for k in reversed(ks)))]

    return [[sum(stride[k] * v for k, v in {**f, **r}.items()) for r in mixed(vary)] for f in mixed(fixed)]


def megatron_ep_groups(tp: int, cp: int, dp: int, ep: int, pp: int) -> list[list[int]]:
    """Megatron-Core's EP groups: its expert rank generator, order tp-cp-ep-dp-pp with cp 1 (parallel_state's
    ``expert_decoder_rank_generator``), expert tp at its default (the tp size), expert dp = world / (tp ep pp)."""
    world = tp * cp * dp * pp
    sizes = {"tp": tp, "cp": 1, "ep": ep, "dp": world // (tp * ep * pp), "pp": pp}
    return megatron_groups(sizes, "tp-cp-ep-dp-pp", "ep")


@pytest.mark.parametrize("tp,cp,dp,ep,pp", [(1, 2, 2, 2, 1), (1, 2, 2, 4, 1), (1, 2, 4, 2, 1), (1, 2, 4, 8, 1),
                                            (1, 4, 2, 2, 1), (2, 2, 2, 4, 1), (1, 2, 2, 2, 2), (1, 1, 4, 2, 2)])
def test_the_ep_groups_are_megatrons(h100, tp, cp, dp, ep, pp):
    """Placement.ep_group's PEs, as global ranks of the machine's order, are the groups of Megatron-Core's expert
    rank generator: ep consecutive data ranks of the dp x cp data dimension (cp 2, ep 2: the two cp ranks of one
    replica). The dense grid's cp and dp groups stay Megatron's too (its default generator, order tp-cp-ep-dp-pp)."""
    plan = ParallelPlan(tp=tp, cp=cp, dp=dp, ep=ep, pp=pp)
    pl = plan.place(h100)
    rank = {pe: k for k, pe in enumerate(h100.pes())}
    ours = sorted(sorted(rank[pe] for pe in pl.ep_group(g, s, t))
                  for g in range(plan.dp_cp // ep) for s in range(pp) for t in range(tp))
    assert ours == sorted(megatron_ep_groups(tp, cp, dp, ep, pp))
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    cps = sorted(sorted(rank[pe] for pe in pl.cp_group(d, s, t)) for d in range(dp) for s in range(pp)
                 for t in range(tp))
    assert cps == sorted(megatron_groups(dense, "tp-cp-ep-dp-pp", "cp"))
    dps = sorted(sorted(rank[pe] for pe in pl.dp_group(s, t)) for s in range(pp) for t in range(tp))
    assert dps == sorted(megatron_groups(dense, "tp-cp-ep-dp-pp", "dp-cp"))


def test_the_expert_data_parallel_group_spans_dp_x_cp_over_ep(h100):
    """tp 1, cp 2, dp 2, ep 2: each EP rank's expert gradients are all-reduced over dp x cp / ep = 2 GPUs, the
    groups of Megatron-Core's expert generator's ``get_ranks("dp")``; with ep 4 (= dp x cp) nothing is reduced."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=1)
    lo = lower(g, h100, ParallelPlan(dp=2, cp=2, ep=2), phase="train")
    rank = {pe: k for k, pe in enumerate(h100.pes())}
    got = sorted(sorted(rank[pe] for pe in r["pes"]) for r in lo.expert_dp)
    sizes = {"tp": 1, "cp": 1, "ep": 2, "dp": 2, "pp": 1}
    assert got == sorted(megatron_groups(sizes, "tp-cp-ep-dp-pp", "dp")) == [[0, 2], [1, 3]]
    assert not lower(g, h100, ParallelPlan(dp=2, cp=2, ep=4), phase="train").expert_dp


def _alltoall_bytes(lo) -> dict[str, int]:
    """Bytes each GPU sends in the MoE all-to-alls (dispatch and combine, forward and backward) of a run."""
    log = lo.run().log_df()
    return {pe: int(b) for pe, b in log[log.tag_name == "alltoall"].groupby("pe").bytes.sum().items()}


def test_a_cp_2_step_dispatches_half_the_tokens_per_rank_with_the_ring_in_it(h100):
    """Mixtral (2 layers, seq 256) at dp 2, ep 2 against dp 2, cp 2, ep 2 (the EP groups: the two cp ranks of each
    replica): every rank sends half the all-to-all bytes of the cp 1 step (each cp rank dispatches its half of the
    sequence), the expert GEMMs run the same tokens over all ranks (so the step's GEMM FLOPs are the cp 1 step's),
    and the attention ring is in the same step, forward and backward."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=2)
    one = lower(g, h100, ParallelPlan(dp=2, ep=2), phase="train")
    two = lower(g, h100, ParallelPlan(dp=2, cp=2, ep=2), phase="train")
    b1, b2 = _alltoall_bytes(one), _alltoall_bytes(two)
    assert len(b1) == 2 and len(b2) == 4 and len(set(b1.values())) == 1
    assert all(2 * b == b1["gpu0"] for b in b2.values())
    assert two.counts["alltoall"] == 2 * one.counts["alltoall"]  # twice the groups, the same pairs in each

    def expert_tokens(lo, pass_):
        return sum(sum(r["expert_tokens"].values()) for r in lo.moe if r["pass"] == pass_)

    for pass_ in ("forward", "backward"):
        assert expert_tokens(two, pass_) == expert_tokens(one, pass_) == 2 * 2 * 256 * 2  # layers x dp x T x K
    assert two.gemm_flops == pytest.approx(one.gemm_flops, rel=1e-12)
    assert all(r["tokens"] == 2 * 128 for r in two.moe)  # two sources of 128 tokens each
    kv = [r for r in two.cp if r["kind"] == "kv"]
    assert {r["pass"] for r in kv} == {"forward", "backward"}
    assert len([r for r in two.cp if r["kind"] == "dkv"]) == 2 * 2 * 2 * 2  # layers x replicas x cp ranks x steps
    assert not one.cp


def test_uneven_routing_splits_over_the_cp_ranks_and_is_conserved(h100):
    """A skewed routing whose counts do not halve: the cp ranks of a group route different shares (``sent`` None,
    ``sent_by_source`` per source), which add up to the cp 1 step's counts expert by expert; nothing is dropped
    without a capacity, and every expert runs exactly the tokens routed to it."""
    dims = {**SMALL, "routing": {"skew": {"kind": "zipf", "s": 1.1}, "seed": 3}}
    g = handbuilt.decoder_graph(1, 256, dims=dims, embed=False, head=False, name="small-moe")
    counts = [op.attrs["counts"] for op in g.ops if op.kind == "moe"]
    assert any(c % 2 for cs in counts for c in cs)  # some count does not halve
    lo = lower(g, h100, ParallelPlan(cp=2, ep=2), phase="train")
    fwd = [r for r in lo.moe if r["pass"] == "forward"]
    assert len(fwd) == len(counts)
    for r, want in zip(fwd, counts):
        assert r["sent"] is None and len(r["sent_by_source"]) == 2
        assert [a + b for a, b in zip(*r["sent_by_source"])] == list(want)
        assert r["expert_tokens"] == dict(enumerate(want)) and r["dropped"] == 0
        assert [sum(row) for row in r["dispatch_tokens"]] == [sum(s) for s in r["sent_by_source"]]


@pytest.mark.parametrize("dp,ep", [(4, 2), (4, 4), (2, 4)])
def test_one_or_mirrored_replicas_equal_every_data_rank(h100, dp, ep):
    """cp 2 with MoE: data rank r repeats data rank r mod lcm(cp, ep) (the same cp rank, the same EP rank of a
    group at the same cp ranks). 'mirror' reuses those data ranks' compute: it equals the full step (1e-6) with the
    same kernel counts and FLOPs. 'one' lowers them alone, the others only in the dp x cp and expert-data-parallel
    reductions: the same counts and FLOPs, the step within 0.5 % (measured: +0.27 % at dp 4, ep 2; +0.41 % at
    cp 1, dp 8, ep 4, where 'one' appends each expert all-reduce after its first EP group's gradients rather than
    the last's). Both from fewer program ops where there is a data rank to spare."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=1)
    plan = ParallelPlan(dp=dp, cp=2, ep=ep)
    assert plan.period == math.lcm(2, ep)
    full = estimate.training_step(g, System.load(H100), plan, reuse=False, replicas="all", check_memory=False)
    for mode, tol in (("mirror", 1e-6), ("one", 5e-3)):
        got = estimate.training_step(g, System.load(H100), plan, reuse=False, replicas=mode, check_memory=False)
        assert got.step_ms == pytest.approx(full.step_ms, rel=tol) and got.counts == full.counts
        assert got.gemm_flops == pytest.approx(full.gemm_flops, rel=1e-12)
        if plan.period < plan.dp_cp:
            assert got.reuse["ops"][0] < full.reuse["ops"][0]


def test_the_extended_step_equals_the_full_lowering(h100):
    """Mixtral (4 layers, seq 256) at cp 2, ep 2, pp 2, 16 microbatches: the step extended from a window of
    microbatches equals every microbatch simulated within 0.1 %, with the full step's FLOPs and kernel counts."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=4)
    plan = ParallelPlan(cp=2, ep=2, pp=2, microbatches=16)
    ext = estimate.training_step(g, System.load(H100), plan, reuse=True, replicas="all", check_memory=False)
    full = estimate.training_step(g, System.load(H100), plan, reuse=False, replicas="all", check_memory=False)
    assert "microbatches" in ext.reuse["extended"], ext.reuse
    assert full.reuse["microbatches"] == [16] and sum(ext.reuse["microbatches"]) < 48
    assert ext.step_ms == pytest.approx(full.step_ms, rel=1e-3)
    assert ext.gemm_flops == pytest.approx(full.gemm_flops, rel=1e-9)
    assert ext.counts == full.counts


def test_full_recompute_repeats_both_the_ring_and_the_all_to_alls(h100):
    """recompute='full' at cp 2, ep 2: each layer's forward again before its backward, its attention ring
    (``recompute`` kv rows as many as the forward's) and its MoE dispatch (``recompute`` records equal to the
    forward's)."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=2)
    lo = lower(g, h100, ParallelPlan(cp=2, ep=2, recompute="full"), phase="train")
    kv = [r for r in lo.cp if r["kind"] == "kv"]
    assert len([r for r in kv if r.get("pass") == "recompute"]) == len([r for r in kv if r["pass"] == "forward"]) > 0
    moe = {p: sorted((r["op"], r["group"], r["dispatch_tokens"], sorted(r["expert_tokens"].items()))
                     for r in lo.moe if r["pass"] == p) for p in ("forward", "recompute")}
    assert moe["recompute"] == moe["forward"] and moe["forward"]


def test_a_prefill_with_cp_and_experts_splits_the_tokens(h100):
    """An inference prefill at cp 2, ep 2: the ring runs, and each cp rank dispatches its half of the prompt (128
    tokens, top 2, half of them to the other GPU's experts) and takes the results back: 2 x 128 x hidden x 2 bytes
    sent by each GPU."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=1)
    lo = lower(g, h100, ParallelPlan(cp=2, ep=2))
    assert [r["tokens"] for r in lo.moe] == [256] and lo.moe[0]["dispatch_tokens"] == [[128, 128], [128, 128]]
    assert any(r["kind"] == "kv" for r in lo.cp)
    H = get_model("mixtral-8x7b").hidden
    assert _alltoall_bytes(lo) == {"gpu0": 2 * 128 * H * 2, "gpu1": 2 * 128 * H * 2}


def test_memory_counts_the_experts_over_dp_x_cp_over_ep():
    """training_footprint: with a sharded optimizer the routed experts' state is cut over dp x cp / ep ranks, so dp
    2 x cp 2 at ep 2 holds what dp 4 at ep 2 holds, and ep 4 (= dp x cp) keeps each rank's experts' state whole."""
    spec = get_model("mixtral-8x7b")

    def stage(**kw):
        return training_footprint(spec, ParallelPlan(sharding="zero1", **kw), micro_batch=1, seq=4096,
                                  layers=2).stages[0]

    cp, flat, whole = stage(dp=2, cp=2, ep=2), stage(dp=4, ep=2), stage(dp=2, cp=2, ep=4)
    assert (cp.weights, cp.gradients, cp.optimizer) == (flat.weights, flat.gradients, flat.optimizer)
    assert cp.activations < flat.activations  # cp splits the sequence
    # ep 4 holds 2 experts a layer whole (BF16) where ep 2 holds 4; their Adam state is E / ep experts over
    # dp x cp / ep ranks either way: E / (dp x cp)
    assert cp.weights - whole.weights == 2 * 2 * 3 * spec.hidden * spec.expert_ffn * 2
    assert cp.optimizer == whole.optimizer


@pytest.mark.parametrize("dp,cp,ep", [(1, 2, 4), (3, 2, 4), (2, 2, 8)])
def test_an_ep_megatron_refuses_is_refused_naming_the_values(dp, cp, ep):
    """Megatron-Core needs world / (tp x ep x pp) whole: ep must divide dp x cp (not dp alone: dp 1, cp 2, ep 2
    is accepted)."""
    with pytest.raises(WorkloadError, match=rf"ep = {ep} .* must divide dp x cp = {dp} x {cp} = {dp * cp}"):
        ParallelPlan(dp=dp, cp=cp, ep=ep)
    assert ParallelPlan(dp=1, cp=2, ep=2).period == 2


def test_experts_that_do_not_split_over_ep_are_refused():
    """Mixtral's 8 experts over ep 16 (dp 8 x cp 2 allows the ep): refused naming the experts and the ep."""
    g = get_model("mixtral-8x7b").graph(1, 256, layers=1)
    with pytest.raises(WorkloadError, match="8 experts are not divisible by ep = 16"):
        check_ep(g, ParallelPlan(dp=8, cp=2, ep=16))


def test_the_grok_1_recipe_is_a_valid_plan():
    """Grok-1 at TP 4, PP 8, CP 2, EP 8, VP 8 on 512 GPUs: dp 8, its EP groups take 8 of the 16 data ranks (the cp
    ranks of 4 replicas), the experts' gradients are reduced over 2."""
    plan = ParallelPlan(tp=4, pp=8, cp=2, ep=8, dp=8, interleave=8, microbatches=64)
    assert plan.size == 512 and plan.dp_cp // plan.ep == 2 and plan.period == 8
    grok = get_model("grok-1")
    assert grok.experts % plan.ep == 0

"""Context parallelism (ParallelPlan.cp, kernbench.workloads.context): the ring's K/V bytes are the closed form,
the causal chunking balances the attention work exactly, a CP 2 step is the no-CP step's compute split in two,
the ranks are placed in Megatron's order (tp-cp-ep-dp-pp) with the gradients reduced over dp x cp, plans without
cp keep their placement, and bad input is refused by name."""

from __future__ import annotations

import pytest

from kernbench.workloads.gpu_kernels import BACKWARD_FLOPS
from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, handbuilt
from kernbench.workloads.context import ring_steps
from kernbench.workloads.lower import lower

H100 = "machines/h100-8x-nvswitch.yaml"
#: A small GQA decoder: 8 query heads, 4 KV heads (2 per rank at tp 2).
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 4, "head_dim": 64, "intermediate": 1024, "vocab": 4096, "layers": 2}
#: NVLink without cost: the ring's transfers take no time, so a step is its compute (and NCCL's own latencies).
FREE = {"links.nvlink.bandwidth": "1000000 GB/s", "links.nvlink.latency": "0 ns"}


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


def graph(seq=512, batch=2, layers=2, dims=SMALL):
    return handbuilt.llama_graph(batch, seq, dims=dims, layers=layers)


def attn_flops(lo, pass_="forward") -> dict[str, float]:
    """Attention FLOPs of each GPU's kernels in ``pass_`` (Lowered.cp's kernel rows)."""
    out: dict[str, float] = {}
    for r in lo.cp:
        if r["kind"] == "attention" and r["pass"] == pass_:
            out[r["pe"]] = out.get(r["pe"], 0.0) + r["flops"]
    return out


@pytest.mark.parametrize("cp,tp", [(2, 1), (2, 2), (4, 2)])
def test_the_rings_kv_bytes_per_step_are_the_closed_form(h100, cp, tp):
    """Each ring step moves a rank's K/V pair, 2 x (s / cp) x b x kv_heads / tp x head_dim x bytes, from rank i
    to rank i + 1: cp - 1 steps in the forward; in the backward the pairs go round again (cp - 1) and their
    dK/dV cp times (the last back to the owner). The DMAs the run carries have exactly those bytes."""
    s, b = 512, 2
    lo = lower(graph(s, b), h100, ParallelPlan(cp=cp, tp=tp), phase="train")
    pair = 2 * (s // cp) * b * (SMALL["kv_heads"] // tp) * SMALL["head_dim"] * 2
    rows = [r for r in lo.cp if r["kind"] in ("kv", "dkv")]
    assert rows and all(r["bytes"] == pair for r in rows)
    layers, groups = SMALL["layers"], tp  # one ring per layer and tensor-parallel rank
    count = {(r["kind"], r["pass"]): 0 for r in rows}
    for r in rows:
        count[(r["kind"], r["pass"])] += 1
    rings = layers * groups * cp
    assert count == {("kv", "forward"): rings * (cp - 1), ("kv", "backward"): rings * (cp - 1),
                     ("dkv", "backward"): rings * cp}
    for r in rows:  # each send goes to the next cp rank of the same tp rank
        pes = lo.placement.cp_group(r["replica"], r["stage"], r["t"])
        assert (r["src"], r["dst"]) == (pes[r["cp_rank"]], pes[(r["cp_rank"] + 1) % cp])
    log = lo.run().log_df()
    moved = log.groupby("op")["bytes"].max()
    assert all(int(moved[r["op"]]) == pair for r in rows)


@pytest.mark.parametrize("cp", [2, 3, 4, 8])
def test_the_causal_chunking_gives_every_rank_equal_attention_work(cp):
    """With chunks i and 2cp - 1 - i on rank i each rank does 2 cp blocks of c x c (step 0 two half diagonal
    blocks and a full one, every other step two full blocks), the causal attention's 2 cp^2 over cp ranks."""
    c = 64
    for rank in range(cp):
        steps = ring_steps(cp, rank, c, True)
        assert len(steps) == cp and steps[0] == (2 * c, 2 * c, True)
        blocks = 2 + sum(q * s // (c * c) for q, s, _ in steps[1:])
        assert blocks == 2 * cp


@pytest.mark.parametrize("cp", [2, 4])
def test_each_cp_rank_does_the_same_attention_flops_summing_to_the_unsplit(h100, cp):
    """The lowered ring: every GPU's attention FLOPs are equal, forward and backward, and they add up to the
    unsplit causal attention's exactly (the kernel model's causal count, 4 b h s (s + 1) / 2 d per layer; the
    backward kernel's 2.5x that: kernbench.workloads.gpu_kernels)."""
    s, b = 1024, 1
    lo = lower(graph(s, b), h100, ParallelPlan(cp=cp), phase="train")
    whole = 4 * b * SMALL["heads"] * s * (s + 1) / 2 * SMALL["head_dim"] * SMALL["layers"]
    fwd, bwd = attn_flops(lo), attn_flops(lo, "backward")
    assert len(fwd) == cp and len(set(fwd.values())) == 1 and len(set(bwd.values())) == 1
    assert sum(fwd.values()) == whole and sum(bwd.values()) == BACKWARD_FLOPS * whole  # the backward: 2.5x


def kernel_time(lo, res, select) -> dict[str, int]:
    """Summed kernel duration (ps) by span kind of the selected spans (host launches left out)."""
    t = res._core.ops()
    st, en = t["start_ps"], t["end_ps"]
    out: dict[str, int] = {}
    for s in lo.spans:
        if select(s):
            for o in range(s.first, s.end):
                if o not in lo.launches and st[o] >= 0:
                    out[s.kind] = out.get(s.kind, 0) + int(en[o]) - int(st[o])
    return out


def test_cp_2_on_two_gpus_with_free_links_is_the_no_cp_compute_split_in_two():
    """On free NVLinks a CP 2 step's compute is the no-CP step's split over two GPUs: the same GEMM and attention
    FLOPs in all, half on each GPU, and each kind's kernel time (the merge and gradient additions CP adds left out)
    within 3 % of the no-CP one in sum -- the GEMM model's efficiency at half the rows; attention within 6 %: the
    ring's steps pay the fixed cost per CTA more often."""
    dims = {**SMALL, "hidden": 2048, "heads": 16, "head_dim": 128, "intermediate": 8192}
    g = graph(8192, 1, dims=dims)
    one = lower(g, System.load(H100, set=FREE), ParallelPlan(), phase="train")
    two = lower(g, System.load(H100, set=FREE), ParallelPlan(cp=2), phase="train")
    assert two.gemm_flops_by_pass == one.gemm_flops_by_pass
    compute = (lambda s: s.pass_ in ("forward", "backward") and s.kind in ("matmul", "attention", "norm",
                                                                           "elementwise", "embedding")
               and " cp " not in s.name)
    t1, t2 = kernel_time(one, one.run(), compute), kernel_time(two, two.run(), compute)
    assert set(t1) == set(t2)
    assert t1["matmul"] < t2["matmul"] < 1.03 * t1["matmul"]
    # attention: each ring step's CTAs pay the kernel's fixed cost per CTA over fewer keys (and a causal step its
    # diagonal tiles whole: kernbench.workloads.gpu_kernels), so the split costs more than the GEMMs' 3 %
    assert t1["attention"] < t2["attention"] < 1.06 * t1["attention"]
    assert sum(t1.values()) < sum(t2.values()) < 1.05 * sum(t1.values())  # the attention steps' fixed costs
    per_gpu = attn_flops(two)
    assert sorted(per_gpu) == ["gpu0", "gpu1"] and per_gpu["gpu0"] == per_gpu["gpu1"]


def test_the_ranks_are_placed_in_megatrons_order_at_tp_2_cp_2_dp_2(h100):
    """Megatron-Core's RankGenerator at tp 2, cp 2, dp 2 (order tp-cp-ep-dp-pp): tp groups [0,1] [2,3] [4,5] [6,7],
    cp groups [0,2] [1,3] [4,6] [5,7], dp groups [0,4] [1,5] [2,6] [3,7], dp x cp groups [0,2,4,6] [1,3,5,7]."""
    pl = ParallelPlan(tp=2, cp=2, dp=2).place(h100)
    gpu = lambda *ids: tuple(f"gpu{i}" for i in ids)  # noqa: E731
    assert [pl.group(r, 0) for r in range(4)] == [gpu(0, 1), gpu(2, 3), gpu(4, 5), gpu(6, 7)]
    assert [pl.cp_group(d, 0, t) for d in range(2) for t in range(2)] == [gpu(0, 2), gpu(1, 3), gpu(4, 6), gpu(5, 7)]
    assert [tuple(pl.group(d * 2 + c, 0)[t] for d in range(2)) for c in range(2) for t in range(2)] == \
        [gpu(0, 4), gpu(1, 5), gpu(2, 6), gpu(3, 7)]
    assert [pl.dp_group(0, t) for t in range(2)] == [gpu(0, 2, 4, 6), gpu(1, 3, 5, 7)]
    assert pl.pes == list(gpu(*range(8)))


def test_the_gradients_are_reduced_over_dp_x_cp_ranks(h100):
    """The data-parallel gradient all-reduce of a tp 2, cp 2, dp 2 step runs over the four ranks of each tp rank
    that hold the same weights; zero1 shards Adam over them (a rank's Adam is a quarter of the unsharded one's)."""
    g = graph()
    lo = lower(g, h100, ParallelPlan(tp=2, cp=2, dp=2), phase="train")
    log = lo.run().log_df()
    groups = set()
    for s in lo.spans:
        if s.kind == "grad_all_reduce":
            pes = set(log[(log.op >= s.first) & (log.op < s.end)].pe) - {""}
            groups.add(tuple(sorted(pes)))
    assert groups == {("gpu0", "gpu2", "gpu4", "gpu6"), ("gpu1", "gpu3", "gpu5", "gpu7")}

    def adam_elements(plan):
        lo = lower(g, System.load(H100), plan, phase="train")
        log = lo.run().log_df()
        ops = [o for s in lo.spans if s.kind == "optimizer" for o in range(s.first, s.end) if o not in lo.launches]
        rows = log[log.op.isin(ops) & (log.pe == "gpu0")]
        return int(rows.bytes.sum())

    full, sharded = adam_elements(ParallelPlan(cp=2, sharding="none")), adam_elements(ParallelPlan(cp=2, dp=2,
                                                                                                    sharding="zero1"))
    assert sharded * 4 == pytest.approx(full, rel=1e-3)
    assert sharded == adam_elements(ParallelPlan(dp=4, sharding="zero1"))


def test_one_or_mirrored_replicas_equal_every_replica_at_cp_2(h100):
    """replicas='one' lowers replica 0's cp ranks alone (the other replica joins their dp x cp reductions) and
    'mirror' reuses their compute: on the H100 box's non-blocking NVSwitch both equal the full step (1e-6), from
    fewer program ops, with the same kernel counts."""
    g = handbuilt.llama_graph(2, 1024, dims={**SMALL, "layers": 4})
    plan = ParallelPlan(cp=2, dp=2, tp=2)
    full = estimate.training_step(g, System.load(H100), plan, reuse=False, replicas="all", tp_ranks="all")
    for mode in ("one", "mirror"):
        got = estimate.training_step(g, System.load(H100), plan, reuse=False, replicas=mode, tp_ranks="all")
        assert got.step_ms == pytest.approx(full.step_ms, rel=1e-6) and got.counts == full.counts
        assert got.reuse["ops"][0] < full.reuse["ops"][0]


@pytest.mark.parametrize("dp,tp,pp", [(2, 2, 2), (1, 8, 1), (4, 1, 2), (8, 1, 1)])
def test_plans_without_cp_keep_their_placement(h100, dp, tp, pp):
    """cp = 1 places rank ((stage x dp) + replica) x tp + t, as before context parallelism."""
    pl = ParallelPlan(dp=dp, tp=tp, pp=pp).place(h100)
    order = h100.pes()
    for d in range(dp):
        for s in range(pp):
            assert pl.group(d, s) == tuple(order[((s * dp) + d) * tp + t] for t in range(tp))


def test_the_all_to_all_form_moves_qkv_and_o_and_splits_the_heads(h100):
    """cp_comm_type a2a: per attention, an all-to-all of each rank's q/k/v ((h + 2 kv) / tp x d x s / cp x b x
    bytes) before and of o (h / tp x d x s / cp x b x bytes) after; the attention runs whole on h / (tp cp) heads,
    every GPU the same FLOPs, the unsplit attention's in sum."""
    s, b, tp, cp = 512, 2, 2, 2
    lo = lower(graph(s, b), h100, ParallelPlan(tp=tp, cp=cp, cp_comm_type="a2a"), phase="train")
    H, KV, d = SMALL["heads"], SMALL["kv_heads"], SMALL["head_dim"]
    qkv, o = (H + 2 * KV) // tp * d * s // cp * b * 2, H // tp * d * s // cp * b * 2
    got = sorted((r["pass"], r["bytes"]) for r in lo.cp if r["kind"] == "alltoall")
    per = SMALL["layers"] * tp
    assert got == sorted([("forward", qkv), ("forward", o), ("backward", o), ("backward", qkv)] * per)
    fwd = attn_flops(lo)
    assert len(set(fwd.values())) == 1 and len(fwd) == tp * cp
    assert sum(fwd.values()) == 4 * b * H * s * (s + 1) / 2 * d * SMALL["layers"]


def test_recompute_repeats_the_rings_forward(h100):
    """Selective and full recompute run the ring's forward again before its backward, its K/V exchange included:
    as many recomputed K/V sends as forward ones."""
    for mode in ("selective", "full"):
        lo = lower(graph(), h100, ParallelPlan(cp=2, recompute=mode), phase="train")
        sends = {p: sum(1 for r in lo.cp if r["kind"] == "kv" and r["pass"] == p) for p in ("forward", "recompute")}
        assert sends["forward"] == sends["recompute"] > 0, mode


def test_a_long_prompts_prefill_splits_over_cp_gpus(h100):
    """estimate.inference at cp 2 and 4: the prefill of a 16k-token prompt on the GPUs (the serving framework's
    host time per step and the first launch left out: they are not split) falls near 1/cp (within 10 %: smaller
    kernels run less efficiently), with no communication exposed (the ring's sends hide behind the attention)."""
    build = (lambda bb, s, kv: handbuilt.llama_graph(bb, s, kv, dims={**SMALL, "hidden": 2048, "heads": 16,
                                                                     "head_dim": 128, "intermediate": 8192}))
    t = {}
    for cp in (1, 2, 4):
        est = estimate.inference(build, h100, ParallelPlan(cp=cp), batch=1, prompt=16384)
        kinds = est.breakdown["prefill"]["by_kind"]
        assert kinds.get("exposed_communication", 0.0) < 1e-3 * est.ttft_ms * 1e3
        t[cp] = est.ttft_ms * 1e3 - kinds["framework"] - kinds["launch"]
    for cp in (2, 4):
        assert t[1] / cp < t[cp] < 1.1 * t[1] / cp, t


def test_bad_context_parallel_plans_are_refused_by_name(h100):
    """A cp that does not cut the sequence into 2 x cp chunks, a graph with no attention op, ranks past the
    machine, a bad cp or cp_comm_type, heads that a2a cannot split, decode at cp > 1 and a SIP machine: each a
    WorkloadError naming the argument and its values."""
    with pytest.raises(WorkloadError, match=r"cp = 4 .*1004 tokens .*2 x cp = 8 equal chunks"):
        estimate.training_step(graph(1004), h100, ParallelPlan(cp=4))
    with pytest.raises(WorkloadError, match="no attention op"):
        lower(handbuilt.resnet50_graph(1), h100, ParallelPlan(cp=2), phase="train")
    with pytest.raises(WorkloadError, match=r"dp=2 x cp=4 x pp=1 x tp=2 = 16 GPUs do not fit .* 8 GPUs: 8 short"):
        ParallelPlan(dp=2, cp=4, tp=2).place(h100)
    with pytest.raises(WorkloadError, match="cp must be an integer >= 1, got 0"):
        ParallelPlan(cp=0)
    with pytest.raises(WorkloadError, match="cp_comm_type 'ring': expected one of p2p, a2a"):
        ParallelPlan(cp=2, cp_comm_type="ring")
    with pytest.raises(WorkloadError, match=r"'a2a'.*2 KV heads per tensor-parallel rank \(tp = 2\) must each divide "
                                            r"by cp = 4"):
        lower(graph(), h100, ParallelPlan(cp=4, tp=2, cp_comm_type="a2a"), phase="train")
    build = (lambda bb, s, kv: handbuilt.llama_graph(bb, s, kv, dims=SMALL))
    with pytest.raises(WorkloadError, match="decode with context parallelism .* is not modelled"):
        estimate.inference(build, h100, ParallelPlan(cp=2), batch=1, prompt=512, decode_steps=4)
    with pytest.raises(WorkloadError, match="q_len 1 over kv_len 513: .* not modelled"):
        lower(build(1, 1, 513), h100, ParallelPlan(cp=2))
    with pytest.raises(WorkloadError, match="GPU target only"):
        lower(graph(), System.load(), ParallelPlan(cp=2), phase="train")

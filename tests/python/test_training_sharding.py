"""Training steps at scale (kernbench.workloads.sharding, training, step): FSDP/ZeRO sharding moves the bytes it
should and runs Adam on the shard, recompute adds the forward it should, reuse equals the full simulation, and
model.training reports what llm-foundry and Megatron report."""

from __future__ import annotations

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, handbuilt
from kernbench.workloads.lower import lower

H100 = "machines/h100-8x-nvswitch.yaml"
#: A small decoder: steps simulate in well under a second.
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096, "layers": 2}


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


def graph(layers=2, seq=256, batch=2, **kw):
    return handbuilt.llama_graph(batch, seq, dims=SMALL, layers=layers, **kw)


def kernel_time(lo, res, select) -> int:
    """Summed duration (ps) of the GPU kernels in the selected spans (their host launches left out)."""
    t = res._core.ops()
    st, en = t["start_ps"], t["end_ps"]
    return sum(int(en[o]) - int(st[o]) for s in lo.spans if select(s) for o in range(s.first, s.end)
               if o not in lo.launches and st[o] >= 0)


@pytest.mark.parametrize("dp,M", [(2, 1), (4, 2)])
def test_fsdp_gathers_and_scatters_the_parameters_as_full_shard_does(h100, dp, M):
    """FSDP: per microbatch every layer's 16-bit weights are all-gathered before its forward and its backward and
    its gradients reduce-scattered, so the bytes all-gathered and reduce-scattered per step are parameters x 2 B x
    (2 M gathers + M scatters), and a rank receives (dp - 1) / dp of each; no all-reduce is left."""
    g = graph()
    tr = estimate.training_step(g, h100.twin(), ParallelPlan(dp=dp, microbatches=M, sharding="fsdp"), reuse=False)
    P = 2 * g.param_count
    assert tr.dp_bytes == {"all_gather": 2 * M * P, "reduce_scatter": M * P}
    received = sum(tr.dp_bytes.values()) * (dp - 1) / dp
    assert received == pytest.approx(P * 3 * M * (dp - 1) / dp)
    kinds = {s.kind for s in tr.lowered.spans}
    assert {"all_gather", "reduce_scatter"} <= kinds and "grad_all_reduce" not in kinds


@pytest.mark.parametrize("sharding", ["none", "fsdp"])
def test_a_tensor_parallel_rank_exchanges_its_share_of_the_weights(h100, sharding):
    """At tp 2 a rank holds half of each row- or column-parallel weight and of the embedding, and all of each
    replicated one (the norms): the data-parallel exchange of the step carries, over the tp ranks, 2 B x (matmul
    weights + embedding + tp x the rest) --
    with FSDP too, whose first gather of a layer is counted before the layer is lowered (model-step once counted
    every weight whole on every tp rank: 8x the Adam work and all-reduce bytes at tp 8)."""
    g, tp, M = graph(), 2, 2
    seen: dict[str, bool] = {}
    for op in g.ops:
        for p in op.params:
            seen.setdefault(p.name, op.kind == "embedding" or (op.kind == "matmul" and bool(op.attrs.get("weight"))))
    split = sum(p.spec.numel for op in g.ops for p in op.params if seen.pop(p.name, None))
    rest = g.param_count - split
    X = 2 * (split + tp * rest)
    tr = estimate.training_step(g, h100.twin(), ParallelPlan(dp=2, tp=tp, microbatches=M, sharding=sharding),
                                reuse=False)
    assert split > 0 and rest > 0
    assert tr.dp_bytes == ({"all_reduce": X} if sharding == "none" else {"all_gather": 2 * M * X,
                                                                         "reduce_scatter": M * X})


def test_zero_reduce_scatters_then_gathers_the_updated_weights(h100):
    """zero1 reduce-scatters the accumulated gradients once per step and zero2 once per microbatch; both then
    all-gather the updated weights once: zero1's bytes are an all-reduce's (a reduce-scatter plus an all-gather)."""
    g = graph()
    P = 2 * g.param_count
    z1 = estimate.training_step(g, h100.twin(), ParallelPlan(dp=4, microbatches=3, sharding="zero1"), reuse=False)
    z2 = estimate.training_step(g, h100.twin(), ParallelPlan(dp=4, microbatches=3, sharding="zero2"), reuse=False)
    none = estimate.training_step(g, h100.twin(), ParallelPlan(dp=4, microbatches=3), reuse=False)
    assert z1.dp_bytes == {"reduce_scatter": P, "all_gather": P}
    assert z2.dp_bytes == {"reduce_scatter": 3 * P, "all_gather": P}
    assert none.dp_bytes == {"all_reduce": P}


def test_the_optimizer_runs_on_the_shard(h100):
    """Sharded, Adam updates 1/dp of each layer's parameters on a rank: each rank's Adam kernels are exactly the
    stream kernels of 32 B (fp32 grad, master, m, v read and written) per parameter of the layer's shard, at dp 2
    and dp 4; unsharded, of the whole layer."""
    from kernbench import _core

    g = graph()
    units: dict[str, int] = {}
    seen: set[str] = set()
    for op in g.ops:
        for p in op.params:
            parts = p.name.split(".")
            unit = ".".join(parts[:3]) if parts[:2] == ["model", "layers"] else "outside"
            units.setdefault(unit, 0)
            units[unit] += p.spec.numel if p.name not in seen else 0
            seen.add(p.name)

    def adam_per_rank(plan):
        lo = lower(g, h100.twin(), plan, phase="train")
        res = lo.run()
        return kernel_time(lo, res, lambda s: s.kind == "optimizer") // plan.dp

    def expected(dp, sharded):
        sysm = h100.twin()
        return sum(_core.gpu_stream(sysm._core, sysm.pes()[0], 32 * (-(-n // dp) if sharded else n))["duration_ps"]
                   for n in units.values())

    assert adam_per_rank(ParallelPlan(dp=2, sharding="zero1")) == expected(2, True)
    assert adam_per_rank(ParallelPlan(dp=4, sharding="fsdp")) == expected(4, True)
    assert adam_per_rank(ParallelPlan(dp=4)) == expected(4, False)
    assert expected(4, False) > expected(2, True) > expected(4, True) > 0


def test_full_recompute_adds_one_forward_per_layer_to_the_backward(h100):
    """recompute='full' runs each layer's forward again in its backward: the recomputed GEMM FLOPs equal the
    layers' forward GEMM FLOPs (the embedding and LM head are not recomputed), the recomputed kernels take what
    the forward's layer kernels take, and with nothing else in flight (dp 1) and kernels longer than their host
    launches the step grows by that, within 0.5 %."""
    big = {"hidden": 2048, "heads": 16, "kv_heads": 16, "head_dim": 128, "intermediate": 8192, "vocab": 4096}
    g = handbuilt.llama_graph(2, 1024, dims=big, layers=2, embed=False, head=False)
    none = estimate.training_step(g, h100.twin(), ParallelPlan(), reuse=False)
    full = estimate.training_step(g, h100.twin(), ParallelPlan(recompute="full"), reuse=False)
    assert full.gemm_flops["recompute"] == none.gemm_flops["forward"]
    assert full.gemm_flops["forward"] == none.gemm_flops["forward"]
    assert full.gemm_flops["backward"] == none.gemm_flops["backward"]
    assert full.counts["kernel"] - none.counts["kernel"] == sum(
        1 for s in none.lowered.spans if s.pass_ == "forward" for o in range(s.first, s.end)
        if o not in none.lowered.launches)
    assert full.parts["recompute"] == pytest.approx(none.parts["forward"], rel=1e-9)
    assert full.step_ms == pytest.approx(none.step_ms + full.parts["recompute"], rel=5e-3)


def test_selective_recompute_adds_the_attention_cores_forward(h100):
    """recompute='selective' recomputes only the attention core: one more attention kernel per layer and
    microbatch (forward 1 + backward 1, the GPU's fused backward kernel, + recompute 1), no GEMM recomputed; a graph
    with no fused attention op is refused rather than given a silent zero."""
    g = graph(embed=False, head=False)
    none = estimate.training_step(g, h100.twin(), ParallelPlan(microbatches=2), reuse=False)
    sel = estimate.training_step(g, h100.twin(), ParallelPlan(microbatches=2, recompute="selective"), reuse=False)
    assert none.counts["attention"] == 2 * 2 * 2 and sel.counts["attention"] == 2 * 2 * 3
    assert "recompute" not in sel.gemm_flops
    assert 0 < sel.parts["recompute"] < none.parts["forward"]
    with pytest.raises(WorkloadError, match="recompute='selective' recomputes the attention core"):
        estimate.training_step(handbuilt.resnet50_graph(1), h100.twin(), ParallelPlan(recompute="selective"))


@pytest.mark.parametrize("plan,layers", [(ParallelPlan(dp=2), 7), (ParallelPlan(pp=2, microbatches=4), 10)])
def test_reuse_equals_the_full_simulation_to_the_picosecond(h100, plan, layers):
    """Reuse simulates 2, 3 and 4 layers per stage and extends the periodic schedule: on a size where both fit
    the step equals the fully simulated one to the picosecond, with its kernel counts and FLOPs, from a fraction of
    the program ops. The parts are extended too: they still sum to the step, each within 1 % of the step of the
    full run's (an instant shared by a host launch and a kernel may fall to another part a few layers on)."""
    g = graph(layers=layers)
    full = estimate.training_step(g, h100.twin(), plan, reuse=False)
    fast = estimate.training_step(g, h100.twin(), plan, reuse=True)
    assert fast.reuse["mode"] == "extrapolated" and full.reuse["mode"] == "full"
    assert round(fast.step_ms * 1e9) == round(full.step_ms * 1e9)
    assert fast.counts == full.counts
    assert fast.gemm_flops == pytest.approx(full.gemm_flops, rel=1e-12)
    assert sum(fast.parts.values()) == pytest.approx(fast.step_ms, rel=1e-9)
    for k in full.parts:
        assert fast.parts[k] == pytest.approx(full.parts[k], abs=0.01 * full.step_ms)
    assert max(fast.reuse["ops"]) < full.reuse["ops"][0]


def test_reuse_where_flows_share_links_stays_within_its_bound():
    """dp 16 over two DGX boxes (each layer's gradient all-reduce crosses the NICs while the backward runs, its
    flows sharing them with the next layer's): the increments are periodic to PERIODIC, not to the picosecond, and
    the extension stays within 0.5 % of the full step. (dp 4 x tp 2 on one box was this case while each unit's
    Adam overlapped the remaining reductions; since the optimizer steps after every reduction, as with gradient
    clipping, its reuse is exact, as ZeRO-2's became once its reductions were issued during the backward.)"""
    from kernbench.workloads.step import PERIODIC

    g = graph(layers=7)
    plan = ParallelPlan(dp=16, fidelity="steps")  # the step model's sends: its flows share the NICs
    cluster = "machines/dgx-h100-cluster.yaml"
    def step(reuse):  # every replica lowered: their flows are the case
        return estimate.training_step(g, System.load(cluster, set={"cluster.nodes": 2}), plan, reuse=reuse,
                                      replicas="all")
    full, fast = step(False), step(True)
    assert fast.reuse["mode"] == "extrapolated" and fast.reuse["residual_ps"] != 0
    assert abs(fast.reuse["residual_ps"]) <= PERIODIC * fast.step_ms * 1e9
    assert fast.step_ms == pytest.approx(full.step_ms, rel=5e-3)
    assert fast.counts == full.counts


def test_a_steps_parts_sum_to_it_with_sharding_and_recompute(h100):
    """forward, backward, recompute, optimizer, exposed communication (and idle) add up to the step exactly,
    for FSDP with full recompute over 2 microbatches, reused or not."""
    g = graph(layers=6)
    for reuse in (False, True):
        tr = estimate.training_step(g, h100.twin(), ParallelPlan(dp=4, microbatches=2, sharding="fsdp",
                                                                 recompute="full"), reuse=reuse)
        assert sum(tr.parts.values()) == pytest.approx(tr.step_ms, rel=1e-9)
        assert tr.parts["recompute"] > 0 and tr.parts["optimizer"] > 0


def test_two_layers_at_dp_8_run_on_the_sip_machine(capsys):
    """A data-parallel step of 2 layers at dp 8 (tiles x layers x replicas on the SIP machine) runs, its program
    size printed; with mirrored replicas it is 2.5x smaller and within 1 % of the full step, counts equal."""
    g = graph(seq=64, batch=1, embed=False, head=False)
    sip = System.load()
    tr = estimate.training_step(g, sip.twin(), ParallelPlan(dp=8))
    mir = estimate.training_step(g, sip.twin(), ParallelPlan(dp=8), mirror_replicas=True)
    print(f"2-layer dp-8 step: {tr.reuse['ops'][0]} program ops ({mir.reuse['ops'][0]} mirrored), "
          f"{tr.step_ms:.3f} ms ({mir.step_ms:.3f} mirrored)")
    assert "program ops" in capsys.readouterr().out
    assert tr.reuse["ops"][0] > 2.4 * mir.reuse["ops"][0]
    assert mir.step_ms == pytest.approx(tr.step_ms, rel=1e-2)
    assert mir.counts == tr.counts and mir.gemm_flops == tr.gemm_flops


@pytest.mark.parametrize("plan,rel", [(ParallelPlan(dp=2), 4e-5), (ParallelPlan(dp=4, sharding="fsdp", microbatches=2), 4e-5),
                                      (ParallelPlan(dp=2, tp=2, pp=2, microbatches=2, sharding="zero1",
                                                    recompute="full"), 4e-5)])
def test_mirrored_replicas_on_the_h100_box_stay_close_to_the_full_step(h100, plan, rel):
    """On the NVSwitch box the replicas are symmetric: mirroring them leaves the step within 4e-5 (a mirrored
    replica's host launches are not simulated; measured 0, 7e-6 and 0), with the same kernel counts and FLOPs and
    fewer program ops. (With pp 2 it was 2.8e-3 while NCCL kernels queued on the compute stream: a mirrored
    replica's GPU, which runs no kernels of its own, started its NCCL kernels without waiting behind them.)"""
    g = graph(seq=64, batch=1)
    full = estimate.training_step(g, h100.twin(), plan, replicas="all")
    mir = estimate.training_step(g, h100.twin(), plan, mirror_replicas=True)
    assert mir.step_ms == pytest.approx(full.step_ms, rel=rel)
    assert mir.counts == full.counts and mir.gemm_flops == full.gemm_flops
    assert mir.reuse["ops"][0] < full.reuse["ops"][0]


def test_model_training_reports_tokens_step_and_mfu():
    """model.training: tokens_per_gpu = dp x micro_batch x grad_accum x seq / step / GPUs, and mfu = model FLOPs
    (3 x the forward's, no recompute) / (step x GPUs x peak)."""
    from kernbench.calibrate import REGISTRY, Context

    fn = REGISTRY.get("model.training").fn
    ctx = Context(config=H100, sets={})
    r = fn(ctx, model="gpt2", dp=2, seq=128, micro_batch=1, grad_accum=2, sharding="fsdp")
    assert r["tokens_per_gpu"] == pytest.approx(2 * 1 * 2 * 128 / (r["step"] * 1e-3) / 2)
    assert 0 < r["mfu"] < 1
    rc = fn(ctx, model="gpt2", dp=2, seq=128, micro_batch=1, grad_accum=2, sharding="fsdp", recompute="full")
    assert rc["step"] > r["step"] and rc["mfu"] < r["mfu"]  # recompute costs time; model FLOPs stay


def test_bad_plans_are_refused_by_name():
    """An unknown sharding or recompute names the choices."""
    with pytest.raises(WorkloadError, match="sharding 'zero3'.*none, zero1, zero2, fsdp"):
        ParallelPlan(sharding="zero3")
    with pytest.raises(WorkloadError, match="recompute 'some'.*none, selective, full"):
        ParallelPlan(recompute="some")


def test_the_training_row_is_a_data_file_of_its_own():
    """configs/machines/h100-training.measured.yaml holds gpu-measured section 4's row as a model.training call in
    tokens/s, with its source; the CI-gated h100.measured.yaml holds no training row."""
    from kernbench.calibrate import load_data
    from kernbench.system import config_path

    ds = load_data(str(config_path("machines/h100-training.measured.yaml")))
    (row,) = ds.rows
    assert row.call.startswith("model.training model=mpt-7b dp=8 seq=2048 micro_batch=6") and row.value == 10643
    assert "llm-foundry" in row.source
    gated = load_data(str(config_path("machines/h100.measured.yaml")))
    assert not [r for r in gated.rows if r.call.startswith("model.training")]

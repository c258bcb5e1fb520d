"""Sharded data parallelism across pipeline stages (kernbench.workloads.sharding): the ops outside the layers (the
root unit) sit on two stages at pp > 1 -- the embedding on the first, the final norm and LM head on the last -- and
each stage gathers, reduce-scatters and updates only the parameters it holds. ZeRO-2 and FSDP at pp 2 once failed
with an IndexError (the root's reduction was issued on the first stage's stream at a place reserved on the last
stage's), and unsharded / ZeRO-1 steps exchanged and updated the whole root twice, on the first stage."""

from __future__ import annotations

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, estimate, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.training import model_chunks

H100 = "machines/h100-8x-nvswitch.yaml"
SMALL = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096, "layers": 2}


@pytest.fixture(scope="module")
def h100():
    return System.load(H100)


def graph(layers=4, dims=SMALL, **kw):
    return handbuilt.llama_graph(2, 256, dims=dims, layers=layers, **kw)


def units_per_stage(g, plan) -> dict[tuple[str, int], int]:
    """(unit, stage) -> its parameter elements (each name once per stage): the layers, and the root per stage."""
    stages = [c % plan.pp for c in model_chunks(g, plan)]
    out: dict[tuple[str, int], int] = {}
    seen: set[tuple[str, int]] = set()
    for i, op in enumerate(g.ops):
        for p in op.params:
            parts = p.name.split(".")
            key = (".".join(parts[:3]) if parts[:2] == ["model", "layers"] else "outside", stages[i])
            out[key] = out.get(key, 0) + (p.spec.numel if (p.name, stages[i]) not in seen else 0)
            seen.add((p.name, stages[i]))
    return out


def kernel_time(lo, res, select) -> int:
    """Summed duration (ps) of the GPU kernels in the selected spans (their host launches left out)."""
    t = res._core.ops()
    st, en = t["start_ps"], t["end_ps"]
    return sum(int(en[o]) - int(st[o]) for s in lo.spans if select(s) for o in range(s.first, s.end)
               if o not in lo.launches and st[o] >= 0)


@pytest.mark.parametrize("dp,M,v", [(2, 2, 1), (4, 2, 1), (2, 2, 2)])
def test_fsdp_bytes_at_pp_2_are_the_parameters_gathered_and_scattered(h100, dp, M, v):
    """FSDP at pp 2 (interleaved too): summed over the stages, the bytes all-gathered and reduce-scattered per step
    are parameters x 2 B x (2 M gathers + M scatters), a rank receiving (dp - 1) / dp of each -- the embedding's
    on the first stage, the final norm's and LM head's on the last, each once."""
    g = graph()
    tr = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, dp=dp, microbatches=M, interleave=v,
                                                             sharding="fsdp"), reuse=False)
    P = 2 * g.param_count
    assert tr.dp_bytes == {"all_gather": 2 * M * P, "reduce_scatter": M * P}
    received = sum(tr.dp_bytes.values()) * (dp - 1) / dp
    assert received == pytest.approx(P * 3 * M * (dp - 1) / dp)
    kinds = {(s.kind, s.stage) for s in tr.lowered.spans}
    assert {("all_gather", 0), ("all_gather", 1), ("reduce_scatter", 0), ("reduce_scatter", 1)} <= kinds


def test_every_sharding_exchanges_the_root_once_per_stage_at_pp_2(h100):
    """At pp 2 x dp 2 the bytes of each sharding are those of pp 1: an all-reduce's (none), a reduce-scatter per
    step or per microbatch and one gather of the updated weights (zero1, zero2) -- the root's split between the
    stages, not exchanged twice."""
    g, M = graph(), 2
    P = 2 * g.param_count
    want = {"none": {"all_reduce": P}, "zero1": {"reduce_scatter": P, "all_gather": P},
            "zero2": {"reduce_scatter": M * P, "all_gather": P}}
    for sharding, bytes_ in want.items():
        tr = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, dp=2, microbatches=M, sharding=sharding),
                                    reuse=False)
        assert tr.dp_bytes == bytes_, sharding


@pytest.mark.parametrize("sharding", ["zero2", "fsdp"])
def test_pp_2_dp_2_runs_and_its_stages_hold_the_models_parameters(h100, sharding):
    """pp 2 x dp 2 with the embedding and LM head runs with zero2 and fsdp; the stages' parameters sum to the
    model's: the first stage the embedding and its layers, the last its layers, the final norm and the LM head.
    The root's gradients are reduced on both stages' dp groups."""
    g = graph()
    plan = ParallelPlan(pp=2, dp=2, microbatches=2, sharding=sharding)
    tr = estimate.training_step(g, h100.twin(), plan, reuse=False)
    assert tr.step_ms > 0 and tr.parts["optimizer"] > 0
    per = units_per_stage(g, plan)
    stage = {s: sum(n for (u, t), n in per.items() if t == s) for s in range(2)}
    assert tr.lowered.dp_params == stage
    assert sum(tr.lowered.dp_params.values()) == g.param_count
    assert per[("outside", 0)] == 4096 * 512                 # the embedding table
    assert per[("outside", 1)] == 512 + 512 * 4096           # the final norm and the LM head
    reduced = {s.stage for s in tr.lowered.spans if s.kind == "reduce_scatter" and s.name.startswith("outside")}
    assert reduced == {0, 1}


@pytest.mark.parametrize("sharding", ["zero2", "fsdp"])
def test_the_optimizer_of_each_stage_runs_on_its_shard(h100, sharding):
    """pp 2: each stage's Adam updates 1/dp of the parameters of the units it holds -- its kernels on a rank are
    exactly the stream kernels of 32 B per parameter of each unit's shard, at dp 2 and dp 4 (8 GPUs), so a stage's
    optimizer time falls with dp as its shards do."""
    from kernbench import _core

    g = graph()
    sysm = h100.twin()

    def expected(per, s, dp):
        return sum(_core.gpu_stream(sysm._core, sysm.pes()[0], 32 * -(-n // dp))["duration_ps"]
                   for (u, t), n in per.items() if t == s)

    times = {}
    for dp in (2, 4):
        plan = ParallelPlan(pp=2, dp=dp, microbatches=2, sharding=sharding)
        lo = lower(g, h100.twin(), plan, phase="train")
        res = lo.run()
        per = units_per_stage(g, plan)
        for s in range(2):
            times[(dp, s)] = kernel_time(lo, res, lambda x: x.kind == "optimizer" and x.stage == s) // dp
            assert times[(dp, s)] == expected(per, s, dp), (dp, s)
    for s in range(2):
        assert 0 < times[(4, s)] < times[(2, s)]


def test_a_tied_lm_head_is_held_on_the_first_and_the_last_stage(h100):
    """The assumption for a tied LM head at pp > 1: the embedding table is held on both the first and the last
    stage (Megatron-LM's layout) and exchanged on each, so the stages hold the model's parameters plus one more
    copy of the table (the all-reduce between the two copies is not modelled); at pp 1 the table counts once."""
    g = graph(dims={**SMALL, "tied": True})
    table = 4096 * 512
    one = estimate.training_step(g, h100.twin(), ParallelPlan(dp=2, sharding="fsdp"), reuse=False)
    assert one.lowered.dp_params == {0: g.param_count}
    two = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, dp=2, microbatches=2, sharding="fsdp"),
                                 reuse=False)
    held = g.param_count + table
    assert sum(two.lowered.dp_params.values()) == held
    assert two.dp_bytes == {"all_gather": 2 * 2 * 2 * held, "reduce_scatter": 2 * 2 * held}

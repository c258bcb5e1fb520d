"""The LLaMA-3.1-70B decoder layer from Python: the plan's analytic FLOPs for
the model's dims, a small-dims run (phases, FLOPs, overlap, RunResult for the
critical path), bad inputs, and the llama-layer bench at smoke size."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kernbench
from kernbench import _core, llama

SMALL = {"hidden": 1024, "heads": 8, "kv_heads": 2, "head_dim": 128, "intermediate": 2048}


@pytest.fixture
def sip():
    return kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})


def test_plan_flops_are_the_70b_analytic_count(sip):
    """Projections 2 T in out each, attention 4 T S d h_q, MLP 3 x 2 T H I, with Meta's 70B dims."""
    T, H, I = 2048, 8192, 28672
    p = llama.plan(sip, "prefill", T, tp=8)
    want = 2 * T * H * (H + 2 * 1024) + 4 * T * T * 128 * 64 + 2 * T * H * H + 6 * T * H * I
    assert p["flops_model"] == pytest.approx(want, rel=1e-12)
    assert p["flops_executed"] == pytest.approx(want, rel=1e-12)  # tp <= 8: no replicated K/V
    assert p["gqa_case"] == 2 and p["group_pes"] == 1
    d = llama.plan(sip, "decode", 32, s_kv=8192, tp=32)
    assert d["gqa_case"] == 4 and d["group_pes"] == 4
    assert d["kv_cache_bytes"] == 2 * 32 * 8192 * 8 * 128 * 2


def test_small_layer_runs_with_phases_and_critical_path(sip):
    """Every phase runs, FLOPs match the plan, AR 1 overlaps later compute, the RunResult feeds the critical path."""
    r = llama.layer(sip, "prefill", 128, tp=4, chunks=4, dims=SMALL)
    assert r.flops_program == pytest.approx(r.plan["flops_executed"], rel=1e-9)
    assert set(r.phases) == set(llama.PHASES)
    assert r.phases["allreduce1"]["first_start_ps"] < r.phases["attention"]["last_end_ps"]
    assert r.tokens_per_s == pytest.approx(128 / (r.latency_ps * 1e-12))
    row = r.row()
    assert row["gqa_case"] == 1 and row["pes"] == 4
    from kernbench import critical_path

    cp = critical_path.summarize(r.run)
    assert cp["makespan_ps"] == r.latency_ps
    # The parts sum to the path exactly in ps; the summary's shares are each rounded to 6 decimals.
    exact = critical_path.of(r.run)
    assert sum(exact.share_ps.values()) == exact.length_ps == r.latency_ps
    assert sum(cp["share"].values()) == pytest.approx(1.0, abs=len(cp["share"]) * 5e-7)


def test_replicas_multiply_throughput(sip):
    """Two data-parallel copies on disjoint PEs: the same latency within 1 %, twice the tokens/s."""
    one = llama.layer(sip, "decode", 4, s_kv=256, tp=2, dims=SMALL)
    two = llama.layer(kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1}), "decode", 4, s_kv=256,
                      tp=2, replicas=2, dims=SMALL)
    assert two.latency_ps == pytest.approx(one.latency_ps, rel=0.01)
    assert two.tokens_per_s == pytest.approx(2 * one.tokens_per_s, rel=0.01)


def test_explicit_placement(sip):
    """pes= places the ranks (by name); a KV group that straddles two cubes is refused."""
    names = [f"sip0.cube1.pe{i}" for i in range(8)] + [f"sip0.cube2.pe{i}" for i in range(8)]
    p = llama.plan(sip, "prefill", 256, tp=16, pes=names)
    assert p["ranks"] == [[sip.node_id(n) for n in names]]
    with pytest.raises(_core.UsageError, match="consecutive PEs of one cube"):
        llama.plan(sip, "prefill", 256, tp=16, pes=names[1:] + names[:1])
    with pytest.raises(_core.UsageError, match="2 PEs given, tp x replicas = 16"):
        llama.plan(sip, "prefill", 256, tp=16, pes=names[:2])


@pytest.mark.parametrize("kwargs,needle", [
    ({"tp": 3}, "does not divide the 64 query heads"),
    ({"tp": 64, "replicas": 4}, "do not fit the machine's 128 PEs"),
    ({"chunks": 3}, "chunks = 3"),
    ({"dims": {"layers": 80}}, "unknown key 'layers'"),
])
def test_bad_inputs_are_usage_errors(sip, kwargs, needle):
    """Bad sharding, placement or dims raise UsageError naming the problem."""
    with pytest.raises(_core.UsageError, match=needle):
        llama.plan(sip, "prefill", 256, **kwargs)
    with pytest.raises(_core.UsageError, match="expected 'prefill' or 'decode'"):
        llama.plan(sip, "train", 256)


def test_bench_smoke(tmp_path):
    """The llama-layer bench at smoke size: results, no failures, CSV, figures, critical path per row."""
    proc = subprocess.run([sys.executable, "-m", "kernbench", "run", "--bench", "llama-layer", "--smoke",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    rows = sweep["results"]
    assert len(rows) == 4
    for r in rows:
        assert r["critical_path"]["makespan_ps"] == round(r["latency_us"] * 1e6)
        assert r["flops_program"] >= r["flops_model"]
    for fig in ("latency_vs_tp.png", "tokens_per_s_vs_tp.png", "phases.png", "llama.csv"):
        assert (tmp_path / fig).exists()

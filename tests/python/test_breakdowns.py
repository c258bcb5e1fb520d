"""Breakdowns add up (docs/model-estimates.md "Where the time goes"): every breakdown kernbench returns sums to
its total -- an inference's prefill and decode by kind and by part, a training step's parts, a LLaMA layer's
phase shares, a K200 case's step shares -- with exposed communication, launch, idle, bubble and the
framework's step named, and the benches that print one carry it (llama-layer, model-step, milestone-1h-gqa,
k200-cases)."""

from __future__ import annotations

import json

import pytest

from kernbench import k200, llama
from kernbench.system import System
from kernbench.workloads import ParallelPlan, estimate, get_model

H100 = "machines/h100-8x-nvswitch.yaml"


def total(d):
    return sum(d.values())


@pytest.mark.parametrize("config,tp", [(H100, 1), (H100, 4), (None, 8)])
def test_inference_breakdowns_sum_to_ttft_and_decode(config, tp):
    """Prefill's parts sum to ttft_ms and decode's (over every step, interpolated ones included) to decode_ms,
    by kind and by part; on a GPU the framework's step and, with tp > 1, exposed communication are parts."""
    spec = get_model("llama3-8b")
    e = estimate.inference(spec.builder(layers=2), System.load(config), ParallelPlan(tp=tp), batch=4, prompt=32,
                           decode_steps=12, kv_samples=3)
    for key in ("by_kind", "by_part"):
        assert total(e.breakdown["prefill"][key]) / 1e3 == pytest.approx(e.ttft_ms, rel=1e-9)
        assert total(e.breakdown["decode"][key]) / 1e3 == pytest.approx(e.decode_ms, rel=1e-9)
    kinds = e.breakdown["decode"]["by_kind"]
    assert "idle" in kinds and kinds["matmul"] > 0
    if config == H100:
        assert kinds["framework"] == pytest.approx(12 * 290.44, rel=1e-3)  # gpu.framework_step (us) per step
    if tp > 1:
        assert kinds["exposed_communication"] > 0


def test_a_training_steps_parts_sum_to_the_step():
    """dp 2 x tp 4 and a 2-stage pipeline: forward, backward, optimizer, exposed communication, launch and idle
    (bubble across stages) add up to step_ms; the pipeline's bubble is a part."""
    s = System.load(H100)
    g = get_model("gpt2").graph(4, 256, layers=4)
    for plan in (ParallelPlan(dp=2, tp=4), ParallelPlan(tp=2, pp=2, microbatches=4)):
        tr = estimate.training_step(g, s, plan, precision="bf16")
        assert total(tr.parts) == pytest.approx(tr.step_ms, rel=1e-9)
        assert tr.parts["forward"] > 0 and tr.parts["backward"] > tr.parts["forward"] and tr.parts["optimizer"] > 0
        row = tr.row()
        assert sum(v for k, v in row.items() if k.startswith("part_")) == pytest.approx(tr.step_ms, rel=1e-9)
        if plan.pp > 1:
            assert tr.parts["bubble"] > 0


@pytest.mark.parametrize("config", [None, H100])
def test_a_llama_layers_phase_shares_sum_to_its_latency(config):
    """The layer's phases overlap (their active times add up to more or less than the latency); their shares and
    the idle rest add up to it exactly, on the SIP machine and on the GPU target."""
    s = System.load(config)
    for phase, tokens, kv in (("decode", 8, 256), ("prefill", 128, 0)):
        row = llama.layer(s, phase, tokens, s_kv=kv, tp=8).row()
        shares = sum(v for k, v in row.items() if k.startswith("share_us_"))
        assert shares == pytest.approx(row["latency_us"], rel=1e-9)


def test_a_k200_cases_step_shares_sum_to_its_elapsed_time():
    """Every K200 case, every variant's first batch: each label's share plus the idle rest = elapsed_s."""
    for f in k200.case_files():
        row = k200.run_variant(k200.load_case(f))[0]
        assert total(row["step_share_ms"]) == pytest.approx(row["elapsed_s"] * 1e3, rel=1e-9)
        assert row["step_share_ms"]["idle"] >= 0


def test_the_benches_that_print_a_breakdown_carry_one_that_adds_up(cli, tmp_path):
    """Smoke runs of llama-layer, model-step, milestone-1h-gqa and k200-cases: each row's breakdown (phase shares,
    by-kind and step parts, step shares) sums to the row's total, and each critical path to its makespan."""
    rows = {}
    for bench in ("llama-layer", "model-step", "milestone-1h-gqa", "k200-cases"):
        cli("run", "--bench", bench, "--smoke", "--out", str(tmp_path / bench), "--quiet", check=True)
        rows[bench] = json.loads((tmp_path / bench / "sweep.json").read_text())["results"]
    for r in rows["llama-layer"]:
        assert sum(v for k, v in r.items() if k.startswith("share_us_")) == pytest.approx(r["latency_us"], rel=1e-9)
    for bench in ("llama-layer", "milestone-1h-gqa"):
        for r in rows[bench]:
            cp = r["critical_path"]
            assert cp["length_ps"] == cp["makespan_ps"] and sum(cp["share"].values()) == pytest.approx(1, abs=1e-5)
    for r in rows["model-step"]:
        if r["mode"] == "inference":
            assert total(r["prefill_by_kind_us"]) / 1e3 == pytest.approx(r["ttft_ms"], rel=1e-9)
            assert total(r["decode_by_kind_us"]) / 1e3 == pytest.approx(r["tpot_ms"] * r["decode_steps"], rel=1e-9)
        else:
            parts = sum(v for k, v in r.items() if k.startswith("part_"))
            assert parts == pytest.approx(r["step_ms"], rel=1e-9)
    for r in rows["k200-cases"]:
        assert total(r["step_share_ms"]) == pytest.approx(r["elapsed_s"] * 1e3, rel=1e-9)


def test_a_k200_cases_critical_path_is_labelled_as_the_whole_run():
    """A case of 3 iterations: its critical path covers the whole run, and its label says how many iterations
    and how long, beside the row's per-iteration latency."""
    case = k200.load_case(k200.case_files()[0])
    seen = []
    row = k200.run_variant(case, on_run=lambda label, result: seen.append((label, result)))[0]
    label, result = seen[0]
    assert row["iterations"] == 3 and "whole run: 3 iterations" in label
    path = result.critical_path(label)
    assert path.length_ps == path.makespan_ps == pytest.approx(row["elapsed_s"] * 1e12, rel=1e-9)
    assert row["latency_ms"] == pytest.approx(row["elapsed_s"] * 1e3 / 3, rel=1e-6)

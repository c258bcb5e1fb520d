"""The GEMM kernel model from Python: the gemm_plan / gemm_program bindings and
the milestone-1h-gemm bench at smoke size (outputs, invariants, MILESTONE_FAST)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import kernbench
from kernbench import _core

SMOKE = [
    "bench.square=256,512",
    "bench.precisions=fp16",
    "bench.pe_counts=1,8",
    "bench.skinny=32x3072x32",
    "bench.llm_tokens=1,64",
    "bench.llm_pes=8",
]


def _run_bench(out, *sets, env=None):
    args = [sys.executable, "-m", "kernbench", "run", "--bench", "milestone-1h-gemm", "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke-size run of the bench, shared by the tests that read its outputs."""
    out = tmp_path_factory.mktemp("gemm")
    proc = _run_bench(out, *SMOKE)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return out, proc, json.loads((out / "sweep.json").read_text())


@pytest.fixture
def system():
    return kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})


def test_bench_writes_every_output(smoke):
    """sweep.json without failures, the CSVs and the three figures; the run says how long it took."""
    out, proc, sweep = smoke
    assert sweep["failures"] == []
    # 2 square sizes x 2 PE counts, 32x3072x32 plain and pinned, 4 projections x 2 token counts.
    assert len(sweep["results"]) == 4 + 2 + 8
    for f in ("gemm.csv", "pinned_window.csv", "efficiency.png", "roofline.png", "timeline.png"):
        assert (out / f).stat().st_size > 0, f
        assert f in sweep["files"]
    assert "milestone-1h-gemm: 14 points, 0 failures in" in proc.stdout
    header = (out / "gemm.csv").read_text().splitlines()[0].split(",")
    assert {"shape", "precision", "pes", "limit", "efficiency", "limit_efficiency", "tiles"} <= set(header)


def test_bench_efficiency_against_the_stage_limit(smoke):
    """Efficiency is at most 1; decode projections are DMA-bound, yet close to their stage limit."""
    _, _, sweep = smoke
    rows = sweep["results"]
    for r in rows:
        assert 0 < r["efficiency"] <= 1.0, r["name"]
        assert r["makespan_ns"] >= r["window_ns"] > 0
        assert r["limit"] in ("dma", "compute")
    decode = [r for r in rows if r["case"] == "llm" and r["m"] == 1]
    assert len(decode) == 4
    for r in decode:
        assert r["limit"] == "dma"
        assert r["limit_efficiency"] >= 0.9, r
        assert r["efficiency"] < 0.2  # ~1 FLOP per byte against 8 FLOPs per byte of balance
    big = next(r for r in rows if r["name"] == "square 512x512x512 fp16 1PE")
    assert big["limit"] == "compute" and big["efficiency"] >= 0.9


def test_bench_pinned_window_excludes_the_pinned_load(smoke):
    """The pinned B load (192 KiB, ~768 ns) sits outside the composite window; a fast engine shows the shrink."""
    _, _, sweep = smoke
    by = {(r["engine"], r["pinned"]): r for r in sweep["pinned_window"]}
    plain, pinned = by[("config", False)], by[("config", True)]
    assert 700 <= pinned["pinned_ns"] <= 850
    assert pinned["makespan_ns"] - pinned["window_ns"] >= pinned["pinned_ns"]
    assert plain["pinned_ns"] == 0
    fast = [k for k in by if k[0] != "config"]
    assert len(fast) == 2
    fplain, fpinned = by[(fast[0][0], False)], by[(fast[0][0], True)]
    assert fpinned["window_ns"] < fplain["window_ns"] - 0.3 * fpinned["pinned_ns"]
    tl = sweep["timelines"]
    assert [t["name"] for t in tl] == ["skinny 32x3072x32 fp16", "skinny 32x3072x32 fp16 pinned"]
    lanes = {r["lane"] for r in tl[1]["rows"]}
    assert {"pinned", "load A", "compute", "store"} <= lanes and "load B" not in lanes
    first_compute = min(r["start_ns"] for r in tl[1]["rows"] if r["lane"] == "compute")
    pin_end = max(r["end_ns"] for r in tl[1]["rows"] if r["lane"] == "pinned")
    assert first_compute > pin_end


def test_fast_mode_rerenders_without_simulating(smoke):
    """MILESTONE_FAST=1 rebuilds the figures from sweep.json: same results, no simulation."""
    out, _, sweep = smoke
    before = (out / "roofline.png").stat().st_mtime_ns
    env = dict(os.environ, MILESTONE_FAST="1")
    proc = _run_bench(out, *SMOKE, env=env)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((out / "sweep.json").read_text())
    assert again["results"] == sweep["results"]
    assert again["rerendered"] is True
    assert "re-rendered from sweep.json" in proc.stdout
    assert "square" not in proc.stdout  # no point was simulated
    assert (out / "roofline.png").stat().st_mtime_ns >= before


def test_fast_mode_without_a_sweep_is_a_failure(tmp_path):
    """MILESTONE_FAST=1 on an empty folder reports the missing sweep.json as the bench's failure."""
    proc = _run_bench(tmp_path, *SMOKE, env=dict(os.environ, MILESTONE_FAST="1"))
    assert proc.returncode == 1
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert "does not exist" in sweep["failures"][0]["error"]


def test_gemm_plan_binding(system):
    """gemm_plan: tiles within scratch, the split over named PEs, element sizes, per-share columns."""
    pes = [f"sip0.cube0.pe{q}" for q in range(8)]
    plan = _core.gemm_plan(system._core, 64, 4096, 1024, precision="fp16", pes=pes)
    assert plan["grid_m"] * plan["grid_n"] == 8
    assert plan["scratch_per_pe"] <= plan["scratch_budget"] == 1024 * 1024
    assert (plan["elem_bytes"], plan["c_elem_bytes"], plan["acc_elem_bytes"]) == (2, 2, 4)
    assert plan["flops"] == 2 * 64 * 4096 * 1024
    assert plan["peak_flops_per_s"] == pytest.approx(8 * 2 * 1024 * 1e9)
    assert plan["limit"] in ("dma", "compute")
    shares = plan["shares"]
    assert shares["pe_name"] == pes
    assert shares["home_name"] == [f"sip0.cube0.hbm_ctrl.pe{q}" for q in range(8)]
    assert sum(m * n for m, n in zip(shares["m"], shares["n"])) == 64 * 4096
    assert sum(shares["steps"]) == plan["steps_total"]
    # Ids work like names; given tiles are kept.
    ids = [system.node_id(p) for p in pes[:2]]
    fixed = _core.gemm_plan(system._core, 128, 128, 128, pes=ids, tile_m=32, tile_n=64, tile_k=16)
    assert (fixed["tile_m"], fixed["tile_n"], fixed["tile_k"]) == (32, 64, 16)
    assert fixed["shares"]["pe"] == ids


def test_gemm_plan_errors(system):
    """Bad inputs: unknown precision, modes the engine lacks (the SIP PE has no tf32/fp8 tensor mode), scratch
    overflow with numbers, non-PE agents."""
    with pytest.raises(kernbench.ConfigError, match=r"unknown precision 'fp4' \(known: fp32, tf32, fp16, bf16, fp8"):
        _core.gemm_plan(system._core, 64, 64, 64, precision="fp4")
    for p in ("fp8", "tf32"):
        with pytest.raises(ValueError, match=rf"no {p} mode \(pe.gemm.{p} = 0\)"):
            _core.gemm_plan(system._core, 64, 64, 64, precision=p)
    no_int8 = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1, "pe.gemm.int8": 0})
    with pytest.raises(ValueError, match=r"no int8 mode \(pe.gemm.int8 = 0\)"):
        _core.gemm_plan(no_int8._core, 64, 64, 64, precision="int8")
    with pytest.raises(kernbench.CapacityError, match="need 4 MiB of scratch per PE.*budget pe.scratch = 1 MiB"):
        _core.gemm_program(system._core, 1024, 1024, 1024, tile_m=512, tile_n=512, tile_k=512)
    with pytest.raises(kernbench.ConfigError, match="is a hbm_ctrl, not a PE"):
        _core.gemm_plan(system._core, 64, 64, 64, pes=["sip0.cube0.hbm_ctrl.pe0"])
    with pytest.raises(kernbench.TopologyError):
        _core.gemm_plan(system._core, 64, 64, 64, pes=["sip9.cube0.pe0"])


def test_gemm_program_runs_as_planned(system):
    """gemm_program: one composite per PE, GEMM stages = planned tiles, FLOPs conserved, pinned window."""
    pes = [f"sip0.cube1.pe{q}" for q in range(4)]
    plan = _core.gemm_plan(system._core, 96, 200, 64, pes=pes, pinned=True)
    prog = _core.gemm_program(system._core, 96, 200, 64, pes=pes, pinned=True)
    assert isinstance(prog, _core.Program)
    res = system.run_program(prog)
    assert res.op_counts["composite"] == 4
    assert res.op_counts["gemm"] == plan["steps_total"]
    assert res.op_bytes["dma"] == plan["hbm_bytes"]
    log = res.log()
    gemm = res.kind_names.index("gemm")
    assert log["work"][log["kind"] == gemm].sum() == pytest.approx(2 * 96 * 200 * 64)
    p0, p1 = res.window("pinned")
    c0, _ = res.window("compute")
    assert 0 <= p0 < p1 < c0


def test_a_slow_clock_plans_without_overflow():
    """At pe.clock = 1 Hz a 512 x 4096 x 4096 GEMM's candidate tilings take up to 2^63 ps and more: their
    estimates are held in range (they once wrapped, left no near-best tiling and crashed the process), and the
    GEMM plans and runs, its compute-bound time scaling with the clock against the default machine's."""
    from kernbench.program import Program

    def run(clock):
        s = kernbench.System.load(set={"pe.clock": clock} if clock else {})
        p = Program(s, "slow")
        p.gemm(s.pes()[:8], 512, 4096, 4096)
        return p.run().makespan_ps

    slow, fast = run("1 Hz"), run(None)
    assert slow > 1e6 * fast  # a million times slower at least (the default clock is in the hundreds of MHz)
    assert slow < 2 ** 63

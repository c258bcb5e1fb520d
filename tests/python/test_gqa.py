"""GQA attention: the numeric check of the executed Programs for every case and phase, the
kernbench.gqa bindings on the default machine (counts, work, memory,
orderings, errors), and the milestone-1h-gqa bench at smoke size."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import kernbench
from kernbench import _core, gqa
from kernbench import gqa_reference as ref

CASES = (1, 2, 3, 4)


# ---- numerics: the executed Programs compute attention --------------------------

@pytest.fixture(scope="module")
def system():
    return kernbench.System.load()


# Small tiles so every Program runs several Q tiles, K/V tiles, ring steps and merges;
# S_kv = 300 leaves uneven shares and edge tiles.
SMALL = dict(tile_q=32, tile_s=16)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("phase,t_q,s_kv", [("prefill", 128, 256), ("decode", 1, 512), ("decode", 3, 300)])
def test_executed_program_matches_plain_attention(system, phase, case, t_q, s_kv):
    """For every GQA case and phase (uneven shares and edge tiles included) the executed Program computes plain
    attention to 1e-10 and writes every output row, and each of its QK^T, PV and output-store ops was interpreted."""
    x = ref.execute(system, phase, case, t_q=t_q, s_kv=s_kv, **SMALL)
    assert not np.isnan(x.out).any()  # every output row written
    assert x.error < 1e-10
    # Every data op was interpreted: the roles cover the Program's compute and traffic.
    roles = x.ops["role"]
    assert roles.count("qk") == roles.count("pv") == x.plan["gemm_ops"] // 2
    assert roles.count("store_o") == x.plan["dma_out"]


def test_the_check_runs_the_timed_program():
    """The Program the numeric check interprets is the one gqa.run times: the same latency on a fresh machine and the
    same data ops, so the check vouches for the timed figures."""
    x = ref.execute(kernbench.System.load(), "decode", 4, t_q=3, s_kv=300, **SMALL)
    r = gqa.run(kernbench.System.load(), "decode", 4, 3, 300, **SMALL)
    assert x.latency_ps == r.latency_ps
    assert len(x.ops["role"]) == sum(c for kind, c in r.op_counts.items() if kind != "slot_wait")


def _first(ops, role, after=0):
    return next(i for i in range(after, len(ops["role"])) if ops["role"][i] == role)


def test_check_fails_when_a_dependency_is_dropped(system):
    """Dropping the edge from a QK^T to the first softmax update lets it run early on missing scores and the check's
    error exceeds 1e-3 (the check sees ordering bugs); dropping an edge that does not exist is a UsageError."""
    args = dict(t_q=128, s_kv=256, **SMALL)
    ops = ref.execute(system, "prefill", 4, **args).ops
    # The first online-softmax update waits for its QK^T; without that edge the executor runs it on
    # scores that are not there yet.
    sm = _first(ops, "softmax")
    qk = next(d for d in ops["deps"][sm] if ops["role"][d] == "qk")
    x = ref.execute(system, "prefill", 4, drop_deps=[(sm, qk)], **args)
    assert x.ops["start_ps"][sm] < x.ops["end_ps"][qk]  # it did run early
    assert x.error > 1e-3
    with pytest.raises(_core.UsageError, match="does not depend on"):
        ref.execute(system, "prefill", 4, drop_deps=[(qk, sm)], **args)


def test_check_fails_when_merge_keys_are_swapped(system):
    """Swapping the keys of one decode merge's m and l messages (no deadlock, wrong payloads) makes the check's error
    exceed 1e-3, so it catches routing mistakes, not only hangs."""
    args = dict(t_q=1, s_kv=512, **SMALL)
    ops = ref.execute(system, "decode", 4, **args).ops
    # One merge's m and l messages, swapped: each recv gets the other's payload (no deadlock).
    rm = _first(ops, "recv_m")
    rl = _first(ops, "recv_l", rm)
    assert ops["agent"][rm] == ops["agent"][rl] and ops["peer"][rm] == ops["peer"][rl]
    err = ref.check(system, "decode", 4, set_keys=[(rm, ops["key"][rl]), (rl, ops["key"][rm])], **args)
    assert err > 1e-3


# ---- the model on the default machine -------------------------------------------

def test_plan_counts_and_work(system):
    """gqa.plan on the default machine gives each case's cube order, active PEs, compute work, KV bytes per cube and
    case 4's Q tiles and IPCQ ring/merge counts as derived by hand, within the 1 MiB scratch budget."""
    p = {c: gqa.plan(system, "prefill", c, 2048, 2048) for c in CASES}
    assert p[1]["cubes"] == [0, 1, 2, 3, 7, 6, 5, 4]
    assert p[3]["compute_work"] == 8 * p[1]["compute_work"] == 8 * p[4]["compute_work"]
    assert p[2]["active_pes"] == 8 and p[1]["active_pes"] == 64
    full = 2 * 2048 * 128 * 2
    assert p[2]["kv_bytes_per_cube"] == p[3]["kv_bytes_per_cube"] == full
    assert p[1]["kv_bytes_per_cube"] == p[4]["kv_bytes_per_cube"] == full // 8
    # Case 4: 2048 rows per cube -> 8 Q tiles of 256; 32 K/V tokens per chunk -> one tile:
    # the ring moves 8 x 7 rotations x K and V x 64 PEs.
    assert p[4]["q_tiles"] == 8
    assert p[4]["ipcq_ring"] == 8 * 7 * 2 * 64
    assert p[4]["ipcq_merge"] == 8 * 8 * 7 * 3
    for c in CASES:
        assert p[c]["scratch_per_pe"] <= p[c]["scratch_budget"] == 1 << 20


def test_run_matches_plan_and_scratch_budget(system):
    """For prefill and decode shapes in every case, gqa.run's DMA, IPCQ and GEMM op counts and peak scratch equal the
    plan's, the latency is positive and equals the run's makespan, and GEMM occupancy lies in (0, 1]."""
    for phase, t_q, s_kv in [("prefill", 512, 512), ("decode", 1, 2048), ("decode", 4, 1000)]:
        for c in CASES:
            r = gqa.run(system, phase, c, t_q, s_kv)
            p = r.plan
            assert r.dma_ops == p["dma_q"] + p["dma_kv"] + p["dma_out"]
            assert r.ipcq_ops == p["ipcq_ring"] + p["ipcq_merge"]
            assert r.op_counts["gemm"] == p["gemm_ops"]
            assert r.peak_scratch == p["scratch_per_pe"] <= 1 << 20
            assert r.latency_ps > 0
            assert 0 < r.engine_occupancy["gemm"] <= 1
            assert r.run.makespan_ns * 1e3 == pytest.approx(r.latency_ps)


def test_decode_case4_reference_counts(system):
    """Decode case 4 at 8192 tokens does what the reference's study counts: one output write and 189 IPCQ copies (63
    merges of O, m and l)."""
    # The reference's decode study: 1 output write and 189 IPCQ copies (63 merges x O, m, l).
    r = gqa.run(system, "decode", 4, 1, 8192)
    assert r.ipcq_ops == 189
    assert r.plan["dma_out"] == 1


def test_prefill_orderings_and_why_case4_is_not_first(system):
    """In prefill cases 1 and 4 beat the replicated cases 2 and 3 by a wide margin, case 1 stays slightly ahead of
    case 4 with the gap closing as the context grows, and giving case 1 case 4's small K/V tiles takes most of its
    lead (the per-tile costs explain it)."""
    # The reference expects case 4 fastest at long context in prefill. Our model finds cases 1 and 4
    # far ahead of the replicated cases 2 and 3, with case 1 slightly ahead of case 4 and the gap
    # closing as the context grows (bench: 3.3x at 512, 1.66x at 2048, 1.11x at 8192, <1 % at 16384).
    lat = {(c, t): gqa.run(system, "prefill", c, t, t).latency_ps for c in CASES for t in (512, 2048)}
    for t, factor in ((512, 1.5), (2048, 4)):
        assert factor * max(lat[(1, t)], lat[(4, t)]) < min(lat[(2, t)], lat[(3, t)])
    assert lat[(1, 2048)] < lat[(4, 2048)]
    assert lat[(4, 2048)] / lat[(1, 2048)] < lat[(4, 512)] / lat[(1, 512)]
    # Why: both do the same GEMM work per PE, but case 4's K/V tiles are S_kv / 64 tokens, so the
    # per-tile costs (O rescale on the vector engine, dispatches) are paid 8x as often. Giving case 1
    # the same 32-token tiles takes away most of its lead.
    c1_small = gqa.run(system, "prefill", 1, 2048, 2048, tile_s=32)
    assert c1_small.latency_ps > 1.2 * lat[(1, 2048)]
    assert (lat[(4, 2048)] - c1_small.latency_ps) < 0.6 * (lat[(4, 2048)] - lat[(1, 2048)])


def test_decode_case4_fastest(system):
    """At a 32768-token decode case 4 is the fastest and case 2 (one cube streams all of K/V) the slowest."""
    lat = {c: gqa.run(system, "decode", c, 1, 32768).latency_ps for c in CASES}
    assert min(lat, key=lat.get) == 4, lat
    assert lat[2] == max(lat.values())  # one cube streams all of K/V


def test_capacity_error_names_the_numbers(system):
    """A tile plan over the scratch budget raises a CapacityError that names the scores' size and the pe.scratch
    budget."""
    with pytest.raises(_core.CapacityError, match=r"scores 1024 x 1024 x 4 B = 4096 KiB.*budget pe.scratch = 1024 KiB"):
        gqa.plan(system, "prefill", 3, 1024, 8192, tile_q=1024, tile_s=1024)


def test_bad_inputs(system):
    """An unknown phase or a sequence length that is not a multiple of 64 is a ConfigError saying what was expected."""
    with pytest.raises(_core.ConfigError, match="expected 'prefill' or 'decode'"):
        gqa.plan(system, "train", 1, 64, 64)
    with pytest.raises(_core.ConfigError, match="not a multiple of 64"):
        gqa.plan(system, "prefill", 1, 100, 100)


def test_deterministic():
    """Two runs of one GQA prefill on fresh machines give the same latency and link bytes."""
    a = gqa.run(kernbench.System.load(), "prefill", 1, 512, 512)
    b = gqa.run(kernbench.System.load(), "prefill", 1, 512, 512)
    assert a.latency_ps == b.latency_ps and a.link_bytes == b.link_bytes


# ---- the bench at smoke size ------------------------------------------------------

def test_bench_smoke(tmp_path):
    """`kernbench run --bench milestone-1h-gqa --smoke` exits 0 with 8 result rows and no failures, prints its wall
    time and writes the gqa.csv and the four figures for each phase."""
    proc = subprocess.run([sys.executable, "-m", "kernbench", "run", "--bench", "milestone-1h-gqa", "--smoke",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    assert len(sweep["results"]) == 8
    assert "wall time" in proc.stdout
    for phase in ("prefill", "decode"):
        for fig in ("latency", "traffic", "memory", "parallelism"):
            assert (tmp_path / f"{phase}_{fig}.png").exists()
    assert (tmp_path / "gqa.csv").exists()

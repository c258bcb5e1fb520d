"""The fabric benches at smoke size: outputs, invariants, failures."""

from __future__ import annotations

import json

import pytest


def test_pe_dma_perf_verify_passes(cli, tmp_path):
    """pe-dma-perf --verify: every reference invariant holds on the default machine."""
    proc = cli("run", "--bench", "pe-dma-perf", "--out", str(tmp_path), "--verify")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    names = [r["scenario"] for r in sweep["results"]]
    assert names[:5] == ["SAME_CUBE_PE_LOCAL", "SAME_CUBE_PE_REMOTE_BEST", "SAME_CUBE_PE_REMOTE_WORST",
                         "REMOTE_CUBE_PE_REMOTE_BEST", "REMOTE_CUBE_PE_REMOTE_WORST"]
    assert {"ctrl_hot_1", "ctrl_hot_2", "ctrl_hot_3", "ucie_east_8", "hot_slice_8", "all_local_sip",
            "all_on_pe0_sip", "REMOTE_SIP"} <= set(names)
    assert all(c["ok"] for c in sweep["invariants"]), sweep["invariants"]
    assert len(sweep["invariants"]) >= 12
    by = {r["scenario"]: r for r in sweep["results"]}
    # ctrl_hot slope: each extra reader adds about 16 KB / 256 GB/s = 64 ns.
    slope = by["ctrl_hot_3"]["makespan_ns"] - by["ctrl_hot_2"]["makespan_ns"]
    assert 55 <= slope <= 75
    for f in ("summary.csv", "breakdown.png", "utilization.png"):
        assert (tmp_path / f).exists()
    assert "ours/ref" in proc.stdout


def test_pe_dma_perf_flow_model(cli, tmp_path):
    """The same bench runs on the flow model through --set."""
    proc = cli("run", "--bench", "pe-dma-perf", "--out", str(tmp_path), "--quiet", "--set", "fabric.model=flow",
               "--set", "bench.flit_check=false")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["config_overrides"] == {"fabric.model": "flow"}
    assert all(r["drain_ns"] == 0 for r in sweep["results"])


def test_bad_config_override_is_refused_before_running(cli, tmp_path):
    """A machine override with a bad value fails up front with the YAML path."""
    proc = cli("run", "--bench", "pe-dma-perf", "--out", str(tmp_path), "--set", "system.sips.w=two")
    assert proc.returncode == 2
    assert "system.sips.w" in proc.stderr and "two" in proc.stderr
    assert not (tmp_path / "sweep.json").exists()


def test_noc_load_latency_smoke(cli, tmp_path):
    """Latency rises with load and the bound is computed from the routes."""
    proc = cli("run", "--bench", "noc-load-latency", "--out", str(tmp_path), "--quiet",
               "--set", "bench.meshes=cube-4x2", "--set", "bench.loads=0.2,0.6,1.4",
               "--set", "bench.window_ns=1500", "--set", "bench.warmup_ns=300")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    rows = sweep["results"]
    lat = [r["mean_latency_ns"] for r in rows]
    assert lat[0] < lat[1] < lat[2]
    s = sweep["summary"]["cube-4x2"]
    # 4x2 mesh, XY routes, uniform over 8 PEs: the row-0 middle channel
    # r0c1 -> r0c2 carries 8/7 of a PE's injection rate.
    assert s["gamma_max"] == pytest.approx(8 / 7)
    assert s["lambda_sat_GBps"] == pytest.approx(256 * 7 / 8)
    # Saturation lies between the swept 0.6x and 1.4x of the bound.
    assert 0.6 * s["lambda_sat_GBps"] < s["saturation_GBps"] < 1.4 * s["lambda_sat_GBps"]
    assert (tmp_path / "load_latency.png").exists()


def test_perf_fabric_smoke(cli, tmp_path):
    """perf-fabric reports rates for both models and the chunk-size knob against 64 B."""
    proc = cli("run", "--bench", "perf-fabric", "--out", str(tmp_path), "--quiet",
               "--set", "bench.pe_counts=128", "--set", "bench.chunks=64,1024", "--set", "bench.window_ns=500")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    scale = [r for r in sweep["results"] if r["study"] == "scale"]
    assert {r["model"] for r in scale} == {"packet", "flow"}
    assert all(r["events_per_s"] > 0 for r in scale)
    knob = [r for r in sweep["results"] if r["study"] == "chunk"]
    ref = next(r for r in knob if r["chunk_bytes"] == 64)
    assert ref["latency_error"] == 0
    big = next(r for r in knob if r["chunk_bytes"] == 1024)
    assert big["chunk_hops"] < ref["chunk_hops"]


def test_perf_ccl_scale_fits_wall_against_events():
    """The scaling exponent is the log-log slope of wall time against events, per model."""
    from kernbench.benches.perf_ccl_scale import _scaling

    def row(model, pes, events, wall):
        return {"model": model, "pes": pes, "events": events, "wall_s": wall, "wall_us_per_event": wall / events * 1e6}

    rows = [row("linear", 128 * k, 1000 * k, 0.002 * k) for k in (1, 4, 16)]
    rows += [row("steeper", 128 * k, 1000 * k, 0.002 * k ** 1.5) for k in (1, 4, 16)]
    rows += [row("alone", 128, 1000, 0.5)]
    fit = _scaling(rows)
    assert fit["linear"]["exponent"] == pytest.approx(1.0, abs=1e-9)
    assert fit["steeper"]["exponent"] == pytest.approx(1.5, abs=1e-9)
    assert fit["steeper"]["us_per_event_largest"] == pytest.approx(4 * fit["steeper"]["us_per_event_smallest"])
    assert (fit["linear"]["pes_smallest"], fit["linear"]["pes_largest"], fit["linear"]["points"]) == (128, 2048, 3)
    assert "alone" not in fit  # one point has no slope

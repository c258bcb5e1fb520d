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
    """Latency rises with load, saturation is found and each pattern's bound comes from the routes."""
    proc = cli("run", "--bench", "noc-load-latency", "--out", str(tmp_path), "--quiet",
               "--set", "bench.meshes=mesh-4x4", "--set", "bench.patterns=uniform,transpose",
               "--set", "bench.buffers=unbounded", "--set", "bench.loads=0.2,0.6,1.4",
               "--set", "bench.window_cycles=3000", "--set", "bench.warmup_cycles=800",
               "--set", "bench.tree_loads=0,0.2")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    load = [r for r in sweep["results"] if r["study"] == "load"]
    for pattern in ("uniform", "transpose"):
        lat = [r["mean_latency_cycles"] for r in load if r["pattern"] == pattern]
        assert lat[0] < lat[1] < lat[2]
    sat = {s["pattern"]: s for s in sweep["summary"]["saturation"]}
    assert set(sat) == {"uniform", "transpose"}
    for s in sat.values():
        assert s["buffer"] == "unbounded" and s["mesh"] == "mesh-4x4"
        assert set(s) >= {"pattern", "buffer", "saturation", "bound"}
        # Saturation lies between the swept 0.6x and 1.4x of the bound.
        assert 0.6 * s["bound"] < s["saturation"] <= 1.4 * s["bound"]
    # 4x4 mesh, XY routes, uniform over 16 PEs: a row's middle channel carries
    # 2 sources x 8 destinations / 15 = 16/15 of a node's load; a flit per cycle
    # per channel makes the bound 15/16 flits/node/cycle.
    assert sat["uniform"]["gamma_max"] == pytest.approx(16 / 15)
    assert sat["uniform"]["bound"] == pytest.approx(15 / 16)
    # Transpose under XY: the corner column's links carry 3 rows' worth (see docs/noc.md).
    assert sat["transpose"]["bound"] < sat["uniform"]["bound"]
    tree = [r for r in sweep["results"] if r["study"] == "tree"]
    assert [r["load_fraction"] for r in tree] == [0.0, 0.2]
    for f in ("load_latency_mesh-4x4.png", "tree_saturation.png", "load_latency.csv"):
        assert (tmp_path / f).exists()


def _rows(offered, accepted, latency):
    return [{"offered_flits": o, "accepted_flits": a, "mean_latency_cycles": l}
            for o, a, l in zip(offered, accepted, latency)]


def test_noc_saturation_detection_on_synthetic_rows():
    """Saturation: the first crossing of accepted < 95 % of offered or latency > 3x zero-load, interpolated."""
    from kernbench.benches.noc_load_latency import find_saturation

    # Throughput falls behind first: ratio 0.9667 at 0.3, 0.75 at 0.4 -> crosses 0.95 at 0.3 + 0.1 x 1/13.
    x, why = find_saturation(_rows([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.29, 0.3], [10, 11, 15, 40]))
    assert why == "accepted" and x == pytest.approx(0.3 + 0.1 * (0.29 / 0.3 - 0.95) / (0.29 / 0.3 - 0.75))
    # Latency first (rows in any order): all accepted; latency 20 -> 50 over the loads 0.3 -> 0.4
    # crosses 3 x 10 at 0.3 + 0.1 x 1/3.
    x, why = find_saturation(_rows([0.4, 0.1, 0.3, 0.2], [0.4, 0.1, 0.3, 0.2], [50, 10, 20, 12]))
    assert why == "latency" and x == pytest.approx(0.3 + 0.1 / 3)
    # Never saturated within the loads; saturated from the first load.
    assert find_saturation(_rows([0.1, 0.2], [0.1, 0.2], [10, 12])) == (None, None)
    assert find_saturation(_rows([0.5, 0.6], [0.3, 0.3], [10, 12])) == (0.5, "accepted")
    assert find_saturation([]) == (None, None)
    # A Bernoulli run that injected 6 % under its nominal load and delivered all of it is not saturated.
    rows = _rows([0.1, 0.2], [0.094, 0.2], [10, 11])
    rows[0]["injected_flits"] = 0.094
    assert find_saturation(rows) == (None, None)
    del rows[0]["injected_flits"]
    assert find_saturation(rows) == (0.1, "accepted")


@pytest.mark.parametrize("pattern", ["uniform", "transpose", "bitcomplement", "neighbour", "hotspot"])
def test_noc_destination_matrix_matches_the_generator(pattern):
    """The bound's P(s -> d) is what the C++ generator draws: exact for the fixed patterns, within
    statistical bounds for the random ones."""
    import numpy as np

    from kernbench import System
    from kernbench.benches.noc_load_latency import destinations

    system = System.load(set={"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 1, "system.cubes.h": 1,
                              "system.routers.w": 4, "system.routers.h": 4, "system.pes_per_cube": 16}, seed=3)
    pes = system.pes()
    # Periodic: each source injects 400 times (64 B every 10 ns for 4 us).
    system.traffic(pattern, pes, 6.4, 64, 0, 4_000_000, injection="periodic", hotspot=pes[0],
                   hotspot_fraction=0.3, grid_w=4)
    system.run()
    t = system.transfers()
    index = {name: i for i, name in enumerate(pes)}
    seen = np.zeros((16, 16))
    for s, d in zip(t["src"], t["dst"]):
        seen[index[system.node_name(int(s))], index[system.node_name(int(d))]] += 1
    want = destinations(pattern, 16, 4, 0, 0.3) * 400
    if pattern in ("uniform", "hotspot"):
        # Binomial counts: within 5 standard deviations of each expected count.
        sd = np.sqrt(want * (1 - want / 400))
        assert np.all(np.abs(seen - want) <= 5 * sd + 1e-9)
    else:
        assert np.array_equal(seen, want)
    if pattern == "transpose":
        assert np.trace(seen) == 0 and seen.sum() == 12 * 400
    if pattern == "bitcomplement":
        assert all(seen[s, 15 - s] == 400 for s in range(16))
    if pattern == "neighbour":
        assert seen[3, 0] == 400 and seen[3, 4] == 0  # wraps within the row


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

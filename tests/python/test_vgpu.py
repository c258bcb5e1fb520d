"""The vGPU forwarding path from Python: launches, decomposition, P1-P12, benches."""

from __future__ import annotations

import json

import pytest

import kernbench
from kernbench import vgpu


def test_first_launch_matches_the_measured_figures():
    """The first launch reproduces 189 ms / ~180 ms forwarding / 7.87 ms within 5 %."""
    run = vgpu.launches(2)
    first = run["launches"][0]
    assert abs(first["elapsed_ms"] - 189) <= 0.05 * 189
    assert abs(first["forwarding_ps"] / vgpu.MS - 180) <= 0.05 * 180
    assert abs(first["doorbell_to_completion_ps"] / vgpu.MS - 7.87) <= 0.05 * 7.87
    assert (first["forwards"], first["accepted"], first["refused"]) == (8, 2, 6)
    rows = {r["component"]: r for r in vgpu.decomposition(first)}
    assert rows["elapsed_ms (jiffies)"]["measured"] == 189
    assert 0.95 <= rows["elapsed_ms (jiffies)"]["model/measured"] <= 1.05
    assert run["launches"][1]["forwards"] == 7


def test_op_log_names_every_step():
    """The op log carries the model's op kinds; the forwards are 8 pde_forward ops of the first launch."""
    run = vgpu.launches(1)
    df = vgpu.ops_table(run["ops"])
    kinds = set(df["kind_name"])
    for k in ("trap", "pde_forward", "rpc", "poll_wait", "qmd_relocation", "shadow_copy", "bounce_in", "doorbell",
              "gr_exec", "completion_poll", "bounce_out", "msix", "launch"):
        assert k in kinds, k
    assert (df["kind_name"] == "pde_forward").sum() == 8
    assert int(df.loc[df["kind_name"] == "pde_forward", "work"].sum()) == 2  # accepted ones


def test_chrome_trace_of_a_run(tmp_path):
    """The op log becomes a Perfetto trace: one X event per op, named by kind, on resource tracks."""
    run = vgpu.launches(1, set={"vgpu.guests": 2})
    info = vgpu.chrome_trace(run, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X" and not e["cat"].startswith("critical")]
    assert info["events"] == len(xs) == len(run["ops"]["op"])
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {procs[e["pid"]] for e in xs} == {"guest 0", "guest 1"}
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"].startswith("critical")]
    assert sum(e["args"]["end_ps"] - e["args"]["start_ps"] for e in steps) == run["critical_path"]["makespan_ps"]
    assert sum(e["name"] == "rpc" for e in xs) == 16
    assert any(e["name"] == "rpc" and e["args"]["queued_us"] > 0 for e in xs)  # the GSP queue is visible


def test_two_guests_queue_at_the_gsp():
    """With two guests launching at once, the second one's first RPC waits at the GSP."""
    run = vgpu.launches(1, set={"vgpu.guests": 2})
    assert run["gsp_waited"] >= 1
    a, b = run["launches"]
    assert b["gsp_wait_ps"] > 10 * vgpu.MS
    assert b["elapsed_ms"] > a["elapsed_ms"]


def test_hung_launch_times_out_with_a_named_error():
    """A completion that never comes ends at the 5000 ms give-up limit with an error naming the launch."""
    run = vgpu.launches(1, hang=[0])
    r = run["launches"][0]
    assert r["timed_out"] and r["elapsed_ms"] >= 5000
    assert "launch 0 of guest 0" in r["error"]
    with pytest.raises(kernbench.UsageError, match="hang index 3"):
        vgpu.launches(1, hang=[3])


def test_workload_metrics_guest_vs_bare():
    """P1-P12 come out for guest and bare metal; the ratios have the expected directions."""
    s = vgpu.workload(set={"vgpu.workload.warm_launches": 5, "vgpu.workload.burst": 5,
                           "vgpu.workload.copy_max": "1 MiB"}, seeds=[1, 2])
    by = {r["metric"]: r for r in s["summary"]}
    assert by["P3_first_launch_ms"]["ratio"] > 100       # forwarding dominates the first launch
    assert by["P4_warm_p50_ms"]["ratio"] > 100
    assert by["P10_launches_per_s"]["ratio"] < 0.01
    assert by["P9_kernel_us"]["ratio"] == pytest.approx(1.0)  # the same engine runs the kernel
    assert by["P12_kernel_cycles"]["ratio"] == pytest.approx(1.0)
    assert by["P1_init_ms"]["ratio"] > 1
    assert 0 < by["P7_h2d_1MiB_GBps"]["ratio"] < 1
    assert "P11_dispersion_P3h_host_ms" in by


def test_workload_seeds_default_to_the_configured_repetitions():
    """workload() without seeds runs vgpu.workload.repetitions seeds."""
    s = vgpu.workload(set={"vgpu.workload.repetitions": 3, "vgpu.workload.warm_launches": 1, "vgpu.workload.burst": 1,
                           "vgpu.workload.copy_max": "4 KiB"})
    assert [r["seed"] for r in s["runs"]] == [1, 2, 3]


def test_too_many_guests_is_refused():
    """vgpu.guests beyond the model's cap is a ConfigError naming the key."""
    with pytest.raises(kernbench.ConfigError, match="vgpu.guests"):
        vgpu.load({"vgpu.guests": 5000})


def test_knee_of_a_curve():
    """knee(): the smallest size reaching half the largest size's bandwidth."""
    assert vgpu.knee([1, 2, 4, 8], [1.0, 3.0, 5.0, 8.0]) == 4
    assert vgpu.knee([], []) is None


def test_whatif_combinations_cover_every_switch():
    """2 splits x 5 poll settings x batching x caching = 40 labelled override sets."""
    combos = vgpu.whatif_combinations()
    assert len(combos) == 40
    assert {c["poll"] for c in combos} == {"5 ms", "2 ms", "1 ms", "0.1 ms", "interrupt"}


def test_bad_vgpu_override_names_the_path():
    """A bad vgpu value is a ConfigError naming the YAML path."""
    with pytest.raises(kernbench.ConfigError, match="vgpu.poll.mode"):
        vgpu.load({"vgpu.poll.mode": "sometimes"})


def test_vgpu_launch_bench_smoke(cli, tmp_path):
    """vgpu-launch at smoke size: decomposition rows beside the measured figures, spread and histogram."""
    proc = cli("run", "--bench", "vgpu-launch", "--out", str(tmp_path), "--set", "bench.runs=5")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    dec = [r for r in sweep["results"] if r.get("study") == "decomposition"]
    assert {r["split"] for r in dec} == set(vgpu.SPLITS)
    assert sweep["spread"]["runs"] == 5
    assert (tmp_path / "spread.png").exists() and (tmp_path / "copies.png").exists()
    assert "measured" in proc.stdout
    metrics = {r["component"]: r for r in sweep["results"] if r.get("study") == "metrics"}
    assert metrics["P4_warm_p50_ms"]["ratio"] > 100 and metrics["P9_kernel_us"]["ratio"] == pytest.approx(1.0)


@pytest.mark.slow
def test_vgpu_whatif_bench_smoke(cli, tmp_path):
    """vgpu-whatif at smoke size: 40 combinations, the guest sweep, ordering of the poll settings."""
    proc = cli("run", "--bench", "vgpu-whatif", "--out", str(tmp_path), "--quiet", "--set", "bench.seeds=1",
               "--set", "bench.max_guests=3", "--set", "bench.warm_launches=2", "--set", "bench.burst=2")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    what = [r for r in sweep["results"] if r["study"] == "whatif"]
    assert len(what) == 40
    plain = {(r["split"][:1], r["poll"]): r["elapsed_ms_p50"] for r in what
             if not r["batching"] and not r["caching"]}
    for s in "AB":
        assert plain[(s, "5 ms")] > plain[(s, "1 ms")] > plain[(s, "interrupt")]
    guests = [r for r in sweep["results"] if r["study"] == "guests"]
    a = [r["elapsed_ms_max"] for r in guests if r["split"].startswith("A")]
    assert a == sorted(a) and a[-1] > a[0]


def test_a_machine_without_a_vgpu_section_is_refused():
    """Running the vGPU model on the default SIP machine is a ConfigError that says what is missing."""
    system = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    with pytest.raises(kernbench.ConfigError, match="vgpu:"):
        kernbench._core.vgpu_launches(system._core, 1)
    with pytest.raises(kernbench.UsageError, match="launches per guest"):
        kernbench._core.vgpu_launches(vgpu.load()._core, 0)

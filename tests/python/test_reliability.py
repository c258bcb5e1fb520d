"""Reliability: interrupts, runaway guards, run-time invariants, determinism of bench outputs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

import kernbench

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}


def test_ctrl_c_interrupts_a_long_cpp_run_promptly():
    """SIGINT during a C++ run that would take hours returns to Python within a few seconds."""
    code = (
        "import kernbench, sys\n"
        "print('running', flush=True)\n"
        "kernbench.run_phold(kernbench.Simulation(1), 'callbacks', events=10**13)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run did not stop within 10 s of Ctrl-C")
    assert time.monotonic() - sent < 5
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err


def test_event_and_time_limits_stop_runaway_models():
    """max_events / max_time_ps end a run that would not stop by itself, with a LimitError that says which."""
    s = kernbench.System.load(set=SMALL)
    s.traffic("uniform", s.pes()[:8], 20.0, 256, 0, 10**15)  # effectively endless
    s.set_limits(max_events=20_000)
    with pytest.raises(kernbench.LimitError, match="event limit: 20000 events"):
        s.run()
    sim = kernbench.Simulation(1)
    sim.set_limits(max_time_ps=5_000_000)
    with pytest.raises(kernbench.LimitError, match="simulated-time limit"):
        kernbench.run_phold(sim, "callbacks", events=10**9)
    assert sim.now <= 5_000_000


def _sweep_without_wall_clock(path):
    d = json.loads(path.read_text())
    d.pop("wall_s")
    return d


@pytest.mark.parametrize(
    "bench, sets",
    [
        ("pe-dma-perf", ["--set", "bench.flit_check=false"]),
        ("noc-load-latency", ["--set", "bench.meshes=cube-4x2", "--set", "bench.loads=0.5,1.1",
                              "--set", "bench.window_cycles=3200", "--set", "bench.warmup_cycles=800",
                              "--set", "bench.patterns=uniform", "--set", "bench.buffers=unbounded,8 flits",
                              "--set", "bench.vcs=2", "--set", "bench.tree_loads=0.1"]),
    ],
)
def test_same_seed_same_sweep(cli, tmp_path, bench, sets):
    """A bench run twice with one seed writes the same sweep.json, wall time aside."""
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        proc = cli("run", "--bench", bench, "--out", str(out), "--quiet", "--seed", "7", *sets)
        assert proc.returncode == 0, proc.stderr
    assert _sweep_without_wall_clock(a / "sweep.json") == _sweep_without_wall_clock(b / "sweep.json")
    assert (a / "sweep.json").read_text().replace(str(a), "") != ""  # written, not empty


def test_interrupted_bench_keeps_what_it_finished(tmp_path):
    """Ctrl-C in the middle of a bench: exit 130, and sweep.json holds the finished points plus 'interrupted'."""
    pops = ",".join(["256x1"] * 20)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernbench", "run", "--bench", "perf-phold", "--out", str(tmp_path),
         "--set", "bench.events=2000000", "--set", "bench.simpy_events=20000", "--set", f"bench.populations={pops}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait until a few populations are done (each prints its simpy line last).
    done = 0
    while done < 2:
        line = proc.stdout.readline()
        assert line, "the bench ended before it could be interrupted"
        done += "simpy" in line
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "kernbench: interrupted" in err and "Traceback" not in err
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert len(sweep["results"]) >= 2
    assert sweep["failures"][-1]["error"] == "interrupted (KeyboardInterrupt)"

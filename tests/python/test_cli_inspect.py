"""`kernbench run --trace` (Chrome/Perfetto traces) and `kernbench show` (topology summary and picture)."""

from __future__ import annotations

import json

import kernbench
from kernbench.trace import chrome_trace

GEMM_SMOKE = ["--set", "bench.square=256", "--set", "bench.pe_counts=1,8", "--set", "bench.precisions=fp16",
              "--set", "bench.skinny=32x64x32", "--set", "bench.llm_tokens=1", "--set", "bench.llm_pes=8",
              "--set", "bench.timeline=none"]
PANEL = "square 256x256x256 fp16 8PE"


def _tracks(trace):
    """(process name, track name) for every track that holds at least one event."""
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X"}
    assert used == set(threads), "every track is named and holds events"
    return {(procs[p], threads[(p, t)]) for p, t in used}


def test_run_trace_writes_one_track_per_engine(cli, tmp_path):
    """--trace of a GEMM panel: valid JSON, one process per PE, one track per engine unit that ran ops."""
    out, path = tmp_path / "out", tmp_path / "trace.json"
    proc = cli("run", "--bench", "milestone-1h-gemm", "--out", str(out), "--quiet", *GEMM_SMOKE,
               "--trace", str(path), "--trace-panel", PANEL)
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(path.read_text())
    tracks = _tracks(trace)
    pes = {p for p, _ in tracks if p != "critical path"}
    assert pes == {f"sip0.cube0.pe{i}" for i in range(8)}
    assert ("critical path", "steps") in tracks
    for pe in pes:  # two DMA channels, the GEMM engine and the composite envelope on every PE
        assert {t for p, t in tracks if p == pe} == {"dma", "dma #1", "gemm", "control"}
    # No two ops overlap on one track: a track is one engine unit.
    by_track: dict = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["args"]["start_ps"], e["args"]["end_ps"]))
    for spans in by_track.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["trace"]["panel"] == PANEL and sweep["trace"]["tracks"] == len(tracks)
    row = next(r for r in sweep["results"] if r["name"] == PANEL)
    assert trace["otherData"]["makespan_ps"] == round(row["makespan_ns"] * 1e3)
    last_end = max(e["args"]["end_ps"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert last_end - min(e["args"]["issue_ps"] for e in trace["traceEvents"] if e["ph"] == "X") <= row["makespan_ns"] * 1e3


def test_trace_of_an_unknown_panel_is_a_failure_listing_the_panels(cli, tmp_path):
    """Asking for a panel the bench does not have fails the run (exit 1) and lists the panels offered."""
    proc = cli("run", "--bench", "milestone-1h-gemm", "--out", str(tmp_path), "--quiet", *GEMM_SMOKE,
               "--trace", str(tmp_path / "t.json"), "--trace-panel", "no such panel")
    assert proc.returncode == 1
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    err = sweep["failures"][-1]["error"]
    assert "no panel 'no such panel'" in err and repr(PANEL) in err
    assert not (tmp_path / "t.json").exists()


def test_dma_trace_of_a_system():
    """A System's DMA ops trace as one track per concurrent op of an issuer, times exact to the ps."""
    s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    for i in range(3):
        s.dma("read", "sip0.cube0.pe0", f"sip0.cube0.hbm_ctrl.pe{i}", 4096, address=i * 4096)
    s.dma("read", "sip0.cube0.pe1", "sip0.cube0.hbm_ctrl.pe1", 4096)
    s.run()
    t = chrome_trace(s, "demo")
    tracks = _tracks(t)
    assert tracks == {("sip0.cube0.pe0", "dma"), ("sip0.cube0.pe0", "dma #1"), ("sip0.cube0.pe0", "dma #2"),
                      ("sip0.cube0.pe1", "dma")}
    d = s.dma_df()
    ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["args"]["end_ps"] - e["args"]["issue_ps"] for e in ev) == sorted(d["latency_ps"].tolist())


def test_show_prints_kinds_links_and_the_sip_grid(cli, tmp_path):
    """`kernbench show` counts node kinds and links from the built machine and draws a PNG."""
    png = tmp_path / "m.png"
    proc = cli("show", "--set", "system.sips.w=2", "--set", "system.sips.h=1", "--png", str(png))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # 2 SIPs x 16 cubes x 8 PEs; each PE has an HBM controller slice; 8 routers per cube.
    assert "pe 256" in out and "hbm_ctrl 256" in out and "router 256" in out and "pcie_ep 2" in out
    assert "SIP grid 2x1 (torus" in out and "sip0 -- sip1" in out
    ucie = next(line for line in out.splitlines() if line.strip().startswith("ucie "))
    assert "x4 lanes" in ucie and "128 GB/s" in ucie
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_show_bad_override_names_the_path(cli):
    """A bad --set on `show` is the loader's one-line error."""
    proc = cli("show", "--set", "system.cubes.w=many")
    assert proc.returncode == 2 and "system.cubes.w" in proc.stderr and "many" in proc.stderr


def _stderr_through_a_terminal(args, tmp_path):
    """Run `kernbench ARGS` with stderr on a pseudo-terminal; what it wrote there."""
    import os
    import pty
    import subprocess
    import sys

    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a real terminal has a size
    proc = subprocess.Popen([sys.executable, "-m", "kernbench", *args], stdout=subprocess.DEVNULL, stderr=slave,
                            cwd=tmp_path)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


def test_progress_bars_only_on_a_terminal(cli, tmp_path):
    """tqdm bars go to stderr when it is a terminal (bench rows, sweep points), never into pipes or logs."""
    # (Runs into pipes are checked in test_sweep and test_goldens: their stderr is empty.)
    shown = _stderr_through_a_terminal(["run", "--bench", "perf-phold", "--set", "bench.events=2000", "--set",
                                        "bench.simpy_events=200", "--set", "bench.populations=16x1", "--out", "b"],
                                       tmp_path)
    assert "perf-phold" in shown and "row" in shown
    shown = _stderr_through_a_terminal(["sweep", "--bench", "noc-load-latency", "--set", "bench.meshes=cube-4x2",
                                        "--set", "bench.patterns=uniform", "--set", "bench.buffers=unbounded",
                                        "--set", "bench.tree=false",
                                        "--set", "bench.loads=0.2", "--set", "bench.window_cycles=1600",
                                        "--set", "bench.warmup_cycles=400", "--grid", "bench.packet_flits=1,2",
                                        "--executor", "serial", "--out", "c"], tmp_path)
    assert "sweep noc-load-latency" in shown and "/2" in shown and "point" in shown


def test_show_an_explicit_graph(cli, tmp_path):
    """An explicit graph: node and link counts, the edge classes, a picture laid out by a graph layout (tests/python/test_show_layout.py checks no edge hides)."""
    cfg = tmp_path / "g.yaml"
    cfg.write_text(
        "graph:\n"
        "  nodes:\n"
        "    - {name: host, kind: host, overhead: 1 ns}\n"
        "    - {name: sw, kind: router, overhead: 1 ns}\n"
        "    - {name: m0, kind: hbm_ctrl, overhead: 1 ns}\n"
        "    - {name: m1, kind: hbm_ctrl, overhead: 1 ns}\n"
        "  edges:\n"
        "    - {a: host, b: sw, bandwidth: 32 GB/s, latency: 100 ns, class: pcie}\n"
        "    - {a: sw, b: m0, bandwidth: 256 GB/s, latency: 1 ns, class: hbm}\n"
        "    - {a: sw, b: m1, bandwidth: 256 GB/s, latency: 1 ns, class: hbm}\n")
    png = tmp_path / "g.png"
    proc = cli("show", str(cfg), "--png", str(png))
    assert proc.returncode == 0, proc.stderr
    assert "explicit graph: 4 nodes, 3 edges" in proc.stdout
    assert "nodes (4): hbm_ctrl 2, host 1, router 1" in proc.stdout
    hbm = next(line for line in proc.stdout.splitlines() if line.strip().startswith("hbm "))
    assert "2 links" in hbm and "256 GB/s" in hbm
    assert "SIP grid" not in proc.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_traffic_bench_traces_its_transfers(cli, tmp_path):
    """noc-load-latency offers each load point; its trace has one process per sending PE and every transfer."""
    path = tmp_path / "noc.json"
    panel = "mesh-4x4@uniform@unbounded@0.8"
    proc = cli("run", "--bench", "noc-load-latency", "--smoke", "--quiet", "--out", str(tmp_path / "o"),
               "--set", "bench.buffers=unbounded", "--set", "bench.tree=false",
               "--trace", str(path), "--trace-panel", panel)
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(path.read_text())
    assert trace["otherData"]["source"] == "transfers" and trace["otherData"]["panel"] == panel
    tracks = _tracks(trace)
    assert {p for p, _ in tracks} == {f"sip0.cube0.pe{i}" for i in range(16)}
    ev = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    sweep = json.loads((tmp_path / "o" / "sweep.json").read_text())
    row = next(r for r in sweep["results"] if r["load_fraction"] == 0.8 and r["pattern"] == "uniform")
    assert len(ev) >= row["packets"]  # every transfer, the warm-up ones too
    for e in ev:  # the four parts of every transfer sum to its latency
        a = e["args"]
        assert a["overhead_ps"] + a["transmission_ps"] + a["drain_ps"] + a["queuing_ps"] == a["end_ps"] - a["issue_ps"]

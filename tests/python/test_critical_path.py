"""The critical path from Python: result.critical_path(), summarize(), the trace highlight, the bench summary."""

from __future__ import annotations

import json

import pytest

import kernbench
from kernbench import critical_path
from kernbench.trace import chrome_trace

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}
PE = "sip0.cube0.pe0"


@pytest.fixture
def system():
    return kernbench.System.load(set=SMALL)


def _program(system):
    """A load, a GEMM that depends on it, and a second GEMM contending for the same engine."""
    prog = system.program("cp")
    load = prog.dma(PE, "sip0.cube1.hbm_ctrl.pe3", PE, 256 * 1024, name="far load")
    first = prog.gemm(PE, 2 * 256**3, deps=[load], name="first")
    second = prog.gemm(PE, 2 * 256**3, deps=[load], name="second")
    return prog, load, first, second


def test_length_equals_makespan_and_every_step_is_a_real_op_or_wait(system):
    """The steps tile [start, end] of the run; each is an op or wait of a node that ran, linked to a real cause."""
    prog, load, first, second = _program(system)
    res = prog.run()
    cp = res.critical_path()
    assert cp.length == cp.length_ps == res.makespan_ps > 0
    steps = cp.steps
    assert steps[0]["start_ps"] == res.start_ps and steps[-1]["end_ps"] == res.end_ps
    assert all(a["end_ps"] == b["start_ps"] for a, b in zip(steps, steps[1:]))
    ops = res.ops_df()
    for s in steps:
        assert s["kind"] in ("op", "wait:dependency", "wait:resource")
        assert s["duration_ps"] == s["end_ps"] - s["start_ps"] > 0
        assert sum(s["parts"].values()) == s["duration_ps"]
        if 0 <= s["node"] < len(ops):  # a program op: inside its own lifetime
            assert ops.loc[s["node"], "ready_ps"] <= s["start_ps"] and s["end_ps"] <= ops.loc[s["node"], "end_ps"]
    # load -> first (dependency) -> second (waited for the GEMM engine first held)
    assert [s["op"] for s in steps if s["via"] != "op"][1:] == [first, second]
    last = steps[-1]
    assert last["op"] == second and last["via"] == "resource:gemm" and last["holder"] == first
    assert last["holder_name"] == "first" and last["waited_ps"] > 0
    # the load's fabric time went to link classes of its route (a cross-cube read: UCIe)
    assert any(k.startswith("link:ucie") for k in cp.share)
    assert sum(cp.share.values()) == pytest.approx(1.0)
    assert cp.share["engine:gemm"] == pytest.approx(2 * (ops.loc[first, "end_ps"] - ops.loc[first, "start_ps"])
                                                    / res.makespan_ps)


def test_summarize_gives_the_shared_sweep_json_dict(system):
    """summarize(result) is {"length_ps", "makespan_ps", "share": {label: fraction}} with contract labels."""
    prog, *_ = _program(system)
    res = prog.run()
    d = critical_path.summarize(res)
    assert set(d) == {"length_ps", "makespan_ps", "share"}
    assert d["length_ps"] == d["makespan_ps"] == res.makespan_ps
    assert all(k.split(":")[0] in ("engine", "link", "wait") for k in d["share"])
    assert sum(d["share"].values()) == pytest.approx(1.0, abs=1e-5)
    json.dumps(d)  # plain JSON
    text = res.critical_path().summary()
    assert "critical path of 'cp'" in text and "engine:gemm" in text and "resource:gemm <- first" in text
    with pytest.raises(kernbench.UsageError, match="expected a RunResult"):
        critical_path.summarize(system)


def test_trace_highlights_the_path(system):
    """The Perfetto trace has a 'critical path' process with the steps, and marks the ops on it."""
    prog, load, first, second = _program(system)
    res = prog.run()
    t = chrome_trace(res, "demo")
    procs = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e["name"] == "process_name"}
    pid = next(p for p, n in procs.items() if n == "critical path")
    steps = [e for e in t["traceEvents"] if e["ph"] == "X" and e["pid"] == pid]
    cp = res.critical_path()
    assert len(steps) == len(cp.steps) == t["otherData"]["critical_path_steps"]
    assert sum(e["args"]["end_ps"] - e["args"]["start_ps"] for e in steps) == res.makespan_ps
    marked = {e["args"]["op"] for e in t["traceEvents"] if e["ph"] == "X" and e["args"].get("critical")}
    assert {load, first, second} <= marked
    flows = [e for e in t["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * sum(1 for s in cp.steps[1:] if s["via"] != "op")


def test_bench_run_prints_and_writes_the_critical_paths(tmp_path, capsys):
    """A bench run lists its runs' critical paths after the run and writes critical_path.csv; rows carry the dict."""
    from kernbench.runner import run_bench

    sweep = run_bench("milestone-1h-gemm", out=tmp_path, sets=[
        "bench.square=256", "bench.pe_counts=1", "bench.precisions=fp16", "bench.skinny=32x64x32",
        "bench.llm_tokens=1", "bench.llm_pes=8", "bench.timeline=none"], quiet=False)
    assert not sweep["failures"], sweep["failures"]
    row = sweep["results"][0]
    assert row["critical_path"]["length_ps"] == row["critical_path"]["makespan_ps"] == round(row["makespan_ns"] * 1e3)
    out = capsys.readouterr().out
    assert "critical paths (" in out and row["name"] in out
    csv = (tmp_path / "critical_path.csv").read_text().splitlines()
    assert csv[0].split(",")[:3] == ["run", "label", "share"] and len(csv) > 1
    assert "critical_path.csv" in sweep["files"]


def test_op_log_critical_path_on_a_hand_made_log():
    """Models without causes (K200, vGPU): links inferred from times; the steps tile the makespan."""
    from kernbench.critical_path import from_op_log

    # a: [0,10) on dma; b queued on dma from 2, granted at 10 (a held it), ends 30;
    # c ready at 35 (a gap of 5 after b) on gemm, ends 50; d: [0,5) elsewhere, off the path.
    log = {"issue": [0, 2, 35, 0], "start": [0, 10, 35, 0], "end": [10, 30, 50, 5],
           "resource": ["dma", "dma", "gemm", "cpu"], "kind": ["load", "load2", "mm", "misc"]}
    cp = from_op_log(log, start_ps=0)
    assert cp.length_ps == cp.makespan_ps == 50
    assert [(s["kind"], s["name"], s["start_ps"], s["end_ps"]) for s in cp.steps] == [
        ("op", "load", 0, 10), ("op", "load2", 10, 30), ("wait:dependency", "gap", 30, 35), ("op", "mm", 35, 50)]
    assert cp.steps[1]["via"] == "resource:dma"          # load2 was handed the dma by load
    assert cp.share_ps == {"engine:load": 10, "engine:load2": 20, "wait:dependency": 5, "engine:mm": 15}
    # A queued op whose holder is not in the log: the queueing is a wait step.
    cp2 = from_op_log({"issue": [0], "start": [4], "end": [9], "resource": ["q"], "kind": ["x"]}, start_ps=0)
    assert [(s["kind"], s["start_ps"], s["end_ps"]) for s in cp2.steps] == [("wait:resource", 0, 4), ("op", 4, 9)]
    assert cp2.length_ps == 9


def test_k200_and_vgpu_runs_have_a_critical_path():
    from kernbench import k200, vgpu

    sys = k200.load_system()
    r = k200.copy(sys, "pageable", "h2d", 4 << 20)
    cp = r.critical_path()
    assert cp.length_ps == cp.makespan_ps > 0
    assert sum(cp.share_ps.values()) == cp.length_ps
    assert all(a["end_ps"] == b["start_ps"] for a, b in zip(cp.steps, cp.steps[1:]))  # the steps join end to end
    out = vgpu.launches(1)
    vp = vgpu.critical_path(out["ops"])
    ends = out["ops"]["end"]
    assert vp.length_ps == vp.makespan_ps == max(ends) - min(out["ops"]["issue"])
    assert any(k.startswith("engine:") for k in vp.share_ps)


def test_op_log_critical_path_prefers_the_innermost_of_rows_ending_together():
    from kernbench.critical_path import from_op_log

    # An envelope [0, 20) around two steps [0, 8) and [8, 20): the path is the steps, not the envelope.
    log = {"issue": [0, 0, 8], "start": [0, 0, 8], "end": [20, 8, 20], "resource": ["r", "a", "b"],
           "kind": ["envelope", "first", "second"]}
    cp = from_op_log(log, start_ps=0)
    assert [s["name"] for s in cp.steps] == ["first", "second"]
    assert cp.length_ps == 20


def test_op_log_critical_path_goes_into_a_blocking_wait():
    from kernbench.critical_path import from_op_log

    # A thread launches [0, 2), then waits [2, 30) for a kernel [3, 27) on the device (queued from 2);
    # the wait's own cost is its tail [27, 30). The path: launch, the kernel's queueing, the kernel,
    # the wait's tail -- not "wait 28 ps".
    log = {"issue": [0, 2, 2], "start": [0, 3, 2], "end": [2, 27, 30], "resource": ["q", "dev", "q"],
           "kind": ["launch", "kernel", "wait"]}
    assert from_op_log(log, start_ps=0).steps[-1]["duration_ps"] == 28  # not declared a wait: its own work
    cp = from_op_log(log, start_ps=0, waits=("wait",))
    assert [(s["kind"], s["name"], s["start_ps"], s["end_ps"]) for s in cp.steps] == [
        ("op", "launch", 0, 2), ("wait:resource", "kernel", 2, 3), ("op", "kernel", 3, 27), ("op", "wait", 27, 30)]
    assert cp.steps[-1]["via"] == "inside (inferred)"
    assert cp.length_ps == cp.makespan_ps == 30


def test_a_system_of_bare_dma_ops_has_a_critical_path():
    """No op depends on another: the path is the gap before the last op's issue, then that op split
    exactly by its four fabric parts."""
    import kernbench
    from kernbench.critical_path import from_system

    s = kernbench.System.load()
    s.dma("read", "sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0", 16384)
    s.dma("read", "sip0.cube0.pe1", "sip0.cube0.hbm_ctrl.pe0", 16384, 5000)  # issued 5 ns later, queues
    s.run()
    d = s.dma_ops()
    cp = from_system(s, "two reads")
    last = max(range(2), key=lambda i: (d["end_ps"][i], d["issue_ps"][i]))
    assert cp.length_ps == cp.makespan_ps == d["end_ps"][last] - min(d["issue_ps"])
    parts = sum(int(d[p][last]) for p in ("overhead_ps", "transmission_ps", "drain_ps", "queuing_ps"))
    assert parts == d["end_ps"][last] - d["issue_ps"][last]
    assert cp.share_ps.get("wait:dependency", 0) == d["issue_ps"][last] - min(d["issue_ps"])
    assert sum(cp.share_ps.values()) == cp.length_ps

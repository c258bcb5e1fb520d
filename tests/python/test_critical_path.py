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

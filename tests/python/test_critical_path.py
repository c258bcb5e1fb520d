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
    first = prog.compute(PE, 2 * 256**3, deps=[load], name="first")
    second = prog.compute(PE, 2 * 256**3, deps=[load], name="second")
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


def _tiles(cp):
    """The invariants of an exact path: the steps tile [start, end], their parts sum to them."""
    assert cp.length_ps == cp.makespan_ps == cp.end_ps - cp.start_ps > 0
    assert cp.steps[0]["start_ps"] == cp.start_ps and cp.steps[-1]["end_ps"] == cp.end_ps
    assert all(a["end_ps"] == b["start_ps"] for a, b in zip(cp.steps, cp.steps[1:]))
    assert all(sum(s["parts"].values()) == s["duration_ps"] for s in cp.steps)
    assert sum(cp.share_ps.values()) == cp.length_ps


def test_k200_pinned_copy_path_is_exact_and_closed_form():
    """A one-segment pinned H2D: call, map, eDMA, poll, unmap, each the dependency of the next (exact
    causes the model recorded, not inferred), timed as the driver parameters say."""
    from kernbench import k200

    sys = k200.load_system()
    r = k200.copy(sys, "pinned", "h2d", 1 << 20)
    cp = r.critical_path()
    _tiles(cp)
    assert cp.makespan_ps == r.raw["elapsed_ps"]
    assert [s["op_kind"] for s in cp.steps] == ["call", "map", "edma", "poll", "unmap"]
    assert [s["via"] for s in cp.steps] == ["start"] + ["dependency"] * 4
    assert [s["holder_name"] for s in cp.steps[1:]] == ["call", "map", "edma", "poll"]
    call, half = 5_000_000, (200_000 + 256 * 5_000) // 2  # k200.yaml: call_overhead, (segment + pages x map) / 2
    assert [s["duration_ps"] for s in cp.steps[:2]] == [call, half] and cp.steps[-1]["duration_ps"] == half
    assert cp.steps[3]["end_ps"] % 2_000_000 == 0  # the poll tick (every 2 us) that saw the completion
    log = r.raw["log"]
    edma = log["kind"].index("edma")
    assert (cp.steps[2]["start_ps"], cp.steps[2]["end_ps"]) == (log["start_ps"][edma], log["end_ps"][edma])
    assert cp.steps[2]["op"] == log["op"][edma]  # a step names its op-log row


def test_k200_queued_edma_is_handed_its_channel_by_a_poll():
    """Four copies to one die (3 channels): the fourth eDMA queues; its holder is the poll that ended a hold."""
    from kernbench import k200

    sys = k200.load_system()
    r = k200.copies(sys, [{"kind": "pinned", "direction": "h2d", "bytes": 1 << 20}] * 4)
    cp = r.critical_path()
    _tiles(cp)
    handed = [s for s in cp.steps if s["via"].startswith("resource:")]
    assert handed and all(s["holder_name"] == "poll" and s["waited_ps"] > 0 for s in handed)
    assert handed[0]["via"] == "resource:card0.die0.edma_channels"


def test_vgpu_launch_path_is_exact_and_closed_form():
    """One forwarded launch: the guest's chain, every RPC and poll wait on it, the GR job forked at the
    doorbell and the completion poll that saw it, then copy-out and MSI-X."""
    from kernbench import vgpu

    run = vgpu.launches(1)
    cp = vgpu.critical_path(run)
    _tiles(cp)
    (l,) = run["launches"]
    assert cp.end_ps == l["guest_done_ps"]
    kinds = [s["op_kind"] for s in cp.steps]
    assert kinds[0] == "guest_driver" and kinds[-1] == "msix"
    assert sum(s["duration_ps"] for s in cp.steps if s["op_kind"] == "rpc") == l["firmware_ps"]
    assert sum(s["duration_ps"] for s in cp.steps if s["op_kind"] == "poll_wait") == l["poll_wait_ps"]
    assert kinds.count("rpc") == l["rpcs"]
    g = kinds.index("gr_exec")
    assert cp.steps[g]["holder_name"] == "doorbell" and cp.steps[g]["duration_ps"] == l["kernel_ps"]
    nxt = cp.steps[g + 1]  # the completion poll that saw the job (passed through when it took no time)
    assert (nxt["op_kind"], nxt["holder_name"]) in {("completion_poll", "gr_exec"), ("bounce_out", "completion_poll")}
    assert all(s["via"] in ("start", "dependency") for s in cp.steps)  # one guest: nothing queues


def test_vgpu_second_guest_is_handed_the_gsp_by_the_first_guests_rpc():
    """With two vGPU guests the critical path shows the second waiting on the GSP resource held by the first guest's
    rpc step, and asking for a critical path from the op log alone is a UsageError (it holds no causes)."""
    from kernbench import vgpu

    run = vgpu.launches(1, set={"vgpu.guests": 2})
    cp = vgpu.critical_path(run)
    _tiles(cp)
    gsp = [s for s in cp.steps if s["via"] == "resource:gsp"]
    assert gsp and all(s["holder_name"] == "rpc" and s["waited_ps"] > 0 for s in gsp)
    with pytest.raises(kernbench.UsageError):
        vgpu.critical_path(run["ops"])  # the op log alone holds no causes


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


def test_ccl_all_reduce_result_writes_its_trace(tmp_path):
    """RunResult.to_chrome_trace on a Program with send/recv (every ccl result): was KeyError 'ipcq'.
    One event per op-log row, on its PE's process and engine track, with the op log's times."""
    from kernbench import ccl

    system = kernbench.System.load(set=SMALL)
    r = ccl.all_reduce(system, 16 * 1024, algorithm="ring")
    path = r.run.to_chrome_trace(tmp_path / "ar.json")
    trace = json.loads(path.read_text())
    log = r.run.log()
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X" and not e["cat"].startswith("critical")]
    assert len(ops) == len(log["op"])
    kinds = r.run._core.kind_names
    for e, op, kind, start, end in zip(ops, log["op"], log["kind"], log["start_ps"], log["end_ps"]):
        assert e["args"]["op"] == op and e["args"]["kind"] == kinds[int(kind)]
        assert (e["args"]["start_ps"], e["args"]["end_ps"]) == (start, end)
    assert {"send", "recv"} <= {e["args"]["kind"] for e in ops}
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert "ipcq" in threads
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"].startswith("critical")]
    assert sum(e["args"]["end_ps"] - e["args"]["start_ps"] for e in steps) == int(r.run._core.makespan_ps)

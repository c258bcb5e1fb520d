"""Programs from Python: building, running, results, Chrome traces, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import kernbench

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}


@pytest.fixture
def system():
    return kernbench.System.load(set=SMALL)


def _pipeline_program(system):
    prog = system.program("pipeline")
    pe = "sip0.cube0.pe0"
    pin = prog.dma(pe, "sip0.cube0.hbm_ctrl.pe1", pe, 64 * 1024, name="pinned B", tag="pinned")
    buf = prog.alloc(pe, 256 * 1024, deps=[pin], name="tiles")
    comp = prog.composite(pe, tiles=4, loads=[("sip0.cube0.hbm_ctrl.pe0", pe, 16 * 1024)], flops=2 * 64**3,
                          stores=[(pe, "sip0.cube0.hbm_ctrl.pe0", 8 * 1024)], deps=[buf], name="tiles",
                          tag="composite", load_tag="load", compute_tag="compute", store_tag="store")
    prog.free(buf, deps=[comp])
    return prog, pin, comp


def test_run_a_program_and_read_results(system):
    """A pinned load then a 4-tile pipeline: ordering, counts, the op log and engine occupancy."""
    prog, pin, comp = _pipeline_program(system)
    res = prog.run()
    ops = res.ops_df()
    assert ops.loc[comp, "start_ps"] > ops.loc[pin, "end_ps"]  # the composite window excludes the pinned load
    assert res.op_counts["dma"] == 1 + 4 * 2
    assert res.op_counts["gemm"] == 4
    assert res.op_bytes["dma"] == 64 * 1024 + 4 * (16 + 8) * 1024
    assert res.peak_scratch[system.node_id("sip0.cube0.pe0")] == 256 * 1024
    log = res.log_df()
    assert set(log["kind_name"]) >= {"dma", "gemm", "alloc", "free", "composite"}
    assert (log["start_ps"] >= log["issue_ps"]).all() and (log["end_ps"] >= log["start_ps"]).all()
    assert (log.loc[log["kind_name"] == "gemm", "engine"] == "sip0.cube0.pe0.gemm").all()
    t0, t1 = res.window("compute")
    assert t0 >= ops.loc[pin, "end_ps"] and t1 <= res.end_ps
    eng = res.engines_df()
    gemm = eng[eng["name"] == "sip0.cube0.pe0.gemm"].iloc[0]
    assert gemm["busy_ps"] == pytest.approx(res.busy_within(system.node_id("sip0.cube0.pe0"), "gemm", 0, res.end_ps))
    assert 0 < gemm["utilization"] <= 1
    assert res.makespan_ns == res.makespan_ps / 1e3


def test_chrome_trace_matches_the_op_log(system, tmp_path):
    """The trace is valid JSON with one complete event per op-log row, on per-PE, per-engine tracks."""
    prog, _, _ = _pipeline_program(system)
    res = prog.run()
    path = res.to_chrome_trace(tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X" and not e["cat"].startswith("critical")]
    log = res.log()
    assert len(events) == len(log["op"])
    for e, start, end, op in zip(events, log["start_ps"], log["end_ps"], log["op"]):
        assert e["ts"] == pytest.approx(start / 1e6)
        assert e["dur"] == pytest.approx((end - start) / 1e6)
        assert e["args"]["op"] == op
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"dma", "dma #1", "gemm", "pe_cpu", "control", "steps"} >= names >= {"dma", "gemm"}
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert procs[0] == "sip0.cube0.pe0" and set(procs[1:]) <= {"critical path", "links"}
    assert "links" in procs  # the DMAs' channels: utilisation counter tracks (docs/traces.md)


def test_log_columns_are_views(system):
    """Op-log columns share the result's memory."""
    prog, _, _ = _pipeline_program(system)
    res = prog.run()
    assert np.shares_memory(res.log()["end_ps"], res.log()["end_ps"])


def test_errors_name_the_ops(system):
    """Scratch overflow, a cycle and an unmatched recv are typed errors naming what is wrong."""
    prog = system.program("big")
    a = prog.alloc("sip0.cube0.pe2", 800 * 1024, name="A")
    prog.alloc("sip0.cube0.pe2", 400 * 1024, deps=[a], name="B")
    with pytest.raises(kernbench.CapacityError, match="scratch of sip0.cube0.pe2 overflows: B asks for 400 KiB"):
        prog.run()
    cyc = kernbench.System.load(set=SMALL).program("cycle")
    x = cyc.barrier("sip0.cube0.pe0", [], name="x")
    y = cyc.compute("sip0.cube0.pe0", 1e3, deps=[x], name="y")
    z = cyc.compute("sip0.cube0.pe0", 1e3, deps=[y], name="z")
    cyc.depend(y, z)
    with pytest.raises(kernbench.DeadlockError, match="op 1 'y'.*waits for op 2"):
        cyc.run()
    lonely = kernbench.System.load(set=SMALL).program("lonely")
    lonely.recv("sip0.cube0.pe1", "sip0.cube0.pe0", key=5, name="r")
    with pytest.raises(kernbench.DeadlockError, match="waits for a send from sip0.cube0.pe0 with key 5"):
        lonely.run()
    with pytest.raises(kernbench.ConfigError, match="unknown precision 'fp4'"):
        system.program("p").compute("sip0.cube0.pe0", 1e3, precision="fp4")


def test_same_program_same_log():
    """Two runs of one program on fresh machines give identical op logs."""
    def once():
        s = kernbench.System.load(set=SMALL)
        prog, _, _ = _pipeline_program(s)
        return prog.run().log()

    a, b = once(), once()
    for col in ("start_ps", "end_ps", "op", "kind"):
        assert np.array_equal(a[col], b[col])


def test_ops_df_names_kinds_and_tags(system):
    """ops_df has one row per op, by id: the name given with name=, the op kind, the tag label and the PE,
    beside its timings; an op given no name is named KIND#ID, one given no tag has an empty tag."""
    prog, pin, comp = _pipeline_program(system)
    pe1 = "sip0.cube0.pe1"
    v = prog.vector(pe1, 4096, name="softmax", tag="post")
    b = prog.barrier(pe1, deps=[v, comp])
    g = prog.compute(pe1, 2 * 32**3, deps=[b])  # unnamed, untagged
    res = prog.run()
    ops = res.ops_df()
    assert list(ops.columns[:4]) == ["name", "kind", "tag", "pe"]
    assert {"ready_ps", "start_ps", "end_ps"} <= set(ops.columns) and len(ops) == len(prog)
    assert ops.loc[pin, ["name", "kind", "tag", "pe"]].tolist() == ["pinned B", "dma", "pinned", "sip0.cube0.pe0"]
    assert ops.loc[comp, ["name", "kind", "tag"]].tolist() == ["tiles", "composite", "composite"]
    assert ops.loc[v, ["name", "kind", "tag", "pe"]].tolist() == ["softmax", "vector", "post", pe1]
    assert ops.loc[b, "kind"] == "barrier" and ops.loc[g, ["name", "kind", "tag"]].tolist() == [f"gemm#{g}", "gemm", ""]
    assert list(ops["kind"]) == ["dma", "alloc", "composite", "free", "vector", "barrier", "gemm"]
    # The timings are those of the op log's rows for the same op ids.
    log = res.log_df()
    row = log[(log["op"] == v) & (log["kind_name"] == "vector")].iloc[0]
    assert (ops.loc[v, "start_ps"], ops.loc[v, "end_ps"]) == (row["start_ps"], row["end_ps"])

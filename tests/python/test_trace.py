"""kernbench.trace knows no platform: every result type has a to_trace(label) over the one op-log writer, and
chrome_trace is that method (issue 26)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernbench
from kernbench import k200, trace, vgpu

SMALL = {"system.sips.w": 1, "system.sips.h": 1}
PE = "sip0.cube0.pe0"


def test_chrome_trace_is_each_results_to_trace():
    """A Program RunResult, a K200 Result, a vGPU Run and its OpLog, and a System each trace themselves, and
    chrome_trace(obj, label) is obj.to_trace(label); the vGPU run keeps its dict keys."""
    s = kernbench.System.load(set=SMALL)
    prog = s.program("t")
    prog.compute(PE, 2 * 64**3, deps=[prog.dma(PE, "sip0.cube0.hbm_ctrl.pe0", PE, 4096)])
    res = prog.run()
    kr = k200.copy(k200.load_system(), "pinned", "h2d", 1 << 20)
    run = vgpu.launches(1)
    assert isinstance(run, dict) and isinstance(run, vgpu.Run) and isinstance(run["ops"], vgpu.OpLog)
    assert {"launches", "ops", "critical_path"} <= set(run)
    d = kernbench.System.load(set=SMALL)
    d.dma("read", PE, "sip0.cube0.hbm_ctrl.pe0", 4096)
    d.run()
    for obj, source in ((res, "program"), (kr, "k200"), (run, "vgpu"), (run["ops"], "vgpu"), (d, "dma")):
        t = trace.chrome_trace(obj, "lbl")
        assert t == obj.to_trace("lbl") and t["otherData"]["source"] == source and t["otherData"]["panel"] == "lbl"
    assert trace.chrome_trace(kr)["otherData"]["panel"] == "K200" and trace.chrome_trace(run)["otherData"]["panel"] == "vGPU"


def test_an_object_without_to_trace_is_a_type_error():
    """chrome_trace of anything without to_trace (a number, a plain dict) is the TypeError naming its type."""
    for obj, name in ((3, "int"), ({"x": 1}, "dict")):
        with pytest.raises(TypeError, match=f"cannot trace a {name}: pass a RunResult"):
            trace.chrome_trace(obj)


def test_trace_imports_no_platform():
    """kernbench/trace.py imports nothing of kernbench but its atomic writer: no platform, no result type."""
    tree = ast.parse(Path(trace.__file__).read_text())
    ours = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and (n.module or "").startswith("kernbench") for a in n.names}
    ours |= {(a.name, None) for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
             if a.name.startswith("kernbench")}
    assert ours == {("kernbench", "atomic_output")}

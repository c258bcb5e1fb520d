"""Issue 31 (reliability round 3), the C++ core: the Python API reproducers of families 1, 2, 9 and 11.

Grid products in 64 bits and refused when they are not the ranks (1); GEMM shapes whose tile counts would wrap
refused naming M, N, K and the product (2); pieces beyond the buffer's bytes refused (9); a barrier on a large
star routed with one shortest-path search per source, not per pair (11). The configs and CLI cases are in
tests/bad_inputs/cases_r3_core.yaml. The reproducers that used to kill the interpreter (SIGSEGV, SIGFPE) run in
a child process, so a regression fails this test instead of ending the session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import kernbench
from kernbench import ccl
from kernbench._core import ConfigError, UsageError

CONFIGS = Path(__file__).resolve().parents[1] / "bad_inputs" / "configs"
BASE_SYSTEM = CONFIGS / "_base_system.yaml"


def _child(code: str, timeout_s: float = 120) -> str:
    """Run `code` in a fresh interpreter; it must exit 0 (no signal); return its stdout."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout_s)
    assert proc.returncode == 0, f"the child died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.stdout


def _star(leaves: int) -> str:
    """An explicit star: `leaves` PEs around one switch."""
    nodes = ["    - {name: hub, kind: switch, overhead: 1 ns}"]
    nodes += [f"    - {{name: p{i}, kind: pe, overhead: 1 ns}}" for i in range(leaves)]
    edges = [f"    - {{a: p{i}, b: hub, bandwidth: 100 GB/s, latency: 1 ns}}" for i in range(leaves)]
    return "graph:\n  nodes:\n" + "\n".join(nodes) + "\n  edges:\n" + "\n".join(edges) + "\nfabric: {model: flow}\n"


# ---- family 1: grid products ----------------------------------------------------------------------------------


def test_ccl_grid_argument_that_wraps_is_refused():
    """grid=(5128, 6700417) on 8 PEs (34359738376 cells, 8 in an int product) is a UsageError, not a SIGSEGV."""
    out = _child(f"""
        import kernbench
        from kernbench import ccl
        s = kernbench.System.load({str(BASE_SYSTEM)!r}, set={{"system.pes_per_cube": 8}})
        try:
            ccl.all_reduce(s, 4096, algorithm="torus2d", grid=(5128, 6700417))
        except kernbench.UsageError as e:
            print("UsageError:", e)
        """)
    assert "UsageError:" in out
    for word in ("grid=(5128, 6700417)", "34359738376 cells", "8 ranks"):
        assert word in out, out


def test_ccl_grid_argument_variant_is_refused():
    """A second wrapping grid, (6, 715827883) = 2^32 + 2 cells, on 2 PEs: refused naming the figures."""
    s = kernbench.System.load(BASE_SYSTEM)
    with pytest.raises(UsageError, match=r"grid 6x715827883 does not hold the 2 ranks: grid=\(6, 715827883\) has 4294967298 cells"):
        ccl.all_reduce(s, 4096, algorithm="torus2d", grid=(6, 715827883))


def test_torus2d_on_a_wrapping_layout_grid_cannot_start():
    """The layout grid 1282 x 6700417 for 2 ranks no longer loads, so the torus2d all-reduce on it cannot segfault."""
    out = _child(f"""
        import kernbench
        from kernbench import ccl
        try:
            s = kernbench.System.load({str(CONFIGS / "r3_core_layout_grid_wraps_to_ranks.yaml")!r})
            ccl.all_reduce(s, 4096, algorithm="torus2d")
            print("ran")
        except kernbench.ConfigError as e:
            print("ConfigError:", e)
        """)
    assert "ConfigError:" in out and "graph.layout.grid" in out and "8589934594 cells" in out, out


def test_a_right_grid_still_runs():
    """The fix refuses only wrong grids: 2 x 1 on the 2-PE machine runs a torus2d all-reduce."""
    s = kernbench.System.load(BASE_SYSTEM)
    r = ccl.all_reduce(s, 4096, algorithm="torus2d", grid=(2, 1))
    assert r.latency_ps > 0


# ---- family 2: the GEMM shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2**40, 4096, 4096), (2**41, 4096, 4096), (2**36, 2**14, 2**14)])
def test_gemm_shape_past_the_limit_is_refused(shape):
    """M x N x K past 2^60 multiply-adds (2^40 x 4096 x 4096 wrapped the step count to 0: SIGFPE) is a ConfigError."""
    m, n, k = shape
    out = _child(f"""
        import kernbench
        s = kernbench.System.load({str(BASE_SYSTEM)!r})
        prog = kernbench.Program(s)
        try:
            prog.gemm([s.pes()[0]], {m}, {n}, {k})
        except kernbench.ConfigError as e:
            print("ConfigError:", e)
        """)
    assert "ConfigError:" in out, out
    for word in ("M x N x K", str(m), str(m * n * k), "at most 2^60"):
        assert word in out, out


# ---- family 9: pieces ------------------------------------------------------------------------------------------


def test_pieces_beyond_the_bytes_are_refused():
    """pieces=1000 on a 16-byte all-reduce (28,000 sends of empty slices) is a UsageError naming both figures."""
    s = kernbench.System.load(BASE_SYSTEM)
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(s, 16, pieces=1000)
    for word in ("pieces = 1000", "16 B", "pieces <= 16"):
        assert word in str(e.value)


def test_pieces_variant_in_a_program_is_refused():
    """The same rule in a Program: pieces=17 on 16 bytes is refused; pieces=16 and the default 4 on 1 byte run."""
    s = kernbench.System.load(BASE_SYSTEM)
    with pytest.raises(UsageError, match="pieces = 17"):
        kernbench.Program(s).all_reduce(None, 16, pieces=17)
    assert ccl.all_reduce(s, 16, pieces=16).latency_ps > 0
    assert ccl.all_reduce(s, 1, algorithm="double_binary_tree").latency_ps > 0  # a barrier: default pieces


# ---- family 11: a barrier on a large star ------------------------------------------------------------------------


def test_barrier_on_a_large_star_is_quick():
    """A barrier (1-byte double-binary-tree all-reduce) on a 6,000-PE star: one search for the hub, seconds (it took ~30 s per-pair)."""
    s = kernbench.System.from_yaml(_star(6000))
    t0 = time.monotonic()
    r = ccl.all_reduce(s, 1, algorithm="double_binary_tree")
    assert r.latency_ps > 0
    assert time.monotonic() - t0 < 15


def test_star_routes_are_the_shortest():
    """The star's routes after the shared search: leaf -> hub -> leaf, two hops, for any pair."""
    s = kernbench.System.from_yaml(_star(50))
    assert s.route("p3", "p41") == ["p3", "hub", "p41"]
    assert s.route("hub", "p7") == ["hub", "p7"]
    assert s.route("p9", "hub") == ["p9", "hub"]

"""The energy model and HBM slices from Python: linearity as configured, the shared
sweep.json contract, per-pseudo-channel traffic, capacity errors, and the GEMM
bench's energy rows and figure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kernbench
from kernbench import _core
from kernbench import energy as kenergy

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}
PE, HBM = "sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0"


def _write(bytes_, extra=None):
    system = kernbench.System.load(set={**SMALL, **(extra or {})})
    prog = system.program("write")
    prog.dma(PE, PE, HBM, bytes_)  # scratch -> HBM: a write, no request packet
    return prog.run()


def test_energy_is_linear_in_bytes_as_configured():
    """Doubling the bytes doubles every dynamic label exactly; each is bytes x the configured price."""
    prices = {"energy.links.pe": "1 pJ/B", "energy.links.hbm": "2 pJ/B", "energy.memory.hbm": "30 pJ/B",
              "energy.memory.sram": "10 pJ/B"}
    one, two = _write(65536, prices).energy(), _write(131072, prices).energy()
    assert one["by"]["dynamic:link:pe"] == pytest.approx(65536 * 1e-12, rel=1e-12)
    assert one["by"]["dynamic:link:hbm"] == pytest.approx(65536 * 2e-12, rel=1e-12)
    assert one["by"]["dynamic:memory:hbm"] == pytest.approx(65536 * 30e-12, rel=1e-12)
    assert one["by"]["dynamic:memory:sram"] == pytest.approx(65536 * 10e-12, rel=1e-12)
    for label, j in one["by"].items():
        if label.startswith("dynamic:"):
            assert two["by"][label] == 2 * j, label
    assert one["total_j"] == pytest.approx(one["dynamic_j"] + one["static_j"], rel=1e-15)


def test_compute_and_static_energy_follow_their_prices():
    """FLOPs x price per precision; static = nodes x watts x makespan."""
    system = kernbench.System.load(set={**SMALL, "energy.compute.gemm.fp32": "4 pJ/flop", "energy.static.pe": "2 W",
                                        "energy.static.router": "0 W", "energy.static.hbm_ctrl": "0 W",
                                        "energy.static.ucie": "0 W", "energy.static.pcie_ep": "0 W"})
    prog = system.program("gemm")
    prog.compute(PE, 1e6, precision="fp32")
    res = prog.run()
    e = res.energy()
    assert e["by"]["dynamic:compute:gemm:fp32"] == pytest.approx(1e6 * 4e-12, rel=1e-12)
    pes = e["counts"]["nodes:pe"]
    assert pes == 16
    assert e["static_j"] == pytest.approx(pes * 2.0 * res.makespan_ps * 1e-12, rel=1e-12)
    assert set(k for k in e["by"] if k.startswith("static:")) == {"static:pe"}


def test_summarize_follows_the_shared_contract():
    """summarize(): total_j and by {label: J} with the shared label forms; by_op_kind sums to the dynamic part."""
    system = kernbench.System.load(set=SMALL)
    prog = system.program("mixed")
    a = prog.dma(PE, HBM, PE, 16384, tag="load")
    g = prog.compute(PE, 2 * 64**3, deps=[a])
    prog.vector(PE, 4096, deps=[g])
    res = prog.run()
    s = kenergy.summarize(res)
    assert set(s) >= {"total_j", "by"}
    assert s["total_j"] == pytest.approx(sum(s["by"].values()), rel=1e-12)
    forms = ("dynamic:link:", "dynamic:memory:", "dynamic:compute:", "static:")
    assert all(k.startswith(forms) for k in s["by"]), s["by"]
    assert "dynamic:compute:gemm:fp16" in s["by"] and "dynamic:compute:vector:any" in s["by"]
    full = res.energy()
    assert sum(s["by_op_kind"].values()) == pytest.approx(full["dynamic_j"], rel=1e-12)
    assert "unattributed" not in s["by_op_kind"]
    json.dumps(s, allow_nan=False)  # plain finite floats
    groups = kenergy.group(s)
    assert sum(groups.values()) == pytest.approx(s["total_j"], rel=1e-12)


def test_energy_needs_the_program():
    """A bare _core result cannot be priced: the error says how to get one that can."""
    system = kernbench.System.load(set=SMALL)
    prog = system.program("x")
    prog.compute(PE, 1000)
    bare = _core.run_program(system._core, prog._core)
    with pytest.raises(kernbench.UsageError, match="run_program"):
        kenergy.summarize(bare)


def test_hbm_traffic_per_pseudo_channel():
    """A 4 KiB read at address 0 over 8 pseudo-channels of 256 B: 512 B each, read from the one slice."""
    system = kernbench.System.load(set={**SMALL, "pe.hbm.pseudo_channels": 8})
    prog = system.program("read")
    prog.dma(PE, HBM, PE, 4096)
    res = prog.run()
    t = res.hbm_traffic()
    assert [d["name"] for d in t] == [HBM]
    assert t[0]["read"] == [512] * 8 and t[0]["written"] == [0] * 8


def test_hbm_allocator_capacity_error_names_the_numbers():
    """The slice fills to the byte; one more is a CapacityError naming the item, the PE, capacity and free."""
    system = kernbench.System.load(set={**SMALL, "pe.hbm.capacity": "1 MiB"})
    alloc = _core.HbmAllocator(system._core)
    slice_ = system.node_id(HBM)
    assert alloc.alloc(slice_, 1024 * 1024, "weights") == (0, 1024 * 1024)
    assert alloc.free(slice_) == 0
    with pytest.raises(kernbench.CapacityError, match=r"KV cache needs 1 B on sip0\.cube0\.pe0's HBM slice .*"
                                                       r"holds 1 MiB \(pe\.hbm\.capacity\)"):
        alloc.alloc(slice_, 1, "KV cache")


def test_gemm_operands_must_fit_the_slice():
    """gemm_plan refuses operands that do not fit (A, B, C of 2048^3 fp16 = 24 MiB) and accepts them at 24 MiB."""
    ok = kernbench.System.load(set={**SMALL, "pe.hbm.capacity": "24 MiB"})
    _core.gemm_plan(ok._core, 2048, 2048, 2048)
    tight = kernbench.System.load(set={**SMALL, "pe.hbm.capacity": str(24 * 1024 * 1024 - 256) + " B"})
    with pytest.raises(kernbench.CapacityError, match="C block 2048 x 2048"):
        _core.gemm_plan(tight._core, 2048, 2048, 2048)


def test_bad_energy_values_are_config_errors():
    """A missing unit or a negative price names the key."""
    with pytest.raises(kernbench.ConfigError, match=r"energy\.memory\.hbm.*pJ/bit"):
        kernbench.System.load(set={**SMALL, "energy.memory.hbm": "3.9"})
    with pytest.raises(kernbench.ConfigError, match=r"energy\.static\.pe.*>= 0"):
        kernbench.System.load(set={**SMALL, "energy.static.pe": "-1 W"})


def test_gemm_bench_rows_carry_energy(tmp_path):
    """milestone-1h-gemm at a tiny size: every row has the energy dict, energy.png is written."""
    sets = ["bench.square=256", "bench.pe_counts=1", "bench.precisions=fp16", "bench.skinny=32x64x32",
            "bench.llm_tokens=1", "bench.llm_pes=8", "bench.timeline=none"]
    args = [sys.executable, "-m", "kernbench", "run", "--bench", "milestone-1h-gemm", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["failures"] == []
    for row in sweep["results"]:
        e = row["energy"]
        assert e["total_j"] > 0 and e["total_j"] == pytest.approx(sum(e["by"].values()), rel=1e-9)
        assert e["by"]["dynamic:compute:gemm:fp16"] == pytest.approx(row["flops"] * 0.75e-12, rel=1e-9)
        assert row["energy_pj_per_flop"] > 0.75  # the FLOPs alone cost 0.75 pJ each (1.5 pJ/MAC)
    assert (tmp_path / "energy.png").stat().st_size > 0 and "energy.png" in sweep["files"]

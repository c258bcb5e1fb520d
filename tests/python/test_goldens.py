"""Golden regression: every bench's smoke run against tests/goldens/<bench>.json.

A model change that moves a golden metric past its tolerance fails here;
refresh with `kernbench goldens --update --bench NAME` and review the diff.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kernbench.goldens import compare, golden_path, load_golden, run_smoke, summarize, within
from kernbench.registry import get_bench, list_benches
from kernbench.sweepjson import validate_sweep

GOLDENS = Path(__file__).resolve().parent.parent / "goldens"


@pytest.mark.parametrize("name", [b.name for b in list_benches()])
def test_bench_smoke_run_matches_its_golden(name, tmp_path):
    """The smoke run's key metrics equal the checked-in golden within each metric's tolerance; sweep.json is schema v1."""
    bench = get_bench(name)
    if bench.golden is None:
        pytest.skip(f"{name} has no smoke size/golden yet: add smoke= and golden= to its @bench, then "
                    f"`kernbench goldens --update --bench {name}`")
    golden = load_golden(golden_path(name, GOLDENS))
    current = summarize(bench, run_smoke(bench, tmp_path))
    validate_sweep(json.loads((tmp_path / "sweep.json").read_text()))  # the versioned format, as written
    bad = [str(d) for d in compare(golden, current) if not d.ok]
    assert not bad, (f"{name} moved past its goldens (if intended: kernbench goldens --update --bench {name}):\n  "
                     + "\n  ".join(bad))


def test_every_golden_file_belongs_to_a_bench():
    """No stale golden files: each names a registered bench that declares a golden."""
    names = {b.name for b in list_benches() if b.golden is not None}
    files = {p.stem for p in GOLDENS.glob("*.json")}
    assert files <= names, f"goldens without a bench: {sorted(files - names)}"
    assert {"perf-phold", "pe-dma-perf", "noc-load-latency", "perf-fabric", "milestone-1h-gemm"} <= names


def test_comparison_fails_past_the_tolerance():
    """A relative metric moved by 2x its tolerance fails, by half passes; a count off by one fails; a lost row fails."""
    golden = load_golden(golden_path("pe-dma-perf", GOLDENS))
    assert golden["tolerances"]["hops"] == "exact"
    rel = float(golden["tolerances"]["makespan_ns"].split("=")[1])
    row = next(iter(golden["rows"]))
    base = golden["rows"][row]["makespan_ns"]

    def moved(metric, value):
        cur = copy.deepcopy(golden)
        cur["rows"][row][metric] = value
        return compare(golden, cur)

    assert compare(golden, copy.deepcopy(golden)) == []
    small = moved("makespan_ns", base * (1 + rel / 2))
    assert len(small) == 1 and small[0].ok
    big = moved("makespan_ns", base * (1 + 2 * rel))
    assert len(big) == 1 and not big[0].ok and "OUTSIDE" in str(big[0]) and "makespan_ns" in str(big[0])
    count = moved("hops", golden["rows"][row]["hops"] + 1)
    assert not count[0].ok
    lost = copy.deepcopy(golden)
    del lost["rows"][row]
    assert [str(d) for d in compare(golden, lost)] == [f"{row}: row is gone"]
    assert within(100, 100.5, "abs=0.5") and not within(100, 100.6, "abs=0.5")
    assert within("abc", "abc", "rel=0.1") and not within("abc", "abd", "rel=0.1")


def test_goldens_command_reports_and_refreshes(cli, tmp_path):
    """`kernbench goldens` fails on a moved metric and names it; --update rewrites and prints what moved."""
    src = golden_path("perf-phold", GOLDENS)
    path = tmp_path / "perf-phold.json"
    g = json.loads(src.read_text())
    row = next(iter(g["rows"]))
    true_pending = g["rows"][row]["pending"]
    g["rows"][row]["pending"] = true_pending + 1
    path.write_text(json.dumps(g))
    proc = cli("goldens", "--bench", "perf-phold", "--dir", str(tmp_path))
    assert proc.returncode == 1
    assert f"{row}: pending {true_pending + 1} -> {true_pending}" in proc.stdout and "OUTSIDE exact" in proc.stdout
    proc = cli("goldens", "--update", "--bench", "perf-phold", "--dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "1 value(s) moved" in proc.stdout and f"pending {true_pending + 1} -> {true_pending}" in proc.stdout
    assert json.loads(path.read_text()) == json.loads(src.read_text())
    proc = cli("goldens", "--bench", "perf-phold", "--dir", str(tmp_path))
    assert proc.returncode == 0 and "perf-phold: ok" in proc.stdout


def test_run_smoke_flag_uses_the_declared_size(cli, tmp_path):
    """`kernbench run --smoke` runs the bench at its golden size (the params show it)."""
    proc = cli("run", "--bench", "noc-load-latency", "--smoke", "--quiet", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["params"]["meshes"] == ["mesh-4x4"] and sweep["params"]["loads"] == [0.3, 0.8, 1.3]

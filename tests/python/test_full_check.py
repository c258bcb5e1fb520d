"""The full-check size (issue 30 item 6): every bench's full-check covers the default's code paths, the registry
refuses one that drops a path, ``kernbench run --full-check`` runs it, and scripts/check_benches.py runs every
bench once and fails naming the bench and its failure text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kernbench
from kernbench import registry
from kernbench.full_check import categorical, full_check_sets
from kernbench.overrides import Param, apply_bench_overrides

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_benches.py"


def _items(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


@pytest.mark.parametrize("b", [b for b in kernbench.list_benches() if b.full_check is not None], ids=lambda b: b.name)
def test_every_full_check_keeps_every_categorical_value_of_the_default(b):
    """For each bench with a full-check size, the full-check grid holds every distinct value of every categorical
    parameter of the default grid (choices, strings, bools), so it cannot silently drop an algorithm, case,
    precision or mode; it also parses and changes something (a full-check equal to the default is pointless)."""
    params, config = apply_bench_overrides(b.name, b.params, full_check_sets(b))
    for key, default in b.params.items():
        if not categorical(default, b.param_specs.get(key)):
            continue
        if isinstance(default, (list, tuple)) and not default:
            assert params[key] == [], f"{b.name}: bench.{key} is [] (every one) by default, full-check narrows it"
        for v in _items(default):
            assert v in _items(params[key]), f"{b.name}: the default runs bench.{key}={v!r}, full-check does not"
    assert params != dict(b.params) or config, f"{b.name}: full_check= is the default size"


def test_the_benches_too_slow_for_ci_declare_a_full_check():
    """Exactly the benches whose default size runs for minutes on CI's 2 cores (timed for issue 30 item 6) declare a
    full-check size; the benches CI ran at default size before (milestone-1h-ccl, llama-layer, serving) do not."""
    slow = {"perf-ccl-scale", "perf-phold", "noc-load-latency", "milestone-1h-gemm", "model-step"}
    have = {b.name for b in kernbench.list_benches() if b.full_check is not None}
    assert have == slow


def test_only_reviewed_string_parameters_are_marked_as_sizes():
    """Param(size=True) lets a full-check thin out a string or choice parameter: only the reviewed ones carry it (SIP
    grids, PHOLD populations, NoC meshes: sizes of the same code), so a new mark is a conscious change here."""
    marked = {(b.name, k) for b in kernbench.list_benches() for k, spec in b.param_specs.items() if spec.size}
    assert marked == {("perf-ccl-scale", "sips"), ("perf-phold", "populations"), ("noc-load-latency", "meshes")}


BENCH = """
from kernbench import bench
from kernbench.overrides import Param

@bench(name="{name}", description="a full-check test bench",
       params={{"algorithms": Param(["ring", "tree"], choices=["ring", "tree", "nvls"]), "sizes": [1, 2, 3],
                "grid": {grid}, "exact": True}},
       full_check={full_check})
def run(ctx):
    return {{"results": [dict(ctx.params)]}}
"""


def _define(tmp_path, name, full_check, grid='"4x2"'):
    path = tmp_path / f"{name.replace('-', '_')}.py"
    path.write_text(textwrap.dedent(BENCH.format(name=name, full_check=full_check, grid=grid)))
    registry.add_bench_path(tmp_path)
    return registry.list_benches()


@pytest.fixture
def plugin_state(monkeypatch):
    """Registrations made by a test are undone after it (the registry is process-global)."""
    saved = (dict(registry._BENCHES), list(registry._EXTRA_PATHS), dict(registry._LOADED_FILES),
             set(registry._PLUGIN_MODULES), registry._ENTRY_POINTS_LOADED)
    monkeypatch.delenv(registry.BENCH_PATH_ENV, raising=False)
    yield
    registry._BENCHES.clear()
    registry._BENCHES.update(saved[0])
    registry._EXTRA_PATHS[:] = saved[1]
    registry._LOADED_FILES.clear()
    registry._LOADED_FILES.update(saved[2])
    registry._PLUGIN_MODULES.clear()
    registry._PLUGIN_MODULES.update(saved[3])
    registry._ENTRY_POINTS_LOADED = saved[4]


@pytest.mark.parametrize("full_check, words", [
    ('{"bench.algorithms": ["ring"]}', "bench.algorithms: the default runs 'tree', full-check does not"),
    ('{"bench.exact": False}', "bench.exact: the default runs True"),
    ('{"bench.grid": "2x2"}', "bench.grid: the default runs '4x2'"),
    ('{"bench.nope": 1}', "full_check= does not run: --set bench.nope=1: unknown parameter"),
    ('{"bench.algorithms": ["ring", "tree", "bogus"]}', "full_check= does not run: bench.algorithms=ring,tree,bogus"),
])
def test_a_full_check_that_drops_a_code_path_is_refused(tmp_path, plugin_state, full_check, words):
    """The registry refuses a full_check= that drops a value of a categorical parameter (a choice, a bool, a string),
    names an unknown parameter or a value the bench's own checks refuse: an audit error naming the bench."""
    with pytest.raises(kernbench.BenchAuditError) as e:
        _define(tmp_path, "fc-bad", full_check)
    assert "fc-bad" in str(e.value) and words in str(e.value)


def test_sizes_may_shrink_and_size_params_may_thin_out(tmp_path, plugin_state):
    """Numbers without choices and a Param(size=True) string are sizes: full-check may take fewer of them; the
    categorical values stay, so the bench registers and its full-check parameters are the declared ones."""
    benches = _define(tmp_path, "fc-good", '{"bench.sizes": [1], "bench.grid": "2x2", "bench.algorithms": '
                      '["ring", "tree", "nvls"]}', grid='Param("4x2", size=True)')
    b = next(x for x in benches if x.name == "fc-good")
    params, _ = apply_bench_overrides(b.name, b.params, full_check_sets(b))
    assert params["sizes"] == [1] and params["grid"] == "2x2" and params["algorithms"] == ["ring", "tree", "nvls"]
    assert not categorical("4x2", Param("4x2", size=True)) and categorical([], None) and categorical(False, None)
    assert not categorical([1, 2], None) and categorical([1, 2], Param([1, 2], choices=[1, 2, 3]))


def _plugins(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "fine.py").write_text(textwrap.dedent(BENCH.format(
        name="fc-fine", full_check='{"bench.sizes": [7]}', grid='"4x2"')))
    (folder / "broken.py").write_text(textwrap.dedent("""
        from kernbench import bench

        @bench(name="fc-broken", description="lists a failure", params={"n": 2})
        def run(ctx):
            ctx.results.append({"n": ctx.params["n"]})
            ctx.failures.append({"name": "point n=2", "error": "CapacityError: scratch of pe0 overflows"})
            return {"results": ctx.results, "failures": ctx.failures}
    """))
    return folder


def test_run_full_check_runs_the_declared_size(tmp_path, cli, plugin_state):
    """`kernbench run --full-check` runs the bench at its full-check size (--set applies on top); with --smoke it is
    a usage error (exit 2); `kernbench describe` shows the full-check settings."""
    folder = _plugins(tmp_path)
    out = tmp_path / "run"
    proc = cli("run", "--bench", "fc-fine", "--bench-path", str(folder), "--full-check", "--out", str(out),
               "--set", "bench.exact=false")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["params"]["sizes"] == [7] and doc["params"]["exact"] is False
    proc = cli("run", "--bench", "fc-fine", "--bench-path", str(folder), "--full-check", "--smoke")
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    proc = cli("describe", "fc-fine", "--bench-path", str(folder))
    assert proc.returncode == 0 and "full-check settings (--full-check" in proc.stdout and "bench.sizes=7" in proc.stdout


def _script(tmp_path, folder, *args):
    env = {**os.environ, registry.BENCH_PATH_ENV: str(folder)}
    return subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


def test_check_benches_fails_naming_the_bench_and_its_failure(tmp_path):
    """scripts/check_benches.py runs each chosen bench into OUT/NAME (a full-check bench at its full-check size) and
    exits 1 when one lists a failure, naming the bench and the failure text; the clean bench alone passes."""
    folder = _plugins(tmp_path)
    proc = _script(tmp_path, folder, "--bench", "fc-fine", "--bench", "fc-broken")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "check-benches: fc-broken: failure 'point n=2': CapacityError: scratch of pe0 overflows" in proc.stderr
    assert "fc-fine" not in proc.stderr and "1 failed: fc-broken" in proc.stdout
    assert "fc-fine                full-check" in proc.stdout and "fc-broken              default" in proc.stdout
    fine = json.loads((tmp_path / "out" / "fc-fine" / "sweep.json").read_text())
    assert fine["params"]["sizes"] == [7] and fine["verify"] is True
    proc = _script(tmp_path, folder, "--bench", "fc-fine")
    assert proc.returncode == 0 and "none failed" in proc.stdout, proc.stderr
    proc = _script(tmp_path, folder, "--bench", "no-such-bench")
    assert proc.returncode == 2 and "unknown bench no-such-bench" in proc.stderr


def test_check_benches_runs_benches_side_by_side_with_the_same_verdict(tmp_path):
    """With --jobs 2 both benches run (each into its own folder, one line each), the broken one is still named with
    its failure text and the exit status is 1; --jobs 0 is refused."""
    folder = _plugins(tmp_path)
    proc = _script(tmp_path, folder, "--bench", "fc-fine", "--bench", "fc-broken", "--jobs", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "check-benches: fc-broken: failure 'point n=2': CapacityError: scratch of pe0 overflows" in proc.stderr
    assert "1 failed: fc-broken" in proc.stdout and proc.stdout.count(" s cpu ") == 2
    assert (tmp_path / "out" / "fc-fine" / "sweep.json").exists()
    proc = _script(tmp_path, folder, "--jobs", "0")
    assert proc.returncode == 2 and "--jobs must be >= 1, got 0" in proc.stderr

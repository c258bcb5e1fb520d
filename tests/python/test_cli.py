"""The kernbench command line: list, run, errors, outputs."""

from __future__ import annotations

import json
import shutil
import subprocess

from kernbench.sweepjson import validate_sweep

SMALL = ["--set", "bench.events=20000", "--set", "bench.simpy_events=2000", "--set", "bench.populations=64x1,64x4"]


def test_list_shows_benches_with_indices(cli):
    """`kernbench list` numbers the benches; perf-phold is among them."""
    proc = cli("list", check=True)
    lines = proc.stdout.strip().splitlines()
    assert any(line.split()[:2] == ["0", lines[0].split()[1]] for line in lines[:1])
    assert any("perf-phold" in line for line in lines)


def test_console_script_is_installed():
    """The `kernbench` console script is on PATH after pip install."""
    exe = shutil.which("kernbench")
    assert exe is not None, "kernbench console script not found on PATH"
    proc = subprocess.run([exe, "list"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "perf-phold" in proc.stdout


def test_run_perf_phold_small_writes_outputs(cli, tmp_path):
    """A tiny perf-phold run writes sweep.json, CSV and PNG, and all engines agree."""
    out = tmp_path / "phold"
    proc = cli("run", "--bench", "perf-phold", "--out", str(out), *SMALL, check=True)
    assert "cb/bare" in proc.stdout
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["bench"] == "perf-phold"
    assert sweep["params"]["events"] == 20000
    assert sweep["params"]["populations"] == ["64x1", "64x4"]
    assert sweep["failures"] == []
    assert [r["pending"] for r in sweep["results"]] == [64, 256]
    for r in sweep["results"]:
        for engine in ("bare", "callbacks", "coroutines", "simpy"):
            assert r[f"{engine}_events_per_s"] > 0
        assert r["callbacks_vs_bare"] == r["callbacks_events_per_s"] / r["bare_events_per_s"]
    assert {t["ratio"] for t in sweep["targets"]} == {"callbacks_vs_bare", "coroutines_vs_bare", "coroutines_vs_simpy"}
    assert (out / "phold.csv").read_text().startswith("population,")
    assert (out / "phold.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(sweep["files"]) == ["phold.csv", "phold.png", "sweep.csv", "sweep.json"]
    validate_sweep(sweep)
    assert sweep["schema"] == "kernbench.sweep" and sweep["schema_version"] == 1 and sweep["kind"] == "bench"
    assert sweep["config"] is None and sweep["config_hash"] is None
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_run_by_index(cli, tmp_path):
    """A bench can be named by its index from `kernbench list`."""
    listing = cli("list", check=True).stdout.splitlines()
    index = next(line.split()[0] for line in listing if "perf-phold" in line)
    cli("run", "--bench", index, "--out", str(tmp_path), "--quiet", *SMALL, check=True)
    assert json.loads((tmp_path / "sweep.json").read_text())["bench"] == "perf-phold"


def test_unknown_bench_lists_known_ones(cli):
    """An unknown bench name is a one-line error that lists the known benches."""
    proc = cli("run", "--bench", "no-such-bench")
    assert proc.returncode == 2
    assert "unknown bench 'no-such-bench'" in proc.stderr
    assert "perf-phold" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_set_key_is_named(cli, tmp_path):
    """A misspelt bench parameter is refused before running, naming it and the valid keys."""
    proc = cli("run", "--bench", "perf-phold", "--out", str(tmp_path), "--set", "bench.evnts=5")
    assert proc.returncode == 2
    assert "unknown parameter 'evnts'" in proc.stderr
    assert "bench.events" in proc.stderr
    assert not (tmp_path / "sweep.json").exists()


def test_bad_set_value_and_syntax(cli):
    """Badly typed values and malformed assignments are clear errors."""
    proc = cli("run", "--bench", "perf-phold", "--set", "bench.events=lots")
    assert proc.returncode == 2 and "expected a number, got 'lots'" in proc.stderr
    proc = cli("run", "--bench", "perf-phold", "--set", "bench.events=1.5")
    assert proc.returncode == 2 and "expected an integer" in proc.stderr
    proc = cli("run", "--bench", "perf-phold", "--set", "events")
    assert proc.returncode == 2 and "expected PATH=VALUE" in proc.stderr


def test_config_key_on_a_bench_without_config(cli):
    """perf-phold simulates no machine: a config path override is refused by name."""
    proc = cli("run", "--bench", "perf-phold", "--set", "system.sips.w=4")
    assert proc.returncode == 2
    assert "unknown key 'system.sips.w'" in proc.stderr


def test_bad_population_refused_before_the_run(cli, tmp_path):
    """A bad population is refused up front (issue 22: bench parameters are checked before any
    simulation): exit 2, one line naming the parameter, the bad item and the form, nothing written."""
    sets = ["--set", "bench.events=5000", "--set", "bench.simpy_events=500", "--set", "bench.populations=8x2,eight,16x1"]
    proc = cli("run", "--bench", "perf-phold", "--out", str(tmp_path), "--quiet", *sets)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("kernbench: error: bench.populations=8x2,eight,16x1")
    assert "'eight'" in proc.stderr and "NxE" in proc.stderr
    assert not (tmp_path / "sweep.json").exists()


def test_describe_by_name_and_by_index(cli):
    """describe prints the description, typed parameters with defaults, smoke settings, outputs and config."""
    by_name = cli("describe", "pe-dma-perf", check=True).stdout
    index = next(line.split()[0] for line in cli("list", check=True).stdout.splitlines()
                 if line.split()[1] == "pe-dma-perf")
    assert cli("describe", index, check=True).stdout == by_name
    assert by_name.startswith(f"pe-dma-perf (index {index}): PE DMA latency by distance")
    assert "bench.bytes       int   default 16384" in by_name
    assert "bench.flit_check  bool  default true" in by_name
    assert "system.cubes.w=2" in by_name.split("smoke settings")[1].split("outputs")[0]
    outputs = by_name.split("outputs (in --out DIR, default out/pe-dma-perf):")[1].split("default config")[0]
    for f in ("sweep.json", "summary.csv", "breakdown.png", "utilization.png", "critical_path.csv"):
        assert f in outputs
    assert "default config: topology.yaml" in by_name
    phold = cli("describe", "perf-phold", check=True).stdout
    assert "default config: none (models no machine config" in phold
    assert "bench.populations" in phold and "list[str]" in phold


def test_describe_json_and_errors(cli):
    """`kernbench describe NAME --json` gives the bench's name, default config, list index and typed parameters; an
    unknown name or index exits 2 with one error line naming it."""
    import json

    d = json.loads(cli("describe", "k200-bandwidth", "--json", check=True).stdout)
    assert d["name"] == "k200-bandwidth" and d["config"]["name"] == "k200.yaml"
    from kernbench.registry import list_benches  # its index moves as benches are added (gpu-collectives sorts first)

    index = [b.name for b in list_benches()].index("k200-bandwidth")
    assert d["config"]["path"].endswith("k200.yaml") and d["index"] == index
    assert {p["name"] for p in d["params"]} and all({"name", "type", "default"} <= set(p) for p in d["params"])
    proc = cli("describe", "no-such-bench")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown bench 'no-such-bench'" in proc.stderr
    proc = cli("describe", "99")
    assert proc.returncode == 2 and "no bench with index 99" in proc.stderr

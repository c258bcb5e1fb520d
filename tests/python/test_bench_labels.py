"""Bench text describes the machine actually loaded: a reference figure taken beside the default
machine is only claimed when the run simulates that machine unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from kernbench.registry import get_bench
from kernbench.runner import BenchContext
from kernbench.system import config_path

TINY_CCL = ["--set", "bench.sizes=1024", "--set", "bench.algorithms=ring", "--set", "bench.full_algorithms=lrab",
            "--set", "bench.grid=2x1", "--set", "bench.grid_sizes=1024", "--set", "bench.grid_topologies=ring",
            "--set", "bench.buffer_algorithms=ring"]


def _small_machine(path: Path) -> Path:
    text = config_path("topology.yaml").read_text()
    small = text.replace("sips: {w: 2, h: 2, topology: torus}", "sips: {w: 2, h: 1, topology: ring}")
    small = small.replace("cubes: {w: 4, h: 4}", "cubes: {w: 2, h: 1}")
    assert small != text
    path.write_text(small)
    return path


def _ctx(config, overrides=None, bench="milestone-1h-ccl"):
    return BenchContext(bench=get_bench(bench), params={}, seed=1, out=Path("unused"),
                        config=Path(config) if config else None, config_overrides=dict(overrides or {}))


def test_machine_label_and_default_machine(tmp_path):
    """A bench context calls its machine "the default machine" only for the bench's own default config (or a
    byte-identical copy) with no overrides; any other file or an override is named as such, so a report never claims
    a reference machine it did not run."""
    default = config_path("topology.yaml")
    copy = tmp_path / "copy.yaml"
    copy.write_bytes(default.read_bytes())
    mine = _small_machine(tmp_path / "mine.yaml")
    assert _ctx(default).default_machine and _ctx(default).machine_label() == "the default machine"
    assert _ctx(copy).default_machine  # the same bytes under another name is the same machine
    assert not _ctx(mine).default_machine and _ctx(mine).machine_label() == "mine.yaml"
    over = _ctx(default, {"system.cubes.w": "2"})
    assert not over.default_machine and over.machine_label() == "the default machine with system.cubes.w=2"
    assert _ctx(mine, {"system.sips.w": "1"}).machine_label() == "mine.yaml with system.sips.w=1"
    # A bench whose default is another config: its own default counts, topology.yaml does not.
    k200 = config_path("k200.yaml")
    assert _ctx(k200, bench="k200-bandwidth").default_machine
    assert not _ctx(default, bench="k200-bandwidth").default_machine


def test_ccl_bench_on_another_config_names_it_and_claims_no_reference(cli, tmp_path):
    """milestone-1h-ccl on a config of one's own names that file in its text, prints no ratio to the 366 us
    reference, and records the reference in sweep.json with applies=false."""
    mine = _small_machine(tmp_path / "mine.yaml")
    out = tmp_path / "out"
    proc = cli("run", "--bench", "milestone-1h-ccl", "--config", str(mine), *TINY_CCL, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "default machine" not in proc.stdout.replace("set beside the default machine only", "")
    assert "one SIP of mine.yaml" in proc.stdout and "the whole of mine.yaml at 96 KiB per PE" in proc.stdout
    assert "366" not in proc.stdout and "x the" not in proc.stdout
    ref = json.loads((out / "sweep.json").read_text())["reference"]
    assert ref["applies"] is False and ref["machine"] == "mine.yaml" and ref["latency_us"] == 366.0


def test_pe_dma_summary_drops_the_reference_column_off_the_default_machine(cli, tmp_path):
    """pe-dma-perf's smoke run (which overrides system.sips.w) says it shows no reference column and names the
    override, and prints none of the default machine's reference figures."""
    proc = cli("run", "--bench", "pe-dma-perf", "--smoke", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "no reference column" in proc.stdout and "the default machine with system.sips.w=2" in proc.stdout
    assert "573 ns" not in proc.stdout  # REMOTE_CUBE_PE_REMOTE_WORST's reference figure


def test_k200_bandwidth_says_when_its_machine_is_not_the_measured_card(cli, tmp_path):
    """k200-bandwidth labels its 'measured' column plainly on k200.yaml as shipped, and with an override notes that
    'measured' is the card k200.yaml was fitted to, not the machine simulated."""
    note = "'measured' is the card k200.yaml was fitted to"
    proc = cli("run", "--bench", "k200-bandwidth", "--smoke", "--out", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr
    assert note not in proc.stdout and "measured" in proc.stdout
    proc = cli("run", "--bench", "k200-bandwidth", "--smoke", "--set", "k200.driver.kl1_p2p_stub=1",
               "--out", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    assert f"model on k200.yaml with k200.driver.kl1_p2p_stub=1; {note}" in proc.stdout

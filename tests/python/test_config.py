"""Machine configs from Python: the loader binding, the unit parsers, the schema and `kernbench validate`."""

from __future__ import annotations

import pytest

from kernbench import _core
from kernbench._core import ConfigError
from kernbench.config import config_overrides, describe, schema, validate

SYSTEM = """\
system:
  name: demo
  sips: {w: 2, h: 2, topology: torus}
  cubes: {w: 4, h: 4}
  routers: {w: 4, h: 2}
  pes_per_cube: 8
nodes:
  pe:       {overhead: 1 ns}
  router:   {overhead: 1 ns}
  hbm_ctrl: {overhead: 10 ns}
  ucie:     {overhead: 3 ns}
  pcie_ep:  {overhead: 60 ns, flit_aware: false}
links:
  pe:        {bandwidth: 512 GB/s, latency: 0.5 ns}
  noc:       {bandwidth: 256 GB/s, latency: 0.5 ns}
  hbm:       {bandwidth: 256 GB/s, latency: 1 ns}
  ucie_port: {bandwidth: 512 GB/s, latency: 0.5 ns}
  ucie:      {bandwidth: 128 GB/s, latency: 2 ns, connections: 4}
  pcie_port: {bandwidth: 256 GB/s, latency: 0.5 ns}
  pcie:      {bandwidth: 64 GB/s, latency: 150 ns}
"""

GRAPH = """\
graph:
  nodes:
    - {name: host, kind: host, overhead: 0 ns, flit_aware: false}
    - {name: rc, kind: switch, overhead: 20 ns}
    - {name: card, kind: pcie_ep, overhead: 60 ns}
  edges:
    - {a: host, b: rc, class: pcie, bandwidth: 16 GB/s, latency: 100 ns}
    - {a: rc, b: card, bandwidth: 25 Gb/s, latency: 50 ns, connections: 2}
fabric: {model: flow}
"""


@pytest.fixture
def system_file(tmp_path):
    path = tmp_path / "system.yaml"
    path.write_text(SYSTEM)
    return path


def test_load_config_summary_of_a_system(system_file):
    """A system config summarises to its grids, PE total and the default fabric."""
    s = _core.load_config_summary(str(system_file))
    assert s["source"] == str(system_file)
    assert s["kind"] == "system"
    assert s["name"] == "demo"
    assert s["sips"] == {"w": 2, "h": 2, "count": 4, "topology": "torus"}
    assert s["cubes"] == {"w": 4, "h": 4, "count": 16}
    assert s["routers"] == {"w": 4, "h": 2, "count": 8}
    assert s["pes_per_cube"] == 8
    assert s["total_pes"] == 4 * 16 * 8
    assert s["fabric"] == {"model": "packet", "chunk": 4096, "flit": 64, "request": 64, "stripe": 0}


def test_parse_config_summary_of_a_graph():
    """A graph config from text summarises to node and edge counts; the source names it."""
    s = _core.parse_config_summary(GRAPH, "inline.yaml")
    assert s["source"] == "inline.yaml"
    assert s["kind"] == "graph"
    assert (s["nodes"], s["edges"]) == (3, 2)
    assert s["fabric"]["model"] == "flow"


def test_overrides_reach_the_loader(system_file):
    """(path, value) overrides set and create keys before the config is typed."""
    s = _core.load_config_summary(str(system_file), [("system.sips.w", "4"), ("fabric.chunk", "16 KiB")])
    assert s["sips"]["w"] == 4 and s["total_pes"] == 8 * 16 * 8
    assert s["fabric"]["chunk"] == 16384


def test_errors_are_config_errors_naming_file_and_path(system_file):
    """A bad value is a ConfigError (also a ValueError) naming the file, the YAML path and the --set."""
    with pytest.raises(ConfigError, match=r"system\.yaml: system\.sips\.w \(set by --set system\.sips\.w=two\): "
                                          r'expected a positive integer, got "two"'):
        _core.load_config_summary(str(system_file), [("system.sips.w", "two")])
    with pytest.raises(ValueError, match=r"inline\.yaml: graph\.edges\[1\]\.b: no node named \"cardd\""):
        _core.parse_config_summary(GRAPH.replace("b: card", "b: cardd"), "inline.yaml")


def test_missing_file_is_a_config_error(tmp_path):
    """Loading a file that does not exist names the path."""
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"{missing}: cannot read the config file"):
        _core.load_config_summary(str(missing))


def test_unit_parsers_return_base_units():
    """parse_time/bytes/bandwidth return ps, bytes and bytes per second as ints."""
    assert _core.parse_time("1.5 us") == 1_500_000
    assert _core.parse_bytes("4 KiB") == 4096
    assert _core.parse_bandwidth("25 Gb/s") == 3_125_000_000
    assert _core.parse_bandwidth("256 GB/s") == 256_000_000_000
    assert isinstance(_core.parse_time("5 ns"), int)


def test_unit_parsers_reject_missing_and_foreign_units():
    """A missing unit or a unit of another kind (GT/s is not a bandwidth) is a ConfigError."""
    with pytest.raises(ConfigError, match=r'expected a time like "5 ns" \(units: ps, ns, us, ms, s\), got "5"'):
        _core.parse_time("5")
    with pytest.raises(ConfigError, match=r"here: expected a bandwidth like"):
        _core.parse_bandwidth("16 GT/s", "here")
    with pytest.raises(ConfigError, match="not a whole number of bytes"):
        _core.parse_bytes("0.5 B")


def test_schema_describes_sections_and_keys():
    """The schema JSON lists every section with typed, documented keys and the structs' defaults."""
    s = schema()
    assert set(s["units"]) == {"time", "bytes", "bandwidth", "frequency", "energy/byte", "energy/op", "power"}
    assert set(s["keys"]) == {"include", "system", "nodes", "links", "graph", "cluster", "fabric", "pe", "gpu", "nccl", "k200",
                              "vgpu", "energy"}
    bw = s["keys"]["links"]["keys"]["pcie"]["keys"]["bandwidth"]
    assert bw["type"] == "bandwidth" and bw["required"] is True and "Gb/s" in bw["units"]
    fabric = s["keys"]["fabric"]["keys"]
    assert fabric["chunk"]["default"] == "4 KiB"
    assert fabric["model"]["values"] == ["packet", "flow"]
    assert all(k["doc"] for k in s["keys"]["system"]["keys"].values())


def test_config_overrides_split_and_refuse_bench_params():
    """--set strings become (path, value) pairs; bench.* and malformed ones are ConfigErrors."""
    assert config_overrides(["system.sips.w=4", "fabric.chunk = 8 KiB"]) == [
        ("system.sips.w", "4"),
        ("fabric.chunk", "8 KiB"),
    ]
    with pytest.raises(ConfigError, match="bench parameters belong to `kernbench run`"):
        config_overrides(["bench.events=10"])
    with pytest.raises(ConfigError, match="expected PATH=VALUE"):
        config_overrides(["system.sips.w"])


def test_validate_and_describe(system_file):
    """validate() returns the summary; describe() makes one sentence of it."""
    s = validate(system_file, ["system.sips.topology=mesh"])
    assert s["sips"]["topology"] == "mesh"
    text = describe(s)
    assert text.startswith(f"{system_file}: valid.")
    assert "2x2 SIPs (mesh)" in text and "512 PEs in all" in text and "4 KiB chunks of 64 B flits" in text
    assert "\n" not in text


def test_cli_validate_prints_a_summary(cli, system_file):
    """`kernbench validate FILE` prints the one-paragraph summary and exits 0."""
    proc = cli("validate", str(system_file), "--set", "system.sips.w=4")
    assert proc.returncode == 0, proc.stderr
    assert "4x2 SIPs (torus)" in proc.stdout and "1024 PEs in all" in proc.stdout
    assert proc.stderr == ""


def test_cli_validate_graph(cli, tmp_path):
    """A graph config validates too and reports its node and edge counts."""
    path = tmp_path / "graph.yaml"
    path.write_text(GRAPH)
    proc = cli("validate", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "explicit graph: 3 nodes, 2 edges; fabric: flow model." in proc.stdout


def test_cli_validate_reports_errors_on_one_line(cli, tmp_path):
    """An invalid config prints `kernbench: error: <file>: <path>: ...` on stderr and exits 1."""
    path = tmp_path / "bad.yaml"
    path.write_text(SYSTEM.replace("latency: 150 ns", "latency: 150"))
    proc = cli("validate", str(path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"kernbench: error: {path}: links.pcie.latency: expected a time like")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cli_validate_several_files_checks_each(cli, system_file, tmp_path):
    """`kernbench validate A B C`: each file gets its header and summary; a bad one is its one error line and
    exit 1, and does not stop the files after it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(SYSTEM.replace("latency: 150 ns", "latency: 150"))
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH)
    proc = cli("validate", str(system_file), str(bad), str(graph))
    assert proc.returncode == 1
    assert [line for line in proc.stdout.splitlines() if line.startswith("== ")] == [
        f"== {system_file}", f"== {bad}", f"== {graph}"]
    assert "explicit graph: 3 nodes, 2 edges" in proc.stdout  # the file after the bad one was checked
    assert proc.stderr.startswith(f"kernbench: error: {bad}: links.pcie.latency:")
    assert len(proc.stderr.strip().splitlines()) == 1
    ok = cli("validate", str(system_file), str(graph))
    assert ok.returncode == 0 and ok.stderr == ""


def test_cli_validate_bad_set_and_missing_file(cli, system_file, tmp_path):
    """A --set that breaks the config, or a file that is missing, exits 1 with the reason."""
    by_count = tmp_path / "by_count.yaml"
    by_count.write_text(SYSTEM.replace("{w: 2, h: 2, topology: torus}", "{count: 4, topology: torus}"))
    proc = cli("validate", str(by_count), "--set", "system.sips.count=6")
    assert proc.returncode == 1
    assert "system.sips.count (set by --set system.sips.count=6): 6 SIPs is not a square grid" in proc.stderr
    assert "give system.sips.w and system.sips.h (2x3 or 3x2)" in proc.stderr
    proc = cli("validate", str(system_file), "--set", "system.sips.count=9")
    assert proc.returncode == 1
    assert "give either count or w and h, not both" in proc.stderr
    proc = cli("validate", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 1
    assert "missing.yaml: cannot read the config file" in proc.stderr


def test_cli_validate_includes(cli, tmp_path):
    """Included files merge under the including file before validation."""
    (tmp_path / "base.yaml").write_text(SYSTEM)
    top = tmp_path / "top.yaml"
    top.write_text("include: base.yaml\nsystem: {sips: {w: 3, h: 3}}\nfabric: {model: flow}\n")
    proc = cli("validate", str(top))
    assert proc.returncode == 0, proc.stderr
    assert "3x3 SIPs (torus)" in proc.stdout and "flow model" in proc.stdout

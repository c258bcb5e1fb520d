"""links.<class> on explicit graphs: the presets state each class once and load the machine they loaded before;
a --set of the class reaches every edge (and a ring all-reduce's busbw), through System.load, a sweep's grid,
`calibrate --free` and `kernbench validate`; a wrong class or key is refused naming the file and the path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import kernbench
from kernbench import ccl
from kernbench import calibrate as cal
from kernbench._core import ConfigError
from kernbench.calibrate.data import schema_key
from kernbench.cli import main
from kernbench.system import System

MACHINES = Path(__file__).resolve().parents[2] / "configs" / "machines"
H100 = "machines/h100-8x-nvswitch.yaml"
PRESETS = ["h100-8x-nvswitch", "h200-8x-nvswitch", "a100-8x-nvswitch", "l40s-8x-pcie"]
# What each preset's classes were, per edge, before they moved under links: (bandwidth, latency).
CLASSES = {
    "h100-8x-nvswitch": {"hbm": ("3350 GB/s", "100 ns"), "nvlink": ("25 GB/s", "100 ns"),
                         "pcie": ("63015 MB/s", "250 ns"), "pcie_uplink": ("63015 MB/s", "250 ns"),
                         "socket": ("32 GB/s", "100 ns")},
    "h200-8x-nvswitch": {"hbm": ("4800 GB/s", "100 ns"), "nvlink": ("25 GB/s", "100 ns"),
                         "pcie": ("63015 MB/s", "250 ns"), "pcie_uplink": ("63015 MB/s", "250 ns"),
                         "socket": ("32 GB/s", "100 ns")},
    "a100-8x-nvswitch": {"hbm": ("2039 GB/s", "100 ns"), "nvlink": ("25 GB/s", "100 ns"),
                         "pcie": ("31508 MB/s", "250 ns"), "pcie_uplink": ("31508 MB/s", "250 ns"),
                         "socket": ("32 GB/s", "100 ns")},
    "l40s-8x-pcie": {"hbm": ("864 GB/s", "100 ns"), "pcie": ("31508 MB/s", "250 ns"),
                     "pcie_uplink": ("31508 MB/s", "250 ns"), "socket": ("32 GB/s", "100 ns")},
}


def _edges(system) -> list[dict]:
    return system.explicit_graph()["edges"]


def _flat_twin(name: str) -> str:
    """The preset with every class value written on its edges again (links: expanded by hand, rule 2)."""
    doc = yaml.safe_load((MACHINES / f"{name}.yaml").read_text())
    links = doc.pop("links")
    for e in doc["graph"]["edges"]:
        for k, v in links.get(e.get("class", "link"), {}).items():
            e.setdefault(k, v)
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.mark.parametrize("name", PRESETS)
def test_presets_state_classes_once_and_build_the_same_links(name):
    """Each preset's edges no longer repeat bandwidth/latency; the built links carry the values they carried."""
    doc = yaml.safe_load((MACHINES / f"{name}.yaml").read_text())
    for cls in doc["links"]:
        assert all("bandwidth" not in e and "latency" not in e
                   for e in doc["graph"]["edges"] if e["class"] == cls), cls
    system = System.load(f"machines/{name}.yaml")
    seen = {}
    for e in _edges(system):
        seen.setdefault(e["class"], set()).add((e["bandwidth"], e["latency"]))
    assert seen == {c: {v} for c, v in CLASSES[name].items()}
    twin = System.from_yaml(_flat_twin(name), source=str(MACHINES / f"{name}.yaml"))
    assert _edges(twin) == _edges(system)


def test_h100_all_reduce_is_the_per_edge_twin_s_to_the_ps():
    """A 64 MiB ring all-reduce on the H100 preset takes exactly its time on the per-edge twin."""
    twin = System.from_yaml(_flat_twin("h100-8x-nvswitch"), source=str(MACHINES / "h100-8x-nvswitch.yaml"))
    times = [ccl.collective(s, "all_reduce", 64 << 20, algorithm="ring", buffer="hbm", verify="off").latency_ps
             for s in (System.load(H100), twin)]
    assert times[0] == times[1] > 0


def test_set_links_nvlink_bandwidth_reaches_all_32_edges_and_the_busbw():
    """--set links.nvlink.bandwidth=50 GB/s: all 32 NVLink edges (and no other) at 50 GB/s, lanes kept; a 1 GiB
    ring all-reduce's busbw rises by nearly 2x (bandwidth-bound; the fixed costs keep it under 2x)."""
    base, fast = System.load(H100), System.load(H100, set={"links.nvlink.bandwidth": "50 GB/s"})
    nv = [e for e in _edges(fast) if e["class"] == "nvlink"]
    assert len(nv) == 32 and {e["bandwidth"] for e in nv} == {"50 GB/s"}
    assert [e["connections"] for e in nv] == [e["connections"] for e in _edges(base) if e["class"] == "nvlink"]
    assert [e for e in _edges(fast) if e["class"] != "nvlink"] == [e for e in _edges(base) if e["class"] != "nvlink"]
    size = 1 << 30
    t = [ccl.collective(s, "all_reduce", size, algorithm="ring", buffer="hbm", verify="off").latency_ps
         for s in (base, fast)]
    busbw = [2 * 7 / 8 * size / (x * 1e-12) / 1e9 for x in t]
    assert 1.8 < busbw[1] / busbw[0] < 2.0
    # The per-edge value no longer counts under a --set: a graph edge's own latency is overridden too.
    slow = System.load(H100, set={"links.nvlink.latency": "1 us"})
    assert {e["latency"] for e in _edges(slow) if e["class"] == "nvlink"} == {"1 us"}


def test_file_edge_value_wins_over_file_class_value(tmp_path):
    """Rule 2 on the H100 preset: an edge of the file stating 10 GB/s keeps it; the other 31 take links.nvlink."""
    text = (MACHINES / "h100-8x-nvswitch.yaml").read_text().replace(
        "{a: gpu3, b: nvswitch2, class: nvlink, connections: 4}",
        "{a: gpu3, b: nvswitch2, class: nvlink, connections: 4, bandwidth: 10 GB/s}", 1)
    system = System.from_yaml(text, source=str(MACHINES / "h100-8x-nvswitch.yaml"))
    rates = {(e["a"], e["b"]): e["bandwidth"] for e in _edges(system) if e["class"] == "nvlink"}
    assert rates.pop(("gpu3", "nvswitch2")) == "10 GB/s" and set(rates.values()) == {"25 GB/s"}
    over = System.from_yaml(text, source=str(MACHINES / "h100-8x-nvswitch.yaml"),
                            set={"links.nvlink.bandwidth": "30 GB/s"})
    assert {e["bandwidth"] for e in _edges(over) if e["class"] == "nvlink"} == {"30 GB/s"}  # rule 1


def test_unknown_class_or_key_names_the_path():
    """A class the graph has no edge of lists the graph's classes; a misspelt key is named with its path."""
    with pytest.raises(ConfigError, match=r"h100-8x-nvswitch.yaml: links.nvlnk \(set by --set "
                                          r"links.nvlnk.bandwidth=1 GB/s\): no edge of class \"nvlnk\" in graph.edges "
                                          r"\(its classes: hbm, nvlink, pcie, pcie_uplink, socket\)"):
        System.load(H100, set={"links.nvlnk.bandwidth": "1 GB/s"})
    with pytest.raises(ConfigError, match=r"links.nvlink.bandwith.*unknown key.*did you mean \"bandwidth\""):
        System.load(H100, set={"links.nvlink.bandwith": "1 GB/s"})
    with pytest.raises(ConfigError, match=r"links.nvlink.bandwidth.*expected a bandwidth"):
        System.load(H100, set={"links.nvlink.bandwidth": "fast"})


def test_validate_and_schema_know_links_class(cli):
    """`kernbench validate --set links.nvlink.bandwidth=...` accepts it (and refuses a foreign class, exit 1);
    the schema lists the links.<class> placeholder, which schema_key matches for any class name."""
    path = str(MACHINES / "h100-8x-nvswitch.yaml")
    assert cli("validate", path, "--set", "links.nvlink.bandwidth=40 GB/s").returncode == 0
    bad = cli("validate", path, "--set", "links.ib.latency=1 us")
    assert bad.returncode == 1 and 'no edge of class "ib"' in bad.stderr
    s = kernbench.config.schema()
    assert set(s["keys"]["links"]["keys"]["<class>"]["keys"]) == {"bandwidth", "latency", "connections", "buffer",
                                                                   "vcs"}
    assert schema_key("links.nvlink.bandwidth")["type"] == "bandwidth"
    assert schema_key("links.pcie.bandwidth")["required"] is True  # a system's class: its own entry
    assert schema_key("links.nvlink.nope") is None
    assert "`links.<class>.bandwidth`" in kernbench.config.reference_markdown()


def test_sweep_grid_over_links_nvlink_bandwidth():
    """A sweep over links.nvlink.bandwidth runs every point; a faster NVLink gives a faster all-reduce."""

    def all_reduce(point):
        t = ccl.collective(point.load_system(), "all_reduce", 256 << 20, algorithm="ring", buffer="hbm",
                           verify="off").latency_ps
        return {"time_ps": t}

    df = kernbench.sweep(all_reduce, {"links.nvlink.bandwidth": ["25 GB/s", "50 GB/s"]}, "serial", config=H100)
    assert (df["status"] == "ok").all()
    t = dict(zip(df["links.nvlink.bandwidth [GB/s]"], df["time_ps"]))  # the axis in its one unit
    assert t[50] < 0.6 * t[25]


def test_calibrate_free_links_nvlink_bandwidth_recovers_it(tmp_path):
    """`calibrate --free links.nvlink.bandwidth` fits the NVLink rate back from rows the model made at 30 GB/s."""
    from kernbench.calibrate.registry import REGISTRY, Context

    free = cal.parse_free("links.nvlink.bandwidth=10 GB/s..60 GB/s")
    assert free.path == "links.nvlink.bandwidth" and free.unit == "GB/s"
    rows = []
    for size in (16 << 20, 64 << 20):  # large enough that the NVLink rate sets most of the time
        r = REGISTRY.get("gpu.nccl").fn(Context(config=H100, sets={"links.nvlink.bandwidth": "30 GB/s"}),
                                       collective="all_reduce", bytes=size, algorithm="ring")
        rows.append(f"  - {{id: ar-{size}, group: g, call: gpu.nccl collective=all_reduce bytes={size} "
                    f"algorithm=ring, metric: time, value: {r['time']!r}, unit: us, source: synthetic}}\n")
    data = tmp_path / "data.yaml"
    data.write_text("rows:\n" + "".join(rows))
    out = tmp_path / "out"
    assert main(["calibrate", "--data", str(data), "--free", "links.nvlink.bandwidth=10 GB/s..60 GB/s",
                 "--cv-by", "none", "--out", str(out), "--no-plots"]) == 0
    overlay = yaml.safe_load((out / "overlay.yaml").read_text())
    value, unit = str(overlay["links"]["nvlink"]["bandwidth"]).split()
    assert unit == "GB/s" and float(value) == pytest.approx(30, rel=0.01)

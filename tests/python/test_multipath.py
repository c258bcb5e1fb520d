"""Multipath routing on the GPU-box presets: equal-cost paths, spread by link count, pinned routes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernbench.system import System

H100 = Path(__file__).resolve().parents[2] / "configs" / "machines" / "h100-8x-nvswitch.yaml"


def _h100_with_routes(routes: list[dict]) -> str:
    """The H100 preset's YAML with graph.routes added."""
    doc = yaml.safe_load(H100.read_text())
    doc["graph"]["routes"] = routes
    return yaml.safe_dump(doc)


def _switch_bytes(system: System, prefix: str = "nvswitch") -> dict[str, int]:
    """Payload bytes that entered each switch so far (every channel into a node named prefix*)."""
    ch = system.channels()
    out: dict[str, int] = {}
    for i in range(len(ch["src"])):
        to = system.node_name(int(ch["dst"][i]))
        if to.startswith(prefix):
            out[to] = out.get(to, 0) + int(ch["bytes"][i])
    return out


def test_h100_gpu_pair_has_one_equal_cost_path_per_nvswitch_in_tie_order():
    """gpu0 -> gpu1 on H100: 4 paths, nvswitch0..3 in node order, at 5/4/4/5 links x 25 GB/s (the HC34 wiring)."""
    system = System.load("machines/h100-8x-nvswitch.yaml")
    assert system.multipath == "spread"
    paths = system.route_paths("gpu0", "gpu1")
    assert [p["nodes"] for p in paths] == [["gpu0", f"nvswitch{k}", "gpu1"] for k in range(4)]
    assert [p["rate_Bps"] for p in paths] == [125e9, 100e9, 100e9, 125e9]
    assert system.route_info("gpu0", "gpu1")["nodes"] == paths[0]["nodes"]  # route() is the first


def test_h100_spread_follows_the_uneven_wiring():
    """One 18 MiB transfer on H100 puts its bytes on the 4 NVSwitches in the ratio of their links, 5:4:4:5."""
    system = System.load("machines/h100-8x-nvswitch.yaml")
    system.transfer("gpu0", "gpu1", 18 << 20)
    system.run()
    per = _switch_bytes(system)
    assert per == {"nvswitch0": 5 << 20, "nvswitch1": 4 << 20, "nvswitch2": 4 << 20, "nvswitch3": 5 << 20}
    t = system.transfers()
    mine = [i for i in range(len(t["id"])) if t["parent"][i] == -1]
    assert len(mine) == 1 and t["stripes"][mine[0]] == 4  # one record for the caller, in 4 stripes
    assert sorted(t["path"][i] for i in range(len(t["id"])) if t["parent"][i] >= 0) == [0, 1, 2, 3]


def test_h100_single_path_uses_one_nvswitch():
    """With fabric.multipath=single the same transfer crosses nvswitch0 alone (the first path of the tie order)."""
    system = System.load("machines/h100-8x-nvswitch.yaml", set={"fabric.multipath": "single"})
    system.transfer("gpu0", "gpu1", 1 << 20)
    system.run()
    assert _switch_bytes(system) == {"nvswitch0": 1 << 20, "nvswitch1": 0, "nvswitch2": 0, "nvswitch3": 0}


def test_a_pinned_route_is_obeyed_on_the_preset():
    """graph.routes pins gpu0 -> gpu5 through nvswitch2: spread leaves it there; gpu5 -> gpu0 still spreads."""
    system = System.from_yaml(_h100_with_routes([{"src": "gpu0", "dst": "gpu5", "via": ["nvswitch2"]}]),
                              source=str(H100))
    assert [p["nodes"] for p in system.route_paths("gpu0", "gpu5")] == [["gpu0", "nvswitch2", "gpu5"]]
    system.transfer("gpu0", "gpu5", 1 << 20)
    system.run()
    assert _switch_bytes(system) == {"nvswitch0": 0, "nvswitch1": 0, "nvswitch2": 1 << 20, "nvswitch3": 0}
    assert len(system.route_paths("gpu5", "gpu0")) == 4


def test_a_pinned_route_off_the_edges_names_its_yaml_path():
    """A pinned step that is not an edge is a ConfigError naming graph.routes[0].via."""
    text = _h100_with_routes([{"src": "gpu0", "dst": "gpu5", "via": ["nvswitch2", "cpu0"]}])
    with pytest.raises(ValueError, match=r"graph\.routes\[0\]\.via: no edge joins \"nvswitch2\" and \"cpu0\""):
        System.from_yaml(text, source=str(H100))


def test_a_spread_transfer_is_one_interval_in_the_trace():
    """The trace draws a spread transfer once (its parent record), not once per stripe."""
    from kernbench import trace

    system = System.load("machines/h100-8x-nvswitch.yaml")
    system.transfer("gpu0", "gpu1", 1 << 20)
    system.run()
    assert len(system.transfers()["id"]) == 5  # the transfer and its 4 stripes
    events = [e for e in trace.chrome_trace(system)["traceEvents"] if e.get("ph") == "X"]
    assert [e["args"]["bytes"] for e in events] == [1 << 20]

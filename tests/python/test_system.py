"""Machines from Python: loading, inspection, routing, transfers, DMA, traffic."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench

CHAIN = """
graph:
  nodes:
    - {name: a, kind: other, overhead: 1 ns}
    - {name: b, kind: router, overhead: 2 ns}
    - {name: c, kind: other, overhead: 3 ns}
  edges:
    - {a: a, b: b, bandwidth: 256 GB/s, latency: 0.5 ns}
    - {a: b, b: c, bandwidth: 128 GB/s, latency: 1 ns}
fabric: {model: packet, chunk: 1 KiB, flit: 64 B}
"""


@pytest.fixture(scope="module")
def default_system():
    return kernbench.System.load()


def test_default_machine_shape(default_system):
    """The default config is 2x2 SIPs of 4x4 cubes of 8 PEs: 512 PEs named sipS.cubeC.peP."""
    pes = default_system.pes()
    assert len(pes) == 512
    assert pes[0] == "sip0.cube0.pe0" and pes[-1] == "sip3.cube15.pe7"
    nodes = default_system.nodes_df()
    assert (nodes["kind"] == "hbm_ctrl").sum() == 512
    assert (nodes["kind"] == "pcie_ep").sum() == 4
    assert not nodes.loc[nodes["kind"] == "pcie_ep", "flit_aware"].any()
    ch = default_system.channels_df()
    ucie = ch[ch["class"] == "ucie"]
    assert (ucie["connections"] == 4).all() and (ucie["bandwidth_Bps"] == 128e9).all()
    assert (ch.loc[ch["class"] == "hbm", "bandwidth_Bps"] == 256e9).all()


def test_routes_are_dimension_ordered(default_system):
    """Inside a cube routes go X then Y; across cubes they leave by the UCIe side of the current row."""
    r = default_system.route("sip0.cube0.pe0", "sip0.cube0.pe6")
    assert r == ["sip0.cube0.pe0", "sip0.cube0.r0c0", "sip0.cube0.r0c1", "sip0.cube0.r0c2",
                 "sip0.cube0.r1c2", "sip0.cube0.pe6"]
    r = default_system.route("sip0.cube0.pe4", "sip0.cube1.pe4")
    assert "sip0.cube0.r1c3" in r and "sip0.cube0.ucie_e" in r and "sip0.cube1.ucie_w" in r
    r = default_system.route("sip0.cube0.pe0", "sip3.cube0.hbm_ctrl.pe0")
    assert [n for n in r if n.endswith("pcie_ep")] == ["sip0.pcie_ep", "sip1.pcie_ep", "sip3.pcie_ep"] or \
        [n for n in r if n.endswith("pcie_ep")] == ["sip0.pcie_ep", "sip2.pcie_ep", "sip3.pcie_ep"]


def test_overrides_reshape_the_machine():
    """set= overrides are applied before typing; a bad one names the key and the --set."""
    s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1})
    assert len(s.pes()) == 16
    with pytest.raises(kernbench.ConfigError, match="system.sips.w"):
        kernbench.System.load(set={"system.sips.w": "two"})
    with pytest.raises(kernbench.ConfigError, match="nonsense"):
        kernbench.System.load(set={"system.nonsense": 1})


def test_transfer_closed_form_and_breakdown():
    """A 4 KiB transfer over a-b-c takes the wormhole closed form; its parts sum to it exactly."""
    s = kernbench.System.from_yaml(CHAIN)
    req = s.transfer("a", "c", 4096)
    s.run()
    t = s.transfers_df()
    row = t[t["request"] == req].iloc[0]
    # overheads 1+2+3 ns, latencies 0.5+1 ns, one flit per hop (250 + 500 ps),
    # then 63 flits through the 128 GB/s bottleneck (500 ps each).
    assert row["latency_ps"] == 6000 + 1500 + 750 + 63 * 500
    parts = row[["overhead_ps", "transmission_ps", "drain_ps", "queuing_ps"]].sum()
    assert parts == row["latency_ps"]
    assert row["queuing_ps"] == 0
    assert row["src_name"] == "a" and row["dst_name"] == "c"


def test_flow_model_same_interface():
    """The flow model answers the same call; uncontended it gives overheads + latencies + bytes/bw."""
    s = kernbench.System.from_yaml(CHAIN, set={"fabric.model": "flow"})
    assert s.fabric_model == "flow"
    s.transfer("a", "c", 4096)
    s.run()
    t = s.transfers_df().iloc[0]
    assert t["latency_ps"] == 6000 + 1500 + 32000
    assert t["drain_ps"] == 0


def test_contention_is_measured_as_queuing():
    """Two transfers started together on one channel: the second waits, and says so."""
    s = kernbench.System.from_yaml(CHAIN)
    s.transfer("a", "c", 8192)
    s.transfer("a", "c", 8192)
    s.run()
    t = s.transfers_df()
    assert (t["queuing_ps"] > 0).all()
    assert (t[["overhead_ps", "transmission_ps", "drain_ps", "queuing_ps"]].sum(axis=1) == t["latency_ps"]).all()
    rates = s.max_min_rates([("a", "c"), ("a", "c")])
    assert rates == [64e9, 64e9]  # half of the 128 GB/s bottleneck each


def test_dma_read_pays_request_then_data(default_system):
    """A DMA read is a request leg then a data leg; both appear as transfers and the op sums them."""
    s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    i = s.dma("read", "sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0", 16384)
    j = s.dma("write", "sip0.cube0.pe1", "sip0.cube1.hbm_ctrl.pe1", 4096, at_ps=1_000_000)
    s.run()
    d = s.dma_df()
    assert d["done"].all()
    assert d.loc[j, "issue_ps"] == 1_000_000
    t = s.transfers_df()
    assert len(t) == 3  # request + data, and the write
    read = d.loc[i]
    legs = t[t["issue_ps"] < 1_000_000]
    assert read["latency_ps"] == legs["end_ps"].max() - legs["issue_ps"].min()
    assert read[["overhead_ps", "transmission_ps", "drain_ps", "queuing_ps"]].sum() == read["latency_ps"]
    with pytest.raises(kernbench.UsageError, match="in the past"):
        s.dma("read", "sip0.cube0.pe0", "sip0.cube0.hbm_ctrl.pe0", 64, at_ps=0)
    with pytest.raises(kernbench.TopologyError, match="unknown node 'sip0.cube0.pe99'"):
        s.dma("read", "sip0.cube0.pe99", "sip0.cube0.hbm_ctrl.pe0", 64)


def test_traffic_generator_and_errors():
    """Uniform traffic delivers every packet it injects; malformed specs are clear errors."""
    s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 1, "system.cubes.h": 1})
    pes = s.pes()
    s.traffic("uniform", pes, 50.0, 256, 0, 2_000_000)
    s.run()
    t = s.transfers()
    assert len(t["id"]) > 100
    assert (t["end_ps"] >= t["issue_ps"]).all()
    assert s.in_flight == 0
    assert set(t["src"]) <= {s.node_id(p) for p in pes}
    with pytest.raises(kernbench.ConfigError, match="transpose needs a square grid"):
        s.traffic("transpose", pes, 1.0, 64, s.now, s.now + 1000)
    with pytest.raises(kernbench.ConfigError, match="unknown pattern 'random'"):
        s.traffic("random", pes, 1.0, 64, s.now, s.now + 1000)


def test_same_seed_same_records():
    """Poisson traffic with one seed repeats bit for bit; another seed differs."""
    def run(seed):
        s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1}, seed=seed)
        s.traffic("uniform", s.pes()[:16], 40.0, 512, 0, 1_000_000)
        s.run()
        return s.transfers()

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a["end_ps"], b["end_ps"]) and np.array_equal(a["dst"], b["dst"])
    assert not np.array_equal(a["dst"], c["dst"][: len(a["dst"])]) or len(a["dst"]) != len(c["dst"])

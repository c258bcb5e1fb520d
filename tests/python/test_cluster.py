"""The cluster: generator (docs/cluster.md): sizes, names, NIC placement, errors, routing and the fabric's bounds."""

from __future__ import annotations

import time

import pytest

import kernbench
from kernbench import ccl
from kernbench.cluster import alltoall_bound
from kernbench.config import validate

H100 = "machines/dgx-h100-cluster.yaml"

# A one-GPU box without PCIe: its NIC attaches to the GPU itself, so every GPU's scale-out traffic has one NIC.
ONE_GPU_BOX = """
graph:
  nodes:
    - {name: gpu0, kind: pe, overhead: 0 ns}
  edges: []
"""


def cluster_yaml(nodes, kind="fat-tree", radix=8, o=1, tiers=2, extra=""):
    return f"""
cluster:
  nodes: {nodes}
  box: box1.yaml
  nic: cx7-ndr-400
  fabric: {{kind: {kind}, tiers: {tiers}, radix: {radix}, oversubscription: {o}}}
fabric: {{model: flow, multipath: spread}}
{extra}"""


def one_gpu_system(tmp_path, **kw):
    (tmp_path / "box1.yaml").write_text(ONE_GPU_BOX)
    path = tmp_path / "c.yaml"
    path.write_text(cluster_yaml(**kw))
    return kernbench.System.load(path)


def channel_bytes(system, predicate):
    ch = system.channels()
    names = system.nodes()["name"]
    return sum(int(b) for s, d, b in zip(ch["src"], ch["dst"], ch["bytes"]) if predicate(names[int(s)], names[int(d)]))


@pytest.mark.parametrize("preset", ["dgx-h100-cluster", "dgx-a100-cluster"])
def test_cluster_presets_validate_and_load(preset):
    """Both cluster presets validate (strict schema) and load by their packaged names: their GPUs are the boxes'
    GPUs, 8 per node, in rank order, and every NIC is a nic node."""
    assert validate(kernbench.system.config_path(f"machines/{preset}.yaml")) is not None
    system = kernbench.System.load(f"machines/{preset}.yaml", set={"cluster.nodes": 3})
    assert system.pes()[:9] == [f"n0.gpu{j}" for j in range(8)] + ["n1.gpu0"] and len(system.pes()) == 24
    kinds = dict(zip(system.nodes()["name"], system.nodes()["kind"]))
    assert sorted(n for n, k in kinds.items() if k == "nic") == sorted(f"n{i}.nic{j}" for i in range(3)
                                                                        for j in range(8))


def test_every_node_count_to_200_validates():
    """Every nodes from 1 to 200 loads and passes the explicit-graph checks, with the GPU count nodes x 8."""
    for n in range(1, 201):
        s = validate(kernbench.system.config_path(H100), [f"cluster.nodes={n}"])
        assert s["cluster"]["gpus"] == 8 * n
        assert s["cluster"]["counts"]["nics"] == 8 * n


def test_all_reduce_runs_on_odd_counts_and_partial_groups():
    """A small all-reduce (one GPU per node, so the ring crosses the scale-out fabric; at 1 node the box's 8 GPUs)
    runs at 1..200 nodes, odd counts and partial leaf groups included; IB links carry bytes exactly when there is
    more than one node, and the ring's time grows with the node count."""
    times = []
    for n in (1, 2, 3, 7, 33, 64, 65, 127, 200):
        s = kernbench.System.load(H100, set={"cluster.nodes": n})
        pes = [f"n{a}.gpu0" for a in range(n)] if n > 1 else None
        r = ccl.all_reduce(s, 4096, pes=pes, channels=1, verify="off")
        ib = channel_bytes(s, lambda a, b: ".nic" in a and b.startswith("leaf"))
        assert (ib > 0) == (n > 1)
        if n > 1:
            times.append(r.latency_ps)
    assert times == sorted(times) and times[0] < times[-1]


def test_rank_order_names_and_nic_placement():
    """Rank r is GPU r % 8 of node r // 8; NIC j of node i is n<i>.nic<j>, joined by a pcie edge at the NIC's
    host rate to GPU j's PCIe switch and by an ib edge at 50 GB/s to its rail's leaf."""
    s = kernbench.System.load(H100, set={"cluster.nodes": 3})
    c = s.cluster()
    assert c["ranks"][:9] == [f"n0.gpu{j}" for j in range(8)] + ["n1.gpu0"]
    assert s.layout()["ranks"] == c["ranks"] if "ranks" in s.layout() else True
    assert c["rank_node"][17] == 2
    assert c["nic_names"][8 * 2 + 5] == "n2.nic5"
    ch = s.channels()
    names = s.nodes()["name"]
    ends = {(names[int(a)], names[int(b)]): (cls, int(bw)) for a, b, cls, bw in
            zip(ch["src"], ch["dst"], ch["class"], ch["bandwidth_Bps"])}
    assert ends[("n2.nic5", "n2.pcie_switch2")] == ("pcie", 63_015_000_000)
    assert ends[("n1.nic3", "leaf3")] == ("ib", 50_000_000_000)   # rail 3 of group 0
    assert s.node_id("n2.nvswitch3") >= 0 and s.node_id("n0.hbm7") >= 0


def test_box_traffic_stays_on_nvlink_and_same_rail_on_its_leaf():
    """Inside a box GPU to GPU goes over the NVSwitches; same-rail GPUs of two nodes of a group go through their
    rail's leaf only."""
    s = kernbench.System.load(H100, set={"cluster.nodes": 4})
    assert all("nvswitch" in n for n in s.route("n1.gpu0", "n1.gpu5")[1:-1])
    assert s.route("n0.gpu2", "n3.gpu2") == ["n0.gpu2", "n0.pcie_switch1", "n0.nic2", "leaf2", "n3.nic2",
                                             "n3.pcie_switch1", "n3.gpu2"]


@pytest.mark.parametrize("nodes,leaves,spines", [(16, 8, 4), (32, 8, 4), (33, 16, 8), (128, 32, 16), (200, 56, 32)])
def test_rail_optimized_counts(nodes, leaves, spines):
    """Rail-optimised, radix 64, o = 1: one leaf per rail per group of 32 nodes; the fewest spines that take
    every uplink (docs/cluster.md's table)."""
    c = kernbench.System.load(H100, set={"cluster.nodes": nodes}).cluster()
    assert (c["counts"]["leaves"], c["counts"]["spines"]) == (leaves, spines)
    assert all(x["up_links"] == 32 for x in c["leaves"])
    assert sum(x["down_links"] for x in c["leaves"]) == 8 * nodes


def test_fat_tree_and_three_tier_counts(tmp_path):
    """Fat-tree radix 8, o = 1 (4 down, 4 up): 10 NICs fill 3 leaves (the last partial); 3 tiers put 4 leaves in
    a pod, each with 4 spines, and join pods through cores."""
    c = one_gpu_system(tmp_path, nodes=10).cluster()
    assert (c["leaf_down"], c["leaf_up"], c["counts"]["leaves"]) == (4, 4, 3)
    assert [x["down_links"] for x in c["leaves"]] == [4, 4, 2]
    c3 = one_gpu_system(tmp_path, nodes=40, tiers=3).cluster()
    assert (c3["pods"], c3["counts"]["leaves"], c3["counts"]["spines"], c3["counts"]["cores"]) == (3, 10, 12, 16)


def test_rail_traffic_never_crosses_a_spine():
    """Rail-optimised: an all-to-all among the rail-0 GPUs of one group's nodes moves no byte over a spine."""
    s = kernbench.System.load(H100, set={"cluster.nodes": 6})
    for a in range(6):
        for b in range(6):
            if a != b:
                s.transfer(f"n{a}.gpu0", f"n{b}.gpu0", 1 << 20)
    s.run()
    assert channel_bytes(s, lambda a, b: a.startswith("leaf0") and b.startswith("n")) > 0
    assert channel_bytes(s, lambda a, b: "spine" in a or "spine" in b) == 0


def run_alltoall(system, pairs, nbytes):
    for a, b in pairs:
        system.transfer(f"n{a}.gpu0", f"n{b}.gpu0", nbytes)
    system.run()
    return system.now * 1e-12


def test_fat_tree_bisection_nic_rate_and_oversubscription(tmp_path):
    """Flow fabric, fat-tree radix 12: every GPU sends 4 MiB to every GPU on another leaf. Non-blocking
    (o = 1: 6 down, 6 up) each GPU sends at the NIC's 50 GB/s within 2 %; at o = 2 (8 down, 4 up) at half of it
    within 2 %; and alltoall_bound gives the simulated time within 1 %."""
    nbytes = 4 << 20
    for o, down, share in ((1, 6, 1.0), (2, 8, 0.5)):
        n = 4 * down
        s = one_gpu_system(tmp_path, nodes=n, radix=12, o=o)
        c = s.cluster()
        assert c["leaf_down"] == down
        leaf = c["nic_leaf"]
        pairs = [(a, b) for a in range(n) for b in range(n) if leaf[a] != leaf[b]]
        t = run_alltoall(s, pairs, nbytes)
        per_gpu = nbytes * (n - down) / t
        assert per_gpu == pytest.approx(share * 50e9, rel=0.02)
        bound = alltoall_bound(c, nbytes, scope="leaf")
        assert bound["time_s"] == pytest.approx(t, rel=0.01)
        assert bound["bottleneck"] == ("nic" if o == 1 else "leaf")


def test_uniform_alltoall_bound_is_exact(tmp_path):
    """A uniform all-to-all between every pair of nodes (non-blocking fat-tree, radix 8, 12 nodes): the bound's
    time (NIC cut: 11 x 2 MiB at 50 GB/s) matches the simulated time within 1 %."""
    nbytes = 2 << 20
    s = one_gpu_system(tmp_path, nodes=12)
    c = s.cluster()
    t = run_alltoall(s, [(a, b) for a in range(12) for b in range(12) if a != b], nbytes)
    bound = alltoall_bound(c, nbytes)
    assert bound["time_s"] == pytest.approx(11 * nbytes / 50e9, rel=1e-9)
    assert bound["time_s"] == pytest.approx(t, rel=0.01)


@pytest.mark.parametrize("yaml_text,where,what", [
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, nic: cx8}", "cluster.nic", "expected one of cx7-ndr-400"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, fabric: {radix: 1}}", "cluster.fabric.radix", "at least 2 ports"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, fabric: {oversubscription: 0}}", "cluster.fabric.oversubscription",
     "positive"),
    ("cluster: {nodes: 2, box: no-such-box}", "cluster.box", "no file for the preset"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch}\ngraph: {nodes: [], edges: []}", "graph", "either cluster or graph"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, nics_per_node: 9}", "cluster.nics_per_node", "has 8 GPUs"),
    ("cluster: {nodes: 300, box: h100-8x-nvswitch}", "cluster.nodes", "at most 256 nodes"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, fabric: {tiers: 4}}", "cluster.fabric.tiers", "2 or 3"),
    ("cluster: {nodes: 2, box: h100-8x-nvswitch, colour: red}", "cluster.colour", "unknown key"),
])
def test_bad_cluster_keys_are_named(yaml_text, where, what):
    """Bad cluster input fails with a ConfigError naming the YAML path and the reason."""
    with pytest.raises(kernbench.ConfigError) as e:
        kernbench.System.from_yaml(yaml_text, source="bad.yaml")
    assert where in str(e.value) and what in str(e.value)


def test_large_clusters_load_quickly_and_route():
    """128 nodes (1,024 GPUs) and 1,000 nodes (3 tiers) load in seconds; on 1,024 GPUs one route per source (to
    the node 64 away) takes well under a second, with equal-cost paths over several spines."""
    t0 = time.perf_counter()
    s = kernbench.System.load(H100, set={"cluster.nodes": 128})
    load128 = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(1024):
        s.route(f"n{i // 8}.gpu{i % 8}", f"n{(i // 8 + 64) % 128}.gpu{i % 8}")
    routes = time.perf_counter() - t0
    paths = s.route_paths("n0.gpu0", "n64.gpu0")
    assert len({n for p in paths for n in p["nodes"] if n.startswith("spine")}) > 1
    t0 = time.perf_counter()
    big = kernbench.System.load(H100, set={"cluster.nodes": 1000, "cluster.fabric.tiers": 3})
    load1000 = time.perf_counter() - t0
    assert big.cluster()["gpus"] == 8000
    assert load128 < 5 and load1000 < 20 and routes < 5


def test_show_large_cluster_is_quick(tmp_path):
    """kernbench show prints a cluster line and draws 1,000 nodes by tier (a layered layout) without a force layout."""
    from kernbench import show
    info = show.topology_summary(H100, ["cluster.nodes=16"])
    assert "cluster" in show.summary_text(info)
    t0 = time.perf_counter()
    out = show.draw(H100, ["cluster.nodes=1000", "cluster.fabric.tiers=3"], png=tmp_path / "c.png")
    assert out.exists() and time.perf_counter() - t0 < 60

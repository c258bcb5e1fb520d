"""NVLS across boxes (docs/ccl.md, "Across boxes"): NCCL's NVLS+tree and NVLS with IB SHARP on a cluster, checked
symbolically, against the bytes they must put on the scale-out links, against the NICs' bound, and in the tuner."""

from __future__ import annotations

import pytest

import kernbench
from kernbench import ccl

from cluster_boxes import write_cluster  # tests/python is on sys.path (no __init__.py)


@pytest.fixture
def cluster_path(tmp_path):
    return write_cluster(tmp_path, nodes=4, reducing=True)


@pytest.mark.parametrize("algorithm", ["nvls", "nvls_tree"])
@pytest.mark.parametrize("nodes", [2, 3, 5])
def test_nvls_across_boxes_computes_the_all_reduce(cluster_path, algorithm, nodes):
    """Every rank ends with the sum of every rank's buffer, each counted once (the symbolic check follows each
    switch's load-reduce into one rank, the network's reduction and the multicast back), odd box counts too."""
    system = kernbench.System.load(cluster_path, set={"cluster.nodes": nodes})
    r = ccl.all_reduce(system, 1 << 20, algorithm=algorithm, buffer="hbm", verify="on")
    assert r.verified and r.algorithm == algorithm
    assert {"nvls reduce", "nvls multicast"} <= set(r.phases)


def test_sharp_moves_each_part_once_up_and_once_down_each_nic(cluster_path):
    """With IB SHARP, part i of the buffer leaves each box once through NIC i to its rail's leaf, which reduces
    the boxes' parts and sends the sum once back down: the ib links carry 2 x boxes x B, against the ring's
    2 x boxes x 2(n-1)/n B."""
    nodes, size = 4, 8 << 20
    system = kernbench.System.load(cluster_path, set={"cluster.nodes": nodes})
    r = ccl.all_reduce(system, size, algorithm="nvls", buffer="hbm")
    assert r.link_bytes["ib"] == 2 * nodes * size
    n = 2 * nodes
    ring = ccl.all_reduce(system.twin(), size, algorithm="ring", buffer="hbm", protocol="simple")
    assert ring.link_bytes["ib"] == 2 * nodes * (2 * (n - 1) * size // n)


def test_sharp_over_two_leaves_sends_one_partial_sum_per_leaf_to_the_spine(cluster_path):
    """With radix 8 a rail-optimised group holds 4 boxes, so 8 boxes' rail-i NICs sit on two leaves and SHARP's
    tree is rooted at a spine: each leaf reduces its 4 heads' parts and sends one partial up, and receives the sum
    once: the ib links carry (2 x boxes + 2 x leaves) x B, not the 4 x boxes x B of every head sent to the spine."""
    nodes, size = 8, 4 << 20
    system = kernbench.System.load(cluster_path, set={"cluster.nodes": nodes, "cluster.fabric.radix": 8})
    info = system.cluster()
    assert len(info["spines"]) > 0
    r = ccl.all_reduce(system, size, algorithm="nvls", buffer="hbm", verify="on")
    assert r.verified
    assert r.link_bytes["ib"] == (2 * nodes + 2 * 2) * size


def test_sharp_runs_at_the_nics_rate_and_beats_the_ring(cluster_path):
    """A 256 MiB all-reduce over 4 boxes of 2 GPUs with nothing else in the way: SHARP moves each half of the buffer
    once out of and once into each box, through the NIC on its rail, so it takes B / (2 NICs x 50 GB/s) plus the
    fill of its pipeline of 4 MiB pieces; the ring moves 2(n-1)/n of it over the same NICs, 1.75x as long."""
    size = 256 << 20
    system = kernbench.System.load(cluster_path)
    info = system.cluster()
    bound = size / (info["nics_per_node"] * info["nic"]["line_rate_Bps"])
    sharp = ccl.all_reduce(system, size, algorithm="nvls", buffer="hbm")
    assert bound <= sharp.latency_ps * 1e-12 <= 1.1 * bound
    ring = ccl.all_reduce(system.twin(), size, algorithm="ring", buffer="hbm", protocol="simple")
    assert ring.latency_ps > 1.5 * sharp.latency_ps
    tree = ccl.all_reduce(system.twin(), size, algorithm="nvls_tree", buffer="hbm")
    assert sharp.latency_ps < tree.latency_ps


def test_the_tuner_offers_nvls_tree_across_boxes_and_sharp_only_where_the_network_reduces():
    """On 16 DGX H100 boxes the tuner prices NVLS+tree across boxes (2 log2(boxes) network steps) and, for large
    all-reduces, takes it; NVLS with SHARP only when the scale-out switches declare a reduction."""
    plain = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 16})
    rows = kernbench._core.nccl_tune(plain._core, "all_reduce", 1 << 30)
    algs = {r["algorithm"] for r in rows}
    assert "nvls_tree" in algs and "nvls" not in algs
    best = min(rows, key=lambda r: r["time_ps"])
    assert best["algorithm"] == "nvls_tree"
    small = min(kernbench._core.nccl_tune(plain._core, "all_reduce", 1 << 10), key=lambda r: r["time_ps"])
    assert small["algorithm"] in ("ring", "tree")
    sharp = kernbench.System.load("machines/dgx-h100-cluster.yaml",
                                  set={"cluster.nodes": 4, "cluster.fabric.reduction": "3.2 TB/s"})
    rows = kernbench._core.nccl_tune(sharp._core, "all_reduce", 1 << 30)
    by = {r["algorithm"]: r for r in rows}
    assert by["nvls"]["time_ps"] < by["nvls_tree"]["time_ps"]
    r = ccl.all_reduce(sharp, 1 << 26, algorithm="auto", buffer="hbm")
    assert r.algorithm == "nvls"


def test_nvls_across_boxes_refuses_what_it_cannot_run(cluster_path):
    """nvls across boxes without a reducing scale-out switch names the key to set; nvls_tree on one box says to
    use nvls, and on one GPU per box (a data-parallel group across boxes) that it needs two, which the tuner then
    does not offer (auto takes the tree)."""
    plain = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 2})
    with pytest.raises(kernbench._core.UsageError, match="cluster.fabric.reduction"):
        ccl.all_reduce(plain, 1 << 20, algorithm="nvls", buffer="hbm")
    pair = ["n0.gpu0", "n1.gpu0"]
    with pytest.raises(kernbench._core.UsageError, match="box of rank 0 holds only that rank"):
        ccl.all_reduce(plain, 1 << 20, algorithm="nvls_tree", buffer="hbm", pes=pair)
    assert ccl.all_reduce(plain, 1 << 30, algorithm="auto", buffer="hbm", pes=pair).algorithm != "nvls_tree"
    box = kernbench.System.load("machines/h100-8x-nvswitch.yaml")
    with pytest.raises(kernbench._core.UsageError, match="one box.*use nvls"):
        ccl.all_reduce(box, 1 << 20, algorithm="nvls_tree", buffer="hbm")


def test_nvls_tree_keeps_each_rail_on_its_own_nics_across_scalable_units():
    """Over 64 DGX H100 boxes (two rail-optimised groups of 32) a path between boxes leaves and enters through the
    GPUs' own NICs, never the other NIC of their PCIe switch (a network is addressed by NIC), and NVLS+tree puts
    half of each rail's part on each of NCCL's two trees (a head inner in one is a leaf in the other: at most twice
    the part through a NIC each way): so its time over 64 boxes is within 5 % of its time over 32."""
    c64 = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 64})
    for gpu in (0, 1):
        paths = c64.route_paths(f"n0.gpu{gpu}", f"n40.gpu{gpu}")
        assert len(paths) > 1
        assert all(p["nodes"][2] == f"n0.nic{gpu}" and p["nodes"][-3] == f"n40.nic{gpu}" for p in paths)
    c32 = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 32})
    t = {n: ccl.all_reduce(c, 1 << 30, algorithm="nvls_tree", buffer="hbm", fidelity="pipeline").latency_ps
         for n, c in ((32, c32), (64, c64))}
    assert t[64] <= 1.05 * t[32]

"""NCCL across the boxes of a cluster (docs/ccl.md, "Across boxes"): the ring against its alpha-beta closed form
with the boxes' NICs as the bottleneck, the tree's log2 latency, the tuner's choice, all-to-all bytes through the
NICs, gpu.nccl on a cluster machine, and the cluster-collectives bench."""

from __future__ import annotations

import json

import pytest

import kernbench
from kernbench import ccl
from kernbench.calibrate import REGISTRY

from cluster_boxes import write_cluster  # tests/python is on sys.path (no __init__.py)


@pytest.fixture
def cluster_path(tmp_path):
    return write_cluster(tmp_path, nodes=16)


def test_ring_across_16_nodes_is_the_alpha_beta_closed_form_with_the_nics_as_bottleneck(cluster_path):
    """A 1 GiB ring all-reduce over 16 boxes of 2 GPUs: 2(n-1) steps of the crossing route's latency plus
    2(n-1)/n of the buffer over the box's NIC rate (2 x 50 GB/s), within 1 % (one step per transfer, so the
    pipeline's per-step costs do not add)."""
    system = kernbench.System.load(cluster_path, set={"nccl.max_steps_per_transfer": 1})
    n = len(system.pes())
    assert n == 32
    size = 1 << 30
    r = ccl.all_reduce(system, size, algorithm="ring", buffer="hbm", protocol="simple")
    assert r.verified
    info = system.cluster()
    beta = info["nics_per_node"] * info["nic"]["line_rate_Bps"]
    route = system.route_info("n0.gpu0", "n1.gpu0")
    alpha = (route["wire_latency_ps"] + route["node_overhead_ps"]) * 1e-12
    closed = 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta
    assert r.latency_ps * 1e-12 == pytest.approx(closed, rel=0.01)
    # PXN keeps every crossing on its rail: no byte on a spine (16 nodes: one group, no spines at all), and the
    # bytes through the NICs are the ring's: each crossing of a box's boundary on two ib links.
    assert r.link_bytes["ib"] == 2 * 16 * (2 * (n - 1) * size // n)


def test_tree_latency_grows_as_log2_of_the_nodes_and_the_rings_linearly(cluster_path):
    """A 64 B all-reduce: each doubling of the boxes adds the same time to the tree (one more level of the tree
    over the boxes) and doubles what it adds to the ring (twice the network steps)."""
    tree, ring = {}, {}
    for nodes in (4, 8, 16, 32):
        system = kernbench.System.load(cluster_path, set={"cluster.nodes": nodes})
        t = ccl.all_reduce(system, 64, algorithm="double_binary_tree", buffer="hbm", protocol="simple")
        assert t.verified
        tree[nodes] = t.latency_ps
        ring[nodes] = ccl.all_reduce(system.twin(), 64, algorithm="ring", buffer="hbm", protocol="simple").latency_ps
    d = [tree[2 * k] - tree[k] for k in (4, 8, 16)]
    assert d[0] > 0
    assert d[1] == pytest.approx(d[0], rel=0.05) and d[2] == pytest.approx(d[0], rel=0.05)
    assert ring[32] - ring[16] == pytest.approx(2 * (ring[16] - ring[8]), rel=0.05)


def test_tuner_across_boxes_picks_the_tree_for_small_buffers_and_the_ring_for_large():
    """On 16 DGX H100 boxes (128 GPUs) NCCL's tuner prices the tree with log2(16) network steps: it wins small
    all-reduces; of the two, the ring (the NICs' full rate) beats the tree on large ones, and NVLS+tree (half the
    NICs' bytes of the ring's) takes them; NVLS with SHARP is not offered, as no switch outside the boxes reduces."""
    system = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 16})
    rows = kernbench._core.nccl_tune(system._core, "all_reduce", 64 << 10)
    best = min(rows, key=lambda r: r["time_ps"])
    assert best["algorithm"] == "tree"
    rows = kernbench._core.nccl_tune(system._core, "all_reduce", 4 << 30)
    assert min(rows, key=lambda r: r["time_ps"])["algorithm"] == "nvls_tree"
    classic = [r for r in rows if r["algorithm"] in ("ring", "tree")]
    assert min(classic, key=lambda r: r["time_ps"])["algorithm"] == "ring"
    assert not any(r["algorithm"] == "nvls" for r in rows)


def test_alltoall_across_boxes_moves_each_remote_block_through_two_nics(cluster_path):
    """A uniform all-to-all over 4 boxes of 2: each rank's block for each of the 6 ranks in other boxes crosses
    a NIC on each side (two ib links, on its rail by PXN); the box's own block stays on NVLink."""
    system = kernbench.System.load(cluster_path, set={"cluster.nodes": 4})
    n = 8
    size = n * (1 << 20)
    r = ccl.collective(system, "alltoall", size, algorithm="auto", buffer="hbm", protocol="simple")
    assert r.verified
    assert r.link_bytes["ib"] == 2 * n * (n - 2) * (size // n)
    assert r.link_bytes.get("spine", 0) == 0


def test_gpu_nccl_runs_on_a_cluster_up_to_its_gpus():
    """gpu.nccl on a 2-node DGX H100 cluster: all 16 GPUs, and more are refused naming the machine's count."""
    fn = REGISTRY.get("gpu.nccl")

    class Ctx:
        def load(self):
            return kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 2})

    got = fn.fn(Ctx(), collective="all_reduce", bytes=1 << 20, ranks=16)
    assert got["busbw"] == pytest.approx(got["algbw"] * 2 * 15 / 16)
    a2a = fn.fn(Ctx(), collective="alltoall", bytes=1 << 20, ranks=16)
    assert a2a["time"] > 0
    with pytest.raises(kernbench._core.UsageError, match="ranks = 17: the machine has 16 GPUs"):
        fn.fn(Ctx(), ranks=17)


def test_cluster_collectives_bench_smoke(tmp_path):
    """The bench's smoke run: one table per collective at 2 nodes, no failure, each all-to-all row beside the
    fabric's bound, which the model does not beat, and the scale targets (here 128 nodes on the flow fabric and 2 on
    the packet fabric) in scale.csv."""
    from kernbench.runner import run_bench

    out = tmp_path / "out"
    run_bench("cluster-collectives", out=out, sets=["bench.nodes=2", "bench.max_bytes=1048576",
                                                    "bench.packet_nodes=2"], quiet=True)
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["failures"] == []
    scale = (out / "scale.csv").read_text().splitlines()
    assert len(scale) == 3 and ",flow," in scale[1] and ",packet,16384," in scale[2]
    rows = sweep["results"]
    assert {r["collective"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter", "alltoall"}
    a2a = [r for r in rows if r["collective"] == "alltoall"]
    assert a2a and all(0 < r["vs_bound"] <= 1.0 for r in a2a)


def test_alltoall_with_uneven_counts_delivers_each_rank_exactly_what_is_sent_to_it(cluster_path):
    """An all-to-all of uneven per-destination counts over 3 boxes of 2 (an MoE dispatch): every rank receives
    exactly the column sum of the counts (the diagonal stays local), and the bytes through the NICs are the
    cross-box counts twice (a NIC on each side)."""
    system = kernbench.System.load(cluster_path, set={"cluster.nodes": 3})
    n = 6
    counts = [[(i * 7 + j * 13) % 5 * 65536 + 4096 * (j + 1) for j in range(n)] for i in range(n)]
    counts[2][5] = 0  # a pair with nothing to send
    r = ccl.collective(system, "alltoall", max(sum(row) for row in counts), algorithm="auto", buffer="hbm",
                       protocol="simple", counts=counts)
    assert r.received == [sum(counts[i][j] for i in range(n) if i != j) for j in range(n)]
    cross = sum(counts[i][j] for i in range(n) for j in range(n) if i // 2 != j // 2)
    assert r.link_bytes["ib"] == 2 * cross
    with pytest.raises(kernbench._core.UsageError, match="counts has 4 entries; 6 ranks need 6 x 6"):
        ccl.collective(system, "alltoall", 1 << 20, algorithm="auto", counts=[[1, 2], [3, 4]])
    with pytest.raises(kernbench._core.UsageError, match=r"counts\[0\]\[1\] = -1 is negative"):
        ccl.collective(system, "alltoall", 1 << 20, algorithm="auto", counts=[[0, -1] + [0] * 4] + [[0] * 6] * 5)
    with pytest.raises(kernbench._core.UsageError, match="counts .* are for alltoall, not all_reduce"):
        ccl.collective(system, "all_reduce", 1 << 20, algorithm="auto", counts=[[0] * 6] * 6)


def test_nccl_on_the_packet_fabric_does_not_hang_on_the_chunk_size():
    """NCCL gives each channel and peer a buffer of its own (runtime/ipcq.hpp), so the concurrent channels'
    segments fall on different lanes of a multi-connection link instead of all asking for the first one: a 256 MiB
    ring all-reduce over two DGX H100 boxes on the packet fabric is within 5 % of the flow fabric at 16 KiB chunks,
    and within 15 % at 1 MiB (4.1x the flow fabric's time while every queue's segments started at address 0)."""
    flow = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 2})
    ref = ccl.all_reduce(flow, 256 << 20, algorithm="ring", protocol="simple", buffer="hbm", fidelity="steps")
    for chunk, tol in (("16KiB", 0.05), ("1MiB", 0.15)):
        s = kernbench.System.load("machines/dgx-h100-cluster.yaml",
                                  set={"cluster.nodes": 2, "fabric.model": "packet", "fabric.chunk": chunk})
        r = ccl.all_reduce(s, 256 << 20, algorithm="ring", protocol="simple", buffer="hbm", fidelity="steps")
        assert r.latency_ps == pytest.approx(ref.latency_ps, rel=tol), chunk

"""Clusters (docs/cluster.md): the bound a fabric puts on a uniform all-to-all.

    info = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": 32}).cluster()
    b = kernbench.cluster.alltoall_bound(info, 1 << 20)   # 1 MiB between every pair of GPUs on different nodes
    b["per_gpu_Bps"], b["bottleneck"]

The traffic model is the rail-matched one NCCL's all-to-all arranges (PXN): node a's bytes for node b split evenly
over the rails, rail j leaving through NIC (a, j) and arriving at NIC (b, j). Each cut -- every NIC, every leaf's
uplinks, every pod's uplinks (3 tiers) -- carries the bytes whose source is inside it and destination outside; its
time is those bytes over its capacity, and the bound is the slowest cut. Inside a node (NVLink) nothing is counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def alltoall_bound(info: dict[str, Any], bytes_per_pair: int, scope: str = "node") -> dict[str, Any]:
    """The time bound of a uniform all-to-all of ``bytes_per_pair`` between every ordered pair of GPUs on
    different nodes (``scope="node"``) or on nodes whose rail NICs sit on different leaves (``scope="leaf"``),
    from ``System.cluster()``. Returns time_s, per_gpu_Bps (bytes each GPU sends / time_s), the time of each cut
    (nic, leaf and, with 3 tiers, pod) and the bottleneck cut."""
    from kernbench._core import UsageError
    from kernbench.args import SIZE

    if scope not in ("node", "leaf"):
        raise UsageError(f"alltoall_bound: scope is 'node' or 'leaf', got {scope!r}")
    SIZE(bytes_per_pair, "alltoall_bound", "bytes_per_pair")  # a whole byte count >= 0: -1 or NaN is refused
    n, g, r = info["nodes"], info["gpus_per_node"], info["nics_per_node"]
    rate = info["nic"]["line_rate_Bps"]
    leaf_of = info["nic_leaf"]
    flow = g * g * bytes_per_pair / r            # bytes on rail j from node a to node b
    on_leaf = Counter((leaf_of[a * r + j], j) for a in range(n) for j in range(r))
    pod_of = {i: s["pod"] for i, s in enumerate(info["leaves"])}
    on_pod = Counter((pod_of[leaf_of[a * r + j]], j) for a in range(n) for j in range(r))
    # Destinations of NIC (a, j): the other nodes' rail-j NICs, or with scope=leaf those on other leaves.
    def dests(a: int, j: int) -> int:
        return n - 1 if scope == "node" else n - on_leaf[(leaf_of[a * r + j], j)]
    nic_t = max((dests(a, j) * flow / rate for a in range(n) for j in range(r)), default=0.0)
    leaf_t = 0.0
    for i, s in enumerate(info["leaves"]):
        out = sum(c * (n - c) * flow for (leaf, j), c in on_leaf.items() if leaf == i)
        if out:
            leaf_t = max(leaf_t, out / (s["up_Bps"] or float("inf")))
    cuts = {"nic": nic_t, "leaf": leaf_t}
    if info["tiers"] == 3 and info["pods"] > 1:
        pod_cap = Counter()
        for s in info["spines"]:
            pod_cap[s["pod"]] += s["up_Bps"]
        pod_t = 0.0
        for p in range(info["pods"]):
            out = sum(c * (n - c) * flow for (pod, j), c in on_pod.items() if pod == p)
            if out:
                pod_t = max(pod_t, out / pod_cap[p])
        cuts["pod"] = pod_t
    t = max(cuts.values())
    if scope == "node":
        sent = bytes_per_pair * (n - 1) * g
    else:   # every GPU of a node sends to the GPUs of the nodes whose NICs are on other leaves (uniform trees)
        sent = bytes_per_pair * dests(0, 0) * g
    return {"time_s": t, "per_gpu_Bps": sent / t if t else float("inf"), "cuts_s": cuts,
            "bottleneck": max(cuts, key=cuts.get), "bytes_per_gpu": sent}

"""The zero-latency cluster of the closed-form tests of NCCL across boxes (test_cluster_nccl.py,
test_cluster_nvls.py): boxes of two GPUs on one switch, no latency anywhere and NCCL's fixed costs at zero, so what
is left of a collective's time is its bytes over the links (and the pipeline's node overheads).

``write_cluster(directory, nodes, reducing)`` writes the box and the cluster file and returns the cluster's path;
``reducing`` declares in-network reduction on the box's switch (NVLS) and on every scale-out switch (IB SHARP).
"""

from __future__ import annotations

from pathlib import Path

BOX2 = """
graph:
  nodes:
    - {{name: gpu0, kind: pe, overhead: 0 ns, memory: hbm0, transit: false}}
    - {{name: gpu1, kind: pe, overhead: 0 ns, memory: hbm1, transit: false}}
    - {{name: hbm0, kind: memory, overhead: 0 ns}}
    - {{name: hbm1, kind: memory, overhead: 0 ns}}
    - {{name: nvsw, kind: switch, overhead: 0 ns{reduction}}}
  edges:
    - {{a: gpu0, b: hbm0, class: hbm, bandwidth: 10000 GB/s, latency: 0 ns}}
    - {{a: gpu1, b: hbm1, class: hbm, bandwidth: 10000 GB/s, latency: 0 ns}}
    - {{a: gpu0, b: nvsw, class: nvlink, bandwidth: 400 GB/s, latency: 0 ns}}
    - {{a: gpu1, b: nvsw, class: nvlink, bandwidth: 400 GB/s, latency: 0 ns}}
pe:
  target: gpu
  clock: 1 GHz
  vector_bytes_per_cycle: 1048576   # reductions far faster than the links
  ipcq: {{channels: 4, slots: 8, slot: 512 KiB, credit: instant}}   # no credit messages among the bytes counted
fabric: {{model: flow, multipath: spread}}
nccl: {{call_host: 0 ns, ll_base: 0 ns, ll128_base: 0 ns, simple_base: 0 ns, nvls_base: 0 ns, ll_step: 0 ns,
       ll128_step: 0 ns, simple_step: 0 ns, net_ll_step: 0 ns, net_ll128_step: 0 ns, net_simple_step: 0 ns,
       link_efficiency: 1}}
"""

CLUSTER = """
cluster:
  nodes: {nodes}
  box: box2.yaml
  nic: cx7-ndr-400
  fabric: {{kind: rail-optimized, tiers: 2, radix: 64, oversubscription: 1, link_latency: 0 ns,
           switch_overhead: 0 ns{reduction}}}
"""


def write_cluster(directory: Path, nodes: int, reducing: bool = False) -> Path:
    """The box and the cluster file in ``directory``; the cluster's path."""
    (directory / "box2.yaml").write_text(BOX2.format(reduction=", reduction: {bandwidth: 100 TB/s}" if reducing
                                                     else ""))
    path = directory / "c.yaml"
    path.write_text(CLUSTER.format(nodes=nodes, reduction=", reduction: 100 TB/s" if reducing else ""))
    return path

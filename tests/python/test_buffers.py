"""Finite buffers from Python: the YAML keys, --set overrides, the deadlock error, the default machine."""

from __future__ import annotations

import pytest

import kernbench

RING = """
graph:
  nodes:
{nodes}
  edges:
{edges}
fabric: {{model: packet, chunk: 64 B, flit: 64 B}}
"""


def _ring(buffer: str, vcs: int = 1) -> str:
    nodes = "\n".join(f"    - {{name: n{i}, kind: router, overhead: 0 ns}}" for i in range(5))
    edges = "\n".join(f"    - {{a: n{i}, b: n{(i + 1) % 5}, bandwidth: 256 GB/s, latency: 0.5 ns, "
                      f"buffer: {buffer}, vcs: {vcs}}}" for i in range(5))
    return RING.format(nodes=nodes, edges=edges)


def test_ring_deadlock_is_a_deadlock_error_naming_the_cycle():
    """A one-VC ring with wrap-around traffic fills its buffers: DeadlockError names every channel of the cycle."""
    s = kernbench.System.from_yaml(_ring("1 flit"))
    for i in range(5):
        s.transfer(f"n{i}", f"n{(i + 2) % 5}", 4096)
    with pytest.raises(kernbench.DeadlockError) as e:
        s.run()
    for i in range(5):
        assert f"n{i}->n{(i + 1) % 5} vc0" in str(e.value)


def test_unbounded_ring_finishes():
    """The same traffic with unbounded buffers completes."""
    s = kernbench.System.from_yaml(_ring("unbounded"))
    for i in range(5):
        s.transfer(f"n{i}", f"n{(i + 2) % 5}", 4096)
    s.run()
    assert all(e >= 0 for e in s.transfers()["end_ps"])


def test_bad_buffer_is_a_config_error_naming_the_key():
    """A buffer that is neither unbounded, a flit count nor a size is refused with its YAML path."""
    with pytest.raises(kernbench.ConfigError, match=r"graph.edges\[0\].buffer.*expected unbounded"):
        kernbench.System.from_yaml(_ring("lots"))


def test_default_machine_is_buffered_and_set_can_unbound_it():
    """The shipped machine buffers its router links; --set links.noc.buffer=unbounded and a pipeline override load."""
    s = kernbench.System.load(set={"links.noc.buffer": "unbounded", "links.pe.buffer": "64 flits",
                                   "nodes.router.pipeline.route": 2})
    assert len(s.pes()) == 512
    with pytest.raises(kernbench.ConfigError, match="fewer than one chunk"):
        kernbench.System.load(set={"links.noc.buffer": "8 flits"})  # 512 B < the 4 KiB chunk

"""A faster link can make a collective slower, and kernbench says why (docs/ccl.md, "Faster links, slower
collective"). On one SIP of the default machine (128 PEs, 1 MiB per PE, buffer="hbm"), raising UCIe from 256 to
512 GB/s raises lrab's and torus2d's all-reduce latency: the receivers' IPCQ slots and receive ports, shared by
several streams and served first come first served, are what the critical path waits for longer."""
from __future__ import annotations

import pytest

import kernbench
from kernbench import System, critical_path


def run(algorithm: str, ucie: str):
    s = System.load(set={"system.sips.w": 1, "system.sips.h": 1, "links.ucie.bandwidth": ucie})
    r = kernbench.ccl.all_reduce(s, 1 << 20, algorithm=algorithm, buffer="hbm")
    return r.latency_ps, critical_path.of(r.run).share_ps


@pytest.mark.parametrize("algorithm,waits", [("lrab", ("wait:resource:ipcq_slots",)),
                                             ("torus2d", ("engine:ipcq_rx",))])
def test_faster_ucie_slower_all_reduce_and_the_waits_that_grow(algorithm, waits):
    """The rise is reproduced (it is the mechanism, not noise: runs are deterministic), and the receive-side waits
    named in the docs grow on the critical path by more than the latency rises, while the UCIe links themselves are
    under 1 % of the path at either rate (they are not the bottleneck: making them faster cannot help)."""
    t256, cp256 = run(algorithm, "256 GB/s")
    t512, cp512 = run(algorithm, "512 GB/s")
    assert t512 > t256
    grew = sum(cp512.get(w, 0) - cp256.get(w, 0) for w in waits)
    assert grew > t512 - t256, (grew, t512 - t256)
    assert cp256.get("link:ucie", 0) < 0.01 * t256 and cp512.get("link:ucie", 0) < 0.01 * t512

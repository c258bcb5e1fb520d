"""In-network reduction (issue 18 item 4): the nvls all-reduce on the HGX H100 preset, and what a box without
reducing switches says."""

from __future__ import annotations

import pytest

import kernbench
from kernbench import ccl
from kernbench.system import config_path

H100 = "machines/h100-8x-nvswitch.yaml"
A100 = "machines/a100-8x-nvswitch.yaml"


def test_nvls_on_h100_is_verified_and_beats_ring():
    """On the H100 box (NVSwitch gen3 declares reduction) nvls is verified, and at a size where its fixed cost is paid
    back (256 MiB) it is faster than the ring."""
    size = 256 << 20
    s = kernbench.System.load(config_path(H100))
    nv = ccl.all_reduce(s, size, algorithm="nvls", verify="on")
    assert nv.verified and nv.ranks == 8
    # A GPU machine cuts NVLS into NCCL's pieces (nccl.nvls_chunk, 4 MiB): 64 pieces x the 4 NVSwitch chips.
    assert nv.op_counts["switch_reduce"] == 64 * 4
    # Each GPU sends its buffer once and receives it once over NVLink.
    assert nv.link_bytes["nvlink"] == 2 * 8 * size
    ring = ccl.all_reduce(kernbench.System.load(config_path(H100)), size, algorithm="ring")
    assert nv.latency_ps < ring.latency_ps


def test_nvls_in_a_user_program():
    """Program.all_reduce(algorithm="nvls") appends the in-network schedule as one handle."""
    s = kernbench.System.load(config_path(H100))
    prog = kernbench.Program(s, "nvls in a program")
    h = prog.all_reduce(s.pes(), 1 << 20, algorithm="nvls", pieces=2)
    prog.barrier(s.pes()[0], deps=[h])
    res = prog.run()
    assert res.makespan_ns > 0


def test_nvls_without_a_reducing_switch_names_what_is_missing():
    """The A100 box's NVSwitch gen2 does no in-network reduction: nvls fails naming the key."""
    a100 = config_path(A100)
    if not a100.exists():
        pytest.skip("no A100 preset")
    s = kernbench.System.load(a100)
    with pytest.raises(kernbench.KernbenchError, match=r"nvls needs an in-network reducing switch.*declares "
                                                       r"reduction: \{bandwidth: \.\.\.\}"):
        ccl.all_reduce(s, 1 << 20, algorithm="nvls")


def test_reduction_only_on_switch_nodes():
    """`reduction:` on a node that is not a switch is a config error naming the YAML path."""
    text = ("graph:\n  nodes:\n    - {name: a, kind: pe, overhead: 0 ns, reduction: {bandwidth: 1 TB/s}}\n"
            "    - {name: b, kind: pe, overhead: 0 ns}\n  edges:\n"
            "    - {a: a, b: b, bandwidth: 100 GB/s, latency: 1 ns}\n")
    with pytest.raises(kernbench.ConfigError, match=r"graph\.nodes\[0\]\.reduction.*only a switch node reduces"):
        kernbench.System.from_yaml(text, source="t.yaml")

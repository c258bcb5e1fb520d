"""kernbench.cli_check: the dry check of a command line that test_doc_snippets.py runs on the docs' commands. It
accepts what the CLI accepts and refuses, with the CLI's own error, what the CLI would refuse up front -- without
running anything."""
from __future__ import annotations

import pytest

from kernbench._core import ConfigError, KernbenchError, UsageError
from kernbench.cli_check import check_command


def test_good_commands_pass_without_running(tmp_path):
    """Commands as the docs write them pass, and nothing is written: the out folders named stay absent."""
    out = tmp_path / "o"
    assert check_command(["run", "--bench", "pe-dma-perf", "--set", "fabric.model=flow", "--out", str(out)])
    assert check_command(["run", "--bench", "perf-phold", "--set", "bench.events=1e6",
                          "--set", "bench.populations=1024x1"])
    assert check_command(["sweep", "--bench", "pe-dma-perf", "--smoke", "--grid",
                          "links.ucie.bandwidth=64 GB/s,128 GB/s", "--out", str(out)]).startswith("sweep pe-dma-perf")
    assert check_command(["validate", "configs/topology.yaml", "--set", "system.sips.w=4"])
    assert check_command(["goldens", "--update", "--bench", "pe-dma-perf"]) == "goldens"
    assert check_command(["calibrate", "--data", "measured.yaml", "--free",
                          "k200.compute.fp32_efficiency=30..90"]) == "calibrate: 1 --free checked"
    assert not out.exists()


@pytest.mark.parametrize("argv, error, words", [
    (["run", "--bench", "no-such-bench"], ConfigError, "no-such-bench"),
    (["run", "--bench", "perf-phold", "--set", "bench.nope=1"], ConfigError, "unknown parameter 'nope'"),
    (["run", "--bench", "pe-dma-perf", "--set", "system.sips.w=two"], ConfigError, "system.sips.w"),
    (["run", "--bench", "pe-dma-perf", "--config", "no/such.yaml"], ConfigError, "no such config file"),
    (["run", "--bench", "perf-phold", "--seed", "-1"], ConfigError, "--seed"),
    (["run", "--bnech", "perf-phold"], UsageError, "--bnech"),
    (["sweep", "--bench", "pe-dma-perf", "--grid", "links.ucie.bandwidth=64 GB/s,fast"], ConfigError,
     "links.ucie.bandwidth"),
    (["sweep", "--bench", "noc-load-latency", "--grid", "bench.packet_flits=1,four"], ConfigError,
     "bench.packet_flits"),
    (["calibrate", "--data", "m.yaml", "--free", "k200.compute.nope=1..2"], KernbenchError, "unknown config path"),
    (["describe", "pe-dma-perv"], ConfigError, "pe-dma-perv"),
    (["serve", "--model", "llama9", "--config", "machines/h100-8x-nvswitch.yaml"], ConfigError, "llama9"),
])
def test_bad_commands_are_refused(argv, error, words):
    """Each bad command is refused with the error class the CLI raises and a message naming what is wrong."""
    with pytest.raises(error, match=None) as e:
        check_command(argv)
    assert words in str(e.value), str(e.value)

"""The GPU-box presets (configs/machines/*.yaml): they validate, have 8 GPU PEs, follow the published wiring."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernbench import ccl, provenance
from kernbench.config import validate
from kernbench.system import System

MACHINES = Path(__file__).resolve().parents[2] / "configs" / "machines"
PRESETS = ["h100-8x-nvswitch", "h200-8x-nvswitch", "a100-8x-nvswitch", "l40s-8x-pcie"]
SHARED = ["nvidia-gpu"]  # included by every preset: the GPU target's mechanism parameters, not a machine
CLUSTERS = ["dgx-h100-cluster", "dgx-a100-cluster"]  # boxes of these presets on a fabric: tests/python/test_cluster.py
GPUS = [f"gpu{i}" for i in range(8)]


def _path(name: str) -> Path:
    return MACHINES / f"{name}.yaml"


def _doc(name: str) -> dict:
    """The preset's own YAML with values in place of their provenance records (kernbench.provenance.plain)."""
    return provenance.plain(yaml.safe_load(_path(name).read_text()))


def _links_per_switch(doc: dict, gpu: str, cls: str = "nvlink") -> dict[str, int]:
    """Links (edge connections) from ``gpu`` to each switch over edges of class ``cls``, read from the config."""
    out: dict[str, int] = {}
    for e in doc["graph"]["edges"]:
        if e.get("class") == cls and gpu in (e["a"], e["b"]):
            other = e["b"] if e["a"] == gpu else e["a"]
            out[other] = out.get(other, 0) + int(e.get("connections", 1))
    return out


def test_presets_are_all_here():
    """The presets and their shared mechanism file exist, and no other file hides in the folder untested."""
    assert sorted(p.stem for p in MACHINES.glob("*.yaml") if not p.name.endswith(".measured.yaml")) == \
        sorted(PRESETS + SHARED + CLUSTERS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_validates_and_loads(name):
    """`kernbench validate` accepts the preset (strict schema), and it loads by its packaged name."""
    summary = validate(_path(name))
    assert summary is not None
    system = System.load(f"machines/{name}.yaml")
    kinds = dict(zip(system.nodes()["name"], system.nodes()["kind"]))
    assert [n for n, k in kinds.items() if k == "pe"] == GPUS  # the GPUs, and only they, compute
    assert [n for n, k in kinds.items() if k == "cpu"] == ["cpu0", "cpu1"]  # host CPUs are not PEs


@pytest.mark.parametrize("name", PRESETS)
def test_preset_pes_are_the_8_gpus(name):
    """System.pes() gives exactly the 8 GPUs, in rank order, each with its own HBM; the host CPUs are not PEs."""
    system = System.load(f"machines/{name}.yaml")
    assert list(system.pes()) == GPUS
    assert [system.memory_of(g) for g in GPUS] == [f"hbm{i}" for i in range(8)]


def test_h100_nvswitch_wiring_is_the_published_uneven_one():
    """HGX H100: every GPU has 18 NVLink4 links, 5/4/4/5 to the four NVSwitches, at 25 GB/s per direction each."""
    doc = _doc("h100-8x-nvswitch")
    for gpu in GPUS:
        per = _links_per_switch(doc, gpu)
        assert per == {"nvswitch0": 5, "nvswitch1": 4, "nvswitch2": 4, "nvswitch3": 5}, gpu
        assert sum(per.values()) == 18
    assert doc["links"]["nvlink"]["bandwidth"] == "25 GB/s"  # stated once, for every nvlink edge
    built = System.load("machines/h100-8x-nvswitch.yaml").explicit_graph()["edges"]
    rates = {e["bandwidth"] for e in built if e["class"] == "nvlink"}
    assert rates == {"25 GB/s"}  # 18 x 25 GB/s x 2 directions = 900 GB/s per GPU


def test_a100_nvswitch_wiring():
    """HGX A100: every GPU has 12 NVLink3 links, 2 to each of the six NVSwitches (600 GB/s bidirectional)."""
    doc = _doc("a100-8x-nvswitch")
    for gpu in GPUS:
        assert _links_per_switch(doc, gpu) == {f"nvswitch{j}": 2 for j in range(6)}, gpu


def test_pcie_box_has_no_nvlink_and_pairs_gpus_per_switch():
    """The L40S box: no NVLink; PCIe switches hold 2 GPUs each, under 2 sockets joined by a socket link."""
    doc = _doc("l40s-8x-pcie")
    assert not [e for e in doc["graph"]["edges"] if e["class"] == "nvlink"]
    for i, gpu in enumerate(GPUS):
        assert _links_per_switch(doc, gpu, "pcie") == {f"pcie_switch{i // 2}": 1}
    assert [(e["a"], e["b"]) for e in doc["graph"]["edges"] if e["class"] == "socket"] == [("cpu0", "cpu1")]


@pytest.mark.parametrize("name,tflops,clock_mhz", [("h100-8x-nvswitch", 989.4, 1830),
                                                   ("a100-8x-nvswitch", 312.0, 1410),
                                                   ("l40s-8x-pcie", 362.05, 2520)])
def test_preset_peak_fp16_matches_the_datasheet(name, tflops, clock_mhz):
    """pe.clock x pe.gemm.fp16 MACs x 2 is the datasheet's dense FP16 tensor peak (within 0.5 %)."""
    pe = _doc(name)["pe"]
    assert pe["clock"] == f"{clock_mhz} MHz"
    assert pe["gemm"]["fp16"] * 2 * clock_mhz * 1e6 == pytest.approx(tflops * 1e12, rel=5e-3)


@pytest.mark.parametrize("name", PRESETS)
def test_every_value_cites_a_source_or_says_assumed(name):
    """Each pe: key line and each first edge of a class carries a comment naming a [source] or `assumed`, or
    declares its provenance beside the value (a datasheet record naming a [source], or an assumed one)."""
    lines = _path(name).read_text().splitlines()
    start = lines.index("pe:")
    for line in lines[start + 1:]:
        if line.strip().startswith("#") or ":" not in line or line.strip().endswith(":"):
            continue
        comment = line.partition("#")[2]
        declared = ("datasheet: \"[" in line) or ("assumed: \"" in line)
        assert "[" in comment or "assumed" in comment or declared, f"{name}: uncited value: {line.strip()}"
    nodes = [ln for ln in lines if ln.strip().startswith("- {name:")]
    kinds_seen: set[str] = set()
    for ln in nodes:  # the first node of each family carries the note
        family = ln.split("name:")[1].split(",")[0].strip().rstrip("0123456789")
        if family not in kinds_seen:
            kinds_seen.add(family)
            assert "#" in ln, f"{name}: node family {family} without a source"


@pytest.mark.parametrize("name", PRESETS)
def test_ring_all_reduce_runs_and_verifies_on_preset(name):
    """The ring all-reduce runs on the preset's 8 GPUs and passes the symbolic check."""
    r = ccl.all_reduce(System.load(f"machines/{name}.yaml"), 1 << 20, algorithm="ring", pes=GPUS, verify="on")
    assert r.verified and r.ranks == 8 and r.latency_ps > 0
    on_nvlink = r.link_bytes.get("nvlink", 0)
    if name.endswith("nvswitch"):  # GPU-to-GPU traffic takes NVLink, never PCIe (routing by latency)
        assert on_nvlink > 0 and r.link_bytes.get("pcie", 0) == 0

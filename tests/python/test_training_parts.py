"""The parts of a training step beyond GEMMs: attention forward and backward kernels by implementation
(kernbench.workloads.gpu_kernels), the measurement functions and the data file of the training-parts rows."""

from pathlib import Path

import pytest

from kernbench import System, _core
from kernbench.calibrate import REGISTRY, check, load_data
from kernbench.calibrate.gpu_parts_functions import KERNEL_RECIPES, kernel_list
from kernbench.workloads.gpu_kernels import (ATTENTION_KERNELS, BACKWARD_FLOPS, QUERY_TILE, attention_plan,
                                             run_keys)
from kernbench.workloads.graph import WorkloadError

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "configs/machines/h100-8x-nvswitch.yaml"
DATA = ROOT / "configs/machines/h100-training-parts.measured.yaml"


@pytest.fixture(scope="module")
def h100():
    return System.load(str(H100))


def _plans(system, impl, s=4096, d=128, causal=False):
    gpu = system.pes()[0]
    return [attention_plan(system, gpu, 4, 16, 16, s, s, d, 2, causal, "bf16", impl, p) for p in ("forward", "backward")]


@pytest.mark.parametrize("impl", sorted(ATTENTION_KERNELS))
@pytest.mark.parametrize("causal", [False, True])
def test_the_backward_does_2_5x_the_forwards_flops(h100, impl, causal):
    """The backward kernel's FLOPs are BACKWARD_FLOPS (2.5) x the forward's exactly: five matmuls of the
    forward's two, the scores recomputed; the forward's FLOPs are the C++ model's 4 b h s keys d."""
    fwd, bwd = _plans(h100, impl, causal=causal)
    assert BACKWARD_FLOPS == 2.5
    keys = (4096 + 1) / 2 if causal else 4096
    assert fwd["flops"] == 4 * 4 * 16 * 4096 * keys * 128
    assert bwd["flops"] == BACKWARD_FLOPS * fwd["flops"]


@pytest.mark.parametrize("impl", sorted(ATTENTION_KERNELS))
def test_the_backward_runs_at_its_own_efficiency(h100, impl):
    """The backward's compute over the forward's is 2.5 x (run keys + its fixed cost) / (run keys + the forward's)
    x the forward's efficiency over the backward's: its own curve, not the forward's at 2.5x."""
    p = ATTENTION_KERNELS[impl]
    for s in (512, 16384):
        fwd, bwd = _plans(h100, impl, s=s)
        want = BACKWARD_FLOPS * (s + p["fixed_keys"]["backward"]) / (s + p["fixed_keys"]["forward"]) \
            * p["efficiency"]["forward"] / p["efficiency"]["backward"]
        assert bwd["compute_ps"] / fwd["compute_ps"] == pytest.approx(want, rel=1e-6)
        assert bwd["duration_ps"] > BACKWARD_FLOPS * fwd["duration_ps"] * 0.9


def test_short_sequences_run_below_the_long_ones_rate(h100):
    """At a fixed 16k tokens the kernel's TFLOPS rises with the sequence (its fixed cost per CTA shrinks against
    the keys), forward and backward, and a causal mask costs more per useful FLOP (whole diagonal tiles)."""
    def tflops(s, causal, which):
        plan = _plans(h100, "fa2", s=s, causal=causal)[which]
        return plan["flops"] / plan["duration_ps"]
    for which in (0, 1):
        rates = [tflops(s, False, which) for s in (512, 2048, 8192)]
        assert rates == sorted(rates) and rates[0] < 0.95 * rates[-1]
    assert tflops(1024, True, 0) < tflops(1024, False, 0)
    assert run_keys(512, 512, True) == QUERY_TILE * (4 + 1) / 2 and run_keys(512, 512, False) == 512


def test_decode_has_no_backward_and_an_unknown_implementation_is_named(h100):
    """A decode-shaped attention (one query) has no backward kernel, and an unknown attention implementation is refused
    naming the known ones."""
    gpu = h100.pes()[0]
    with pytest.raises(WorkloadError, match="decode kernel has no backward"):
        attention_plan(h100, gpu, 1, 8, 8, 1, 1024, 128, 2, True, "bf16", "fa2", "backward")
    with pytest.raises(WorkloadError, match="implementation 'fa9'.*fa2"):
        attention_plan(h100, gpu, 1, 8, 8, 512, 512, 128, 2, True, "bf16", "fa9")
    assert _core.gpu_attention(h100._core, gpu, 1, 8, 8, 1, 1024, 128, 2, True, "bf16")["decode"]


def test_kernel_recipes_count_the_benchmarks_sum_between_forward_and_backward():
    """forward_backward is the forward, one read of the output (out.sum()) and the backward, kernel by kernel."""
    for kernel, impl in KERNEL_RECIPES:
        f, b = kernel_list(kernel, impl, "forward"), kernel_list(kernel, impl, "backward")
        assert kernel_list(kernel, impl, "forward_backward") == f + [(1, 0)] + b


def test_the_data_file_holds_the_reference_rows_and_names_what_it_leaves_out():
    """At least 150 of the page's 157 ids are rows or named as left out with a reason; every tolerance <= 20 %;
    the functions the rows call are registered."""
    ds = load_data(DATA)
    ids = {r.id.rstrip("b") if r.id.endswith("003b") else r.id for r in ds.rows}
    page = [ln.split("|")[1].strip() for ln in (ROOT.parent / "shared/reference/training-parts.md").read_text()
            .splitlines() if ln.startswith("| tp-")] if (ROOT.parent / "shared/reference/training-parts.md").exists() \
        else []
    left = [ln.split(":")[0].strip("# ") for ln in DATA.read_text().splitlines() if ln.startswith("#   tp-")]
    assert len(ids) + len(left) == 157 and not ids & set(left)
    if page:
        assert set(page) == ids | set(left)
    assert all(r.tolerance is not None and r.tolerance <= 0.2 for r in ds.rows)
    for name in ("gpu.attention", "gpu.kernel", "gpu.optimizer", "gpu.clock"):
        assert REGISTRY.get(name) is not None


def test_the_attention_rows_are_within_their_tolerance():
    """Every attention row of the data file (fitted and predicted: the fwd+bwd campaign is not fitted) within
    20 %, except tp-att-131 (a devgpu H100 whose maintainer attributes its ~25 % deficit to the machine)."""
    res = check(str(H100), str(DATA), config=str(H100))
    att = [r for r in res["rows"] if r["id"].startswith("tp-att")]
    assert len(att) == 105
    assert [r["id"] for r in att if not r["within"]] == ["tp-att-131"]
    fwdbwd = [r for r in att if r["group"] == "att-fa2-v2-fwdbwd"]
    assert len(fwdbwd) == 24 and all(r["role"] == "predicted" and abs(r["error"]) < 0.1 for r in fwdbwd)

"""The K200 model's known misses and its C4 calibration, pinned so that drift shows in both directions.

Each figure's current relative error (model - measured) / measured is pinned to within 1.5 points:
a change that improves a miss fails here as loudly as one that worsens it, and the pin is then moved
on purpose (with the reason in the commit). C4 is pinned after its calibration (two parameters, the
operand scan's byte and element rates, fitted on all 12 points; scripts/calibrate_k200.sh), with the
issue's targets: every
point within 15 %, the FP16/FP32 ratio within 10 % at every batch, leave-one-batch-out within 20 %.
"""

from __future__ import annotations

import json

import pytest

from kernbench import k200, references, validation
from kernbench.system import config_path

PIN = 0.015  # 1.5 points of relative error

#: reference key -> pinned relative error (the model's value today)
KNOWN_MISSES = {
    # FP16 at K = 8192 spills like FP32 does (one spill_penalty for both precisions, fitted on FP32 4096^3);
    # the measured FP16 drop is milder.
    "K200 GEMM: fp16 M=N=K=8192": -0.2895,
    "K200 GEMM: fp16 M=N=2048, K=8192": -0.2465,
    # A K = 128 GEMM pays the operand scan over A and B for little compute: FP16 lands low.
    "K200 GEMM: fp16 M=N=2048, K=128": -0.2212,
    # One eDMA per 4 KiB page: the H2D read's round trip is fitted on the stock driver, not on this path.
    "K200 copy bandwidth: page pinning (per-page eDMA) h2d 64 MiB": -0.2474,
}

#: former misses a mechanism fixed: reference key -> pinned relative error, now within tolerance
FIXED_MISSES = {
    # D2D's completion is usleep_range(10 us, 1 ms) waking at the low end (k200.d2d.wake): a 64 MiB copy
    # (1.008 ms) is seen at 1.010 ms; the first model's sleep doubling from 10 us saw it at 1.27 ms (-20.6 %).
    "K200 copy bandwidth: d2d one die 64 MiB": -0.0019,
}

C4_PINNED = {
    ("baseline", 32): 0.0203, ("fp16", 32): 0.0040, ("pinned", 32): 0.0312, ("fp16 pinned", 32): 0.0226,
    ("baseline", 64): -0.0046, ("fp16", 64): -0.0060, ("pinned", 64): 0.0040, ("fp16 pinned", 64): 0.0159,
    ("baseline", 128): -0.0494, ("fp16", 128): -0.0319, ("pinned", 128): -0.0381, ("fp16 pinned", 128): -0.0139,
}


@pytest.fixture(scope="module")
def rows():
    wanted = set(KNOWN_MISSES) | set(FIXED_MISSES) | {f"K200 end to end (C4): C4 {v}, batch {b}" for v, b in C4_PINNED}
    refs = [r for r in references.all_references() if r.key in wanted]
    assert {r.key for r in refs} == wanted, "a pinned figure is no longer among the references"
    return {f"{r['group']}: {r['quantity']}": r for r in validation.reference_rows(refs)}


@pytest.mark.parametrize("key", sorted(KNOWN_MISSES))
def test_known_miss_is_pinned(rows, key):
    """A known miss stays where it is: outside its tolerance, at its pinned error."""
    r = rows[key]
    # outside its status' bar: "outside", or "known miss" where the data file widens its own tolerance
    assert r["verdict"] in ("outside", "known miss"), \
        f"{key}: now within its bar ({r['error']:+.2%}): move it out of KNOWN_MISSES"
    assert r["error"] == pytest.approx(KNOWN_MISSES[key], abs=PIN), f"{key}: error moved to {r['error']:+.2%}"


@pytest.mark.parametrize("key", sorted(FIXED_MISSES))
def test_fixed_miss_stays_fixed(rows, key):
    """A miss a mechanism fixed stays within its tolerance, at its pinned error."""
    r = rows[key]
    assert r["verdict"] == "ok", f"{key}: outside its tolerance again ({r['error']:+.2%})"
    assert r["error"] == pytest.approx(FIXED_MISSES[key], abs=PIN), f"{key}: error moved to {r['error']:+.2%}"


@pytest.mark.parametrize("variant,batch", sorted(C4_PINNED, key=lambda t: (t[1], t[0])))
def test_c4_after_calibration(rows, variant, batch):
    """C4 after the fit: within the 15 % target, at its pinned error."""
    r = rows[f"K200 end to end (C4): C4 {variant}, batch {batch}"]
    # the rows each scan limit binds on: FP16's element rate, FP32's bytes (configs/k200.yaml's provenance)
    pinned = "operand_scan_element_rate" if "fp16" in variant else "operand_scan_bandwidth"
    assert r["status"] == "fitted" and r["fitted_on"] == f"k200.compute.{pinned}"
    assert abs(r["error"]) <= 0.15
    assert r["error"] == pytest.approx(C4_PINNED[(variant, batch)], abs=PIN)


@pytest.mark.parametrize("staging", ["", " pinned"])
@pytest.mark.parametrize("batch", [32, 64, 128])
def test_c4_fp16_over_fp32_ratio_within_10_percent(rows, batch, staging):
    """What FP16 buys in C4 (measured ~1.8x at every batch) comes out of the model within 10 %."""
    def pair(variant):
        r = rows[f"K200 end to end (C4): C4 {variant}, batch {batch}"]
        return r["model"], r["reference"]

    m16, r16 = pair("fp16" + staging)
    m32, r32 = pair("baseline" if not staging else "pinned")
    assert (m16 / m32) / (r16 / r32) == pytest.approx(1.0, abs=0.10)


def test_c4_leave_one_batch_out_within_20_percent():
    """The committed calibration's cross-validated errors (each batch predicted by a fit without it)."""
    rows = json.loads(config_path("k200.calibration.json").read_text())["rows"]
    c4 = {k: v for k, v in rows.items() if k.startswith("c4-")}
    assert len(c4) == 12
    for k, v in c4.items():
        assert v["cv_fold"].startswith("batch="), k
        assert k.split("-")[1] == "b" + v["cv_fold"].split("=")[1], f"{k}: predicted by a fit that included it"
        assert abs(v["cv_error"]) <= 0.20, k


def test_calibration_file_matches_the_config():
    """configs/k200.calibration.json's values are the ones configs/k200.yaml carries (rerun the script when
    either moves): the fitted numbers in the YAML come out of `kernbench calibrate`, not by hand."""
    from kernbench import provenance

    doc = json.loads(config_path("k200.calibration.json").read_text())
    records = provenance.read("k200.yaml")  # the values as the config sets them, each with its provenance
    for path, value in doc["values"].items():
        assert records[path].kind == "fitted" and records[path].source == "scripts/calibrate_k200.sh", path
        got, want = records[path].value, value
        num = lambda t: float(str(t).split()[0])  # noqa: E731
        assert num(got) == pytest.approx(num(want), rel=2e-3), f"{path}: k200.yaml {got}, calibration {want}"


def test_c4_prediction_before_the_c4_fit_is_documented():
    """The honest first number (the GEMM parameters fitted on the micro-benchmarks only, C4 predicted) is in
    the docs, with its range."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "k200-calibration.md").read_text()
    assert "+17" in text and "+64" in text and "first number" in text


def test_every_measured_row_within_its_tolerance_on_the_packaged_config():
    """`kernbench calibrate --check` (the CI mode) on the packaged config: every row of
    configs/k200.measured.yaml within its tolerance (5 % fitted, 20 % predicted, 15 % C4, the known misses 30 %),
    nothing refitted."""
    from kernbench import calibrate

    res = calibrate.check(config_path("k200.yaml"), config_path("k200.measured.yaml"))
    assert len(res["rows"]) == 80
    assert res["ok"], f"outside their tolerance: {res['outside']}"
    known = {r["id"]: r["error"] for r in res["rows"] if r["id"] in
             ("page-pin-h2d", "gemm-fp16-8192", "gemm-k128-fp16", "gemm-k8192-fp16")}
    assert all(abs(e) > 0.20 for e in known.values()), f"a known miss is now within 20 %: {known}"

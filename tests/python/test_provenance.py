"""Provenance declared beside each calibrated value, read back where it is used: ``kernbench schema --config``,
``calibrate --check`` (fitted rows judged as fitted, exactly determined fits and known misses named), the
presets that inherit the H100 fit, and the shipped configs' records against their data files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kernbench
from kernbench import provenance
from kernbench._core import ConfigError
from kernbench.calibrate import DEFAULT_TOLERANCE, check, load_data
from kernbench.calibrate.roles import components, judge
from kernbench.system import config_path

SHIPPED = ["k200.yaml", "machines/h100-8x-nvswitch.yaml", "machines/a100-8x-nvswitch.yaml",
           "machines/h200-8x-nvswitch.yaml", "machines/l40s-8x-pcie.yaml"]


def test_gpu_mechanism_parameters_are_fitted_on_h100_rows_and_inherited():
    """The H100 value of a mechanism parameter is fitted on named H100 rows; the A100 preset inherits the value
    and the record (declared in nvidia-gpu.yaml), and its own datasheet facts are datasheet records."""
    h100 = provenance.read("machines/h100-8x-nvswitch.yaml")
    a100 = provenance.read("machines/a100-8x-nvswitch.yaml")
    rec = h100["gpu.sustained_clock_ratio"]
    assert rec.kind == "fitted" and rec.data == "h100.measured.yaml" and "gemm-bf16-8192-cublas" in rec.rows
    assert Path(rec.file).name == "nvidia-gpu.yaml" and rec.line > 0
    assert a100["gpu.sustained_clock_ratio"] == rec
    assert a100["pe.clock"].kind == "datasheet" and "A100" in a100["pe.clock"].source
    assert h100["pe.clock"].value == "1830 MHz" and a100["pe.clock"].value == "1410 MHz"
    att = h100["gpu.attention_efficiency"]  # fitted on the FlashAttention-2 groups of the training-parts rows
    assert att.kind == "fitted" and att.data == "h100-training-parts.measured.yaml" and "att-fa2-fwd" in att.rows
    assert h100["gpu.launch_graph"].kind == "assumed"
    # a --set replaces the value and its record
    assert "gpu.sustained_clock_ratio" not in provenance.read("machines/h100-8x-nvswitch.yaml",
                                                              {"gpu.sustained_clock_ratio": "0.9"})


def test_a_declared_value_runs_as_the_plain_value():
    """Unwrapping is exact: the preset's GEMM with the declared value equals the GEMM with the same value set
    by --set (which carries no record)."""
    from kernbench.calibrate import REGISTRY, Context

    gemm = REGISTRY.get("gpu.gemm").fn
    args = {"m": 2048, "n": 2048, "k": 2048, "precision": "bf16"}
    a = gemm(Context(config="machines/h100-8x-nvswitch.yaml", sets={}), **args)
    b = gemm(Context(config="machines/h100-8x-nvswitch.yaml", sets={"gpu.sustained_clock_ratio": "0.82449",
                                                                     "gpu.kernel_latency": "3.66388 us"}), **args)
    assert a == b


@pytest.mark.parametrize("config", SHIPPED)
def test_shipped_fitted_records_name_rows_their_data_file_holds(config):
    """Every fitted record of a shipped config names rows or groups its data file holds."""
    records = provenance.read(config)
    assert any(r.kind == "fitted" for r in records.values())
    assert provenance.check_rows(records, load_data) == []


def test_calibration_json_rows_are_the_script_fitted_rows():
    """The cross-validation records (configs/*.calibration.json) cover exactly the rows the configs declare
    fitted by the calibration scripts, so the report's cv column and the provenance agree."""
    k200 = provenance.read("k200.yaml")
    ds = load_data(config_path("k200.measured.yaml"))
    by_script = provenance.fitted_on({p: r for p, r in k200.items() if r.source == "scripts/calibrate_k200.sh"}, ds)
    assert set(json.loads(config_path("k200.calibration.json").read_text())["rows"]) == set(by_script)
    gpu = provenance.fitted_on(provenance.read("machines/h100-8x-nvswitch.yaml"),
                               load_data(config_path("machines/h100.measured.yaml")))
    assert set(json.loads(config_path("gpu.calibration.json").read_text())["rows"]) == set(gpu)


def test_check_rows_reports_a_name_the_data_file_lacks(tmp_path):
    """A fitted record naming a row its data file does not hold is reported with its file, line and path."""
    (tmp_path / "d.measured.yaml").write_text(
        "rows:\n  - {id: r1, group: g, call: 'gpu.stream kernel=copy elements=1024', value: 1, unit: 'TB/s'}\n")
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"include: {config_path('machines/h100-8x-nvswitch.yaml')}\n"
                   "gpu:\n  stream_efficiency: {value: 0.9, fitted: {data: d.measured.yaml, rows: [r1, r9], by: x}}\n")
    problems = provenance.check_rows(provenance.read(cfg, include_dirs=[str(config_path("machines"))]), load_data)
    assert len(problems) == 1
    assert "m.yaml (line 3): gpu.stream_efficiency: fitted on 'r9', which is neither a row id nor a group" in problems[0]


def test_components_and_exact_determination():
    """Parameters that share a row are one fit; a fit with as many parameters as rows is exactly determined."""
    fitted_on = {"w1": ["a", "b"], "w2": ["a", "b"], "w3": ["c"], "w4": ["c"], "w5": ["c", "d"], "w6": ["e"]}
    comps = sorted((sorted(p), sorted(r)) for p, r in components(fitted_on))
    assert comps == [(["a", "b"], ["w1", "w2"]), (["c", "d"], ["w3", "w4", "w5"]), (["e"], ["w6"])]
    rows = [{"id": i, "role": "fitted", "within": True, "error": 0.0} for i in fitted_on]
    s = judge(rows, fitted_on, DEFAULT_TOLERANCE)
    assert s["exactly_determined"] == ["w1", "w2", "w6"]
    assert [r["determined"] for r in rows] == ["exactly", "exactly", "over", "over", "over", "exactly"]


def test_known_misses_are_not_passes():
    """A row within a tolerance of its own that is wider than its role's bar is a known miss, not a pass."""
    rows = [{"id": "p", "role": "predicted", "within": True, "error": 0.25},   # own tolerance 30 %
            {"id": "q", "role": "predicted", "within": True, "error": 0.19},
            {"id": "f", "role": "fitted", "within": True, "error": 0.061},     # own tolerance 10 %
            {"id": "x", "role": "predicted", "within": False, "error": 0.5}]
    s = judge(rows, {"f": ["k"]}, DEFAULT_TOLERANCE)
    assert s["known_misses"] == ["p", "f"] and s["passes"] == 1 and s["outside"] == ["x"]


@pytest.fixture(scope="module")
def k200_check():
    """calibrate --check configs/k200.yaml on its data file, once."""
    return check(config_path("k200.yaml"), config_path("k200.measured.yaml"))


def test_k200_check_judges_exactly_the_declared_rows_as_fitted(k200_check):
    """The fitted rows are those configs/k200.yaml declares (no more, no fewer); each names its parameters;
    the four waits (four parameters) and the hand-solved copies are exactly determined, C4 is not."""
    ds = load_data(config_path("k200.measured.yaml"))
    declared = provenance.fitted_on(provenance.read("k200.yaml"), ds)
    rows = {r["id"]: r for r in k200_check["rows"]}
    assert {i for i, r in rows.items() if r["role"] == "fitted"} == set(declared)
    assert len(declared) >= 20 and len(rows) - len(declared) >= 40
    for rid, params in declared.items():
        assert rows[rid]["fitted_on"] == params
        if rows[rid]["tolerance"] is not None and ds.by_id()[rid].tolerance is None:
            assert rows[rid]["tolerance"] == DEFAULT_TOLERANCE["fitted"]
    exact = set(k200_check["summary"]["exactly_determined"])
    assert {"wait-128-nc1", "wait-128-nc4", "wait-5120-nc1", "wait-5120-nc4"} <= exact
    assert "copy-pinned-d2h-1MiB" in exact and not any(rid.startswith("c4-") for rid in exact)
    assert set(rows["wait-5120-nc4"]["fitted_on"]) == {"k200.launch.dispatch_base", "k200.launch.dispatch_per_cluster",
                                                       "k200.compute.elementwise_bandwidth",
                                                       "k200.compute.elementwise_serial_bandwidth"}
    assert k200_check["ok"], k200_check["outside"]
    # The rows with widened tolerances are listed as misses, not as passes.
    misses = set(k200_check["summary"]["known_misses"])
    assert {"page-pin-h2d", "gemm-fp16-8192"} <= misses
    assert k200_check["summary"]["passes"] + len(misses) == len(rows)


def test_k200_check_fails_when_a_fitted_row_drifts_6_percent(tmp_path):
    """Moving one fitted row's measured value by 6 % breaks the fitted bar (5 %); moving a predicted row by the
    same amount stays within the predicted bar (20 %). The config and its data file are copied side by side,
    so the config's `data: k200.measured.yaml` names the drifted copy."""
    shutil.copy(config_path("k200.yaml"), tmp_path / "k200.yaml")
    shutil.copytree(config_path("k200_cases"), tmp_path / "k200_cases")
    data = yaml.safe_load(config_path("k200.measured.yaml").read_text())
    for r in data["rows"]:
        if r["id"] in ("gemm-fp32-2048", "gemm-fp32-1024"):
            r["value"] = float(r["value"]) * 1.06
    (tmp_path / "k200.measured.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = check(tmp_path / "k200.yaml", tmp_path / "k200.measured.yaml")
    rows = {r["id"]: r for r in res["rows"]}
    assert rows["gemm-fp32-2048"]["role"] == "fitted" and rows["gemm-fp32-1024"]["role"] == "predicted"
    assert rows["gemm-fp32-2048"]["tolerance"] == DEFAULT_TOLERANCE["fitted"] and not rows["gemm-fp32-2048"]["within"]
    assert rows["gemm-fp32-1024"]["within"]
    assert res["outside"] == ["gemm-fp32-2048"] and not res["ok"]


def test_schema_config_prints_the_records():
    """`kernbench schema --config F` lists each declared value with its kind and what it rests on."""
    out = subprocess.run([sys.executable, "-m", "kernbench", "schema", "--config", "k200.yaml"],
                         capture_output=True, text=True, check=True).stdout
    assert "k200.compute.fp32_efficiency" in out and "fitted" in out and "gemm-fp32-2048" in out
    assert "k200.pcie.lane_rate" in out and "datasheet" in out
    js = subprocess.run([sys.executable, "-m", "kernbench", "schema", "--config", "machines/a100-8x-nvswitch.yaml",
                         "--json"], capture_output=True, text=True, check=True).stdout
    recs = json.loads(js)
    assert recs["gpu.launch_host"]["kind"] == "fitted" and recs["gpu.launch_host"]["rows"] == ["gemm-bf16-1024-torch"]


def test_schema_config_refuses_set_without_config():
    """--set belongs to --config."""
    r = subprocess.run([sys.executable, "-m", "kernbench", "schema", "--set", "pe.clock=1 GHz"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--set applies to --config FILE only" in r.stderr


def test_malformed_record_is_a_config_error(tmp_path):
    """The loader's words reach Python: file, path, line."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"include: {config_path('machines/h100-8x-nvswitch.yaml')}\n"
                   "gpu:\n  stream_efficiency: {value: 0.9, fitted: {data: x.yaml, by: y}}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: gpu.stream_efficiency.fitted: a fitted record needs `rows`"):
        provenance.read(cfg, include_dirs=[str(config_path("machines"))])
    assert kernbench  # the package imports with the module


def test_a_fit_with_as_many_parameters_as_rows_is_exactly_determined(tmp_path, capsys):
    """Two free parameters on two rows reproduce them whatever the model: the result and the CLI say so; with a
    third row the same fit is overdetermined."""
    from kernbench import calibrate as cal
    from kernbench.cli import main

    here = Path(__file__).resolve().parents[1] / "calibrate"
    cal.load_functions(here / "synthetic.py")
    free = ["k200.launch.queue_submit=0.5 ns..20 ns", "k200.launch.wait_overhead=0.1 us..20 us"]

    def data(ns):
        p = tmp_path / f"d{len(ns)}.yaml"
        p.write_text("rows:\n" + "".join(f"  - {{id: lin-{n}, group: g, call: test.linear n={n}, "
                                         f"value: {7.5 * n / 1000 + 4.2!r}, unit: us}}\n" for n in ns))
        return p

    exact = cal.calibrate(data((10, 1000)), free, cv_by="none")
    assert exact["determined"] == "exactly"
    assert exact["summary"]["exactly_determined"] == ["lin-10", "lin-1000"]
    over = cal.calibrate(data((10, 100, 1000)), free, cv_by="none")
    assert over["determined"] == "over" and over["summary"]["exactly_determined"] == []
    assert main(["calibrate", "--data", str(data((10, 1000))), "--cv-by", "none", "--no-plots",
                 "--out", str(tmp_path / "o")] + [a for f in free for a in ("--free", f)]) == 0
    assert "EXACTLY DETERMINED: 2 free parameters on 2 rows" in capsys.readouterr().out


def test_vgpu_fitted_values_name_their_rows_and_measured_reads_the_data_file():
    """configs/vgpu.yaml's three hand-fitted values name their rows of configs/vgpu.measured.yaml, the check judges
    exactly those as fitted, and vgpu.MEASURED's figures are the data file's."""
    from kernbench import vgpu

    res = check(config_path("vgpu.yaml"), config_path("vgpu.measured.yaml"))
    assert {r["id"] for r in res["rows"] if r["role"] == "fitted"} == {"round-trip", "doorbell", "spread-min",
                                                                        "spread-max"}
    assert res["ok"] and set(res["summary"]["exactly_determined"]) == {"round-trip", "doorbell"}
    rows = {r.id: r.value for r in load_data(config_path("vgpu.measured.yaml")).rows}
    assert vgpu.MEASURED["round_trip_ms"] == rows["round-trip"] and vgpu.MEASURED["forwards"] == rows["forwards"]
    assert vgpu.MEASURED["spread_ms"] == (rows["spread-min"], rows["spread-max"])

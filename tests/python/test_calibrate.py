"""kernbench calibrate: recovery of known parameters, identifiability, honest cross-validation, the overlay's
round trip, bad input naming its row and file, and the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernbench import calibrate as cal
from kernbench.cli import main

HERE = Path(__file__).resolve().parents[1] / "calibrate"
SYNTH = HERE / "synthetic.py"
K200_GEMM = HERE / "k200_gemm.yaml"

cal.load_functions(SYNTH)
A, B = "k200.launch.queue_submit", "k200.launch.wait_overhead"
P, Q = "k200.driver.segment_overhead", "k200.driver.edma_setup"
TRUE_A_NS, TRUE_B_US = 7.5, 4.2
FREE_AB = [f"{A}=0.5 ns..20 ns", f"{B}=0.1 us..20 us"]


def _write(tmp_path: Path, rows: list[str], name: str = "data.yaml", head: str = "") -> Path:
    p = tmp_path / name
    p.write_text(head + "rows:\n" + "".join(rows))
    return p


def _linear_rows(ns=(10, 100, 1000, 3000), group=lambda n: "small" if n < 500 else "large") -> list[str]:
    return [f"  - id: lin-{n}\n    group: {group(n)}\n    call: test.linear n={n}\n"
            f"    value: {TRUE_A_NS * n / 1000 + TRUE_B_US!r}\n    unit: us\n    source: synthetic\n" for n in ns]


@pytest.fixture
def linear_data(tmp_path):
    return _write(tmp_path, _linear_rows())


def test_recovers_true_parameters_within_one_percent(linear_data):
    """On a synthetic model with known parameters, the fit recovers both within 1 % and calls them identifiable."""
    res = cal.calibrate(linear_data, FREE_AB)
    got = {f["path"]: f for f in res["free"]}
    a = float(got[A]["value"].split()[0])
    b = float(got[B]["value"].split()[0])
    assert got[A]["value"].endswith(" ns") and got[B]["value"].endswith(" us")
    assert abs(a / TRUE_A_NS - 1) < 0.01 and abs(b / TRUE_B_US - 1) < 0.01
    assert res["unidentifiable"] == {} and all(f["identifiable"] for f in res["free"])
    assert all(abs(r["error"]) < 1e-4 for r in res["rows"])
    assert set(got[A]["fitted_on"]) == {r["id"] for r in res["rows"]}


def test_flags_parameters_that_only_appear_as_a_product(tmp_path):
    """p * q * n pins the product only: both parameters are named as not identifiable, in the result and report."""
    rows = [f"  - {{id: prod-{n}, group: g, call: test.product n={n}, value: {0.6 * n}, unit: us}}\n"
            for n in (1, 10, 100)]
    data = _write(tmp_path, rows)
    res = cal.calibrate(data, [f"{P}=0.05 us..5 us", f"{Q}=0.1 us..10 us"])
    assert set(res["unidentifiable"]) == {P, Q}
    assert all(abs(r["error"]) < 1e-3 for r in res["rows"])  # the product itself is fitted
    out = cal.write_outputs(res, tmp_path / "out", plots=False)
    report = Path(out["report"]).read_text()
    assert "Parameters the data cannot pin down" in report and P in report and Q in report
    assert "NOT IDENTIFIABLE" in Path(out["overlay"]).read_text()


@pytest.mark.parametrize("cv_by", ["group", "row", "n"])
def test_cross_validation_never_predicts_a_row_from_its_own_fit(tmp_path, cv_by):
    """In every fold the held-out rows are not among the rows fitted, and each row's cross-validated error comes
    from a fold that left it out; predicted rows are never in the main fit."""
    rows = _linear_rows((10, 50, 100, 1000, 2000, 3000), group=lambda n: f"g{n % 3}")
    rows += [f"  - {{id: pred-{n}, group: other, call: test.linear n={n}, value: {TRUE_A_NS * n / 1000 + 4.0}, "
             "unit: us}\n" for n in (20, 500)]
    data = _write(tmp_path, rows)
    res = cal.calibrate(data, FREE_AB, fit_on=["g0", "g1", "g2"], cv_by=cv_by)
    fitted = set(res["fitted_rows"])
    assert fitted == {r["id"] for r in res["rows"] if r["group"] != "other"}
    folds = {f["left_out"]: f for f in res["folds"]}
    assert folds
    for f in res["folds"]:
        assert not set(f["fit_rows"]) & set(f["predicted_rows"])
        assert set(f["fit_rows"]) <= fitted
    for r in res["rows"]:
        if r["role"] == "predicted":
            assert r["id"] not in fitted and r["cv_fold"] == "prediction"
        else:
            assert r["cv_error"] is not None
            assert r["id"] in folds[r["cv_fold"]]["predicted_rows"]
            assert r["id"] not in folds[r["cv_fold"]]["fit_rows"]


def test_leave_one_batch_out_refits_without_the_batch(tmp_path):
    """--cv-by a call parameter holds out each of its values; a shifted batch shows up in its CV error only."""
    rows = [f"  - {{id: r{n}, group: g, call: test.linear n={n}, value: {TRUE_A_NS * n / 1000 + TRUE_B_US}, unit: us}}\n"
            for n in (10, 100, 1000)]
    rows.append("  - {id: bad, group: g, call: test.linear n=2000, value: 30.0, unit: us}\n")  # true 19.2
    res = cal.calibrate(_write(tmp_path, rows), FREE_AB, cv_by="n")
    bad = next(r for r in res["rows"] if r["id"] == "bad")
    assert bad["cv_fold"] == "n=2000" and abs(bad["cv_error"]) > abs(bad["error"])


def test_overlay_round_trips_exactly(tmp_path, linear_data):
    """Applying the overlay (--check) reproduces the report's errors exactly, and the overlay loads as a config."""
    res = cal.calibrate(linear_data, FREE_AB, fit_on=["small"])
    out = cal.write_outputs(res, tmp_path / "out", plots=False)
    chk = cal.check(out["overlay"], linear_data)
    assert [r["error"] for r in chk["rows"]] == [r["error"] for r in res["rows"]]
    assert [r["role"] for r in chk["rows"]] == [r["role"] for r in res["rows"]]
    saved = json.loads(Path(out["result"]).read_text())
    assert [r["error"] for r in saved["rows"]] == [r["error"] for r in res["rows"]]
    ov = cal.read_overlay(out["overlay"])
    assert ov["values"] == res["overlay_values"] and ov["meta"]["fitted_rows"] == res["fitted_rows"]


def test_k200_fits_fp32_efficiency_near_the_packaged_value(tmp_path):
    """The real K200 model: fp32_efficiency fitted on the 2048^3 FP32 GEMM lands near configs/k200.yaml's own value
    (fitted there on the same figure); the other GEMMs are predictions; the overlay round-trips through the C++
    config loader too."""
    from kernbench import k200, provenance

    packaged = float(provenance.read("k200.yaml")["k200.compute.fp32_efficiency"].value)

    res = cal.calibrate(K200_GEMM, ["k200.compute.fp32_efficiency=30..90", "k200.compute.fc_overhead=0.1 us..5 us"],
                        fit_on=["gemm-fp32-2048"])
    eff = next(f for f in res["free"] if f["path"] == "k200.compute.fp32_efficiency")
    assert abs(float(eff["value"]) - packaged) <= 3
    assert [r["role"] for r in res["rows"]] == ["fitted", "predicted", "predicted"]
    out = cal.write_outputs(res, tmp_path / "k200", plots=True)
    assert all((tmp_path / "k200" / f).read_bytes()[:4] == b"\x89PNG"
               for f in ("fitted_vs_measured.png", "cv_error.png", "correlation.png"))
    chk = cal.check(out["overlay"], K200_GEMM)
    assert [r["error"] for r in chk["rows"]] == [r["error"] for r in res["rows"]]
    # The overlay is a config: it includes k200.yaml and sets the fitted values.
    g = k200.gemm(k200.load_system(out["overlay"]), 2048, 2048, 2048, "fp32").gflops
    assert g == res["rows"][0]["model"]


def test_csv_and_yaml_give_the_same_rows(tmp_path):
    """A CSV data file (call as text, comments, a knob as a dotted key) reads like its YAML twin."""
    csv = tmp_path / "d.csv"
    csv.write_text("# a comment\nid,group,call,metric,value,unit,source,tolerance\n"
                   "a,g,test.linear n=10,value,4.275,us,synthetic,5 %\n"
                   "b,g,\"test.linear n=1000 k200.driver.kl1_bounce_pipe=0\",,11.7,us,synthetic,\n")
    ds = cal.load_data(csv)
    assert [(r.id, r.line, r.params, r.set, r.tolerance) for r in ds.rows] == [
        ("a", 3, {"n": 10}, {}, 0.05), ("b", 4, {"n": 1000}, {"k200.driver.kl1_bounce_pipe": "0"}, None)]
    yml = _write(tmp_path, ["  - {id: a, group: g, function: test.linear, params: {n: 10}, value: 4275, unit: ns}\n"])
    assert cal.load_data(yml).rows[0].measured == pytest.approx(4.275)


BAD_ROWS = [
    ("unknown function", "call: test.nope n=1", "unknown measurement function 'test.nope'"),
    ("unknown parameter", "call: test.linear n=1 m=2", "no parameter 'm'"),
    ("unknown config path", "call: test.linear n=1 k200.nope.x=1", "k200.nope.x: unknown config path"),
    ("unknown unit", "call: test.linear n=1\n    unit: furlongs", "unknown unit 'furlongs'"),
    ("unit of another dimension", "call: test.linear n=1\n    unit: GiB/s", "does not convert"),
    ("NaN value", "call: test.linear n=1\n    value: .nan", "not a finite number"),
    ("negative value", "call: test.linear n=1\n    value: -3", "must be > 0"),
    ("unknown metric", "call: test.linear n=1\n    metric: gflops", "no such metric"),
    ("bad tolerance", "call: test.linear n=1\n    tolerance: lots", "tolerance 'lots'"),
]


@pytest.mark.parametrize("what,body,message", BAD_ROWS, ids=[b[0] for b in BAD_ROWS])
def test_bad_row_names_row_line_and_file(tmp_path, what, body, message):
    """Each bad row is one CalibrationError naming the file, the row's line and its id."""
    good = "  - id: ok\n    group: g\n    call: test.linear n=1\n    value: 2\n    unit: us\n"
    lines = body.split("\n    ")
    fields = {"call": None, "unit": "us", "value": "2"}
    bad = "  - id: broken\n    group: g\n" + "".join(f"    {ln}\n" for ln in lines)
    for k, v in fields.items():
        if v is not None and not any(ln.startswith(k + ":") for ln in lines):
            bad += f"    {k}: {v}\n"
    data = _write(tmp_path, [good, bad])
    with pytest.raises(cal.CalibrationError) as e:
        cal.load_data(data)
    text = str(e.value)
    assert f"{data}:7: row 'broken'" in text and message in text


def test_duplicate_id_names_both_lines(tmp_path):
    """A duplicate id is refused at its second line, naming the first."""
    row = "  - {id: x, group: g, call: test.linear n=1, value: 2, unit: us}\n"
    data = _write(tmp_path, [row, row])
    with pytest.raises(cal.CalibrationError, match=r"data.yaml:3: row 'x': duplicate id \(first on line 2\)"):
        cal.load_data(data)


@pytest.mark.parametrize("spec,message", [
    (f"{A}=20 ns..0.5 ns", "bounds reversed"),
    (f"{A}=1..5", "is not one of the key's units"),
    (f"{A}=1 GB/s..5 GB/s", "'GB/s' is not one of the key's units"),
    ("k200.compute.fp32_efficiency=30 us..90 us", r"plain number \(no unit\)"),
    ("k200.nope=1..2", "k200.nope: unknown config path"),
    (f"{A}=0.5 ns", "expected PATH=LO..HI"),
])
def test_bad_free_parameter(spec, message):
    """A free parameter with an unknown path, reversed bounds or bounds outside the key's units is refused."""
    with pytest.raises(cal.CalibrationError, match=message):
        cal.parse_free(spec)


def test_fit_on_group_that_no_row_has(linear_data):
    """--fit-on naming a group of no row lists the groups there are."""
    with pytest.raises(cal.CalibrationError, match=r"--fit-on nope: no row of .*data.yaml is in group 'nope' "
                                                   r"\(groups: small, large\)"):
        cal.calibrate(linear_data, FREE_AB, fit_on=["nope"])


def test_cli_exit_codes(tmp_path, linear_data, capsys):
    """0 for a fit, 0/1 for --check within/outside tolerance, 2 with one `kernbench: error:` line for bad input."""
    out = tmp_path / "cli"
    args = ["calibrate", "--functions", str(SYNTH), "--data", str(linear_data), "--out", str(out), "--no-plots"]
    assert main(args + ["--free", FREE_AB[0], "--free", FREE_AB[1], "--fit-on", "small,large"]) == 0
    stdout = capsys.readouterr().out
    assert "wrote" in stdout and (out / "overlay.yaml").exists() and (out / "report.md").exists()
    chk = ["calibrate", "--functions", str(SYNTH), "--check", str(out / "overlay.yaml"), "--data", str(linear_data)]
    assert main(chk) == 0
    capsys.readouterr()
    (tmp_path / "shifted.yaml").write_text((out / "overlay.yaml").read_text().replace(
        "wait_overhead: ", "wait_overhead: 1", 1))
    assert main(chk[:4] + [str(tmp_path / "shifted.yaml")] + chk[5:]) == 1
    assert "outside their tolerance" in capsys.readouterr().err
    for bad in (["--free", f"{A}=9 ns..1 ns"], ["--free", FREE_AB[0], "--fit-on", "nope"],
                ["--tolerance", "lots"], ["--functions", str(tmp_path / "missing.py")]):
        assert main(args + bad) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("kernbench: error:")
    bad_data = _write(tmp_path, ["  - {id: q, group: g, call: test.nope, value: 1, unit: us}\n"], "bad.yaml")
    assert main(["calibrate", "--data", str(bad_data)]) == 2
    err = capsys.readouterr().err
    assert f"{bad_data}:2: row 'q'" in err


@pytest.mark.parametrize("name", ["../../configs/k200.measured.yaml", "../../configs/vgpu.measured.yaml", "fabric.yaml"])
def test_shipped_data_files_evaluate(name):
    """The K200 and vGPU (configs/*.measured.yaml) and fabric data files of docs/calibrate.md run through the
    built-in functions."""
    res = cal.calibrate(HERE / name)
    assert res["rows"] and all(r["model"] > 0 and r["role"] == "predicted" for r in res["rows"])


def test_overlay_of_a_list_item_round_trips(tmp_path):
    """A free parameter inside a list (a graph edge) writes the base config's whole list into the overlay, which
    loads as a config and reproduces the errors."""
    rows = ["  - {id: stock, group: g, call: k200.copy kind=stock direction=h2d bytes=64MiB, metric: bandwidth, "
            "value: 4.27, unit: GiB/s}\n"]
    data = _write(tmp_path, rows)
    res = cal.calibrate(data, ["graph.edges.0.latency=10 ns..1000 ns"])
    out = cal.write_outputs(res, tmp_path / "out", plots=False)
    assert "edges: [" in Path(out["overlay"]).read_text()
    chk = cal.check(out["overlay"], data)
    assert [r["error"] for r in chk["rows"]] == [r["error"] for r in res["rows"]]
    from kernbench.config import validate

    assert validate(out["overlay"])["kind"] == "graph"


# ---- a row whose function raises; the tokens/s unit ----------------------------------------------------------

@cal.measurement("test.fragile", unit="us", doc="a * n + b, refusing n = 0 (a bad parameter value)", replace=True)
def _fragile(ctx, n: int):
    return (TRUE_A_NS * 1e-3 * n + TRUE_B_US) * (n / n)  # n = 0: ZeroDivisionError


@cal.measurement("test.tokens", metrics={"throughput": "tokens/s", "latency": "ms"}, replace=True,
                 doc="a serving figure: tokens/s (the first metric) and ms")
def _tokens(ctx, batch: int):
    return {"throughput": 125.0 * batch, "latency": 1000.0 / batch}


def _fragile_rows() -> list[str]:
    return ["  - {id: good, group: g, call: test.fragile n=1000, value: %r, unit: us}\n" % (TRUE_A_NS + TRUE_B_US),
            "  - {id: bad-n, group: g, call: test.fragile n=0, value: 4.2, unit: us}\n",
            "  - {id: bad-kind, group: g, call: k200.copy kind=nope direction=h2d bytes=64MiB, metric: bandwidth, "
            "value: 4.27, unit: GiB/s}\n",
            "  - {id: also-good, group: g, call: test.fragile n=10, value: %r, unit: us}\n"
            % (TRUE_A_NS * 0.01 + TRUE_B_US)]


def test_check_records_a_row_that_raises_and_runs_the_rest(tmp_path, linear_data, capsys):
    """`calibrate --check`: a row whose function raises (a bad parameter value: ZeroDivisionError; an unknown copy
    kind: the model's own error) is reported within false with its error text and no figure, the rows after it
    still run, result.json and report.md are written with every row's fields, and the exit status is 1."""
    fit_out = tmp_path / "fit"
    assert main(["calibrate", "--functions", str(SYNTH), "--data", str(linear_data), "--out", str(fit_out),
                 "--no-plots", "--free", FREE_AB[0], "--free", FREE_AB[1]]) == 0
    capsys.readouterr()
    data = _write(tmp_path, _fragile_rows(), "mixed.yaml")
    out = tmp_path / "chk"
    rc = main(["calibrate", "--functions", str(SYNTH), "--check", str(fit_out / "overlay.yaml"), "--data", str(data),
               "--out", str(out), "--tolerance", "1 %"])
    cap = capsys.readouterr()
    assert rc == 1
    saved = json.loads((out / "result.json").read_text())
    rows = {r["id"]: r for r in saved["rows"]}
    assert list(rows) == ["good", "bad-n", "bad-kind", "also-good"]
    for r in rows.values():
        assert {"id", "role", "measured", "unit", "model", "error", "tolerance", "within"} <= set(r)
    for rid in ("good", "also-good"):
        assert rows[rid]["within"] is True and rows[rid]["failure"] is None and rows[rid]["model"] > 0
    bad, kind = rows["bad-n"], rows["bad-kind"]
    assert bad["within"] is False and bad["model"] is None and bad["error"] is None
    assert f"{data}:3: row 'bad-n': test.fragile raised ZeroDivisionError" in bad["failure"]
    assert kind["within"] is False and "unknown K200 copy kind 'nope'" in kind["failure"]
    assert saved["outside"] == ["bad-n", "bad-kind"] and saved["failed"] == ["bad-n", "bad-kind"]
    assert saved["ok"] is False
    assert "ZeroDivisionError" in cap.out and "unknown K200 copy kind 'nope'" in cap.out  # each row's line
    assert "outside their tolerance: bad-n, bad-kind" in cap.err
    report = (out / "report.md").read_text()
    assert "## Rows whose function raised" in report and "bad-n" in report


def test_check_api_keeps_going_past_a_row_that_raises(tmp_path, linear_data):
    """kernbench.calibrate.check (the API) reports the raising row the same way and judges the others."""
    res = cal.calibrate(linear_data, FREE_AB)
    ov = cal.write_outputs(res, tmp_path / "out", plots=True)["overlay"]
    chk = cal.check(ov, _write(tmp_path, _fragile_rows(), "mixed.yaml"))
    assert [r["within"] for r in chk["rows"]] == [True, False, False, True]
    assert chk["failed"] == ["bad-n", "bad-kind"] and not chk["ok"]
    written = cal.write_outputs(chk, tmp_path / "chk", plots=True)  # the figures leave out the raising rows
    assert json.loads(Path(written["result"]).read_text())["rows"][1]["failure"].endswith(
        "division by zero")


def test_fit_names_the_row_whose_function_raises(tmp_path):
    """The fit path (no --check) stops at a row whose function raises, with an error naming the file, line, row,
    function and the exception, with or without free parameters."""
    data = _write(tmp_path, _fragile_rows(), "mixed.yaml")
    with pytest.raises(cal.CalibrationError,
                       match=r"mixed\.yaml:3: row 'bad-n': test\.fragile raised ZeroDivisionError: .*division by zero"):
        cal.calibrate(data)
    with pytest.raises(cal.CalibrationError, match=r"row 'bad-n': test\.fragile raised ZeroDivisionError"):
        cal.calibrate(data, FREE_AB)


def test_cli_fit_error_names_the_row(tmp_path, capsys):
    """`kernbench calibrate` (a fit) on a data file with a raising row exits 2 with one error line naming it."""
    data = _write(tmp_path, _fragile_rows(), "mixed.yaml")
    assert main(["calibrate", "--data", str(data), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kernbench: error:") and "row 'bad-n'" in err[0]


def test_tokens_per_second_is_a_unit(tmp_path):
    """The data-file reader accepts tokens/s (also as the value's own unit, and tok/s), a rate of the same kind as
    1/s, and converts it to the function's metric unit."""
    from kernbench.calibrate.data import convert, unit_factor

    assert unit_factor("tokens/s") == ("1/s", 1) and convert(2.0, "tokens/s", "1/s") == 2.0
    rows = ["  - {id: t8, group: g, call: test.tokens batch=8, value: 1000, unit: tokens/s}\n",
            "  - {id: t16, group: g, call: test.tokens batch=16, metric: throughput, value: 2 kHz, unit: tok/s}\n",
            "  - {id: t4, group: g, call: test.tokens batch=4, value: '500 tokens/s'}\n"]
    with pytest.raises(cal.CalibrationError, match=r"unit 'tok/s'"):
        cal.calibrate(_write(tmp_path, rows, "tokens.yaml"))  # "2 kHz" and tok/s disagree: named, not guessed
    rows[1] = "  - {id: t16, group: g, call: test.tokens batch=16, metric: throughput, value: 2000, unit: tok/s}\n"
    res = cal.calibrate(_write(tmp_path, rows, "tokens.yaml"))
    assert [r["unit"] for r in res["rows"]] == ["tokens/s"] * 3
    assert [r["unit_as_given"] for r in res["rows"]] == ["tokens/s", "tok/s", "tokens/s"]
    assert all(abs(r["error"]) < 1e-12 and r["within"] for r in res["rows"])


def test_a_missing_size_term_is_named_as_a_misfit(tmp_path, capsys):
    """Data with a quadratic size term the linear model lacks: the fit still pins both parameters, but the errors
    follow n, and the result, the report and the CLI name the misfit (parameter n, the model's structure); the
    same data without the missing term shows none."""
    ns = (10, 30, 100, 300, 1000, 3000)
    def rows(c):
        return [f"  - {{id: q-{n}, group: g, call: test.linear n={n}, value: {TRUE_A_NS * n / 1000 + TRUE_B_US + c * n * n!r}, "
                f"unit: us}}\n" for n in ns]
    bad = _write(tmp_path, rows(2e-6), "bad.yaml")
    res = cal.calibrate(bad, FREE_AB)
    assert all(f["identifiable"] for f in res["free"])
    assert len(res["misfit"]) == 1
    m = res["misfit"][0]
    assert m["function"] == "test.linear" and m["parameter"] == "n" and m["shape"] in ("trend", "bow", "wave")
    assert m["errors"][1] - m["errors"][0] >= 0.02 and "structure cannot fit" in m["text"]
    out = cal.write_outputs(res, tmp_path / "out", plots=False)
    report = Path(out["report"]).read_text()
    assert "## Misfit" in report and "errors" in report and " n " in report
    assert main(["calibrate", "--data", str(bad), "--free", FREE_AB[0], "--free", FREE_AB[1], "--out", str(tmp_path / "o2"),
                 "--no-plots"]) == 0
    assert "MISFIT: test.linear" in capsys.readouterr().out
    assert cal.calibrate(_write(tmp_path, rows(0.0), "good.yaml"), FREE_AB)["misfit"] == []

"""Issue 31 (reliability round 3), calibrate's readers: the Python API reproducers of families 3, 4, 10 and 13.

Non-finite numbers refused where they are read and a run's outputs written all together or not at all (3);
non-UTF-8 text, deep nesting, a bad ``# calibration:`` line and a raising ``--functions`` function refused
naming the file (4); duplicate YAML keys and CSV columns refused (10); a UTF-8 byte-order mark accepted (13).
The CLI cases are in tests/bad_inputs/cases_r3_calibrate.yaml (their inputs in tests/bad_inputs/calibrate_r3/).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernbench import calibrate as cal
from kernbench._core import ConfigError, UsageError
from kernbench.calibrate import report
from kernbench.calibrate.safe_read import MAX_DEPTH, load_yaml, read_text
from kernbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
SYNTH = ROOT / "calibrate" / "synthetic.py"
R3 = ROOT / "bad_inputs" / "calibrate_r3"
FNS = R3 / "fn_type_error.py"

cal.load_functions(SYNTH)
cal.load_functions(FNS)


def _finite_json(path: Path):
    """result.json parsed, refusing NaN / Infinity (which json.loads would accept)."""
    def refuse(name):
        raise AssertionError(f"{path}: holds {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _write(tmp_path: Path, text: str | bytes, name: str = "data.yaml") -> Path:
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


# ---- family 3: non-finite numbers, outputs together ---------------------------------------------------------

def test_value_1e308_ns_writes_every_output_with_finite_numbers(tmp_path, capsys):
    """The reproducer `value: 1e308 ns` (a traceback after overlay.yaml and report.md were written, no result.json):
    the value converts to 1e305 us without overflowing on the way, and every output is written, finite."""
    out = tmp_path / "out"
    rc = main(["calibrate", "--functions", str(SYNTH), "--data", str(R3 / "ok_value_1e308_ns.yaml"),
               "--out", str(out), "--no-plots", "--quiet"])
    capsys.readouterr()
    assert rc == 0
    assert {p.name for p in out.iterdir()} >= {"overlay.yaml", "report.md", "result.json"}
    rows = {r["id"]: r for r in _finite_json(out / "result.json")["rows"]}
    assert rows["big"]["measured"] == pytest.approx(1e305) and rows["big"]["unit"] == "us"
    assert rows["big"]["error"] == pytest.approx(-1.0)


def test_value_that_overflows_in_the_function_unit_is_refused_at_its_row():
    """`1e308 s` is 1e314 us (inf): refused naming the file, the line and the row, before anything runs."""
    with pytest.raises(cal.CalibrationError, match=r"value_overflows_in_unit\.yaml:3: row 'a': value '1e308 s' "
                                                   r"is inf us .*outside the range of a float"):
        cal.load_data(R3 / "value_overflows_in_unit.yaml")


def test_model_measured_ratio_beyond_a_float_names_the_row(tmp_path):
    """A measured 1e-308 us against a model of 2 us: model / measured overflows; the fit refuses the row by name
    and --check records it as the row's failure (no inf reaches the result)."""
    data = R3 / "value_ratio_overflows.yaml"
    with pytest.raises(cal.CalibrationError, match=r"row 'tiny'.*differ by more than a float can hold"):
        cal.calibrate(data)
    ov = _write(tmp_path, '# calibration: {"seed": 1}\n', "overlay.yaml")
    chk = cal.check(ov, data)
    assert chk["failed"] == ["tiny"] and "differ by more than a float" in chk["rows"][0]["failure"]
    written = cal.write_outputs(chk, tmp_path / "chk", plots=False)
    assert _finite_json(Path(written["result"]))["ok"] is False


def test_outputs_land_together_or_not_at_all(tmp_path):
    """When one output cannot be written (result.json is a folder), none is: overlay.yaml and report.md used to
    be written before result.json failed."""
    res = cal.calibrate(R3 / "ok_bom.csv")
    out = tmp_path / "out"
    (out / "result.json").mkdir(parents=True)
    with pytest.raises(UsageError, match="result.json"):
        cal.write_outputs(res, out, plots=False)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".kernbench")) == ["result.json"]
    assert not list(out.glob(".*.tmp"))


def test_a_non_finite_result_writes_nothing_and_names_its_place(tmp_path):
    """The last guard: a result holding NaN is a CalibrationError naming where, and no file is written."""
    res = cal.calibrate(R3 / "ok_bom.csv")
    res["rows"][1]["error"] = math.nan
    out = tmp_path / "out"
    with pytest.raises(cal.CalibrationError, match=r"result\.rows\[1\]\.error: not a finite number; nothing "
                                                   r"written"):
        cal.write_outputs(res, out)
    assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".kernbench")]


@pytest.mark.parametrize("field, text, message", [
    ("value", "value: true, unit: us", "value True: not a number"),
    ("value", "value: " + "9" * 5000 + ", unit: us", "a value cannot be read"),
    ("weight", "value: 2 us, weight: 1e300", "weight 1e+300: must be a number > 0 and <= 1e+06"),
    ("weight", "value: 2 us, weight: true", "weight True: not a number"),
    ("param", 'value: 2 us, function: test.linear, params: {n: .inf}', "parameter n=inf: not a finite number"),
    ("param", 'value: 2 us, function: test.linear, params: {1: 2}', "parameter name 1 is not a text"),
    ("bytes", 'value: 2 us, function: test.linear, params: {n: 1e400 B}', "parameter n='1e400 B'"),
    ("config", "value: 2 us, config: [a.yaml]", "config ['a.yaml']: a config name or path"),
], ids=["value-bool", "value-5000-digits", "weight-huge", "weight-bool", "param-inf", "param-name-int",
        "param-bytes-overflow", "config-list"])
def test_bad_numbers_and_types_are_refused_where_read(tmp_path, field, text, message):
    """Each bad number or type of a row is a CalibrationError naming the file and the row (a bool value, an
    integer of 5000 digits, a huge weight, a non-finite or overflowing parameter, a config that is a list)."""
    call = "" if "function:" in text else "call: test.linear n=10, "
    data = _write(tmp_path, f"rows:\n  - {{id: r, group: g, {call}{text}}}\n")
    with pytest.raises(cal.CalibrationError) as e:
        cal.load_data(data)
    assert str(data) in str(e.value) and message in str(e.value), str(e.value)


# ---- family 4: encodings, nesting, the calibration comment, raising functions -------------------------------

def test_latin1_csv_names_the_line_and_the_byte_offset():
    """A Latin-1 CSV (UnicodeDecodeError before): refused with the file, the line and the byte's offset."""
    with pytest.raises(cal.CalibrationError, match=r"latin1\.csv:2: not UTF-8 text: byte 0xe9 at offset 62 "
                                                   r"\(line 2, column 33\)"):
        cal.load_data(R3 / "latin1.csv")


def test_rows_nested_5000_deep_are_refused_not_a_recursion_error():
    """Nesting 5000 deep (RecursionError before) is refused at the limit, naming the file and the line."""
    with pytest.raises(cal.CalibrationError, match=rf"nested_5000\.yaml:2: nested deeper than {MAX_DEPTH} levels"):
        cal.load_data(R3 / "nested_5000.yaml")


def test_nesting_limit_is_exact():
    """MAX_DEPTH levels read; one more is refused (aliases followed count too)."""
    ok = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert load_yaml(ok, "ok.yaml")[0] is not None
    with pytest.raises(ConfigError, match="deep.yaml:1: nested deeper than 100 levels"):
        load_yaml("x: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, "deep.yaml")
    half = "[" * 60 + "]" * 60
    with pytest.raises(ConfigError, match="once aliases are expanded"):
        load_yaml(f"a: &a {half}\nb: " + "[" * 60 + "*a" + "]" * 60, "alias.yaml")


def test_alias_bomb_and_recursive_alias_are_refused():
    """A billion-laughs document and a node that contains itself are refused naming the file."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    with pytest.raises(ConfigError, match=r"bomb\.yaml: more than 1000000 nodes once aliases are expanded"):
        load_yaml(bomb, "bomb.yaml")
    with pytest.raises(cal.CalibrationError, match=r"recursive_alias\.yaml:3: a recursive alias"):
        cal.load_data(R3 / "recursive_alias.yaml")


@pytest.mark.parametrize("name, message", [
    ("overlay_meta_list.yaml", "overlay_meta_list.yaml:2: the calibration comment is a JSON list, not an object"),
    ("overlay_meta_seed_abc.yaml", 'overlay_meta_seed_abc.yaml:2: the calibration comment: seed "abc": expected '
                                   "an integer"),
    ("overlay_meta_seed_negative.yaml", "seed -1: out of range"),
    ("overlay_meta_key_twice.yaml", "key 'seed' given twice"),
    ("overlay_meta_line_twice.yaml", "overlay_meta_line_twice.yaml:2: a second calibration comment"),
    ("overlay_meta_nested.yaml", "the calibration comment is nested too deeply"),
])
def test_bad_calibration_comment_is_refused_by_check(name, message):
    """--check of an overlay whose `# calibration:` JSON is a list, has `"seed": "abc"` (a ValueError traceback
    before), a seed out of range, a key twice, a second such line or deep nesting: a typed error naming it."""
    with pytest.raises(ConfigError) as e:
        cal.check(R3 / name, R3 / "ok_bom.yaml")
    assert message in str(e.value), str(e.value)


def test_calibration_comment_of_a_real_overlay_reads_back(tmp_path):
    """What write_outputs puts on the `# calibration:` line passes parse_meta unchanged."""
    res = cal.calibrate(R3 / "ok_bom.csv", ["k200.launch.wait_overhead=0.1 us..20 us"])
    ov = Path(cal.write_outputs(res, tmp_path / "o", plots=False)["overlay"])
    line = next(ln for ln in ov.read_text().splitlines() if ln.startswith("# calibration: "))
    meta = report.parse_meta(line[len("# calibration: "):], "x")
    assert meta["seed"] == res["seed"] and meta["fitted_rows"] == res["fitted_rows"]
    assert cal.check(ov, R3 / "ok_bom.csv")["rows"][0]["model"] is not None


def test_function_raising_type_error_names_file_function_and_row(tmp_path):
    """A --functions function raising TypeError: the fit's error and --check's recorded failure name the data
    file and line, the row, the function and the functions file's line where it raised."""
    data = R3 / "fn_type_error.yaml"
    with pytest.raises(cal.CalibrationError) as e:
        cal.calibrate(data)
    msg = str(e.value)
    for word in (f"{data}:2", "row 'te'", "r3.type_error raised TypeError", f"{FNS}:7, type_error",
                 "can only concatenate"):
        assert word in msg, msg
    chk = cal.check(_write(tmp_path, '# calibration: {"seed": 1}\n', "ov.yaml"), data)
    assert chk["failed"] == ["te"] and f"{FNS}:7" in chk["rows"][0]["failure"]


# ---- family 10: duplicate keys and columns ------------------------------------------------------------------

def test_two_rows_keys_are_refused_naming_both_lines():
    """Two `rows:` keys (1 row of 3 evaluated before): refused naming the key and both lines."""
    with pytest.raises(cal.CalibrationError, match=r"two_rows_keys\.yaml:4: key 'rows' given twice \(lines 1 and "
                                                   r"4\)"):
        cal.load_data(R3 / "two_rows_keys.yaml")


def test_same_key_in_different_maps_is_fine():
    """Only a key twice in ONE map is refused: the same key in sibling maps, and merge keys, still read."""
    data, _ = load_yaml("a: {x: 1}\nb: {x: 2}\nc: &c {y: 1}\nd: {<<: *c, z: 2}\n", "ok.yaml")
    assert data == {"a": {"x": 1}, "b": {"x": 2}, "c": {"y": 1}, "d": {"y": 1, "z": 2}}


def test_two_value_columns_are_refused_naming_both():
    """A CSV with two `value` columns (the second used before): refused naming the column and both positions."""
    with pytest.raises(cal.CalibrationError, match=r"two_value_columns\.csv:1: column 'value' given twice "
                                                   r"\(columns 4 and 6\)"):
        cal.load_data(R3 / "two_value_columns.csv")


def test_csv_cell_over_the_size_limit_names_the_line(tmp_path):
    """A cell longer than the csv module's limit (a csv.Error traceback before) is refused naming the line."""
    data = _write(tmp_path, "id,group,call,value,unit,note\na,g,test.linear n=10,2.03,us,\"" + "x" * 200_000 + "\"\n",
                  "long.csv")
    with pytest.raises(cal.CalibrationError, match=r"long\.csv:2: not valid CSV: field larger than field limit"):
        cal.load_data(data)


# ---- family 13: the byte-order mark -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ok_bom.csv", "ok_bom.yaml"])
def test_a_utf8_bom_is_accepted(name):
    """A CSV or YAML starting with a UTF-8 BOM ("missing column 'id'" before) reads like one without."""
    ds = cal.load_data(R3 / name)
    assert ds.rows[0].id == "a" and ds.rows[0].line == (2 if name.endswith(".csv") else 2)


def test_read_text_drops_only_a_leading_bom(tmp_path):
    """read_text drops the BOM at the start only; a file that is not UTF-8 names its offset."""
    assert read_text(_write(tmp_path, b"\xef\xbb\xbfa\xef\xbb\xbfb", "t.txt")) == "a\ufeffb"
    with pytest.raises(ConfigError, match=r"u\.txt:3: not UTF-8 text: byte 0xff at offset 4 \(line 3, column 1\)"):
        read_text(_write(tmp_path, b"a\nb\n\xff", "u.txt"))

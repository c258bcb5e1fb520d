"""Findings of the reader fuzzers (issue 31): tests/python/test_fuzz_calibrate.py and test_fuzz_checkpoint.py.

Each finding's minimal reproducer, and a variant, is a file under tests/bad_inputs/fuzz_r3/. The calibrate ones
(a YAML file with a character YAML forbids gave a bare yaml ReaderError) are CLI cases in
tests/bad_inputs/cases_r3_fuzz.yaml and Python API cases here; the sweep checkpoint ones are here (a resume
reads them): a file of blank lines only was taken for an empty checkpoint and dropped; ``wall_s`` an integer
of 400 digits gave OverflowError; a key given twice in a line kept the last value; a value nested 600 deep
loaded, then the resumed sweep died by RecursionError; ``"version": true`` or ``1.0`` passed for version 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import kernbench
from kernbench import calibrate as cal
from kernbench._core import ConfigError
from kernbench.calibrate import report
from kernbench.sweeps.checkpoint import Checkpoint

FUZZ = Path(__file__).resolve().parents[1] / "bad_inputs" / "fuzz_r3"
SYNTH = Path(__file__).resolve().parents[1] / "calibrate" / "synthetic.py"
IDENTITY = {"target": "r3-nan-metric", "seed": 1, "config_hash": None, "sets": ["bench.bad=none"]}

cal.load_functions(SYNTH)

CHECKPOINT_CASES = {  # file -> words of the ConfigError (the file's path is always one)
    "ckpt_blank_lines.jsonl": ["not a kernbench sweep checkpoint", "only blank lines, no header"],
    "ckpt_form_feed_and_spaces.jsonl": ["not a kernbench sweep checkpoint", "only blank lines, no header"],
    "ckpt_wall_s_400_digits.jsonl": ["line 2 has wall_s=111111", "expected seconds >= 0", "damaged"],
    "ckpt_wall_s_minus_400_digits.jsonl": ["line 2 has wall_s=-999999", "expected seconds >= 0"],
    "ckpt_record_key_twice.jsonl": ['line 2 gives the key "status" twice', "damaged"],
    "ckpt_header_key_twice.jsonl": ['line 1 gives the key "identity" twice', "damaged"],
    "ckpt_rows_nested_600.jsonl": ["line 2 is nested deeper than 100 levels", "damaged"],
    "ckpt_identity_nested_600.jsonl": ["line 1 is nested deeper than 100 levels"],
    "ckpt_version_true.jsonl": ["checkpoint version True", "reads version 1"],
    "ckpt_version_1_0.jsonl": ["checkpoint version 1.0", "reads version 1"],
}


@pytest.mark.parametrize("name", sorted(CHECKPOINT_CASES))
def test_a_fuzzed_checkpoint_is_refused_naming_the_file_and_left_alone(tmp_path, name):
    """Each checkpoint the fuzzer found accepted wrongly or crashing the reader (OverflowError) is one ConfigError
    naming the file and what is wrong, and the file is left byte for byte as it was."""
    path = tmp_path / "checkpoint.jsonl"
    shutil.copy(FUZZ / name, path)
    with pytest.raises(ConfigError) as e:
        Checkpoint(path, IDENTITY).read()
    msg = str(e.value)
    missing = [w for w in [str(path), *CHECKPOINT_CASES[name]] if w not in msg]
    assert not missing, f"{name}: the message lacks {missing}: {msg}"
    assert path.read_bytes() == (FUZZ / name).read_bytes()


def test_every_fuzz_checkpoint_has_a_case():
    """No checkpoint reproducer under fuzz_r3/ is left without a case above."""
    assert {p.name for p in FUZZ.glob("*.jsonl")} == set(CHECKPOINT_CASES)


def test_an_empty_checkpoint_file_is_still_no_checkpoint(tmp_path):
    """A 0-byte file (nothing to lose) reads as no finished points, as a missing one does, and is left alone."""
    path = tmp_path / "checkpoint.jsonl"
    path.write_bytes(b"")
    assert Checkpoint(path, IDENTITY).read() == {}
    assert path.read_bytes() == b""


def small_point(point):
    """A sweep function of one metric (the resume test's target)."""
    return {"y": point.bench["x"] * 2}


def test_a_deeply_nested_checkpointed_row_is_refused_before_the_resumed_sweep(tmp_path):
    """The fuzzer's find through a real resume: a finished point whose row holds a value nested 600 deep made
    `sweep(..., resume=True)` die by RecursionError; it is refused as damage naming the file and line 2, the
    file unchanged and no sweep.json written."""
    kernbench.sweep(small_point, {"bench.x": [1, 2]}, "serial", out=tmp_path)
    ckpt = tmp_path / "checkpoint.jsonl"
    header, first = ckpt.read_text().splitlines()[:2]
    rec = json.loads(first)
    rec["rows"] = [{"y": json.loads("[" * 600 + "]" * 600)}]
    ckpt.write_text(header + "\n" + json.dumps(rec) + "\n")
    (tmp_path / "sweep.json").unlink()
    before = ckpt.read_bytes()
    with pytest.raises(ConfigError, match=r"checkpoint\.jsonl: line 2 is nested deeper than 100 levels"):
        kernbench.sweep(small_point, {"bench.x": [1, 2]}, "serial", out=tmp_path, resume=True)
    assert ckpt.read_bytes() == before and not (tmp_path / "sweep.json").exists()


@pytest.mark.parametrize("name, words", [
    ("data_utf16.yaml", ["data_utf16.yaml:1", "not valid YAML", "character U+0000", "a UTF-16 file?"]),
    ("data_control_char.yaml", ["data_control_char.yaml:2", "not valid YAML", "character U+0001"]),
])
def test_a_yaml_data_file_with_a_forbidden_character_is_refused_naming_the_file(name, words):
    """A data file YAML's reader refuses character by character (a NUL of UTF-16 text, a control character) was a
    bare yaml ReaderError (`special characters are not allowed`); it is a CalibrationError naming file and line."""
    with pytest.raises(cal.CalibrationError) as e:
        cal.load_data(FUZZ / name)
    missing = [w for w in words if w not in str(e.value)]
    assert not missing, f"{name}: the message lacks {missing}: {e.value}"


def test_an_overlay_with_a_forbidden_character_is_refused_naming_the_file():
    """An overlay saved as UTF-16 without a BOM (`--check`) was a bare yaml ReaderError; it is a CalibrationError
    naming the file and line 1."""
    with pytest.raises(cal.CalibrationError, match=r"overlay_utf16\.yaml:1: not valid YAML: character U\+0000"):
        report.read_overlay(FUZZ / "overlay_utf16.yaml")


def test_a_csv_cell_with_a_unicode_line_separator_stays_one_cell():
    """A CSV whose note holds U+2028 and a form feed (csv's own reader keeps both in the cell) was split into more
    rows by str.splitlines and refused naming a row 'b' that does not exist; it loads as its two rows, each on its
    own line, the notes intact."""
    ds = cal.load_data(FUZZ / "ok_csv_line_separator_in_note.csv")
    assert [(r.id, r.line, r.note) for r in ds.rows] == [("r1", 2, "a\u2028b"), ("r2", 3, "form\x0cfeed")]


@pytest.mark.parametrize("name, notes", [
    ("ok_csv_unquoted_quote_then_comment.csv", ['5" screen', "b"]),
    ("ok_csv_quoted_cr_in_note.csv", ["0\r0", "b"]),
    ("ok_csv_quoted_hash_line_in_note.csv", ["first\n# second line, not a comment", "b"]),
])
def test_a_quoted_csv_cell_reads_back_as_written(name, notes):
    """Found by the well-formed-CSV fuzz: a quoted cell's \\r came back as \\n (the lines were re-joined with \\n),
    and a quoted cell's line that starts with # was blanked as a comment (the note lost it, or the file was refused);
    both read back exactly as csv.writer wrote them, a real comment line (with an odd quote) still skipped, and a
    quote inside an unquoted cell (5" screen: plain text to csv) opens no quoted cell."""
    ds = cal.load_data(FUZZ / name)
    assert [r.id for r in ds.rows] == ["r1", "r2"] and [r.note for r in ds.rows] == notes
    if "hash" in name:  # r2 after the note's two lines and the comment
        assert [r.line for r in ds.rows] == [2, 5]
    if "unquoted" in name:  # the comment on line 3 skipped
        assert [r.line for r in ds.rows] == [2, 4]


def _overlay_result(**kw):
    """A calibration result with nothing fitted, for overlay_text; ``kw`` replaces its fields."""
    res = {"date": "2026-12-03", "data": "d.yaml", "config": None, "seed": 1, "command": "kernbench calibrate",
           "fit_on": [], "fitted_rows": [], "free": [], "unidentifiable": {}, "overlay_values": {}}
    res.update(kw)
    return res


@pytest.mark.parametrize("value", ["-", "- us", "\U00010000 x", "\x85\u2028"])
def test_a_written_overlay_value_reads_back(tmp_path, value):
    """Found by the written-overlay fuzz: a value "-" (or "- us") was written plain, a YAML list item, and the
    overlay calibrate wrote was refused by --check; a character past U+FFFF was written as a JSON surrogate pair,
    which YAML reads back as two lone surrogates. Each value now reads back as the same text."""
    path = tmp_path / "overlay.yaml"
    path.write_text(report.overlay_text(_overlay_result(overlay_values={"k200.launch.queue_submit": value}),
                                        tmp_path))
    assert report.read_overlay(path)["values"] == {"k200.launch.queue_submit": value}


@pytest.mark.parametrize("field", ["data", "command", "date"])
def test_a_line_break_in_overlay_header_text_stays_in_its_comment(tmp_path, field):
    """Found by the written-overlay fuzz: a data path, command or date holding a newline ended its # comment line
    and the rest was read as YAML (here a config key the calibration never fitted; a control character made the
    overlay unreadable). The text is escaped in the comment, the values and the metadata read back exactly."""
    text = "x\nk200: {launch: {queue_submit: 1 s}}\x1f"
    path = tmp_path / "overlay.yaml"
    path.write_text(report.overlay_text(_overlay_result(**{field: text}), tmp_path))
    got = report.read_overlay(path)
    assert got["values"] == {} and got["meta"][field] == text


def test_a_row_id_with_a_newline_stays_in_the_fitted_value_comment(tmp_path):
    """A free parameter fitted on a row whose id holds a newline: the id went raw into the value's # comment and
    its second line was read as YAML. The comment is escaped; the value and fitted_on read back exactly."""
    free = [{"path": "k200.launch.queue_submit", "fitted_on": ["r1\nk200: {x: 1}"], "start": "3 ns",
             "bounds": ["1 ns", "9 ns"], "identifiable": True, "why": ""}]
    path = tmp_path / "overlay.yaml"
    path.write_text(report.overlay_text(_overlay_result(free=free, overlay_values={free[0]["path"]: "4 ns"}),
                                        tmp_path))
    got = report.read_overlay(path)
    assert got["values"] == {"k200.launch.queue_submit": "4 ns"}
    assert got["meta"]["fitted_on"] == {"k200.launch.queue_submit": ["r1\nk200: {x: 1}"]}

"""Fuzz calibrate's readers (issue 31): measured-data files (YAML and CSV) and the ``# calibration:`` line of overlays.

Generated files -- rows with duplicate keys and columns, deep nesting, aliases, numbers as texts (nan, inf, 1e308,
with units), in UTF-8 with or without a BOM, Latin-1, UTF-16, cut short or with garbage bytes, or only random
bytes -- go through ``kernbench.calibrate.load_data`` and ``report.read_overlay``. Each must give a parsed result
with no NaN or infinity in it, or a typed kernbench error (CalibrationError, a ConfigError) whose one-line message
names the file; never another exception or a hang. Three round-trip properties besides: every CSV csv.writer writes,
every rows file yaml.safe_dump writes and every overlay calibrate writes (overlay_text) read back exactly.
Findings are reproduced in tests/python/test_r3_fuzz_findings.py.

Default: a short seeded run (a few seconds). ``KERNBENCH_FUZZ_SECONDS=30`` fuzzes that much longer (``.ci/run``),
half of it each for the data files and the overlays.
"""

from __future__ import annotations

import csv
import io
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

from fuzz_support import assert_finite, encoded, fuzz, json_values, numeric_texts, outcome  # noqa: E402
from kernbench import calibrate as cal  # noqa: E402
from kernbench.calibrate import report  # noqa: E402
from kernbench.calibrate.data import ROW_KEYS  # noqa: E402
from kernbench.calibrate.report import META_KEYS, META_PREFIX  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SYNTH = ROOT / "calibrate" / "synthetic.py"
cal.load_functions(SYNTH)

CALLS = ["test.linear n=4", "test.linear n={num}", "test.product n={num}", "k200.gemm m={num} n=64 k=64",
         "k200.copy kind=pinned bytes={num}", "test.linear n=4 k200.launch.queue_submit={num}", "test.linear",
         "nope.fn", "test.linear n=4 n=5", "'unclosed", "test.linear =3", ""]
UNITS = ["us", "ns", "s", "ms", "GFLOPS", "GB/s", "%", "", "fortnights", "x"]
KEYS = [*ROW_KEYS, "value", "value", "id", "bogus", " id", "Value"]


def _scalar() -> st.SearchStrategy[str]:
    """A YAML scalar as written: plain, quoted, or a small flow collection."""
    words = st.sampled_from(["a", "row", "g1", "gemm-square", "test.linear", "yes", "~", "-", "{", "[", ":", "&a",
                             "*a", "!!binary", "!!float", "!!python/none", "'", '"', "#", "\t", "2001-12-14"])
    return st.one_of(numeric_texts(), words, numeric_texts().map(json.dumps), st.text(max_size=8).map(json.dumps),
                     st.lists(numeric_texts().map(json.dumps), max_size=3).map(lambda x: "[" + ", ".join(x) + "]"))


GOOD = {"id": "r{i}", "group": "g1", "call": "test.linear n={i}", "value": "3", "unit": "us", "metric": "value",
        "source": "s", "weight": "2", "tolerance": "5 %", "note": "n", "config": "k200.yaml",
        "function": "test.linear", "params": "{{n: {i}}}", "set": "{{k200.launch.queue_submit: 3 ns}}"}


@st.composite
def _value_text(draw, key: str, i: int = 0, good: float = 0.3, rnd: random.Random | None = None) -> str:
    """A row field's value: a good one (odds ``good``), else awkward for its key, else anything; sometimes nested
    deep. ``rnd`` makes those choices (hypothesis's own draws lean to the extremes: too few good rows)."""
    rnd = rnd or random.Random(0)
    pick = rnd.randrange(10)
    if key in GOOD and rnd.random() < good:
        text = GOOD[key].format(i=i + 1)
    elif key == "call" and pick < 8:
        text = draw(st.sampled_from(CALLS)).replace("{num}", draw(numeric_texts()).replace(" ", ""))
    elif key in ("value", "weight", "tolerance") and pick < 8:
        text = draw(numeric_texts())
    elif key == "unit" and pick < 8:
        text = draw(st.sampled_from(UNITS))
    elif key in ("params", "set") and pick < 8:
        k = draw(st.sampled_from(["n", "m", "k200.launch.queue_submit", "bogus", "1"]))
        text = "{" + k + ": " + draw(_scalar()) + "}"
    else:
        text = draw(_scalar())
    depth = rnd.choice([0] * 40 + [2, 99, 101, 300])
    return "[" * depth + text + "]" * depth


@st.composite
def _yaml_rows(draw) -> str:
    """A rows file: a map with rows (sometimes twice), groups, defaults, anchors; or a bare list of rows."""
    rnd = random.Random(draw(st.integers(0, 2**32)))  # a real PRNG: hypothesis's own draws lean to extremes
    extra = []
    if rnd.random() < 0.5:
        extra = draw(st.lists(st.sampled_from([
            "groups: {g1: {tolerance: 5 %}}\n", "defaults: &d {source: here}\n",
            "groups: {g1: {tolerance: " + draw(numeric_texts()).replace(":", "") + "}}\n",
            "defaults: {weight: " + draw(numeric_texts()).replace(":", "") + "}\n",
            "rows: []\n", "rows: *r\n", "extra: 1\n", "groups: [1]\n", "groups: {g1: 5}\n"]), max_size=3))
    anchored = any("&d" in x for x in extra)
    rows = []
    for i in range(rnd.choice([0, 1, 2, 2, 3, 4])):
        fields = draw(st.lists(st.sampled_from(KEYS), min_size=0, max_size=8))
        plausible = rnd.random() < 0.75
        if plausible:  # sometimes with more fields
            fields = ["id", "group", "call", "value", "unit", *fields[:rnd.choice([0, 0, 0, 1, 3])]]
        body = [f"{k}: {draw(_value_text(k, i, 0.9 if plausible else 0.3, rnd))}" for k in fields]
        if rnd.randrange(4 if anchored else 30) == 0:
            body.insert(0, "<<: *d")
        rows.append("  - " + "\n    ".join(body) if body else "  - {}")
    head = rnd.choice(["rows:\n", "rows:\n", "rows:\n", "", "rows: &r\n"])
    text = "".join(extra) + head + "\n".join(rows) + "\n"
    if not head and draw(st.booleans()):
        text = draw(st.sampled_from(["- ", "5\n", "'x'\n", "{rows: {a: 1}}\n"])) + text
    return text


@st.composite
def _csv_rows(draw) -> str:
    """A CSV file: a header (columns sometimes twice, unknown or padded), comment lines, rows of awkward cells."""
    header = draw(st.lists(st.sampled_from(["id", "group", "call", "value", "unit", "source", "weight", "tolerance",
                                            "metric", "note", "config", "value", " value ", "id", "bogus", ""]),
                           min_size=0, max_size=9))
    rnd = random.Random(draw(st.integers(0, 2**32)))  # a real PRNG: hypothesis's own draws lean to extremes
    plausible = rnd.random() < 0.75
    if plausible:
        header = ["id", "group", "call", "value", "unit", *rnd.choice([[], [], ["source"], ["weight", "note"],
                                                                       header[:3]])]
    lines = [",".join(header)]
    for i in range(rnd.choice([0, 1, 2, 2, 3, 4])):
        cells = []
        for col in header + (["extra"] if rnd.randrange(8) == 0 else []):
            text = draw(_value_text(col.strip(), i, 0.9 if plausible else 0.3, rnd)) if rnd.randrange(20) else draw(st.text(max_size=6))
            if rnd.random() < 0.3:
                text = '"' + text.replace('"', '""') + '"'
            cells.append(text)
        lines.append(",".join(cells[:rnd.randrange(len(cells) + 1)] if rnd.randrange(6) == 0 else cells))
    if rnd.random() < 0.3:
        lines.insert(draw(st.integers(0, len(lines))), "# a comment, " + draw(st.text(max_size=6)))
    return rnd.choice(["\n", "\r\n", "\r"]).join(lines) + rnd.choice(["\n", "\n", "", '"'])


@st.composite
def _data_files(draw) -> tuple[str, bytes]:
    """(suffix, bytes) of a measured-data file: a YAML or CSV one, encoded somehow, or only random bytes."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from([".yaml", ".csv"])), draw(st.binary(max_size=200))
    if kind < 5:
        return draw(st.sampled_from([".yaml", ".yml"])), draw(encoded(draw(_yaml_rows())))
    return ".csv", draw(encoded(draw(_csv_rows())))


def _check_data(tmp: Path, file: tuple[str, bytes], seen: list[str]) -> None:
    suffix, raw = file
    path = tmp / f"data{suffix}"
    path.write_bytes(raw)
    ds, _ = outcome(lambda: cal.load_data(path), path)
    if ds is not None:
        assert ds.rows, f"{path}: a dataset without rows was accepted"
        assert_finite(ds, str(path))
        assert all(r.value > 0 and r.measured > 0 and 0 < r.weight for r in ds.rows)
        seen.append(suffix)


def test_fuzz_data_files(tmp_path):
    """Generated measured-data files (YAML, CSV, any encoding, random bytes) load with finite numbers or are refused
    with a CalibrationError naming the file; no other exception, no hang."""
    seen: list[str] = []
    fuzz(_data_files(), lambda f: _check_data(tmp_path, f, seen), examples=100, at_seed=31, share=0.5)
    assert {".csv", ".yaml"} & set(seen), "no generated data file ever loaded: the generator only makes errors"


# ---- overlays and their # calibration: line ---------------------------------------------------------------------

_JSON = json_values()


@st.composite
def _meta_text(draw, rnd: random.Random) -> str:
    """What follows ``# calibration: ``: a metadata object (right or wrong types, unknown and repeated keys), any
    JSON value, a cut or nested one, or random text."""
    pick = rnd.randrange(10)
    if pick < 6:
        keys = rnd.sample([*META_KEYS, "seed", "bogus"], rnd.randrange(6))
        good = {"date": "2026-01-01", "data": "d.yaml", "config": None, "seed": 1, "command": "c", "fit_on": ["g"],
                "fitted_rows": ["r"], "fitted_on": {"a.b": ["r"]}, "unidentifiable": {"a.b": "why"}}
        parts = [f"{json.dumps(k)}: {json.dumps(good.get(k, 1)) if rnd.random() < 0.8 else draw(_json_text())}"
                 for k in keys]
        text = "{" + ", ".join(parts) + "}"
    elif pick < 8:
        text = draw(_json_text())
    else:
        text = draw(st.text(max_size=30))
    if rnd.randrange(6) == 0:
        text = text[:rnd.randrange(len(text) + 1)]
    return text


@st.composite
def _json_text(draw) -> str:
    """A JSON value as text, sometimes with NaN, a huge number, or nested deep."""
    special = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "1" * 5000, "2" * 30, "-1", "true", "1.0",
                               '"abc"', "[" * 2000 + "]" * 2000, "[" * 500 + "]" * 500, '{"a": 1, "a": 2}'])
    return draw(st.one_of(_JSON.map(json.dumps), special))


@st.composite
def _overlays(draw) -> bytes:
    """An overlay: config keys as YAML (repeated, nested, lists), one or two # calibration: lines, encoded."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    body = []
    for _ in range(rnd.randrange(5)):
        key = rnd.choice(["k200.launch.queue_submit", "k200", "include", "a", "a", "graph"])
        body.append(f"{key}: {draw(_value_text('value', 0, 0.0, rnd))}")
    for _ in range(rnd.choice([1, 1, 1, 1, 0, 2])):
        body.insert(rnd.randrange(len(body) + 1), META_PREFIX + draw(_meta_text(rnd)))
    return draw(encoded("\n".join(body) + "\n"))


def _check_overlay(tmp: Path, raw: bytes, seen: list[dict]) -> None:
    path = tmp / "overlay.yaml"
    path.write_bytes(raw)
    res, _ = outcome(lambda: report.read_overlay(path), path)
    if res is not None:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in res["values"].items())
        assert isinstance(res["meta"], dict) and set(res["meta"]) <= set(META_KEYS)
        assert_finite(res["meta"], str(path))
        seen.append(res["meta"])


def test_fuzz_overlays(tmp_path):
    """Generated overlays (any YAML body, any `# calibration:` line, any encoding) read as --set texts and checked
    metadata, or are refused with a CalibrationError naming the file; no other exception, no hang."""
    seen: list[dict] = []
    fuzz(_overlays(), lambda raw: _check_overlay(tmp_path, raw, seen), examples=80, at_seed=131, share=0.5)
    assert any(seen), "no generated overlay with metadata was ever read: the generator only makes errors"


def test_cli_refuses_a_fuzzed_data_file_with_one_line(tmp_path):
    """One CLI case: `kernbench calibrate` on a Latin-1 CSV with a BOM-like start and a column given twice exits 2
    with one `kernbench: error:` line naming the file, no traceback."""
    path = tmp_path / "fuzzed.csv"
    path.write_bytes(b"\xef\xbb\xbfid,group,call,value,unit,value\nr\xe9,g,test.linear n=4,1e308,us,nan\n")
    proc = subprocess.run([sys.executable, "-m", "kernbench", "calibrate", "--functions", str(SYNTH), "--data",
                           str(path), "--out", str(tmp_path / "out"), "--no-plots"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernbench: error: ") and str(path) in lines[0], proc.stderr


@st.composite
def _good_csv(draw) -> tuple[str, list[tuple[str, str]]]:
    """A well-formed CSV: written by Python's csv module (notes of any text: quotes, commas, line ends, U+2028, a
    leading #), or by hand with notes unquoted (a quote inside is plain text) and # comment lines of any text
    between the rows; and what each row's id and note must read back as."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    n = rnd.randrange(1, 5)
    if rnd.random() < 0.5:
        rows = [(f"r{i}", draw(st.text(max_size=12))) for i in range(1, n + 1)]
        buf = io.StringIO()
        w = csv.writer(buf)  # "\r\n" ends a record: a cell holding \r or \n is quoted (with "\n" alone \r is not)
        w.writerow(["id", "group", "call", "value", "unit", "note"])
        for rid, note in rows:
            w.writerow([rid, "g1", f"test.linear n={rid[1:]}", "3", "us", note])
        return buf.getvalue(), [(rid, note.strip()) for rid, note in rows]
    plain = st.text(st.characters(blacklist_characters=',\r\n', blacklist_categories=("Cs",)), max_size=10)
    rows = [(f"r{i}", draw(plain.filter(lambda t: not t.lstrip().startswith('"')))) for i in range(1, n + 1)]
    lines = ["id,group,call,value,unit,note"]
    for rid, note in rows:
        if rnd.random() < 0.4:
            lines.append("# " + draw(plain))
        lines.append(f"{rid},g1,test.linear n={rid[1:]},3,us,{note}")
    return "\n".join(lines) + "\n", [(rid, note.strip()) for rid, note in rows]


def test_fuzz_well_formed_csv_reads_back_exactly(tmp_path):
    """Every well-formed CSV (csv.writer's, or unquoted notes between comment lines) loads: the same rows, in
    order, notes intact."""
    path = tmp_path / "good.csv"

    def check(case):
        text, want = case
        path.write_bytes(text.encode())
        ds, err = outcome(lambda: cal.load_data(path), path)
        assert err is None, f"a well-formed CSV was refused: {err}\n{text!r}"
        assert [(r.id, r.note) for r in ds.rows] == want, text

    fuzz(_good_csv(), check, examples=60, at_seed=231, share=0.0)


@st.composite
def _good_yaml(draw) -> tuple[str, list[tuple[str, str]]]:
    """A well-formed rows file written by yaml.safe_dump: ids and notes of any text, and what they read back as."""
    import yaml

    rnd = random.Random(draw(st.integers(0, 2**32)))
    # no control characters or U+2028/9: PyYAML's own dump-and-load changes those (its emitter folds them)
    chars = st.one_of(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), st.sampled_from("\n\t"))
    ids = draw(st.lists(st.text(chars, min_size=1, max_size=8).filter(str.strip), min_size=1, max_size=4,
                        unique=True))
    rows = [{"id": rid, "group": "g1", "call": f"test.linear n={i + 1}", "value": rnd.choice([3, 2.5, "4 us"]),
             "unit": "us", "note": draw(st.text(chars, max_size=12))} for i, rid in enumerate(ids)]
    for r in rows:
        if isinstance(r["value"], str):
            del r["unit"]
    text = yaml.safe_dump({"rows": rows}, allow_unicode=rnd.random() < 0.5, default_flow_style=rnd.random() < 0.3)
    return text, [(r["id"], r["note"]) for r in rows]


def test_fuzz_well_formed_yaml_reads_back_exactly(tmp_path):
    """Every rows file yaml.safe_dump writes (any ids and notes) loads: the same rows, in order, text intact."""
    path = tmp_path / "good.yaml"

    def check(case):
        text, want = case
        path.write_bytes(text.encode())
        ds, err = outcome(lambda: cal.load_data(path), path)
        assert err is None, f"a well-formed rows file was refused: {err}\n{text}"
        assert [(r.id, r.note) for r in ds.rows] == want, text

    fuzz(_good_yaml(), check, examples=60, at_seed=331, share=0.0)


@st.composite
def _overlay_results(draw) -> dict:
    """A calibration result as overlay_text writes it: any date, data path and command text, fitted values of
    any text at dotted config paths, free parameters fitted on rows of any id."""
    text = st.text(max_size=10)
    names = st.text("abcdefgh_", min_size=1, max_size=3)
    paths = st.lists(names, min_size=1, max_size=3).map(".".join)
    values = draw(st.dictionaries(paths, text, max_size=4))
    paths_ok = [p for p in values if not any(q.startswith(p + ".") for q in values)]  # no path inside another
    free = [{"path": p, "fitted_on": draw(st.lists(text, max_size=3)), "start": draw(text), "bounds": ["1", "2"],
             "identifiable": draw(st.booleans()), "why": draw(text)} for p in paths_ok if draw(st.booleans())]
    return {"date": draw(text), "data": draw(text), "config": None, "seed": draw(st.integers(0, 2**31)),
            "command": draw(text), "fit_on": draw(st.lists(text, max_size=2)), "fitted_rows": [], "free": free,
            "unidentifiable": {}, "overlay_values": {p: values[p] for p in paths_ok}}


def test_fuzz_written_overlays_read_back_exactly(tmp_path):
    """Every overlay calibrate writes (any date, data path, command, values) reads back with --check: the same
    values as --set texts and the same # calibration: metadata."""
    path = tmp_path / "overlay.yaml"

    def check(result):
        path.write_text(report.overlay_text(result, tmp_path))
        got, err = outcome(lambda: report.read_overlay(path), path)
        assert err is None, f"a written overlay was refused: {err}\n{path.read_text()}"
        assert got["values"] == result["overlay_values"], path.read_text()
        assert got["meta"]["data"] == result["data"] and got["meta"]["command"] == result["command"]
        assert got["meta"]["fitted_on"] == {f["path"]: f["fitted_on"] for f in result["free"]}

    fuzz(_overlay_results(), check, examples=60, at_seed=431, share=0.0)

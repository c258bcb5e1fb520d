"""Issue 31 (reliability round 3), compare-nccl and goldens: the Python API reproducers and their variants.

The CLI reproducers (each broken log and golden, one ``kernbench: error:`` line) are in
tests/bad_inputs/cases_r3_nccl.yaml; the files they read in tests/bad_inputs/nccl_r3/. Here: the readers
called directly, compare-nccl's outputs landing together or not at all (family 3), the --algorithm check
(family 9), and the golden files validated up front, before any smoke run (families 4 and 12).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernbench import nccl
from kernbench._core import ConfigError, UsageError

CORPUS = Path(__file__).resolve().parent.parent / "bad_inputs" / "nccl_r3"
GOOD_LOG = CORPUS / "good_all_reduce.txt"


# ---- family 3: non-finite numbers refused where the log is read; outputs together or not at all --------------

@pytest.mark.parametrize("name,line,words", [
    ("nan_time.txt", 19, ["out-of-place time", "'nan'", "not a finite number"]),
    ("nan_time_last_row.txt", 21, ["out-of-place time", "'nan'"]),
    ("inf_busbw_inplace.txt", 19, ["in-place busbw", "'inf'"]),
    ("overflow_time.txt", 20, ["'1e999'", "not a finite number"]),
    ("nan_wrong.txt", 19, ["#wrong", "'nan'"]),
    ("nan_avg_footer.txt", 23, ["average bus bandwidth", "nan"]),
    ("negative_time.txt", 19, ["out-of-place time", "-23.49", "negative"]),
    ("negative_busbw.txt", 20, ["out-of-place busbw", "-214.73", "negative"]),
    ("negative_algbw_last_row.txt", 21, ["out-of-place algbw", "negative"]),
    ("negative_size.txt", 19, ["size", "negative"]),
    ("size_past_int64.txt", 19, ["more than 2^63 - 1"]),
])
def test_parse_log_refuses_a_number_that_means_nothing_at_its_line(name, line, words):
    """parse_log refuses nan, inf, negative times/bandwidths/sizes with NcclLogError naming file:line and the
    column; a bad last row is refused too, not dropped as a row cut short."""
    with pytest.raises(nccl.NcclLogError) as e:
        nccl.parse_log(CORPUS / name)
    msg = str(e.value)
    assert f"{name}:{line}:" in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_the_sound_log_of_the_corpus_parses():
    """good_all_reduce.txt, the log the broken ones are cut from, reads as 4 complete rows with its footer."""
    log = nccl.parse_log(GOOD_LOG)
    assert [r.size for r in log.rows] == [1 << 20, 2 << 20, 4 << 20, 8 << 20]
    assert not log.truncated and log.avg_busbw == pytest.approx(117.4114) and log.ranks == 8


def test_a_garbled_row_mid_table_is_refused_and_noise_is_skipped(tmp_path):
    """A row-like line that is not a row (size '2_097_152') in the middle of the table is refused at its line
    (before: the table ended there, dropping the rows after it); another program's text between rows (an NCCL
    INFO line) is skipped with a note and every row is kept."""
    with pytest.raises(nccl.NcclLogError, match=r"size_with_underscores\.txt:19: not an nccl-tests result row"):
        nccl.parse_log(CORPUS / "size_with_underscores.txt")
    lines = GOOD_LOG.read_text().splitlines()
    lines.insert(18, "dgx-h100-01:41200:41210 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
    f = tmp_path / "info.txt"
    f.write_text("\n".join(lines) + "\n")
    log = nccl.parse_log(f)
    assert len(log.rows) == 4 and any("line 19: skipped" in n for n in log.notes)


def test_cli_nan_log_writes_nothing(cli, tmp_path):
    """`compare-nccl` on a log whose time is nan: exit 2, one error line naming file and line, and neither
    compare.csv nor compare.json written (before: a traceback, compare.csv without compare.json)."""
    out = tmp_path / "cmp"
    proc = cli("compare-nccl", str(CORPUS / "nan_time.txt"), "--config", "h100-8x-nvswitch", "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "nan_time.txt:19: the out-of-place time is 'nan'" in proc.stderr
    assert not (out / "compare.csv").exists() and not (out / "compare.json").exists()


def _result() -> dict:
    """A small comparison (the sound log on the H100 preset)."""
    return nccl.compare_log(GOOD_LOG, "h100-8x-nvswitch")


def test_write_comparison_with_a_nan_writes_nothing(tmp_path):
    """A non-finite value that reaches write_comparison (past the readers) is a UsageError and no file is
    written or replaced: an earlier run's compare.csv stays as it was."""
    res = _result()
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.csv").write_text("old\n")
    res["rows"][0]["model_time_us"] = math.nan
    with pytest.raises(UsageError, match="nothing written.*non-finite"):
        nccl.write_comparison(res, out, plot=False)
    assert (out / "compare.csv").read_text() == "old\n"
    assert not (out / "compare.json").exists()


def test_write_comparison_lands_every_file_or_none(tmp_path):
    """compare.json that cannot be written (a folder there) stops the run before compare.csv or compare.png is
    replaced: the outputs land together or not at all."""
    res = _result()
    out = tmp_path / "cmp"
    (out / "compare.json").mkdir(parents=True)
    (out / "compare.csv").write_text("old\n")
    with pytest.raises(UsageError, match="compare.json"):
        nccl.write_comparison(res, out, plot=True)
    assert (out / "compare.csv").read_text() == "old\n"
    assert not (out / "compare.png").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_a_no_plot_run_removes_an_earlier_runs_png(tmp_path):
    """A --no-plot run over a folder with an earlier run's compare.png removes it, so the folder never holds a
    plot of another run beside this run's CSV and JSON."""
    res = _result()
    out = tmp_path / "cmp"
    written = nccl.write_comparison(res, out, plot=True)
    assert set(written) == {"csv", "png", "json"} and (out / "compare.png").is_file()
    written = nccl.write_comparison(res, out, plot=False)
    assert set(written) == {"csv", "json"} and not (out / "compare.png").exists()
    assert json.loads((out / "compare.json").read_text())["rows"] == json.loads(json.dumps(res["rows"]))


def test_an_error_too_large_for_a_float_is_null(tmp_path):
    """A relative error too large for a float (a measured time of 5e-324 us) is None, null in compare.json (the
    documented rule), never inf: the JSON is written. Such a time in a log is refused since round 4 (below the
    printed 0.01 us: tests/python/test_r4_reliability.py), so the row is made here, after the parse."""
    res = nccl.compare_log(GOOD_LOG, "h100-8x-nvswitch")
    row = res["rows"][0]
    row["measured_time_us"] = 5e-324
    row["time_error"] = nccl._rel_error(row["model_time_us"], 5e-324)
    assert row["time_error"] is None
    nccl.write_comparison(res, tmp_path / "cmp", plot=False)
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"][0]["time_error"] is None


# ---- family 9: --algorithm checked before any run, naming the known ones -----------------------------------

def test_an_unknown_algorithm_is_refused_naming_the_known_ones():
    """compare_log(algorithm="bogus") raises UsageError naming the algorithms of the collective (before: every
    size became a failure and the command exited 0)."""
    with pytest.raises(UsageError) as e:
        nccl.compare_log(GOOD_LOG, "h100-8x-nvswitch", algorithm="bogus")
    msg = str(e.value)
    assert "'bogus': unknown algorithm" in msg and "known for all_reduce: auto, ring" in msg and "tree" in msg


def test_an_algorithm_without_the_collective_is_refused():
    """model_rows with an algorithm that has no such collective (pairwise for all_reduce, nvls for broadcast)
    refuses it up front, naming the algorithms that have one."""
    with pytest.raises(UsageError, match="'pairwise' has no all_reduce .algorithms with one: auto, ring"):
        nccl.model_rows(nccl.resolve_machine("h100-8x-nvswitch"), "all_reduce", [1024], algorithm="pairwise")
    with pytest.raises(UsageError, match="'nvls' has no broadcast"):
        nccl.check_algorithm("broadcast", "nvls")


def test_the_known_algorithms_still_run():
    """Every name algorithm_names offers for all_reduce is accepted by the check (tree: NCCL's name)."""
    names = nccl.algorithm_names("all_reduce")
    assert names[0] == "auto" and {"ring", "nvls", "tree", "double_binary_tree"} <= set(names)
    for n in names:
        nccl.check_algorithm("all_reduce", n)
    rows = nccl.model_rows(nccl.resolve_machine("h100-8x-nvswitch"), "all_reduce", [1 << 20], algorithm="tree")
    assert rows and rows[0]["time_us"] > 0


# ---- families 4 and 12: goldens validated whole when read, before any smoke run -------------------------------

GOLDENS = Path(__file__).resolve().parent.parent / "goldens"
BROKEN_GOLDENS = {  # nccl_r3/goldens_<case>/perf-phold.json: the field the error names
    "rows_list": "rows: expected an object of row name: metrics, got a list",
    "row_is_list": "rows.64x1: expected an object of metric: value, got a list",
    "other_bench": "bench 'pe-dma-perf': the file is the golden of another bench",
    "key_nope": "key ['nope']: bench 'perf-phold' names its rows by ['population']",
    "key_extra": "key ['population', 'events']",
    "version_999": "golden_version 999: this kernbench reads golden_version 1",
    "version_missing": "field 'golden_version' is missing",
    "tol_rel_nan": "tolerances.pending: tolerance 'rel=nan'",
    "tol_abs_negative": "tolerances.bare_bytes_per_pending: tolerance 'abs=-1'",
    "tol_unknown_metric": "tolerances.nope: not a golden metric of bench 'perf-phold'",
    "value_nan": "rows.64x1.bare_bytes_per_pending: NaN is not a number",
    "value_overflows": "rows.64x1.callbacks_bytes_per_pending: inf is not a finite number",
    "row_twice": "rows.64x1: the key is given twice",
    "row_lacks_metric": "rows.64x4: lacks the golden metric 'pending'",
}
NEEDS_THE_BENCH = {"other_bench", "key_nope", "key_extra", "tol_unknown_metric", "row_lacks_metric"}


def _bench(name: str):
    from kernbench.registry import get_bench

    return get_bench(name)


@pytest.mark.parametrize("case", sorted(BROKEN_GOLDENS))
def test_load_golden_refuses_a_broken_golden_naming_the_field(case):
    """load_golden(path, bench) refuses each broken golden of the corpus with ConfigError naming the file and the
    field (before: rows as a list passed until compare, the others were reported ok)."""
    from kernbench.goldens import load_golden

    path = CORPUS / f"goldens_{case}" / "perf-phold.json"
    with pytest.raises(ConfigError) as e:
        load_golden(path, _bench("perf-phold"))
    assert str(path) in str(e.value) and BROKEN_GOLDENS[case] in str(e.value), str(e.value)


@pytest.mark.parametrize("case", sorted(set(BROKEN_GOLDENS) - NEEDS_THE_BENCH))
def test_load_golden_without_its_bench_still_checks_the_file(case):
    """Without the bench (load_golden(path)), every check that needs no bench still runs: the shape, the version,
    the tolerances, the numbers and duplicate keys."""
    from kernbench.goldens import load_golden

    with pytest.raises(ConfigError, match="the golden file is damaged"):
        load_golden(CORPUS / f"goldens_{case}" / "perf-phold.json")


def test_every_checked_in_golden_passes_the_validation():
    """The goldens under tests/goldens all pass load_golden with their own bench (the checks refuse only broken
    files), and a UTF-8 BOM before one is accepted."""
    from kernbench.goldens import golden_path, load_golden
    from kernbench.registry import list_benches

    checked = 0
    for b in list_benches():
        if b.golden is not None and golden_path(b.name, GOLDENS).is_file():
            load_golden(golden_path(b.name, GOLDENS), b)
            checked += 1
    assert checked >= 15


def test_a_golden_with_a_bom_nested_deep_or_huge(tmp_path):
    """A BOM before the JSON is read; nesting past 100 and a file over 16 MiB are refused as damaged, naming the
    file (never RecursionError or a read of the whole file)."""
    from kernbench.goldens import load_golden

    good = (GOLDENS / "perf-phold.json").read_bytes()
    (tmp_path / "perf-phold.json").write_bytes(b"\xef\xbb\xbf" + good)
    assert load_golden(tmp_path / "perf-phold.json", _bench("perf-phold"))["bench"] == "perf-phold"
    (tmp_path / "perf-phold.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match="perf-phold.json: nested more than 100 deep"):
        load_golden(tmp_path / "perf-phold.json")
    with open(tmp_path / "perf-phold.json", "wb") as f:
        f.truncate((16 << 20) + 10)
    with pytest.raises(ConfigError, match="perf-phold.json: more than 16 MiB"):
        load_golden(tmp_path / "perf-phold.json")


def test_goldens_command_refuses_a_broken_golden_before_any_smoke_run(tmp_path, monkeypatch):
    """`kernbench goldens` with two benches, the second's golden broken (rows a list): ConfigError naming it and
    no smoke run at all, not even the first bench's (before: the first ran, then AttributeError)."""
    from kernbench import goldens

    (tmp_path / "perf-phold.json").write_bytes((GOLDENS / "perf-phold.json").read_bytes())
    doc = json.loads((GOLDENS / "pe2pe-latency.json").read_text())
    doc["rows"] = list(doc["rows"].values())
    (tmp_path / "pe2pe-latency.json").write_text(json.dumps(doc))
    runs: list[str] = []
    monkeypatch.setattr(goldens, "run_smoke", lambda bench, out, seed=1: runs.append(bench.name) or {})
    with pytest.raises(ConfigError, match=r"pe2pe-latency\.json: rows: expected an object"):
        goldens.main(benches=["perf-phold", "pe2pe-latency"], folder=tmp_path)
    assert runs == []

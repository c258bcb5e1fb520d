"""Issue 54 (reliability round 4): the fixes the bad-input corpus cannot express as one refused call.

Two commands into one folder (the second refused, its files never mixed with the first's), what serve's checked
values now mean (warm-up fractions and counts, the default token budget, a BOM), compare-nccl's logs that no run
prints, provenance records of a calibrate overlay, unitless calibrate metrics, packaged names in `validate`, and
the round-3 leftovers with an outcome rather than an error. The refused inputs themselves are in
tests/bad_inputs/cases_r4_serve.yaml and API_CASES (r4-*) of test_bad_inputs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench import nccl, serving
from kernbench._core import ConfigError, UsageError

H100 = "machines/h100-8x-nvswitch.yaml"
CORPUS = Path(__file__).resolve().parent.parent / "bad_inputs"
GOOD_LOG = CORPUS / "nccl_r3" / "good_all_reduce.txt"
S = dict(config=H100, requests=8, check=0, prompt="fixed:64", output="fixed:16")


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernbench", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ), timeout=300)


def _hold(folder: Path) -> subprocess.Popen:
    """A child process holding FOLDER's output lock, as a running `kernbench serve --out FOLDER` does."""
    code = ("import sys, time; from kernbench import atomic_output as kio\n"
            "with kio.lock_output_dir(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _release(holder: subprocess.Popen) -> None:
    holder.kill()
    holder.wait()
    holder.stdout.close()


# ---- losses: every command that writes a folder holds its lock ---------------------------------------------

@pytest.mark.parametrize("argv", [
    ["serve", "--config", H100, "--model", "llama3-8b", "--requests", "8", "--check", "0", "--prompt", "fixed:64",
     "--output", "fixed:16"],
    ["compare-nccl", str(GOOD_LOG), "--config", "h100-8x-nvswitch", "--no-plot"],
    ["calibrate", "--data", str(CORPUS.parent / "calibrate" / "fabric.yaml")],
], ids=["serve", "compare-nccl", "calibrate"])
def test_a_second_command_into_a_held_folder_is_refused(tmp_path, argv):
    """While another run holds --out, serve, compare-nccl and calibrate are refused as run and sweep are (exit 2,
    one line naming the holder's pid), and nothing is written into the folder."""
    out = tmp_path / "out"
    holder = _hold(out)
    try:
        proc = _cli(*argv, "--out", str(out))
    finally:
        _release(holder)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("kernbench: error: --out") and proc.stderr.count("\n") == 1
    assert f"another kernbench run (pid {holder.pid}) is writing into this folder" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [".kernbench.lock"]


def test_serve_writes_its_files_and_write_takes_the_lock(tmp_path):
    """`kernbench serve --out` writes its files once it holds the folder (the writer's own lock is re-entrant);
    ServingResult.write refuses a folder another process holds, and an existing file given as the folder."""
    out = tmp_path / "s"
    proc = _cli("serve", "--config", H100, "--model", "llama3-8b", "--requests", "8", "--check", "0",
                "--prompt", "fixed:64", "--output", "fixed:16", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert {"requests.csv", "timeseries.csv", "summary.json", "latency_cdf.png", "kv_over_time.png"} <= \
        {p.name for p in out.iterdir()}
    res = serving.run("llama3-8b", **S)
    holder = _hold(tmp_path / "held")
    try:
        with pytest.raises(UsageError, match=f"another kernbench run \\(pid {holder.pid}\\)"):
            res.write(tmp_path / "held", plots=False)
    finally:
        _release(holder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        res.write(tmp_path / "file")


# ---- what serve's values mean now ----------------------------------------------------------------------------

def test_warmup_is_a_fraction_or_a_count_below_the_requests():
    """warmup=0.25 of 8 requests leaves 2 out, warmup=3 (the API's count) 3, warmup=0 none; the statistics are
    over the others (completed counts them)."""
    for w, left in ((0.25, 2), (3, 3), (0, 0), (0.99, 7)):
        s = serving.run("llama3-8b", warmup=w, **S).summary()
        assert s["warmup_requests"] == left and s["completed"] == 8 - left


def test_max_batched_tokens_is_used_as_given_and_defaults_by_scheduler():
    """An explicit budget is the run's (1 is no longer the default's 2048 in disguise, 0 is refused in the corpus);
    None is the scheduler's default."""
    assert serving.run("llama3-8b", max_batched_tokens=None, **S).params["max_batched_tokens"] == 2048
    assert serving.run("llama3-8b", max_batched_tokens=64, **S).params["max_batched_tokens"] == 64


def test_a_trace_with_a_bom_reads_as_without(tmp_path):
    """A UTF-8 BOM (Excel's CSV) before the header is not part of the first column's name."""
    plain = tmp_path / "plain.csv"
    plain.write_text("arrival_s,prompt_tokens,output_tokens\n0,64,16\n0.5,64,16\n")
    a = serving.read_trace(CORPUS / "serve_r4" / "trace_bom_ok.csv")
    b = serving.read_trace(plain)
    assert np.array_equal(a.prompt, b.prompt) and np.array_equal(a.arrival_s, b.arrival_s) and len(a) == 2


def test_a_trace_takes_whole_numbers_and_integral_floats():
    """Trace columns become int64 arrays; 64.0 is 64 tokens (nothing truncated, nothing refused that is whole)."""
    t = serving.Trace([0.0, 1.0], [64.0, 32], np.array([16, 8], dtype=np.int32))
    assert t.prompt.dtype == np.int64 and t.prompt.tolist() == [64, 32] and t.output.tolist() == [16, 8]


def test_a_prompt_at_the_models_positions_is_served():
    """prompt + output = max_positions exactly is served (the bound is inclusive); one more token is refused."""
    res = serving.run("llama3-8b", config=H100, requests=1, check=0, prompt=8192 - 16, output=16)
    assert res.summary()["completed"] == 1
    with pytest.raises(serving.ServingError, match="8193 tokens, past llama3-8b's 8192 positions"):
        serving.run("llama3-8b", config=H100, requests=1, check=0, prompt=8192 - 15, output=16)


# ---- compare-nccl: logs no run prints ------------------------------------------------------------------------

def _log(tmp_path: Path, edit) -> Path:
    lines = GOOD_LOG.read_text().splitlines()
    f = tmp_path / "log.txt"
    f.write_text("\n".join(edit(lines)) + "\n")
    return f


@pytest.mark.parametrize("old,new,words", [
    ("18.38", "0.00", "time is 0 us for 1048576 bytes"),
    ("18.38", "1e-30", "time is 1e-30 us for 1048576 bytes"),
    ("57.06", "9999", "algbw 9999 GB/s is not size / time = 1048576 B / 18.38 us = 57.05 GB/s"),
])
def test_an_impossible_row_is_refused_at_its_line(tmp_path, old, new, words):
    """A positive size timed at 0.00 us or 1e-30 us, or an algbw that is not size / time: refused naming the line
    (never a '-' error or +5e33 %)."""
    f = _log(tmp_path, lambda ls: ls[:17] + [ls[17].replace(old, new, 1)] + ls[18:])
    with pytest.raises(nccl.NcclLogError, match=f"{f.name}:18: .*{words}".replace("(", r"\(").replace(")", r"\)")):
        nccl.parse_log(f)


def test_a_busbw_column_inconsistent_with_algbw_is_refused(tmp_path):
    """busbw 9999 GB/s where algbw 57.06 x 2 (8 - 1) / 8 = 99.86: refused naming the line and both figures."""
    f = _log(tmp_path, lambda ls: ls[:17] + [ls[17].replace("99.86", "9999", 1)] + ls[18:])
    with pytest.raises(ConfigError, match=r"log.txt:18: the out-of-place busbw 9999 GB/s is not algbw x 1.75 = 99.86"):
        nccl.compare_log(f, "h100-8x-nvswitch")


def test_a_table_repeated_twice_is_refused(tmp_path):
    """Two logs in one file (the table twice) would weigh each size double: refused at the first repeated size."""
    f = _log(tmp_path, lambda ls: ls + ls)
    n = len(GOOD_LOG.read_text().splitlines())
    with pytest.raises(nccl.NcclLogError, match=f"log.txt:{n + 18}: size 1048576 \\(float\\) again, first at line 18"):
        nccl.parse_log(f)


# ---- provenance of a calibrate overlay, unitless metrics, packaged names ----------------------------------

def _overlay_check(tmp_path: Path, record: str) -> subprocess.CompletedProcess:
    (tmp_path / "data.yaml").write_text(
        "rows:\n  - {id: stock, group: g, call: k200.copy kind=stock direction=h2d bytes=64MiB, metric: bandwidth, "
        "value: 4.27, unit: GiB/s}\n")
    (tmp_path / "ov.yaml").write_text(record)
    return _cli("calibrate", "--check", str(tmp_path / "ov.yaml"), "--data", str(tmp_path / "data.yaml"))


def test_an_overlay_fragments_fitted_record_naming_no_row_is_refused(tmp_path):
    """A fitted record of an overlay that does not load as a machine is read and judged: a row 'nope' is refused."""
    proc = _overlay_check(tmp_path, "graph:\n  edges:\n    - latency: {value: 100 ns, fitted: {data: data.yaml, "
                                    "rows: [nope], by: me}}\n")
    assert proc.returncode == 2 and "graph.edges.0.latency: fitted on 'nope', which is neither a row id" in proc.stderr


def test_a_record_nested_in_a_value_is_refused(tmp_path):
    """{value: {value: V, fitted: ...}, assumed: ...}: the inner record would be dropped; refused, naming the key."""
    proc = _overlay_check(tmp_path, "k200:\n  launch:\n    wait_overhead: {value: {value: 2 us, fitted: {data: "
                                    "data.yaml, rows: [stock], by: me}}, assumed: x}\n")
    assert proc.returncode == 2 and "k200.launch.wait_overhead.value: a record's value is a plain value" in proc.stderr


def test_a_unitless_metric_takes_no_unit_or_percent(tmp_path):
    """model.training's mfu (a ratio): no unit is the ratio, % a percentage; another unit is refused."""
    from kernbench.calibrate import CalibrationError
    from kernbench.calibrate.data import load_data

    def row(unit: str):
        f = tmp_path / "d.yaml"
        f.write_text("rows:\n  - {id: t, group: g, call: model.training model=llama3-8b dp=8 seq=2048 micro_batch=1, "
                     f"metric: mfu, value: 45{unit}}}\n")
        return load_data(f).rows[0]

    assert row("").measured == 45.0 and row(", unit: '%'").measured == pytest.approx(0.45)
    with pytest.raises(CalibrationError, match="unit 'ms': model.training mfu is a ratio without a unit"):
        row(", unit: ms")


def test_validate_resolves_a_packaged_name():
    """`kernbench validate machines/h100-8x-nvswitch.yaml` loads the packaged preset, as show, run and serve do."""
    proc = _cli("validate", "machines/h100-8x-nvswitch.yaml")
    assert proc.returncode == 0 and "h100-8x-nvswitch.yaml: valid." in proc.stdout


# ---- left from round 3 ---------------------------------------------------------------------------------------

def test_a_functions_file_that_exits_is_refused(tmp_path):
    """A --functions file calling raise SystemExit(0) was exit 0 with nothing written; now exit 2 naming it."""
    f = tmp_path / "fn.py"
    f.write_text("raise SystemExit(0)\n")
    proc = _cli("calibrate", "--data", str(CORPUS.parent / "calibrate" / "fabric.yaml"), "--functions", str(f),
                "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "calls SystemExit(0) while it is imported" in proc.stderr


def test_diff_refuses_an_unclosed_bracket(tmp_path):
    """`diff --metric '['` read '[' as a literal and compared nothing ('no change'); now refused."""
    from kernbench.diff import metric_filter

    with pytest.raises(ConfigError, match=r"--metric '\[': a \[ opens a set"):
        metric_filter(["["])
    assert metric_filter(["[[]x"]) is not None and metric_filter(["lat[e]ncy"])("latency")


def test_a_numeric_tag_shows_in_the_op_table():
    """tag=10**6 (no label made for it) showed an empty tag column; it shows as its number, a label as itself."""
    import kernbench

    s = kernbench.System.load(CORPUS / "configs" / "_base_system.yaml")
    p = s.program("p")
    p.compute("sip0.cube0.pe0", 1e3, tag=10**6)
    p.compute("sip0.cube0.pe0", 1e3, tag="lab")
    assert list(p.run().ops_df()["tag"]) == ["1000000", "lab"]


def test_the_serving_bench_logs_no_ratio_when_every_request_is_rejected():
    """_side_by_side with a static scheduler that completed nothing (0 tokens/s) logs the counts, no division."""
    import importlib

    bench = importlib.import_module("kernbench.benches.serving")
    logged = []

    class Ctx:
        results = [{"scheduler": "vllm", "qps": 4.0, "requests": 8, "completed": 0, "output_throughput": 0.0,
                    "p99_ttft_ms": float("nan"), "mean_batch": 0.0},
                   {"scheduler": "static", "qps": 4.0, "requests": 8, "completed": 0, "output_throughput": 0.0,
                    "p99_ttft_ms": float("nan"), "mean_batch": 0.0}]
        log = logged.append

    bench._side_by_side(Ctx())
    assert logged == ["at 4 req/s: vllm completed 0, static 0 of 8 requests; no ratio of throughputs"]


def test_vgpu_dispersion_of_a_zero_median_is_nan():
    """vgpu.jiffy = 1000 s makes every host elapsed_ms 0: P11's p95 / p50 was a ZeroDivisionError, now NaN (no
    dispersion to state); a nonzero median gives p95 / p50 (numpy's linear percentiles: 2.9 / 2)."""
    import math

    from kernbench import vgpu

    assert math.isnan(vgpu._spread([0.0, 0.0, 0.0])) and math.isnan(vgpu._spread([]))
    assert vgpu._spread([1.0, 2.0, 3.0]) == pytest.approx(2.9 / 2.0)

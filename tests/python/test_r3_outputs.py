"""Reliability round 3 (issue 31), sweeps, runs and their outputs: non-finite metrics, damaged checkpoints, a Dask
scheduler nobody runs, output paths checked together, and sweep workers that die with their owner.

The CLI reproducers that end in one ``kernbench: error:`` line are corpus entries in
tests/bad_inputs/cases_r3_outputs.yaml; the damaged checkpoints are files under
tests/bad_inputs/outputs_r3/checkpoints/ (each one's expected words are in CHECKPOINT_CASES below); the
plugin benches these tests run are tests/bad_inputs/outputs_r3/plugins/r3_outputs_benches.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import kernbench
from kernbench import atomic_output as kio
from kernbench import sweepjson
from kernbench._core import ConfigError, UsageError
from kernbench.runner import run_bench

CORPUS = Path(__file__).resolve().parent.parent / "bad_inputs" / "outputs_r3"
PLUGINS = CORPUS / "plugins"
CHECKPOINTS = CORPUS / "checkpoints"
GRID = {"bench.n": [1, 2]}
FIXED = ["bench.bad=none"]  # the identity the corpus checkpoints were written with


@pytest.fixture
def plugins():
    """The corpus's plugin benches registered for the test, forgotten after it."""
    added = kernbench.registry.add_bench_path(PLUGINS)
    try:
        yield PLUGINS
    finally:
        mine = PLUGINS.resolve() / "r3_outputs_benches.py"
        kernbench.registry._forget(kernbench.registry._LOADED_FILES.get(mine, ""), mine)
        for p in added:
            if p in kernbench.registry._EXTRA_PATHS:
                kernbench.registry._EXTRA_PATHS.remove(p)


def _cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "kernbench", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


# ---- family 3: a NaN metric ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, shown", [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf")])
def test_a_non_finite_metric_is_written_as_null_and_named(plugins, tmp_path, bad, shown):
    """A plugin bench returning NaN (or +-inf) gets sweep.json and sweep.csv both, the metric null in each, and a
    failure naming the bench, the row and the metric (it used to leave sweep.csv without sweep.json and a
    ValueError traceback)."""
    out = tmp_path / "o"
    sweep = run_bench("r3-nan-metric", out=out, sets=[f"bench.bad={bad}"], quiet=True)
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["results"] == [{"n": 1, "latency_ns": None, "ok_ns": 2.0}] == sweep["results"]
    assert (out / "sweep.csv").read_text() == "n,latency_ns,ok_ns\n1,,2.0\n"
    (fail,) = doc["failures"]
    assert fail["name"] == "non-finite values"
    assert "bench 'r3-nan-metric'" in fail["error"] and f"results[0].latency_ns = {shown}" in fail["error"]
    assert doc["files"] == ["sweep.json", "sweep.csv", "extra.csv"]


def test_cli_run_with_a_nan_metric_writes_both_files_and_exits_1(tmp_path):
    """`kernbench run` of the NaN bench exits 1 (a failure), no traceback, sweep.json and sweep.csv both written."""
    proc = _cli("run", "--bench", "r3-nan-metric", "--bench-path", str(PLUGINS), "--out", str(tmp_path / "o"),
                "--quiet")
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert {p.name for p in (tmp_path / "o").iterdir()} >= {"sweep.json", "sweep.csv"}


def test_a_sweep_of_the_nan_bench_marks_its_points_partial(plugins, tmp_path):
    """A sweep over the NaN bench: every point partial, its error naming the metric, sweep.json written."""
    df = kernbench.sweep("r3-nan-metric", GRID, "serial", out=tmp_path / "s")
    assert list(df["status"]) == ["partial", "partial"]
    assert all("results[0].latency_ns = nan" in e for e in df["error"])
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["results"][0]["latency_ns"] is None


def test_sweep_json_and_csv_land_together_or_not_at_all(tmp_path):
    """A sweep.json that cannot be written (a value JSON cannot hold) leaves no sweep.csv either, and an older
    pair in the folder is kept as it was."""
    doc = sweepjson.header("bench", "x")
    doc["results"] = [{"a": 1}]
    sweepjson.write_sweep(tmp_path, doc)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    doc = sweepjson.header("bench", "x")
    doc["results"] = [{"a": 2, "b": float("nan")}]
    with pytest.raises(ValueError, match="non-finite"):
        sweepjson.write_sweep(tmp_path, doc)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_write_together_replaces_nothing_when_one_file_fails(tmp_path):
    """write_together stages every file first: when one target cannot be written (a folder), none is replaced."""
    (tmp_path / "a.txt").write_text("old")
    (tmp_path / "dir").mkdir()
    with pytest.raises(UsageError, match="is a folder"):
        kio.write_together({tmp_path / "a.txt": b"new", tmp_path / "dir": b"x"})
    assert (tmp_path / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "dir"]  # no temporary file left


# ---- family 4 and 8: damaged checkpoints ----------------------------------------------------------------------

CHECKPOINT_CASES = {  # file -> words of the ConfigError (the file's name is always one)
    "first_line_5.jsonl": ["not a kernbench sweep checkpoint", "line 1 is not its header"],
    "first_line_list.jsonl": ["not a kernbench sweep checkpoint", "line 1"],
    "garbage.jsonl": ["not a kernbench sweep checkpoint", "line 1 is not JSON"],
    "garbage_with_newlines.jsonl": ["not a kernbench sweep checkpoint", "line 1 is not JSON"],
    "garbage_after_header.jsonl": ["line 2 is not JSON", "damaged"],
    "header_version_2.jsonl": ["checkpoint version 2", "reads version 1"],
    "header_identity_list.jsonl": ["line 1 has no sweep identity"],
    "record_is_a_number.jsonl": ["line 2 is int, not a point's record"],
    "record_lacks_status.jsonl": ["line 2 lacks 'status'"],
    "record_bad_status.jsonl": ["line 2 has status=\"great\"", "ok, partial, failed"],
    "record_key_is_a_number.jsonl": ["line 2 has key=7, expected a string"],
    "record_rows_not_maps.jsonl": ["line 2 has rows that are not all maps"],
    "record_wall_s_nan.jsonl": ["line 2 has wall_s=nan"],
    "record_deeply_nested.jsonl": ["line 2 is not JSON"],
}


def _resume(out: Path, **kw):
    return kernbench.sweep("r3-nan-metric", GRID, "serial", sets=FIXED, out=out, resume=True, **kw)


@pytest.mark.parametrize("name", sorted(CHECKPOINT_CASES))
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_left_alone(plugins, tmp_path, name):
    """Every damaged checkpoint of the corpus is one ConfigError naming the file (and the line), never an
    AttributeError or a silent drop, and the file is not rewritten."""
    out = tmp_path / "s"
    out.mkdir()
    shutil.copy(CHECKPOINTS / name, out / "checkpoint.jsonl")
    with pytest.raises(ConfigError) as e:
        _resume(out)
    msg = str(e.value)
    missing = [w for w in [str(out / "checkpoint.jsonl"), *CHECKPOINT_CASES[name]] if w not in msg]
    assert not missing, f"{name}: the message lacks {missing}: {msg}"
    assert (out / "checkpoint.jsonl").read_bytes() == (CHECKPOINTS / name).read_bytes()
    assert not (out / "sweep.json").exists()


def test_every_corpus_checkpoint_has_a_case():
    """No corpus checkpoint file is left without a test (cases above, or the two resumed below)."""
    files = {p.name for p in CHECKPOINTS.glob("*.jsonl")}
    assert files == set(CHECKPOINT_CASES) | {"cut_last_line.jsonl", "nan_metric.jsonl"}


def test_a_cut_last_line_is_dropped_and_that_point_rerun(plugins, tmp_path):
    """A last line cut short by a crash (no newline, a record's start) is dropped; the point runs again."""
    out = tmp_path / "s"
    out.mkdir()
    shutil.copy(CHECKPOINTS / "cut_last_line.jsonl", out / "checkpoint.jsonl")
    df = _resume(out)
    assert df.attrs["computed"] == 1 and list(df["n"]) == [1, 2] and list(df["status"]) == ["ok", "ok"]
    lines = (out / "checkpoint.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x) for x in lines)


def test_a_checkpointed_nan_is_null_in_sweep_json(plugins, tmp_path):
    """A NaN metric a checkpoint holds (JSON lines keep NaN) resumes and is written as null, named in failures."""
    out = tmp_path / "s"
    out.mkdir()
    shutil.copy(CHECKPOINTS / "nan_metric.jsonl", out / "checkpoint.jsonl")
    df = _resume(out)
    assert df.attrs["computed"] == 1
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["results"][0]["latency_ns"] is None
    assert any("results[0].latency_ns = nan" in f["error"] for f in doc["failures"])


# ---- family 4: a scheduler address where nothing listens -------------------------------------------------------

def test_a_scheduler_nobody_runs_fails_fast_naming_the_address(plugins, tmp_path):
    """executor='tcp://127.0.0.1:1' (nothing listening) is a UsageError naming the address within seconds (it was
    an OSError traceback after 30 s), before anything is written."""
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=r"scheduler tcp://127\.0\.0\.1:1: cannot connect \(connection refused"):
        kernbench.sweep("r3-nan-metric", GRID, "tcp://127.0.0.1:1", out=tmp_path / "s")
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "s").exists()


def test_the_scheduler_timeout_is_documented_and_checked(monkeypatch):
    """The connect timeout is 5 s by default, KERNBENCH_SCHEDULER_TIMEOUT overrides it, a bad value is refused."""
    from kernbench.sweeps import executors

    assert executors.scheduler_timeout() == executors.SCHEDULER_TIMEOUT_S == 5.0
    monkeypatch.setenv("KERNBENCH_SCHEDULER_TIMEOUT", "0.5")
    assert executors.scheduler_timeout() == 0.5
    monkeypatch.setenv("KERNBENCH_SCHEDULER_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="KERNBENCH_SCHEDULER_TIMEOUT='soon'"):
        executors.scheduler_timeout()


# ---- family 7: output paths checked together ---------------------------------------------------------------

def _hold(folder: Path):
    """A child process holding FOLDER's lock, as a running sweep does; returns it (kill it when done)."""
    code = ("import sys, time; from kernbench import atomic_output as kio\n"
            "with kio.lock_output_dir(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_run_inside_a_running_sweeps_folder_is_refused(tmp_path):
    """`run --out S/points/p0000` (and `--trace S/t.json`) while another process holds S is refused before
    anything runs, naming S and its pid; the finished point is left as it was."""
    sweep_dir = tmp_path / "S"
    point = sweep_dir / "points" / "p0000"
    point.mkdir(parents=True)
    (point / "sweep.json").write_text("{}")
    holder = _hold(sweep_dir)
    try:
        proc = _cli("run", "--bench", "perf-phold", "--smoke", "--quiet", "--out", str(point))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"inside {sweep_dir}" in proc.stderr and f"pid {holder.pid}" in proc.stderr
        assert (point / "sweep.json").read_text() == "{}"
        with pytest.raises(UsageError, match=r"--trace .*t\.json: inside .*another kernbench run"):
            run_bench("milestone-1h-gemm", out=tmp_path / "o", trace=sweep_dir / "t.json", quiet=True)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert run_bench("perf-phold", out=point, sets=["bench.events=500"], quiet=True)["results"]  # free again


def test_a_sweeps_own_points_write_inside_its_folder(plugins, tmp_path):
    """The points of a sweep still write under its (locked) folder, serially and on processes."""
    for executor in ("serial", "process"):
        df = kernbench.sweep("r3-nan-metric", GRID, executor, workers=2, sets=FIXED, out=tmp_path / executor)
        assert list(df["status"]) == ["ok", "ok"], df["error"].tolist()
        assert (tmp_path / executor / "points" / "p0001" / "sweep.json").is_file()


@pytest.mark.parametrize("trace, words", [
    ("{out}/sweep.json", "--out's sweep.json"),
    ("{out}", "the same path as --out"),
    ("{out}/../o/critical_path.csv", "--out's critical_path.csv"),
    ("{out}/.kernbench.lock", "--out's .kernbench.lock"),
])
def test_a_trace_colliding_with_the_runs_own_files_is_refused(tmp_path, trace, words):
    """--trace naming the out folder or one of the run's own files is refused up front, nothing written."""
    out = tmp_path / "o"
    with pytest.raises(UsageError, match="--trace") as e:
        run_bench("milestone-1h-gemm", out=out, trace=trace.format(out=out), quiet=True)
    assert words in str(e.value)
    assert not out.exists()


def test_a_checkpoint_colliding_with_sweep_outputs_is_refused(plugins, tmp_path):
    """checkpoint=OUT/sweep.json or a path under OUT/points is refused before any point runs."""
    out = tmp_path / "s"
    with pytest.raises(UsageError, match="checkpoint .*sweep.json: the same path as --out's sweep.json"):
        kernbench.sweep("r3-nan-metric", GRID, "serial", out=out, checkpoint=out / "sweep.json")
    with pytest.raises(UsageError, match="inside .*points, where the points' own outputs go"):
        kernbench.sweep("r3-nan-metric", GRID, "serial", out=out, checkpoint=out / "points" / "c.jsonl")
    assert not out.exists()


# ---- family 8: workers die with their owner -------------------------------------------------------------------

def _marked(marker: str) -> list[int]:
    """The pids of live processes whose environment holds KB_R3_MARK=marker (the sweep and all it started)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"KB_R3_MARK={marker}".encode() in env.split(b"\0") and state != "Z":
            pids.append(int(entry.name))
    return pids


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_sigkill_of_a_sweep_leaves_no_process_and_no_write(tmp_path):
    """SIGKILL of a process sweep (2 workers, points of 1.5 s): within a few seconds no process of it remains (no
    worker, forkserver or resource tracker) and no file under its output changes afterwards."""
    marker = uuid.uuid4().hex
    out = tmp_path / "s"
    env = dict(os.environ, KB_R3_MARK=marker)
    owner = subprocess.Popen([sys.executable, "-m", "kernbench", "sweep", "--bench", "r3-slow", "--bench-path",
                              str(PLUGINS), "--grid", "bench.i=0,1,2,3,4,5,6,7", "--set", "bench.seconds=1.5",
                              "--executor", "process", "--workers", "2", "--out", str(out), "--quiet"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ckpt = out / "checkpoint.jsonl"
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:  # one point finished: the workers are busy with the next ones
            if ckpt.is_file() and len(ckpt.read_bytes().splitlines()) >= 2:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no point finished within 40 s")
        assert len(_marked(marker)) >= 3, "expected the owner and its workers to be running"
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 5
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _marked(marker), f"processes of the killed sweep still alive: {_marked(marker)}"
        before = _files(out)
        time.sleep(2.0)  # longer than a point: a live worker would have finished one and written it
        assert _files(out) == before
    finally:
        for pid in _marked(marker):  # only the processes this test started (they carry its marker)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

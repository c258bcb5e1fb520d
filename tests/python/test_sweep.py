"""kernbench.sweep: grids, failures, executors, checkpoints and resume, the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kernbench
from kernbench.sweepjson import validate_sweep
from kernbench.sweeps import parse_grid

SMALL = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}
GRID = {"fabric.model": ["packet", "flow"], "bench.bytes": [4096, 65536]}
NOC_SMALL = {"bench.loads": [0.2, 0.6], "bench.window_cycles": 2400, "bench.warmup_cycles": 600,
             "bench.patterns": ["uniform"], "bench.buffers": ["unbounded"], "bench.tree": False}


def dma_latency(point):
    """A remote-cube read; stops like Ctrl-C at the point KERNBENCH_TEST_STOP_AT names."""
    if os.environ.get("KERNBENCH_TEST_STOP_AT") == str(point.index):
        raise KeyboardInterrupt
    marks = point.bench.get("marks")
    if marks:
        (Path(marks) / f"p{point.index}").touch()
    s = point.load_system()
    s.dma("read", "sip0.cube0.pe0", "sip0.cube1.hbm_ctrl.pe3", point.bench["bytes"])
    s.run()
    d = s.dma_df()
    return {"latency_ps": int(d["latency_ps"][0]), "queuing_ps": int(d["queuing_ps"][0]),
            "mean_ns": float(d["latency_ps"][0]) / 1e3}


@pytest.fixture(scope="module")
def dask_cluster():
    """One 2-worker dask LocalCluster (processes) shared by the tests of this file."""
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster


def _metrics(df):
    return df.drop(columns=["wall_s"]).to_dict("records")


def test_grid_is_the_product_and_metrics_come_from_the_model():
    """Four points, one row each; a bigger transfer takes longer; every point ok."""
    df = kernbench.sweep(dma_latency, GRID, "serial", sets=SMALL)
    assert list(df["point"]) == [0, 1, 2, 3]
    assert list(zip(df["fabric.model"], df["bench.bytes"])) == [
        ("packet", 4096), ("packet", 65536), ("flow", 4096), ("flow", 65536)]
    assert (df["status"] == "ok").all() and (df["error"] == "").all()
    lat = dict(zip(zip(df["fabric.model"], df["bench.bytes"]), df["latency_ps"]))
    for model in ("packet", "flow"):
        assert lat[(model, 65536)] > lat[(model, 4096)]
    assert lat[("packet", 4096)] != lat[("flow", 4096)]  # the override reached the machine


def test_a_bad_point_is_recorded_and_the_others_run():
    """A point that raises is a failed row with its error; the points around it are computed."""
    df = kernbench.sweep(dma_latency, {"bench.bytes": [4096, -4096, 8192]}, "serial", sets=SMALL)
    assert list(df["status"]) == ["ok", "failed", "ok"]
    assert "bytes" in df["error"][1] or "size" in df["error"][1]
    assert df["latency_ps"][0] < df["latency_ps"][2]
    assert df.attrs["failures"][0]["point"] == 1


def odd_metrics(point):
    """Metrics of awkward types: numpy scalars and arrays, a Path, a list of dicts for two rows."""
    import numpy as np

    x = point.bench["x"]
    return [{"row": 0, "sq": np.int64(x * x), "arr": np.arange(x), "where": Path("/tmp") / str(x)},
            {"row": 1, "sq": float(x) / 2, "arr": [], "where": None}]


def test_function_rows_of_any_type_are_checkpointed_and_written(tmp_path):
    """numpy values become Python values, other objects their text; a list of dicts gives one row each."""
    df = kernbench.sweep(odd_metrics, {"bench.x": [2, 3]}, "serial", out=tmp_path)
    assert list(df["row"]) == [0, 1, 0, 1]
    assert df["sq"].tolist() == [4, 1.0, 9, 1.5]
    assert df["arr"][2] == [0, 1, 2] and df["where"][0] == "/tmp/2"
    again = kernbench.sweep(odd_metrics, {"bench.x": [2, 3]}, "serial", out=tmp_path, resume=True)
    assert again.attrs["computed"] == 0
    assert _metrics(again) == _metrics(df)
    validate_sweep(json.loads((tmp_path / "sweep.json").read_text()))


def test_bench_sweep_with_a_bad_value_fails_that_point_only(tmp_path):
    """A bench point whose own run fails (unknown mesh) is 'failed' with the bench's message."""
    grid = parse_grid(["bench.meshes=cube-4x2;no-such-mesh"], ["bench.meshes"])
    df = kernbench.sweep("noc-load-latency", grid, "serial", sets=NOC_SMALL, out=tmp_path)
    failed = df[df["status"] == "failed"]
    assert list(failed["bench.meshes"]) == ["no-such-mesh"]
    assert "unknown mesh 'no-such-mesh'" in failed["error"].iloc[0]
    ok = df[df["status"] == "ok"]
    assert len(ok) == 2 and list(ok["load_fraction"]) == [0.2, 0.6]
    doc = json.loads((tmp_path / "sweep.json").read_text())
    validate_sweep(doc)
    assert doc["kind"] == "sweep" and doc["points"] == 2 and len(doc["failures"]) == 1
    assert (tmp_path / "sweep.csv").read_text().startswith("point,bench.meshes,")
    assert (tmp_path / "points" / "p0000" / "sweep.json").exists()


@pytest.mark.parametrize("path, value, words", [
    ("system.sips.w", "two", ["system.sips.w", "two", "positive integer"]),
    ("system.sips.wide", 2, ["system.sips.wide", "unknown key"]),
    ("fabric.model", "wormhole", ["fabric.model", "wormhole"]),
    ("fabric.chunk", "4096", ["fabric.chunk", "unit"]),
])
def test_bad_grid_values_fail_up_front_with_the_path(path, value, words):
    """A wrong config path or type stops the sweep before any point runs, naming the path like the loader."""
    with pytest.raises(kernbench.ConfigError) as e:
        kernbench.sweep(dma_latency, {path: [1, value] if path == "system.sips.w" else [value]}, "serial")
    for w in words:
        assert w in str(e.value)


def test_bad_fixed_override_fails_up_front():
    """A bad fixed `sets` value is refused before any point runs, even when the grid holds only bench values."""
    with pytest.raises(kernbench.ConfigError, match="system.cubes.h.*zero|system.cubes.h.*positive"):
        kernbench.sweep(dma_latency, {"bench.bytes": [64]}, "serial", sets={**SMALL, "system.cubes.h": 0})


def test_bad_bench_parameter_is_refused_like_set():
    """bench.<param> grid values are typed like the bench's defaults, with --set's messages."""
    with pytest.raises(kernbench.ConfigError, match="unknown parameter 'pakcet_bytes'"):
        kernbench.sweep("noc-load-latency", {"bench.pakcet_bytes": [64]}, "serial")
    with pytest.raises(kernbench.ConfigError, match="expected a number, got 'big'"):
        kernbench.sweep("noc-load-latency", {"bench.packet_flits": [1, "big"]}, "serial")
    with pytest.raises(kernbench.ConfigError, match="models no machine config"):
        kernbench.sweep("perf-phold", {"system.sips.w": [1]}, "serial")


def test_process_and_dask_give_the_serial_numbers(dask_cluster):
    """The same grid on 2 processes and on a dask LocalCluster (Client, address) gives bit-identical metrics."""
    from distributed import Client

    serial = kernbench.sweep(dma_latency, GRID, "serial", sets=SMALL)
    proc = kernbench.sweep(dma_latency, GRID, "process", workers=2, sets=SMALL)
    with Client(dask_cluster) as client:
        dask = kernbench.sweep(dma_latency, GRID, client, sets=SMALL)
    by_address = kernbench.sweep(dma_latency, GRID, dask_cluster.scheduler_address, sets=SMALL)
    assert _metrics(proc) == _metrics(serial)
    assert _metrics(dask) == _metrics(serial)
    assert _metrics(by_address) == _metrics(serial)
    assert list(serial.columns) == list(dask.columns) == list(proc.columns)


def test_bench_points_match_across_executors(tmp_path):
    """A bench sweep on processes gives the serial rows (deterministic bench, one seed)."""
    grid = {"bench.packet_flits": [1, 4]}
    sets = {**NOC_SMALL, "bench.meshes": ["cube-4x2"], "bench.loads": [0.5]}
    a = kernbench.sweep("noc-load-latency", grid, "serial", sets=sets)
    b = kernbench.sweep("noc-load-latency", grid, "process", workers=2, sets=sets)
    assert _metrics(a) == _metrics(b)
    assert a["mean_latency_ns"][0] < a["mean_latency_ns"][1]  # 4x the flits per packet


def test_resume_after_an_interrupted_sweep_runs_only_the_missing_points(tmp_path, monkeypatch):
    """Ctrl-C at point 3 keeps points 0-2 in the checkpoint; resume runs 3-5 only; a cut line is dropped."""
    ck = tmp_path / "ck.jsonl"
    marks = tmp_path / "marks"
    marks.mkdir()
    grid = {"bench.bytes": [1024, 2048, 4096, 8192, 16384, 32768]}
    sets = {**SMALL, "bench.marks": str(marks)}
    monkeypatch.setenv("KERNBENCH_TEST_STOP_AT", "3")
    with pytest.raises(KeyboardInterrupt):
        kernbench.sweep(dma_latency, grid, "serial", sets=sets, checkpoint=ck)
    monkeypatch.delenv("KERNBENCH_TEST_STOP_AT")
    lines = ck.read_text().splitlines()
    assert len(lines) == 1 + 3  # header and the three finished points
    assert sorted(p.name for p in marks.iterdir()) == ["p0", "p1", "p2"]
    with ck.open("a") as f:
        f.write('{"key": "half a li')  # a crash in the middle of an append
    for p in marks.iterdir():
        p.unlink()
    df = kernbench.sweep(dma_latency, grid, "serial", sets=sets, checkpoint=ck, resume=True)
    assert sorted(p.name for p in marks.iterdir()) == ["p3", "p4", "p5"]
    assert df.attrs["computed"] == 3 and (df["status"] == "ok").all()
    full = kernbench.sweep(dma_latency, grid, "serial", sets=sets)
    assert _metrics(df) == _metrics(full)
    assert all(json.loads(line) for line in ck.read_text().splitlines())  # the cut line is gone


def test_resume_refuses_another_sweeps_checkpoint(tmp_path):
    """A checkpoint written with another seed or fixed overrides is not silently mixed in."""
    ck = tmp_path / "ck.jsonl"
    kernbench.sweep(dma_latency, {"bench.bytes": [4096]}, "serial", sets=SMALL, checkpoint=ck)
    with pytest.raises(kernbench.ConfigError, match="different sweep.*seed"):
        kernbench.sweep(dma_latency, {"bench.bytes": [4096]}, "serial", sets=SMALL, checkpoint=ck,
                        resume=True, seed=2)
    with pytest.raises(kernbench.UsageError, match="workers=0"):
        kernbench.sweep(dma_latency, {"bench.bytes": [4096]}, "process", workers=0)
    with pytest.raises(kernbench.UsageError, match="unknown executor 'threads'"):
        kernbench.sweep(dma_latency, {"bench.bytes": [4096]}, "threads", sets=SMALL)
    with pytest.raises(kernbench.UsageError, match="needs a checkpoint"):
        kernbench.sweep(dma_latency, {"bench.bytes": [4096]}, "serial", sets=SMALL, resume=True)


def test_cli_sweep_writes_versioned_outputs_and_resumes(cli, tmp_path):
    """`kernbench sweep` writes sweep.json (schema v1), sweep.csv and a checkpoint; --resume reuses it."""
    args = ["sweep", "--bench", "noc-load-latency", "--grid", "bench.packet_flits=1,4",
            "--set", "bench.meshes=cube-4x2", "--set", "bench.loads=0.3", "--set", "bench.window_cycles=2400",
            "--set", "bench.warmup_cycles=600", "--set", "bench.patterns=uniform", "--set", "bench.buffers=unbounded",
            "--set", "bench.tree=false", "--executor", "serial", "--out", str(tmp_path)]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar into a pipe
    assert "2 points (2 computed, 0 from the checkpoint)" in proc.stdout
    doc = json.loads((tmp_path / "sweep.json").read_text())
    validate_sweep(doc)
    assert doc["grid"] == {"bench.packet_flits": [1, 4]}
    assert [r["bench.packet_flits"] for r in doc["results"]] == [1, 4]
    assert sorted(doc["files"]) == ["checkpoint.jsonl", "sweep.csv", "sweep.json"]
    proc = cli(*args, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "(0 computed, 2 from the checkpoint)" in proc.stdout
    assert json.loads((tmp_path / "sweep.json").read_text())["results"] == doc["results"]


def test_cli_sweep_bad_grid_is_one_line(cli, tmp_path):
    """A bad grid value exits 2 with the loader's message and writes nothing."""
    proc = cli("sweep", "--bench", "pe-dma-perf", "--grid", "system.sips.w=1,two", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "system.sips.w" in proc.stderr and "two" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "sweep.json").exists()
    proc = cli("sweep", "--bench", "pe-dma-perf", "--grid", "system.sips.w")
    assert proc.returncode == 2 and "expected KEY=V1,V2" in proc.stderr


def test_cli_sweep_on_a_dask_scheduler(cli, tmp_path, dask_cluster):
    """`kernbench sweep --scheduler tcp://...` runs the points on that cluster's workers, same rows as serial."""
    sets = ["bench.meshes=cube-4x2", "bench.loads=0.4", "bench.window_cycles=2000", "bench.warmup_cycles=400",
            "bench.patterns=uniform", "bench.buffers=unbounded", "bench.tree=false"]
    args = ["sweep", "--bench", "noc-load-latency", "--grid", "bench.packet_flits=1,4"]
    for s in sets:
        args += ["--set", s]
    proc = cli(*args, "--scheduler", dask_cluster.scheduler_address, "--out", str(tmp_path / "dask"))
    assert proc.returncode == 0, proc.stderr
    dask = json.loads((tmp_path / "dask" / "sweep.json").read_text())
    assert dask["executor"] == "dask"
    serial = kernbench.sweep("noc-load-latency", {"bench.packet_flits": [1, 4]}, "serial",
                             sets=sets)
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in dask["results"]] == _metrics(serial)


def test_schema_file_matches_the_writer():
    """The JSON Schema requires exactly what write_sweep guarantees, and rejects a file missing a field."""
    import jsonschema

    from kernbench.sweepjson import REQUIRED, SCHEMA_NAME, SCHEMA_VERSION, header, load_schema

    schema = load_schema()
    assert schema["required"] == [*REQUIRED, "files"]
    assert schema["properties"]["schema"]["const"] == SCHEMA_NAME
    assert schema["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    doc = {**header("bench", "x", config=None), "files": ["sweep.json"]}
    validate_sweep(doc)
    for field in ("seed", "config_hash", "failures"):
        broken = {k: v for k, v in doc.items() if k != field}
        with pytest.raises(jsonschema.ValidationError, match=field):
            validate_sweep(broken)
    with pytest.raises(jsonschema.ValidationError):
        validate_sweep({**doc, "schema_version": 2})


# ---- quantities as numbers, --smoke, --plot -----------------------------------------------------

def test_quantity_axes_become_numeric_columns_with_the_unit(tmp_path):
    """An axis of '64 GB/s'-style values is the numeric column 'KEY [GB/s]'; mixed units of one
    dimension convert to the base unit; the config still gets the text, and slower links are slower."""
    from kernbench.sweeps import grid_columns

    grid = {"links.ucie.bandwidth": ["32 GB/s", "128 GB/s"], "bench.bytes": [65536]}
    df = kernbench.sweep(dma_latency, grid, "serial", sets=SMALL, out=tmp_path)
    col = "links.ucie.bandwidth [GB/s]"
    assert col in df.columns and "links.ucie.bandwidth" not in df.columns
    assert df[col].tolist() == [32, 128] and df[col].dtype.kind in "iu"
    assert df["latency_ps"][0] > df["latency_ps"][1]  # the UCIe hop is the bottleneck of this read
    doc = json.loads((tmp_path / "sweep.json").read_text())
    validate_sweep(doc)
    assert doc["grid"]["links.ucie.bandwidth"] == ["32 GB/s", "128 GB/s"]  # what was run, as given
    assert doc["grid_columns"] == {"links.ucie.bandwidth": col}
    assert [r[col] for r in doc["results"]] == [32, 128]
    mixed = grid_columns([{"a": "500 MB/s"}, {"a": "2 GB/s"}, {"b": "1 ns"}, {"b": "1500 ps"}])
    assert {k: (c, [f(v) for v in vals]) for (k, (c, f)), vals in
            zip(mixed.items(), (["500 MB/s", "2 GB/s"], ["1 ns", "1500 ps"]))} == \
        {"a": ("a [B/s]", [500_000_000, 2_000_000_000]), "b": ("b [ps]", [1000, 1500])}
    # Not quantities (plain numbers, words, different dimensions): left as they are.
    assert grid_columns([{"x": 1}, {"x": "packet"}, {"y": "1 ns"}, {"y": "4 KiB"}, {"z": "packet"}]) == {}


def test_diff_of_two_quantity_sweeps_matches_rows_by_the_numeric_column(tmp_path):
    """Two identical sweeps over a quantity axis ("32 GB/s", "128 GB/s") diff as unchanged with both rows matched on
    the numeric column "links.ucie.bandwidth [GB/s]", so quantity axes work as diff keys."""
    from kernbench.diff import diff_paths

    grid = {"links.ucie.bandwidth": ["32 GB/s", "128 GB/s"], "bench.bytes": [65536]}
    kernbench.sweep(dma_latency, grid, "serial", sets=SMALL, out=tmp_path / "a")
    kernbench.sweep(dma_latency, grid, "serial", sets=SMALL, out=tmp_path / "b")
    d = diff_paths(tmp_path / "a", tmp_path / "b", rtol=0.0)
    assert d["changed"] is False and d["matched"] == 2 and "links.ucie.bandwidth [GB/s]" in d["key"]


def test_cli_sweep_smoke_and_plot(cli, tmp_path):
    """--smoke runs every point at the bench's smoke size; --plot X Y draws a PNG into the output folder."""
    out = tmp_path / "sw"
    proc = cli("sweep", "--bench", "pe-dma-perf", "--smoke", "--grid", "links.ucie.bandwidth=64 GB/s,128 GB/s",
               "--plot", "links.ucie.bandwidth", "makespan_ns", "--executor", "serial", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    png = out / "makespan_ns-vs-links.ucie.bandwidth.png"
    assert f"wrote {png}" in proc.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "sweep.json").read_text())
    assert png.name in doc["files"]
    assert doc["config_overrides"]["system.cubes.w"] == "2"  # the smoke size, under the grid
    rows = doc["results"]
    assert {r["links.ucie.bandwidth [GB/s]"] for r in rows} == {64, 128}
    ucie = {r["links.ucie.bandwidth [GB/s]"]: r["makespan_ns"] for r in rows if r["scenario"] == "ucie_east_8"}
    assert ucie[64] > ucie[128]
    # A column that does not exist: one line naming it; the sweep itself is kept.
    proc = cli("sweep", "--bench", "pe-dma-perf", "--smoke", "--grid", "system.sips.w=2",
               "--plot", "system.sips.w", "no_such_metric", "--executor", "serial", "--out", str(tmp_path / "bad"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--plot: no column 'no_such_metric'" in proc.stderr and "makespan_ns" in proc.stderr
    assert (tmp_path / "bad" / "sweep.json").exists()
    proc = cli("sweep", "--bench", "perf-phold", "--smoke", "--grid", "bench.events=100", "--plot", "x")
    assert proc.returncode == 2 and "expected 2 arguments" in proc.stderr

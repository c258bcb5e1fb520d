"""nccl-tests in and out: the *_perf parser, compare-nccl, and the gpu-collectives bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernbench import _core, nccl
from kernbench.system import System

LOGS = Path(__file__).resolve().parents[1] / "nccl"


def test_busbw_factors_are_nccl_tests_ones():
    """busbw / algbw: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, broadcast 1 (PERFORMANCE.md)."""
    assert nccl.busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert nccl.busbw_factor("all_gather", 8) == pytest.approx(0.875)
    assert nccl.busbw_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert nccl.busbw_factor("broadcast", 8) == 1.0
    assert nccl.busbw_factor("allreduce_perf", 2) == pytest.approx(1.0)  # names as nccl-tests' binaries spell them


def test_parses_a_current_log_with_its_collective_name():
    """nccl-tests 2.17 output: the collective from its header, 8 ranks, both column groups and #wrong."""
    log = nccl.parse_log(LOGS / "h100_all_reduce_perf.txt")
    assert log.collective == "all_reduce" and log.ranks == 8 and not log.truncated
    assert len(log.rows) == 28 and log.rows[0].size == 8 and log.rows[-1].size == 1 << 30
    last = log.rows[-1]
    assert last.count == (1 << 30) // 4 and last.type == "float" and last.redop == "sum" and last.root == -1
    assert [g["time_us"] for g in last.groups] == [5258.23, 5139.18]  # out-of-place, in-place
    assert last.groups[0]["busbw"] == 357.35 and last.groups[0]["wrong"] == 0
    assert last.groups[0]["busbw"] == pytest.approx(last.groups[0]["algbw"] * 1.75, abs=0.01)
    assert log.avg_busbw == pytest.approx(117.4114)
    assert log.devices[0].endswith("NVIDIA H100 80GB HBM3")


def test_parses_an_old_log_without_name_or_root():
    """Older layouts: no collective line (None: the caller decides), and the 2019 one with no root and an error value."""
    old = nccl.parse_log(LOGS / "a100_all_gather_perf_old.txt")
    assert old.collective is None and old.ranks == 8 and old.rows[-1].count * 8 * 4 == old.rows[-1].size
    v100 = nccl.parse_log(LOGS / "v100_all_reduce_perf_2019.txt")
    assert v100.rows[0].root is None and v100.rows[0].groups[0]["wrong"] == pytest.approx(2e-7)
    assert len(v100.rows) == 22 and not v100.truncated


def test_parses_a_truncated_log():
    """A run killed mid-table: the complete rows are kept, the half row is dropped and said so."""
    log = nccl.parse_log(LOGS / "h100_reduce_scatter_perf_truncated.txt")
    assert log.truncated and log.collective == "reduce_scatter"
    assert len(log.rows) == 19 and log.rows[-1].size == 8 << 18
    assert any("incomplete last row" in n for n in log.notes)


def test_a_log_cut_before_the_footer_only(tmp_path):
    """Complete rows but no 'Avg bus bandwidth' footer: parsed, marked truncated."""
    text = (LOGS / "h100_all_reduce_perf.txt").read_text().splitlines()
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(text[:30]) + "\n")
    log = nccl.parse_log(cut)
    assert log.truncated and len(log.rows) == 30 - 17


@pytest.mark.parametrize("content,line", [("name,latency_us,bytes\nring,24.57,1048576\n", 1),
                                          ("", 1),
                                          ("hello\n# just a comment\n", 1)])
def test_rejects_non_nccl_files_naming_file_and_line(tmp_path, content, line):
    """A file without nccl-tests' column header is refused; the message names the file and a line."""
    f = tmp_path / "x.txt"
    f.write_text(content)
    with pytest.raises(nccl.NcclLogError, match=rf"x\.txt:{line}: not an nccl-tests"):
        nccl.parse_log(f)


def test_rejects_a_garbled_row_in_the_middle(tmp_path):
    """A row that is not numbers, with rows after it, is an error at that line (not silently skipped)."""
    lines = (LOGS / "h100_all_reduce_perf.txt").read_text().splitlines()
    lines[20] = "   2048   512  float  sum  -1  abc  0.1  0.2  0  13.6  0.1  0.2  0"
    f = tmp_path / "bad.txt"
    f.write_text("\n".join(lines))
    with pytest.raises(nccl.NcclLogError, match=r"bad\.txt:21: not an nccl-tests result row"):
        nccl.parse_log(f)


def test_model_table_round_trips_through_the_parser(tmp_path):
    """format_table writes nccl-tests' layout: parse_log reads the model's own numbers back."""
    rows = nccl.model_rows(nccl.resolve_machine("h100-8x-nvswitch"), "all_reduce", [1024, 1 << 20])
    f = tmp_path / "model.txt"
    f.write_text(nccl.format_table(rows, title="all_reduce_perf (kernbench model)", ranks=8))
    log = nccl.parse_log(f)
    assert log.collective == "all_reduce" and log.ranks == 8
    assert [r.size for r in log.rows] == [1024, 1 << 20]
    assert [r.time_us for r in log.rows] == [round(r["time_us"], 2) for r in rows]
    assert rows[1]["busbw"] == pytest.approx(rows[1]["algbw"] * 1.75)


def test_more_ranks_than_the_machine_has_is_refused(tmp_path):
    """A 16-rank log (two boxes) against an 8-GPU machine: a clear error, not 16 failed sizes."""
    lines = (LOGS / "h100_all_reduce_perf.txt").read_text().splitlines()
    ranks = [ln for ln in lines if "Rank" in ln]
    f = tmp_path / "two_boxes.txt"
    at = lines.index(ranks[-1]) + 1
    f.write_text("\n".join(lines[:at] + [r.replace("dgx-h100-01", "dgx-h100-02") for r in ranks] + lines[at:]))
    assert nccl.parse_log(f).ranks == 16
    with pytest.raises(nccl.ConfigError, match="16 ranks asked, the machine has 8 PEs"):
        nccl.compare_log(f, "h100-8x-nvswitch")


def test_compare_puts_model_beside_measured():
    """compare_log: every size of the log gets the model's time and busbw and the relative errors."""
    res = nccl.compare_log(LOGS / "h100_reduce_scatter_perf_truncated.txt", "h100-8x-nvswitch")
    assert res["collective"] == "reduce_scatter" and res["collective_from"] == "log" and res["ranks"] == 8
    assert res["truncated"] and not res["failures"] and len(res["rows"]) == 19
    for r in res["rows"]:
        assert r["model_time_us"] > 0
        assert r["time_error"] == pytest.approx((r["model_time_us"] - r["measured_time_us"]) / r["measured_time_us"])


def test_compare_collective_defaults_and_conflicts():
    """No name in the log: all_reduce unless --collective; a --collective that contradicts the log is refused."""
    assert nccl.compare_log(LOGS / "v100_all_reduce_perf_2019.txt", "h100-8x-nvswitch")["collective_from"] == "default"
    res = nccl.compare_log(LOGS / "a100_all_gather_perf_old.txt", "a100-8x-nvswitch", collective="all_gather")
    assert res["collective"] == "all_gather" and res["collective_from"] == "--collective"
    with pytest.raises(nccl.ConfigError, match="the log is all_reduce_perf output"):
        nccl.compare_log(LOGS / "h100_all_reduce_perf.txt", "h100-8x-nvswitch", collective="broadcast")
    with pytest.raises(nccl.ConfigError, match="no model"):
        nccl.compare_log(LOGS / "v100_all_reduce_perf_2019.txt", "h100-8x-nvswitch", collective="reduce")


def test_cli_compare_nccl_writes_table_and_plot(cli, tmp_path):
    """`kernbench compare-nccl LOG --config MACHINE --out DIR`: a table on stdout, CSV, JSON and a PNG, no temp files."""
    out = tmp_path / "cmp"
    proc = cli("compare-nccl", str(LOGS / "h100_all_reduce_perf.txt"), "--config", "h100-8x-nvswitch",
               "--out", str(out), check=True)
    assert "all_reduce (log), 8 ranks" in proc.stdout and "bus err" in proc.stdout
    data = json.loads((out / "compare.json").read_text())
    assert len(data["rows"]) == 28 and data["busbw_factor"] == pytest.approx(1.75)
    assert (out / "compare.csv").read_text().startswith("size,count,type,measured_time_us")
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_cli_compare_nccl_rejects_a_non_nccl_file(cli, tmp_path):
    """A non-nccl file: exit 2 and one `kernbench: error:` line naming the file and the line; nothing written."""
    out = tmp_path / "cmp"
    proc = cli("compare-nccl", str(LOGS / "not_nccl.txt"), "--config", "h100-8x-nvswitch", "--out", str(out))
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kernbench: error: ") and "not_nccl.txt:1: not an nccl-tests" in err[0]
    assert not (out / "compare.json").exists()


def test_gpu_collectives_bench_records_unmodelled_collectives_as_failures(cli, tmp_path):
    """A collective with no model becomes a failure with its reason; the others still give their rows."""
    out = tmp_path / "gc"
    proc = cli("run", "--bench", "gpu-collectives", "--smoke", "--out", str(out), "--quiet",
               "--set", "bench.collectives=all_reduce,sendrecv")
    assert proc.returncode == 1  # a failure recorded
    sweep = json.loads((out / "sweep.json").read_text())
    assert {r["collective"] for r in sweep["results"]} == {"all_reduce"}
    assert [f["collective"] for f in sweep["failures"]] == ["sendrecv"] and "no model" in sweep["failures"][0]["error"]
    tables = nccl.parse_log(out / "nccl_tables.txt")
    tuned = [r for r in sweep["results"] if r["requested"] == "auto"]
    assert tables.collective == "all_reduce" and len(tables.rows) == len(tuned)
    # Each row names what the tuner ran: the table's smallest time at that size.
    for r in tuned:
        table = _core.nccl_tune(System.load(nccl.resolve_machine("h100-8x-nvswitch"))._core, "all_reduce", r["size"])
        best = min(table, key=lambda t: t["time_ps"])
        assert (r["algorithm"], r["protocol"]) == (best["algorithm"], best["protocol"])
    # The H100's switches reduce in the network: nvls rows beside the tuner's, at every size.
    nvls = {r["size"]: r for r in sweep["results"] if r["requested"] == "nvls"}
    assert set(nvls) == {r["size"] for r in tuned} and {r["algorithm"] for r in nvls.values()} == {"nvls"}


def test_gpu_collectives_bench_skips_nvls_without_a_reducing_switch(cli, tmp_path):
    """On the A100 box (no in-network reduction) the nvls rows are skipped with the reason, not failures."""
    out = tmp_path / "gc"
    proc = cli("run", "--bench", "gpu-collectives", "--smoke", "--out", str(out), "--quiet",
               "--config", "machines/a100-8x-nvswitch.yaml", "--set", "bench.collectives=all_reduce",
               "--set", "bench.max_bytes=2048")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads((out / "sweep.json").read_text())
    assert {r["algorithm"] for r in sweep["results"]} == {"ring"} and not sweep["failures"]
    assert "nvls needs an in-network reducing switch" in sweep["innet"]["skipped"]


def test_gpu_collectives_target_at_1GiB(tmp_path):
    """The 1 GiB ring all-reduce (Simple): busbw beside the NVLink rate and the routing's, and the closed form.

    On the preset (fabric.multipath spread) the ring's transfers use all 4 NVSwitches: the routing's rate is the
    GPU's 450 GB/s, and the time is 2(n-1)/n S over it at nccl.link_efficiency, within 5 % (the rest: the fixed
    costs and the pipeline's fill, nccl.max_steps_per_transfer = 8 steps). With one path (single) the rate is the 5-link NVSwitch's 125 GB/s.
    """
    from kernbench.runner import run_bench

    sets = ["bench.collectives=all_reduce", f"bench.min_bytes={1 << 30}"]
    t = run_bench("gpu-collectives", out=tmp_path / "spread", quiet=True, sets=sets)["target"]
    assert t["size"] == 1 << 30 and t["link_class"] == "nvlink" and t["gpu_link_rate_GBps"] == pytest.approx(450)
    assert t["multipath"] == "spread" and [p["nodes"][1] for p in t["paths"]] == [f"nvswitch{k}" for k in range(4)]
    assert t["path_rate_GBps"] == pytest.approx(450)
    assert t["protocol"] == "simple" and 0.5 <= t["link_efficiency"] <= 1
    for target in (t, run_bench("gpu-collectives", out=tmp_path / "single", quiet=True,
                                sets=sets + ["fabric.multipath=single"])["target"]):
        assert target["busbw_GBps"] <= target["path_rate_GBps"] * target["link_efficiency"]
        assert 0 <= target["model_vs_closed_form"] < 0.05  # the fixed costs and the fill of 8 steps per transfer
    single = target
    assert single["multipath"] == "single" and single["path_rate_GBps"] == pytest.approx(125)
    assert t["busbw_GBps"] > 3 * single["busbw_GBps"]
    assert {o["name"] for o in t["overheads"]} == {"host launch per call", "simple fixed cost per call"}

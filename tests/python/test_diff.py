"""kernbench diff: a run against itself is no change, a changed config shows what moved
(with the closed-form ratio), failures and critical-path shares are diffed, bad inputs are
clear errors."""

from __future__ import annotations

import copy
import json

import pytest

import kernbench
from kernbench import cli
from kernbench.diff import diff_paths, diff_sweeps, format_diff, load_sweep
from kernbench.runner import run_bench
from kernbench.system import config_path


@pytest.fixture(scope="module")
def pe_dma_run(tmp_path_factory):
    """pe-dma-perf at its smoke size, run twice (two separate runs of the same inputs)."""
    base = tmp_path_factory.mktemp("diff")
    from kernbench.goldens import smoke_sets
    from kernbench.registry import get_bench

    sets = smoke_sets(get_bench("pe-dma-perf"))
    a = run_bench("pe-dma-perf", out=base / "a", sets=sets, quiet=True)
    b = run_bench("pe-dma-perf", out=base / "b", sets=sets, quiet=True)
    return base, a, b


def test_self_diff_is_no_change(pe_dma_run, capsys):
    """A run diffed against itself, and against a rerun of the same inputs: no change, every delta 0."""
    base, _, _ = pe_dma_run
    for other in (base / "a" / "sweep.json", base / "b"):
        d = diff_paths(base / "a", other, rtol=0.0)
        assert d["changed"] is False
        assert d["compared"] > 100 and d["matched"] == d["rows_a"] == d["rows_b"] > 5
        assert d["metrics"] == [] and d["text"] == [] and d["resources"] == []
        assert d["rows_only_a"] == d["rows_only_b"] == []
        assert d["key"] == ["scenario"]
    assert cli.main(["diff", str(base / "a"), str(base / "b")]) == 0
    assert "no change" in capsys.readouterr().out
    # A stored run beside its config: the config side runs the stored run's bench.
    d = diff_paths(base / "a", config_path("topology.yaml"), smoke=True, out=base / "rerun")
    assert d["changed"] is False and d["header"] == [] and d["matched"] == d["rows_a"]


def test_changed_config_shows_the_moved_metric_with_its_ratio(tmp_path):
    """Halving the UCIe lane bandwidth: the lane bottleneck of a cross-cube path moves by exactly
    0.5 and the UCIe busy time (bytes / bandwidth) by exactly 2; the HBM-local read does not move."""
    text = config_path("topology.yaml").read_text()
    slow = text.replace("ucie:      {bandwidth: 128 GB/s", "ucie:      {bandwidth: 64 GB/s")
    assert slow != text
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(slow)
    d = diff_paths(tmp_path / "a.yaml", tmp_path / "b.yaml", bench="pe-dma-perf", smoke=True, out=tmp_path / "runs")
    assert d["changed"]
    moved = {(m["row"], m["metric"]): m for m in d["metrics"]}
    m = moved[("scenario=REMOTE_CUBE_PE_REMOTE_BEST", "lane_bottleneck_GBps")]
    assert (m["a"], m["b"], m["ratio"]) == (128.0, 64.0, 0.5)
    assert moved[("scenario=REMOTE_CUBE_PE_REMOTE_BEST", "ucie_busy_ns")]["ratio"] == pytest.approx(2.0, rel=1e-9)
    assert not any(row == "scenario=SAME_CUBE_PE_LOCAL" for row, _ in moved)
    # Headline metrics first (pe-dma-perf's primary makespan_ns and effective_GBps, then latencies),
    # each group sorted by |log ratio|; the links list leads with a UCIe busy time that doubled.
    from kernbench.diff import headline_rank

    primary = ("makespan_ns", "effective_GBps")
    assert d["primary"] == list(primary)
    ranks = [headline_rank(m["metric"], primary) for m in d["metrics"]]
    assert ranks == sorted(ranks) and ranks[0] == 0 and d["metrics"][0]["metric"] == "makespan_ns"
    for rank in set(ranks):
        logs = [abs(__import__("math").log(m["ratio"])) for m, r in zip(d["metrics"], ranks) if r == rank and m["ratio"]]
        assert logs == sorted(logs, reverse=True)
    assert d["resources"][0]["metric"] == "ucie_busy_ns" and d["resources"][0]["ratio"] == pytest.approx(2.0)
    assert any(h["field"] == "config_hash" for h in d["header"])
    out = format_diff(d)
    assert "metrics that moved" in out and "lane_bottleneck_GBps" in out


def _sweep(rows, failures=(), **extra):
    s = {"schema": "kernbench.sweep", "schema_version": 1, "kind": "bench", "bench": "not-a-bench", "params": {},
         "seed": 1, "results": rows, "failures": list(failures)}
    s.update(extra)
    return s


def test_failures_rows_text_and_critical_path_are_diffed():
    """A point failing on one side only, a row on one side only, a changed text field and the
    critical-path shares that moved (in points) are all reported."""
    a = _sweep([{"name": "x", "latency_ns": 100, "bound": "hbm",
                 "critical_path": {"length_ps": 100, "makespan_ps": 100,
                                   "share": {"engine:gemm": 0.75, "link:noc": 0.25}}},
                {"name": "y", "latency_ns": 50, "bound": "noc"}],
               failures=[{"name": "z", "error": "CapacityError: too big"}])
    b = copy.deepcopy(a)
    b["results"][0]["critical_path"]["share"] = {"engine:gemm": 0.5, "link:noc": 0.25, "wait:dependency": 0.25}
    b["results"][0]["bound"] = "noc"
    b["results"][0]["latency_ns"] = 150
    b["results"].pop(1)
    b["results"].append({"name": "z", "latency_ns": 10, "bound": "pe"})
    b["failures"] = [{"name": "y", "error": "DeadlockError: stuck"}]
    d = diff_sweeps(a, b)
    assert d["key"] == ["name"]
    share = {m["metric"]: m for m in d["critical_path"]}
    assert share["critical_path.share.engine:gemm"]["points"] == pytest.approx(-25.0)
    assert share["critical_path.share.wait:dependency"]["points"] == pytest.approx(25.0)  # absent in A: 0
    assert "critical_path.share.link:noc" not in share
    lat = next(m for m in d["metrics"] if m["metric"] == "latency_ns")
    assert (lat["delta"], lat["ratio"]) == (50, 1.5)
    assert d["text"] == [{"row": "name=x", "metric": "bound", "a": "hbm", "b": "noc"}]
    assert d["rows_only_a"] == ["name=y"] and d["rows_only_b"] == ["name=z"]
    assert d["failures"]["only_a"] == [{"name": "z", "error": "CapacityError: too big"}]
    assert d["failures"]["only_b"] == [{"name": "y", "error": "DeadlockError: stuck"}]
    text = format_diff(d)
    assert "failed only in B: y: DeadlockError: stuck" in text and "critical-path share" in text
    # rtol hides a small move and keeps a large one.
    c = copy.deepcopy(a)
    c["results"][0]["latency_ns"] = 100.001
    c["results"][1]["latency_ns"] = 60
    d = diff_sweeps(a, c, rtol=1e-3)
    assert [(m["row"], m["metric"]) for m in d["metrics"]] == [("name=y", "latency_ns")]


def test_json_output(tmp_path, capsys):
    """--json prints the diff as JSON (ratio, delta, rows)."""
    a = _sweep([{"name": "x", "v": 2.0}])
    b = _sweep([{"name": "x", "v": 3.0}])
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["changed"] is True and d["metrics"][0]["ratio"] == 1.5 and d["metrics"][0]["delta"] == 1.0


def test_bad_inputs_are_clear_errors(tmp_path, capsys):
    """A missing file, bad JSON, a JSON that is no sweep.json and a bad --rtol name what is wrong and where."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_sweep([])))
    with pytest.raises(kernbench.ConfigError, match="nope.json: no such file"):
        load_sweep(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "kernbench.sweep",\n "results": [}')
    with pytest.raises(kernbench.ConfigError, match=r"bad.json: not valid JSON: .* line 2"):
        load_sweep(bad)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(kernbench.ConfigError, match="other.json: not a kernbench sweep.json"):
        load_sweep(other)
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps({**_sweep([]), "results": {"a": 1}}))
    with pytest.raises(kernbench.ConfigError, match="rows.json: results: expected a list"):
        load_sweep(rows)
    with pytest.raises(kernbench.ConfigError, match="--rtol"):
        diff_paths(good, good, rtol=-1)
    with pytest.raises(kernbench.ConfigError, match="--top"):
        diff_paths(good, good, top=-2)
    with pytest.raises(kernbench.ConfigError, match="--bench, --smoke and --set apply to machine configs"):
        diff_paths(good, good, bench="pe-dma-perf")
    with pytest.raises(kernbench.ConfigError, match="nope.yaml"):
        diff_paths(tmp_path / "nope.yaml", good)
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("system:\n  sips: {w: two}\n")
    with pytest.raises(kernbench.ConfigError, match="bad.yaml"):
        diff_paths(cfg, cfg, bench="pe-dma-perf", out=tmp_path / "runs")
    assert cli.main(["diff", str(bad), str(good)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernbench: error:") and "bad.json" in err


def _headline_pair():
    """A latency that rose 10 %, a critical-path share that appeared (0 -> 1 %: infinite |log ratio|),
    a bytes count that doubled, and a throughput that fell."""
    a = _sweep([{"name": "x", "latency_us": 100.0, "bytes_noc": 10, "throughput_per_s": 50.0,
                 "critical_path": {"length_ps": 100, "makespan_ps": 100, "share": {"engine:gemm": 1.0}}}])
    b = copy.deepcopy(a)
    r = b["results"][0]
    r.update(latency_us=110.0, bytes_noc=20, throughput_per_s=40.0)
    r["critical_path"]["share"] = {"engine:gemm": 0.99, "wait:dependency": 0.01}
    return a, b


def test_headline_metrics_sort_before_tiny_critical_path_shares():
    """diff_sweeps lists the headline metrics (throughput, latency) first and the rest by |log ratio|, the text
    follows that order, and headline_rank puts a bench's declared primary metric first and never a share named
    latency."""
    a, b = _headline_pair()
    d = diff_sweeps(a, b)
    order = [m["metric"] for m in d["metrics"]]
    # latency and throughput first (by |log ratio| between them), then the rest by |log ratio|.
    assert order[:2] == ["throughput_per_s", "latency_us"]
    assert order[2] == "critical_path.share.wait:dependency"  # 0 -> 0.01 still leads the non-headline ones
    assert set(order[3:]) == {"bytes_noc", "critical_path.share.engine:gemm"}
    assert [m["headline"] for m in d["metrics"]] == [True, True, False, False, False]
    text = format_diff(d)
    assert text.index("latency_us") < text.index("critical_path.share.wait:dependency")
    # A bench's declared primary metric leads even a latency.
    from kernbench.diff import headline_rank

    assert headline_rank("bytes_noc", ("bytes_noc",)) == 0 < headline_rank("latency_us", ("bytes_noc",)) == 1
    assert headline_rank("critical_path.share.latency", ()) == 1  # a share named latency is no headline


def test_metric_filter_glob_or_substring(tmp_path, capsys):
    """A --metric filter selects metrics by glob or substring (several patterns OR-ed, none matching gives an empty
    unchanged diff), the CLI's diff honours it and names it, and an empty pattern exits 2."""
    a, b = _headline_pair()
    assert [m["metric"] for m in diff_sweeps(a, b, metrics=["latency"])["metrics"]] == ["latency_us"]
    assert sorted(m["metric"] for m in diff_sweeps(a, b, metrics=["critical_path.*"])["metrics"]) == \
        ["critical_path.share.engine:gemm", "critical_path.share.wait:dependency"]
    both = diff_sweeps(a, b, metrics=["*_us", "bytes"])
    assert [m["metric"] for m in both["metrics"]] == ["latency_us", "bytes_noc"]
    assert both["critical_path"] == [] and both["metric_filter"] == ["*_us", "bytes"]
    none = diff_sweeps(a, b, metrics=["nothing*"])
    assert none["metrics"] == [] and none["compared"] == 0 and none["changed"] is False
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--metric", "*put*"]) == 0
    out = capsys.readouterr().out
    assert "metrics matching *put*" in out and "throughput_per_s" in out and "latency_us" not in out
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--metric", " "]) == 2
    assert "--metric: empty pattern" in capsys.readouterr().err

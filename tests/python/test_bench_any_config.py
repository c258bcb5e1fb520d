"""Every bench takes any --config (issue 27 item 7).

A bench parameter that only shapes a generated machine (model-step's ``sips``, the smoke size's
``system.*`` keys) is left out on an explicit-graph machine, with one line in the run's log saying so; a
bench whose subject is another platform or the generated machine's shape refuses with one error line.
These tests assert what runs and what is logged, not the figures (the GPU execution target changes them).
"""

from __future__ import annotations

import json

import pytest

from kernbench.cli import main
from kernbench.registry import list_benches
from kernbench.system import config_path

H100 = str(config_path("machines/h100-8x-nvswitch.yaml"))
GRAPH_CLASH = "give either system or graph"


def _run(tmp_path, capsys, bench: str, *extra: str) -> tuple[int, str, str, dict | None]:
    out = tmp_path / bench
    rc = main(["run", "--bench", bench, "--smoke", "--config", H100, "--out", str(out), *extra])
    cap = capsys.readouterr()
    sweep = json.loads((out / "sweep.json").read_text()) if (out / "sweep.json").exists() else None
    return rc, cap.out, cap.err, sweep


def _ignored_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if "ignored: h100-8x-nvswitch.yaml is an explicit graph" in ln]


def test_model_step_smoke_runs_on_the_h100_preset(tmp_path, capsys):
    """model-step --smoke on configs/machines/h100-8x-nvswitch.yaml runs (exit 0, both rows, no failure: issue 27's
    test), logs once that bench.sips is ignored and says at which tensor-parallel width the training plan ran."""
    rc, out, err, sweep = _run(tmp_path, capsys, "model-step")
    assert sweep is not None and rc == 0 and sweep["failures"] == []
    # The smoke size's training plan (tp 8 x pp 2 = 16 PEs) is fitted to the box's 8 GPUs at tp 4, and logged.
    assert "  training: dp x tp x pp = 16 PEs, the machine has 8: run at tp = 4" in out.splitlines()
    assert sorted(r["mode"] for r in sweep["results"]) == ["inference", "training"]
    assert _ignored_lines(out) == ["model-step: bench.sips=1 ignored: h100-8x-nvswitch.yaml is an explicit graph "
                                   "(it shapes only a machine generated from a `system:` section)"]
    assert "model-step: " in out and " rows, " in out  # the bench's own closing line
    assert not [f for f in sweep["failures"] if f["name"] == "model-step" or "traceback" in f]
    assert not [f for f in sweep["failures"] if GRAPH_CLASH in f["error"]]
    assert not any(k.startswith("system.") for k in sweep["config_overrides"])
    assert "failed:" not in err


def test_model_step_runs_clean_on_the_h100_preset_at_a_plan_that_fits(tmp_path, capsys):
    """With a training plan that fits the box's 8 GPUs (train_pp=1; the smoke size's 8 x 2 needs 16), model-step
    --smoke on the H100 preset exits 0 with an inference and a training row, and still logs bench.sips once."""
    rc, out, _, sweep = _run(tmp_path, capsys, "model-step", "--set", "bench.train_pp=1")
    assert rc == 0 and sweep["failures"] == []
    assert sorted(r["mode"] for r in sweep["results"]) == ["inference", "training"]
    assert len(_ignored_lines(out)) == 1 and "bench.sips=1 ignored" in _ignored_lines(out)[0]


def test_model_step_default_machine_logs_nothing_ignored(tmp_path, capsys):
    """On the default (generated) machine bench.sips shapes the machine: no 'ignored' line, every row runs."""
    out = tmp_path / "ms"
    assert main(["run", "--bench", "model-step", "--smoke", "--set", "bench.mode=inference", "--out", str(out)]) == 0
    assert "ignored" not in capsys.readouterr().out
    assert json.loads((out / "sweep.json").read_text())["failures"] == []


def test_smoke_size_machine_keys_are_dropped_on_a_graph(tmp_path, capsys):
    """pe2pe-latency's smoke size sets system.sips.*: on the H100 box those are left out (one log line naming
    them), the bench runs clean, and sweep.json's config_overrides holds only what was applied."""
    rc, out, _, sweep = _run(tmp_path, capsys, "pe2pe-latency")
    assert rc == 0 and sweep["failures"] == [] and sweep["results"]
    assert _ignored_lines(out) == ["pe2pe-latency: the smoke size's system.sips.w=2, system.sips.h=1 ignored: "
                                   "h100-8x-nvswitch.yaml is an explicit graph (it shapes only a machine "
                                   "generated from a `system:` section)"]
    assert sweep["config_overrides"] == {}


def test_a_users_own_system_key_on_a_graph_is_still_an_error(tmp_path, capsys):
    """Only the smoke size's own values are dropped: a system.* value the user sets on an explicit graph stays a
    config error (one line, exit 2)."""
    rc, _, err, _ = _run(tmp_path, capsys, "pe2pe-latency", "--set", "system.sips.w=3")
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error:") and GRAPH_CLASH in lines[0]


@pytest.mark.parametrize("bench, why", [
    ("noc-load-latency", "router grid"), ("perf-ccl-scale", "SIP grid"), ("perf-fabric", "SIPs"),
    ("pe-dma-perf", "HBM slices"), ("k200-cases", "k200: section missing"),
    ("k200-bandwidth", "k200: section missing"), ("vgpu-launch", "vgpu:"), ("vgpu-whatif", "guest_vcpu"),
])
def test_benches_of_another_platform_refuse_in_one_line(tmp_path, capsys, bench, why):
    """A bench whose subject is another platform (K200, vGPU) or the generated machine's shape (its NoC, its SIP
    count) refuses the H100 box with one `kernbench: error:` line saying why, before any row runs."""
    rc, _, err, _ = _run(tmp_path, capsys, bench)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error:") and why in lines[0]


def test_every_bench_takes_the_h100_preset(tmp_path, capsys):
    """Every bench that models a machine, at its smoke size on the H100 box: it either runs (sweep.json written,
    no crash, no system/graph clash; machine-shaping keys logged as ignored at most once each) or refuses with
    one error line. Benches that model no machine say so in one line."""
    for b in list_benches():
        rc, out, err, sweep = _run(tmp_path, capsys, b.name)
        if rc == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("kernbench: error:"), (b.name, err)
            continue
        assert rc in (0, 1) and sweep is not None, (b.name, rc, err)
        assert not [f for f in sweep["failures"] if "traceback" in f], b.name
        assert not [f for f in sweep["failures"] if GRAPH_CLASH in f["error"]], b.name
        ignored = _ignored_lines(out)
        assert len(ignored) == len(set(ignored)), (b.name, ignored)

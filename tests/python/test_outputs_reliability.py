"""Reliability round 2 (issue 22): output paths, atomic writes, locks, signals, bench parameters, determinism.

Each family is tested at its root (kernbench.atomic_output, kernbench.overrides / registry, the runner's
and the sweep's interrupt paths); the CLI reproducers are corpus entries in
tests/bad_inputs/cases_outputs.yaml.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import kernbench
from kernbench import atomic_output as kio
from kernbench._core import ConfigError, UsageError
from kernbench.goldens import smoke_sets, without_wall_clock
from kernbench.registry import BenchAuditError, bench, list_benches
from kernbench.runner import SEED_MAX, check_seed, run_bench


# ---- atomic writes: what the target is decides, nothing is replaced that is not a file ----------

def test_write_to_dev_null_writes_through_and_keeps_the_device():
    """Writing JSON to /dev/null writes through the character device instead of replacing it, and /dev/null is an
    accepted output file."""
    kio.write_json(Path("/dev/null"), {"a": 1})
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert kio.check_output_file("/dev/null", "--trace") == Path("/dev/null")


def test_write_through_a_symlink_updates_the_target_and_keeps_the_link(tmp_path):
    """An atomic write to a symlink updates the file it points to and leaves the link a link."""
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    kio.write_json(link, {"x": 2})
    assert link.is_symlink() and json.loads(target.read_text()) == {"x": 2}


def test_dangling_symlink_writes_its_target(tmp_path):
    """An atomic write to a dangling symlink creates its target (and the target's missing folder) and keeps the link."""
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "sub" / "new.json")
    kio.write_json(link, [1])
    assert link.is_symlink() and json.loads((tmp_path / "sub" / "new.json").read_text()) == [1]


def test_fifo_is_refused_not_replaced(tmp_path):
    """A FIFO as output is refused with a UsageError, both by the writer and by the up-front check, and stays a FIFO."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is a FIFO, not a file"):
        kio.write_json(fifo, {})
    with pytest.raises(UsageError, match="is a FIFO"):
        kio.check_output_file(fifo, "--trace")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_folder_target_is_refused(tmp_path):
    """A folder as an output file is refused by the writer and by check_output_file, naming the option."""
    with pytest.raises(UsageError, match="is a folder, not a file"):
        kio.write_json(tmp_path, {})
    with pytest.raises(UsageError, match="--trace .*is a folder, not a file"):
        kio.check_output_file(tmp_path, "--trace")


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_honour_the_umask(tmp_path, umask, mode):
    """New JSON and CSV files get mode 0666 & ~umask, as an ordinary write would, although they are written through a
    temporary file."""
    old = os.umask(umask)
    try:
        for write in (lambda p: kio.write_json(p, {}), lambda p: kio.write_csv(p, [{"a": 1}])):
            path = tmp_path / f"f{umask:o}-{id(write)}"
            write(path)
            assert stat.S_IMODE(os.stat(path).st_mode) == mode
    finally:
        os.umask(old)


def test_rewritten_file_keeps_its_mode(tmp_path):
    """Atomically rewriting an existing file keeps its mode."""
    path = tmp_path / "keep.json"
    path.write_text("{}")
    path.chmod(0o640)
    kio.write_json(path, {"b": 1})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_run_outputs_honour_the_umask(tmp_path):
    """A bench run's sweep.json and sweep.csv get the umask's mode (0644 under 022)."""
    old = os.umask(0o022)
    try:
        run_bench("perf-phold", out=tmp_path / "o", sets=smoke_sets(kernbench.get_bench("perf-phold")), quiet=True)
    finally:
        os.umask(old)
    for name in ("sweep.json", "sweep.csv"):
        assert stat.S_IMODE(os.stat(tmp_path / "o" / name).st_mode) == 0o644


@pytest.mark.parametrize("path, words", [
    ("", "empty path"),
    ("/dev/null", "is a character device, not a folder"),
    ("{file}", "is a file, not a folder"),
    ("{file}/sub", "is a file, not a folder"),
    ("{tmp}/" + "d" * 300, "bytes long"),
])
def test_bad_output_folders_are_refused_before_the_run(tmp_path, path, words):
    """An --out that is empty, a device, a file, under a file or too long is refused by check_output_dir and by
    run_bench before the bench runs (the bench would otherwise run for hours)."""
    (tmp_path / "file").write_text("x")
    path = path.format(file=tmp_path / "file", tmp=tmp_path)
    with pytest.raises(UsageError, match=words):
        kio.check_output_dir(path, "--out")
    with pytest.raises(UsageError, match=words):
        run_bench("perf-phold", out=path, sets=["bench.events=1000000000000"], quiet=True)  # would run for hours


def test_bad_trace_path_is_refused_before_the_run(tmp_path):
    """A --trace that is a folder is refused before the bench runs, and no sweep.json is written."""
    with pytest.raises(UsageError, match="--trace .*is a folder"):
        run_bench("milestone-1h-gemm", out=tmp_path / "o", trace=tmp_path, quiet=True,
                  sets=["bench.square=8192,8192,8192"])
    assert not (tmp_path / "o" / "sweep.json").exists()


def test_figure_formats_are_checked():
    """A figure file of an unknown format is refused naming it; a known one (svg) is accepted."""
    with pytest.raises(UsageError, match="unknown figure format 'xyz'"):
        kio.check_figure_file("x.xyz")
    assert kio.check_figure_file("x.svg") == Path("x.svg")


def test_damaged_golden_is_one_config_error(tmp_path):
    """A golden file that is cut JSON or not UTF-8 is one ConfigError saying so, not a traceback."""
    from kernbench.goldens import load_golden

    bad = tmp_path / "perf-phold.json"
    bad.write_bytes(b'{"rows": [')
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_golden(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_golden(bad)


# ---- the output folder lock ---------------------------------------------------------------------

_HOLD = textwrap.dedent("""
    import sys, time
    from kernbench.atomic_output import lock_output_dir
    with lock_output_dir(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def _holder(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_run_into_a_held_folder_is_refused(tmp_path):
    """While another process holds an --out folder's lock, run_bench raises and the CLI exits 2 with one line naming
    the holder's pid, writing nothing; once the holder dies the folder is usable again."""
    holder = _holder(tmp_path)
    try:
        with pytest.raises(UsageError, match=f"another kernbench run \\(pid {holder.pid}\\) is writing"):
            run_bench("perf-phold", out=tmp_path, sets=smoke_sets(kernbench.get_bench("perf-phold")), quiet=True)
        proc = subprocess.run([sys.executable, "-m", "kernbench", "run", "--bench", "perf-phold", "--smoke",
                               "--quiet", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("kernbench: error: --out")
        assert "another kernbench run" in proc.stderr
        assert not (tmp_path / "sweep.json").exists()
    finally:
        holder.kill()
        holder.communicate()
    # the lock goes with its process: the folder is free again
    run_bench("perf-phold", out=tmp_path, sets=smoke_sets(kernbench.get_bench("perf-phold")), quiet=True)
    assert (tmp_path / "sweep.json").exists()


def test_two_concurrent_cli_runs_one_is_refused(tmp_path):
    """Of two CLI runs started into one folder, the second exits 2 saying another kernbench run is writing there,
    without a traceback."""
    long = ["--set", "bench.events=3000000", "--set", "bench.simpy_events=20000",
            "--set", "bench.populations=" + ",".join(["256x1"] * 20)]
    first = subprocess.Popen([sys.executable, "-m", "kernbench", "run", "--bench", "perf-phold", "--out",
                              str(tmp_path), *long], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline(), "the first run printed nothing"
        second = subprocess.run([sys.executable, "-m", "kernbench", "run", "--bench", "perf-phold", "--smoke",
                                 "--quiet", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "another kernbench run" in second.stderr and "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)


def test_sweep_holds_its_folder(tmp_path):
    """kernbench.sweep takes the same output-folder lock: a sweep into a held folder is refused."""
    holder = _holder(tmp_path)
    try:
        with pytest.raises(UsageError, match="another kernbench run"):
            kernbench.sweep("perf-phold", {"bench.events": [1000]}, "serial", out=tmp_path,
                            sets=smoke_sets(kernbench.get_bench("perf-phold")))
    finally:
        holder.kill()
        holder.communicate()


# ---- SIGTERM and interrupted sweeps ------------------------------------------------------------

def test_sigterm_keeps_what_finished_like_ctrl_c(tmp_path):
    """SIGTERM during a bench run exits 143 with one 'interrupted (SIGTERM)' line, and sweep.json keeps the rows that
    finished plus a failure saying why it stopped, as Ctrl-C does."""
    pops = ",".join(["256x1"] * 20)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernbench", "run", "--bench", "perf-phold", "--out", str(tmp_path),
         "--set", "bench.events=2000000", "--set", "bench.simpy_events=20000", "--set", f"bench.populations={pops}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = 0
    while done < 2:
        line = proc.stdout.readline()
        assert line, "the bench ended before it could be stopped"
        done += "simpy" in line
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "kernbench: interrupted (SIGTERM)" in err and "Traceback" not in err
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert len(sweep["results"]) >= 2
    assert sweep["failures"][-1]["error"] == "interrupted (SIGTERM)"


_STOP = {"at": 2}


def test_sigterm_to_a_sweep_keeps_the_finished_points(tmp_path):
    """`kernbench sweep` under SIGTERM: exit 143, sweep.json and the checkpoint hold every finished point."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernbench", "sweep", "--bench", "perf-phold", "--executor", "serial", "--quiet",
         "--out", str(tmp_path), "--set", "bench.simpy_events=20000", "--set", "bench.populations=256x1",
         "--grid", "bench.events=" + ",".join(str(400000 + i) for i in range(30))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = tmp_path / "checkpoint.jsonl"
    t0 = time.monotonic()
    while not (ckpt.exists() and len(ckpt.read_text().splitlines()) >= 3):  # the header and two points
        assert proc.poll() is None, "the sweep ended before it could be stopped"
        assert time.monotonic() - t0 < 120, "no point finished in 120 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "kernbench: interrupted (SIGTERM)" in err and "Traceback" not in err
    doc = json.loads((tmp_path / "sweep.json").read_text())
    finished = len(ckpt.read_text().splitlines()) - 1
    assert finished >= 2 and len({r["point"] for r in doc["results"]}) == finished < 30
    assert doc["failures"][-1]["error"].startswith("interrupted (SIGTERM)")


def test_bad_plot_name_is_refused_before_the_points_run(tmp_path):
    """A --plot file name that is too long is refused before any point runs: no checkpoint is started."""
    with pytest.raises(UsageError, match="--plot .*bytes long"):
        kernbench.sweep(_stop_at_two, {"bench.n": [0, 1, 2, 3]}, "serial", out=tmp_path, plot=("bench.n", "y" * 300))
    assert not (tmp_path / "checkpoint.jsonl").exists()


def _stop_at_two(point):
    if point.index == _STOP["at"]:
        raise KeyboardInterrupt
    return {"x": point.index}


def test_interrupted_sweep_writes_sweep_json_and_resume_keeps_the_finished_points(tmp_path):
    """A sweep interrupted at its third point writes sweep.json with the two finished points and a failure saying 2
    of 4 finished, its checkpoint holds them, and resume=True computes only the other two."""
    grid = {"bench.n": [0, 1, 2, 3]}
    with pytest.raises(KeyboardInterrupt):
        kernbench.sweep(_stop_at_two, grid, "serial", out=tmp_path)
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert [r["x"] for r in doc["results"]] == [0, 1]
    assert doc["failures"][-1]["name"] == "sweep"
    assert doc["failures"][-1]["error"].startswith("interrupted (KeyboardInterrupt): 2 of 4 points finished")
    lines = (tmp_path / "checkpoint.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the header and the two finished points
    _STOP["at"] = None
    try:
        df = kernbench.sweep(_stop_at_two, grid, "serial", out=tmp_path, resume=True)
    finally:
        _STOP["at"] = 2
    assert df.attrs["computed"] == 2 and list(df["x"]) == [0, 1, 2, 3]


def test_interrupt_while_waiting_keeps_every_finished_point():
    """Results that finished before the interrupt was handled reach on_done (so the checkpoint has them)."""
    import concurrent.futures as cf

    from kernbench.sweeps.executors import _run_futures

    got = []

    def on_done(r):
        got.append(r)
        if len(got) == 1:
            raise KeyboardInterrupt  # Ctrl-C / SIGTERM while the first result is handled

    import threading

    started = threading.Barrier(4)  # no point returns before all four run: none is still queued (cancellable)

    def run(x):
        started.wait(timeout=30)
        return _identity(x)

    with cf.ThreadPoolExecutor(4) as pool, pytest.raises(KeyboardInterrupt):  # all four running
        _run_futures(pool, run, [0, 1, 2, 3], on_done)
    assert sorted(got) == [0, 1, 2, 3]


def _identity(x):
    time.sleep(0.05 * x)
    return x


# ---- bench parameters and the seed, checked before the run ------------------------------------

@pytest.mark.parametrize("seed", [-1, SEED_MAX + 1, 2**70, True, 1.5, "3"])
def test_bad_seeds_are_refused(seed):
    """Seeds that are negative, past SEED_MAX, booleans, floats or text are a ConfigError naming the seed, and
    run_bench refuses an out-of-range one before running."""
    with pytest.raises(ConfigError, match="seed"):
        check_seed(seed)
    if isinstance(seed, int) and not isinstance(seed, bool):
        with pytest.raises(ConfigError, match="out of range"):
            run_bench("perf-phold", out=None, sets=["bench.events=1000000000000"], seed=seed, quiet=True)


def test_edge_seeds_run(tmp_path):
    """The extreme valid seeds, 0 and SEED_MAX, run cleanly and are recorded in sweep.json."""
    for seed in (0, SEED_MAX):
        sweep = run_bench("perf-phold", out=tmp_path / str(seed), seed=seed, quiet=True,
                          sets=smoke_sets(kernbench.get_bench("perf-phold")))
        assert sweep["seed"] == seed and not sweep["failures"]


def _plugin(tmp_path, body: str) -> None:
    (tmp_path / "mine.py").write_text(textwrap.dedent(body))
    kernbench.registry.add_bench_path(tmp_path)


def test_a_bench_declares_bounds_and_checks_that_run_before_it(tmp_path, monkeypatch):
    """A plugin bench's Param bounds and choices and its checks function refuse bad values with a ConfigError before
    the bench runs (for a sweep, before any point), a good value runs, and describe shows the allowed range."""
    ran = tmp_path / "ran"
    _plugin(tmp_path, f"""
        from kernbench import bench
        from kernbench.overrides import Param

        @bench(name="rel-plugin-checked", description="x",
               params={{"n": Param(4, min=1, max=64), "mode": Param("a", choices=["a", "b"]), "m": 2}},
               checks=lambda p: None if p["n"] % p["m"] == 0 else f"bench.n={{p['n']}}: not a multiple of bench.m")
        def fn(ctx):
            import pathlib; pathlib.Path({str(ran)!r}).write_text("ran")
            return {{"results": [{{"n": ctx.params["n"]}}]}}
    """)
    try:
        for sets, words in ((["bench.n=65"], "bench.n=65: 65 is above 64"), (["bench.mode=c"], "'c' is not allowed"),
                            (["bench.n=3"], "not a multiple of bench.m")):
            with pytest.raises(ConfigError, match=words):
                run_bench("rel-plugin-checked", out=tmp_path / "o", sets=sets, quiet=True)
            assert not ran.exists()
        assert run_bench("rel-plugin-checked", out=tmp_path / "o", sets=["bench.n=8"], quiet=True)["results"] == [{"n": 8}]
        with pytest.raises(ConfigError, match="not a multiple"):  # a sweep checks every point first
            kernbench.sweep("rel-plugin-checked", {"bench.n": [8, 3]}, "serial")
        from kernbench import bench_info

        info = bench_info.info(kernbench.get_bench("rel-plugin-checked"))
        assert {p["name"]: p.get("allowed") for p in info["params"]}["bench.n"] == "from 1 to 64"
    finally:
        mine = tmp_path.resolve() / "mine.py"
        kernbench.registry._forget(kernbench.registry._LOADED_FILES.get(mine, ""), mine)
        kernbench.registry._EXTRA_PATHS.remove(tmp_path.resolve())


def test_defaults_that_fail_their_own_checks_fail_the_audit():
    """Registering a bench whose default parameters fail its own bounds is a BenchAuditError."""
    from kernbench.overrides import Param

    with pytest.raises(BenchAuditError, match="default parameters fail its own checks"):
        bench(name="rel-bad-default", description="x", params={"n": Param(0, min=1)})


@pytest.mark.parametrize("value, words", [("1e99", "fits 64 bits"), ("-1e99", "fits 64 bits"),
                                          ("9223372036854775808", "fits 64 bits"), ("1" * 5000, "finite number")])
def test_integers_fit_64_bits(value, words):
    """An integer parameter's text must fit 64 bits (1e99, -1e99, 2**63 and a 5000-digit number are refused naming
    why) while 2**63 - 1 is accepted."""
    from kernbench.overrides import coerce

    with pytest.raises(ValueError, match=words):
        coerce(value, 5)
    assert coerce("9223372036854775807", 5) == 2**63 - 1


# ---- determinism: every bench's smoke run, twice with one seed ---------------------------------

SMOKE_BENCHES = [b.name for b in list_benches() if b.smoke is not None and not b.plugin]


@pytest.mark.slow
@pytest.mark.parametrize("name", SMOKE_BENCHES)
def test_every_bench_is_deterministic_outside_its_wall_clock_fields(tmp_path, name):
    """Two smoke runs with one seed: byte-identical sweep.json outside the documented wall-clock fields."""
    b = kernbench.get_bench(name)
    docs = []
    for side in ("a", "b"):
        sweep = run_bench(name, out=tmp_path / side, sets=smoke_sets(b), seed=3, quiet=True)
        doc = json.loads((tmp_path / side / "sweep.json").read_text())
        assert doc["results"], f"{name}: the smoke run gave no results: {sweep['failures'][:3]}"
        docs.append(json.dumps(without_wall_clock(doc), indent=1, sort_keys=True).replace(str(tmp_path / side), "OUT"))
    if name.startswith("perf-"):  # wall-clock by nature: they must say which fields are
        assert json.loads((tmp_path / "a" / "sweep.json").read_text()).get("wall_clock_fields"), (
            f"{name}: a perf bench must list its wall-clock fields in wall_clock_fields")
    assert docs[0] == docs[1], f"{name}: two runs with one seed differ outside the wall-clock fields"

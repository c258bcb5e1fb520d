"""Fuzz the CLI's ``--set`` / bench-parameter / ``--seed`` path (issue 22): a clean run, or exit 2 with one line.

Every generated ``kernbench run --bench B --set K=V ... [--seed N]`` must either run cleanly (exit 0)
or exit 2 with exactly one ``kernbench: error:`` line on stderr, no traceback, within a time limit.
The bench's function is replaced by a stub that checks the parameters it receives are typed like
the defaults (so a value that passed validation is one a bench can use) -- nothing is simulated, so
every example is fast; the config loader (C++) runs for real on every config ``--set``.

Default: a short run (a few seconds, fixed seed). ``KERNBENCH_FUZZ_SECONDS=60`` keeps fuzzing with
fresh seeds for that long (``.ci/run`` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernbench import cli, registry  # noqa: E402
from kernbench.overrides import INT_MAX, INT_MIN  # noqa: E402

BENCHES = [b for b in registry.list_benches() if not b.plugin]
CONFIG_PATHS = ["system.sips.w", "system.sips.h", "system.cubes.w", "system.pes_per_cube", "fabric.model",
                "fabric.chunk", "links.pcie.bandwidth", "links.noc.latency", "pe.clock", "system.name", "nodes",
                "system", "system.sips.w.x", "bench", "bench.", ".", "a..b", "links.pe.bandwidth"]
EXAMPLE_DEADLINE_MS = 10_000  # one example (parse, validate, load the machine, the stub) slower than this fails


def _numbers() -> st.SearchStrategy[str]:
    ints = st.one_of(st.integers(-3, 70), st.integers(INT_MIN - 5, INT_MAX + 5), st.integers(-(10**40), 10**40))
    floats = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(ints.map(str), floats.map(repr), st.sampled_from(
        ["1e99", "-1e99", "1e999", "1e-999", "0.5", "-0.0", "2.5", "1_000", "0x10", "nan", "inf", "-inf", "1e6",
         "9" * 400, "1/2", "+3", " 7 ", "٣", "1e308", "4e-324"]))


def _values() -> st.SearchStrategy[str]:
    units = st.tuples(_numbers(), st.sampled_from(["B", "KiB", "GB/s", "ns", "ps", "GHz", "GT/s", "fortnights", ""]))
    return st.one_of(
        _numbers(),
        units.map(lambda t: f"{t[0]} {t[1]}".strip()),
        st.sampled_from(["", "true", "false", "maybe", "none", "0x0", "4x2", "64x1", "1x2x3", "zz", "ring", "packet",
                         "a,b", ",", ";", "=", "256 KiB", "sip", "full", "auto", "on", "{w: 2}", "[1, 2]", "\x00"]),
        st.lists(_numbers(), min_size=1, max_size=4).map(",".join),
        st.text(max_size=12),
    )


@st.composite
def _keys(draw, bench) -> str:
    names = list(bench.params)
    choice = draw(st.integers(0, 9))
    if names and choice < 6:
        return "bench." + draw(st.sampled_from(names))
    if choice < 8:
        return draw(st.sampled_from(CONFIG_PATHS))
    return draw(st.text(max_size=10))


@st.composite
def _calls(draw) -> tuple[str, list[str]]:
    bench = draw(st.sampled_from(BENCHES))
    args = ["run", "--bench", bench.name, "--quiet"]
    for _ in range(draw(st.integers(1, 3))):
        args += ["--set", f"{draw(_keys(bench))}={draw(_values())}"]
    if draw(st.booleans()):
        args += ["--seed", str(draw(st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70))))]
    return bench.name, args


def _type_ok(value, default) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool) and INT_MIN <= value <= INT_MAX
    if isinstance(default, float):
        return isinstance(value, float) and value == value and abs(value) != float("inf")
    if isinstance(default, (list, tuple)):
        if not default and value == []:  # the bench's own empty default (k200-cases' ``cases``: all of them)
            return True
        return isinstance(value, list) and bool(value) and (not default or all(_type_ok(v, default[0]) for v in value))
    return isinstance(value, str)


@pytest.fixture
def stubbed(tmp_path):
    """Every bench's function replaced by a stub that checks its parameters' types; restored after."""
    seen: list[str] = []
    saved = dict(registry._BENCHES)

    def stub_for(b):
        def stub(ctx):
            bad = {k: v for k, v in ctx.params.items() if not _type_ok(v, b.params[k])}
            assert not bad, f"{b.name}: parameters typed unlike their defaults reached the bench: {bad}"
            seen.append(b.name)
            return {"results": [], "failures": []}
        return stub

    for name, b in saved.items():
        registry._BENCHES[name] = dataclasses.replace(b, func=stub_for(b))
    try:
        yield tmp_path, seen
    finally:
        registry._BENCHES.clear()
        registry._BENCHES.update(saved)


def _one(out, call) -> None:
    name, args = call
    args = [*args, "--out", str(out / "o")]
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = cli.main(args)
        except SystemExit as e:  # argparse's usage errors
            rc = e.code
    text = err.getvalue()
    where = f"kernbench {' '.join(map(repr, args))}"
    assert "Traceback" not in text, f"{where}: traceback:\n{text}"
    assert time.perf_counter() - t0 < EXAMPLE_DEADLINE_MS / 1e3, f"{where}: too slow"
    if rc == 0:
        assert text == "", f"{where}: exit 0 but stderr:\n{text}"
        return
    lines = text.splitlines()
    assert rc == 2, f"{where}: exit {rc}, expected 0 or 2:\n{text}"
    assert len(lines) == 1 and lines[0].startswith("kernbench: error: "), f"{where}: expected one error line:\n{text}"


def _fuzz(out, examples: int, at_seed: int) -> None:
    @seed(at_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(_calls())
    def run(call):
        _one(out, call)

    run()


def test_fuzz_set_and_bench_parameters(stubbed):
    """Generated `run --bench B --set K=V [--seed N]` calls (seeded; longer with KERNBENCH_FUZZ_SECONDS) either run
    cleanly with parameters typed like the defaults or exit 2 with one error line and no traceback, and some of them
    do run."""
    out, seen = stubbed
    budget = float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)
    _fuzz(out, examples=60, at_seed=22)
    deadline = time.monotonic() + budget
    n = 1
    while time.monotonic() < deadline:
        _fuzz(out, examples=200, at_seed=22 + n)
        n += 1
    assert seen, "no generated call ever ran cleanly: the generator only makes errors"


@pytest.mark.parametrize("args", [
    ["run", "--bench", "perf-phold", "--set", "bench.events=1e99"],
    ["run", "--bench", "perf-phold", "--seed", "-1"],
    ["run", "--bench", "perf-phold", "--seed", str(2**64)],
    ["run", "--bench", "perf-phold", "--set", "bench.populations=zz"],
    ["run", "--bench", "llama-layer", "--set", "bench.tp=3"],
    ["run", "--bench", "pe-dma-perf", "--set", "system.sips.w=1e99"],
    ["run", "--bench", "pe-dma-perf", "--set", "bench.sip=-1"],
    ["run", "--bench", "k200-cases", "--set", "bench.quick=0"],
    ["run", "--bench", "perf-fabric", "--set", "bench.window_ns=" + "9" * 400],  # an int too large for a float  # CI stop 23: the default ``cases: []`` is valid
])
def test_known_reproducers_exit_2_with_one_line(stubbed, args):
    """Each input that once crashed or hung the CLI (huge or non-numeric values, out-of-range seeds, an invalid tp, a
    bad sip) now exits cleanly or with code 2 and one `kernbench: error:` line, quickly."""
    out, _ = stubbed
    _one(out, (args[2], [*args, "--quiet"]))

"""Fuzz serving's inputs (issue 54): `kernbench serve`'s flags and serving.run's arguments, through the one checker.

Every generated value must either be refused with a kernbench error (a ServingError naming the argument) or pass
as a value the core can take: whole numbers in their C++ type's range, finite positive reals, known names -- and
then the load it describes is generated (make_trace, at most 64 requests) without any other exception. Nothing
is simulated, so every example is fast. ``KERNBENCH_FUZZ_SECONDS`` lengthens the run as the other fuzzers do.
"""

from __future__ import annotations

import math
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernbench import _core, cli, serve_cli  # noqa: E402
from kernbench.serving_args import MAX_REQUESTS, MAX_TOKENS, check_run_args  # noqa: E402
from kernbench.serving_load import Dist, make_trace  # noqa: E402

EXAMPLES = 60 if not os.environ.get("KERNBENCH_FUZZ_SECONDS") else 2000
FLAGS = ["--tp", "--pp", "--qps", "--requests", "--cv", "--max-num-seqs", "--max-batched-tokens", "--block-size",
         "--replicas", "--prefix-groups", "--prefix-tokens", "--warmup", "--check", "--seed", "--prompt", "--output",
         "--disaggregate", "--slo", "--arrival", "--scheduler"]
TEXTS = ["0", "-1", "1", "2", "7", "0.5", "-0.5", "1e-7", "1e300", "nan", "inf", "-inf", "2147483648", "9" * 31,
         "99999999999999999999", "1:1", "1:1:1", "0:1", "1.5:1", "fixed:64", "fixed:", "fixed:" + "9" * 31,
         "uniform:1:9", "uniform:9:1", "lognormal:mean=64,sigma=1", "lognormal:mean=nan,sigma=1",
         "lognormal:mean=64,mean=9,sigma=1", "sharegpt-prompt", "ttft=1ms", "ttft=1ms,ttft=2s", "tpot=0ms", "vllm",
         "static", "gamma", "poisson", "nope", ""]


def _sane(kw: dict) -> None:
    """What a value that passed the checker must be: the core's types, in range."""
    for key in ("tp", "pp", "max_num_seqs", "block_size", "replicas", "prefix_groups", "prefix_tokens", "check"):
        assert isinstance(kw[key], int) and 0 <= kw[key] < 2**31, (key, kw[key])
    assert isinstance(kw["requests"], int) and 1 <= kw["requests"] <= MAX_REQUESTS
    for key in ("qps", "cv"):
        assert math.isfinite(kw[key]) and kw[key] > 0, (key, kw[key])
    assert math.isfinite(kw["warmup"]) and 0 <= kw["warmup"] < 1
    if kw["max_batched_tokens"] is not None:
        assert 1 <= kw["max_batched_tokens"] <= MAX_TOKENS
    if kw["disaggregate"] is not None:
        assert all(isinstance(x, int) and x >= 1 for x in kw["disaggregate"])


@settings(max_examples=EXAMPLES, deadline=10_000, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(FLAGS), st.one_of(st.sampled_from(TEXTS), st.text(max_size=8))),
                max_size=4))
def test_fuzz_serve_flags(pairs):
    """`kernbench serve` with fuzzed flags: refused with a kernbench error (or argparse's usage line), or checked
    values the core can take, whose load make_trace generates."""
    argv = ["serve", "--model", "llama3-8b"]
    for flag, value in pairs:
        argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
    try:
        args = cli.parser().parse_args(argv)
    except SystemExit as e:  # argparse's one usage line (exit 2): not a value of ours
        assert e.code == 2
        return
    try:
        kw = serve_cli.checked_args(args)
        _sane(kw)
        if kw["trace"] is None:
            make_trace(min(kw["requests"], 64), kw["qps"], arrival=kw["arrival"], cv=kw["cv"], prompt=kw["prompt"],
                       output=kw["output"], seed=kw["seed"], prefix_groups=kw["prefix_groups"],
                       prefix_tokens=kw["prefix_tokens"])
    except _core.KernbenchError as e:
        assert str(e) and "\n" not in str(e)


_ANY = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
                 st.sampled_from(["1", "vllm", "fixed:64", "bf16", "int4", "round_robin", (1, 1), (1.5, 1), (1, 1, 1),
                                  [64.7], {"ttft": "1ms"}]), st.text(max_size=6))


@settings(max_examples=EXAMPLES, deadline=10_000, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(["tp", "pp", "qps", "requests", "prompt", "output", "arrival", "cv", "scheduler",
                                        "max_num_seqs", "max_batched_tokens", "block_size", "kv_blocks", "preemption",
                                        "slo", "warmup", "check", "seed", "dtype", "replicas", "routing",
                                        "disaggregate", "prefix_caching", "prefix_groups", "prefix_tokens"]), _ANY,
                       max_size=4))
def test_fuzz_serving_run_arguments(values):
    """serving.run's checker with any Python values: a ServingError naming the argument, or values of the right
    kind (a length distribution among them parses)."""
    try:
        out = check_run_args(values)
    except _core.KernbenchError as e:
        assert any(k in str(e) for k in values), str(e)
        return
    for key in ("prompt", "output"):
        if key in out and isinstance(out[key], str):
            try:
                Dist.parse(out[key], key)
            except _core.KernbenchError:
                pass

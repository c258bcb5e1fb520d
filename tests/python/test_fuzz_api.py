"""Fuzz the Python program / collective API's arguments (issue 31, family 13): a result or a typed error.

Each example takes one op method (Program.dma / compute / kernel / vector / alloc / send / recv / barrier /
composite / gemm / all_reduce / broadcast / attention, kernbench.ccl.all_reduce, System.dma / route) with
good arguments and replaces one to three of them with hostile values: None, bools, texts, NaN, inf,
fractions, negative numbers, integers past 64 bits, lists, numpy scalars, objects. The only allowed
outcomes are a result or a kernbench typed error (kernbench._core.KernbenchError: ConfigError,
UsageError, ...) -- never TypeError, pybind's "incompatible function arguments", or a crash.

Integers that fit 64 bits but are huge (2**31 .. 2**63) are left out of the dimensions of the kernels
(GEMM m/n/k, attention sizes) and of what runs (ccl): they are legal values whose work is bounded by other
checks (the GEMM tile search's overflow, issue 31 family 2, is fixed in C++ separately).

Default: a short run (fixed seed, well under 20 s). ``KERNBENCH_FUZZ_SECONDS=60`` keeps fuzzing with fresh
seeds for that long (``.ci/run`` does), like tests/python/test_fuzz_cli.py.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import kernbench  # noqa: E402
from kernbench import ccl  # noqa: E402
from kernbench._core import KernbenchError  # noqa: E402

EXAMPLE_LIMIT_S = 5.0


def _hostile() -> st.SearchStrategy:
    """Values no op argument should take: each must come back as a typed error (or be accepted)."""
    return st.one_of(
        st.none(), st.booleans(), st.text(max_size=6), st.binary(max_size=3),
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1.5, -0.5, 1e300, -1e300, 2.0**70]),
        st.integers(-(2**80), -1), st.integers(2**63, 2**80),
        st.lists(st.integers(-2, 3), max_size=3), st.tuples(st.integers(0, 3)),
        st.sampled_from([np.int64(-3), np.uint64(2**63), np.float64("nan"), np.bool_(True), np.int32(7)]),
        st.builds(object), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    )


@pytest.fixture(scope="module")
def world():
    system = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    pes = system.pes()
    return system, pes


def _templates(system, pes):
    """Per call: a function of the argument dict, and the good arguments (small, valid)."""
    pe0, pe1 = pes[0], pes[1]
    hbm0 = pe0.replace(".pe", ".hbm_ctrl.pe")

    def on_program(method):
        def call(kw):
            prog = system.program("fuzz")
            prog.dma(pe0, hbm0, pe0, 64)  # op 0, so deps=[0] is a real op
            return getattr(prog, method)(**kw)
        return call

    return {
        "dma": (on_program("dma"), dict(agent=pe0, src=hbm0, dst=pe0, bytes=4096, deps=[0], name="d", tag="t")),
        "compute": (on_program("compute"), dict(agent=pe0, flops=1e6, precision="fp16", deps=[0], name="c", tag=1)),
        "kernel": (on_program("kernel"), dict(agent=pe0, duration_ps=1000, launch_ps=10, flops=1e3,
                                               precision="bf16", bytes=64)),
        "vector": (on_program("vector"), dict(agent=pe0, bytes=256, deps=[0])),
        "alloc": (on_program("alloc"), dict(agent=pe0, bytes=256)),
        "send": (on_program("send"), dict(agent=pe0, peer=pe1, bytes=256, key=3, source=None)),
        "recv": (on_program("recv"), dict(agent=pe1, peer=pe0, key=3, mode="consume")),
        "barrier": (on_program("barrier"), dict(agent=pe0, deps=[0])),
        "composite": (on_program("composite"), dict(agent=pe0, tiles=2, loads=[(hbm0, pe0, 1024)], flops=1e3,
                                                     vector_bytes=0, buffers=2)),
        "gemm": (on_program("gemm"), dict(pes=[pe0], m=64, n=64, k=64, precision="fp16", tile_m=0, buffers=2,
                                           pinned=False)),
        "all_reduce": (on_program("all_reduce"), dict(pes=[pe0, pe1], bytes=1024, algorithm="ring", pieces=2,
                                                       root=0, grid_w=0)),
        "broadcast": (on_program("broadcast"), dict(pes=[pe0, pe1], bytes=1024, root=0)),
        "attention": (on_program("attention"), dict(phase="decode", case=1, t_q=1, s_kv=256, tile_q=256,
                                                     tile_s=256, kv_buffers=2, sip=0, h_q=8, d_head=128,
                                                     pe_count=0)),
        "ccl.all_reduce": (lambda kw: ccl.all_reduce(system, **kw), dict(bytes_per_pe=256, pes=[pe0, pe1],
                                                                          pieces=1, verify="off")),
        "System.route": (lambda kw: system.route(**kw), dict(src=pe0, dst=pe1)),
        "System.dma": (lambda kw: system.dma(**kw), dict(kind="read", issuer=pe0, memory=hbm0, bytes=64,
                                                          at_ps=None, tag=0)),
    }


@st.composite
def _calls(draw, names):
    name = draw(st.sampled_from(names))
    return name, draw(st.integers(1, 3)), draw(st.randoms(use_true_random=False))


def _one(templates, name, n_bad, rnd, data) -> None:
    call, good = templates[name]
    kw = dict(good)
    for key in rnd.sample(sorted(kw), min(n_bad, len(kw))):
        kw[key] = data.draw(_hostile(), label=f"{name}.{key}")
    t0 = time.perf_counter()
    try:
        call(kw)
    except KernbenchError:
        pass
    except Exception as e:  # noqa: BLE001 - any other error is the finding
        raise AssertionError(f"{name}({kw!r}): {type(e).__name__}: {e}") from e
    assert time.perf_counter() - t0 < EXAMPLE_LIMIT_S, f"{name}({kw!r}): too slow"


def _fuzz(templates, examples: int, at_seed: int) -> None:
    names = sorted(templates)

    @seed(at_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(_calls(names), st.data())
    def run(call, data):
        name, n_bad, rnd = call
        _one(templates, name, n_bad, rnd, data)

    run()


def test_fuzz_program_api_arguments(world):
    """Generated calls of the Program, ccl and System op methods with one to three hostile arguments (seeded;
    longer with KERNBENCH_FUZZ_SECONDS) each return a result or raise a kernbench typed error, never TypeError or
    pybind's 'incompatible function arguments', each within a few seconds."""
    templates = _templates(*world)
    for name, (call, good) in templates.items():  # the good arguments are good
        call(dict(good))
    budget = float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)
    _fuzz(templates, examples=300, at_seed=31)
    deadline = time.monotonic() + budget
    n = 1
    while time.monotonic() < deadline:
        _fuzz(templates, examples=300, at_seed=31 + n)
        n += 1

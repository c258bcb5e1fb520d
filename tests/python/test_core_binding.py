"""The C++ core through pybind11: simulations, models, op-log views, errors."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench


def test_queue_model_round_trip_matches_theory():
    """An M/M/1 at rho 0.5 run from Python lands near rho/(mu-lambda), with per-customer op rows."""
    sim = kernbench.Simulation(seed=11)
    r = kernbench.run_queue(sim, mean_interarrival_ps=2_000_000, mean_service_ps=1_000_000, customers=200_000)
    assert r["served"] == 200_000
    assert r["theory_wait_ps"] == pytest.approx(1_000_000)
    assert r["mean_wait_ps"] == pytest.approx(r["theory_wait_ps"], rel=0.05)
    assert r["utilization"] == pytest.approx(0.5, rel=0.02)
    assert sim.now == r["end_time_ps"]

    log = sim.take_op_log()
    assert len(log) == 200_000
    assert log.kind_names == ["service"]
    c = log.columns()
    assert c["issue_ps"].dtype == np.int64 and c["work"].dtype == np.float64
    # Causality per customer: arrival <= service start < departure.
    assert np.all(c["issue_ps"] <= c["start_ps"])
    assert np.all(c["start_ps"] < c["end_ps"])
    # FIFO single server: service starts in arrival order, never overlapping.
    assert np.all(np.diff(c["start_ps"]) >= 0)
    assert np.all(c["start_ps"][1:] >= c["end_ps"][:-1])
    # The mean wait recomputed from the log equals the model's own figure.
    assert np.mean(c["start_ps"] - c["issue_ps"]) == pytest.approx(r["mean_wait_ps"], rel=1e-9)


def test_op_log_columns_are_views_not_copies():
    """Two calls to columns() see the same memory, owned by the OpLog object."""
    sim = kernbench.Simulation()
    kernbench.run_queue(sim, 1_000, 500, customers=1000)
    log = sim.take_op_log()
    a, b = log.columns()["end_ps"], log.columns()["end_ps"]
    assert np.shares_memory(a, b)
    assert a.base is not None
    # The simulation carries on with a fresh log; the taken one is unaffected.
    kernbench.run_queue(sim, 1_000, 500, customers=10)
    assert len(log) == 1000
    assert len(sim.take_op_log()) == 10


def test_phold_engines_agree_and_runs_are_reproducible():
    """The three C++ PHOLD engines process the same events; a seed reproduces a run bit for bit."""
    def run(engine, seed):
        return kernbench.run_phold(
            kernbench.Simulation(seed=seed), engine=engine, lps=32, events_per_lp=2, events=50_000
        )

    hashes = {e: run(e, 4)["trace_hash"] for e in ("bare", "callbacks", "coroutines")}
    assert len(set(hashes.values())) == 1, hashes
    assert run("callbacks", 4)["trace_hash"] == hashes["bare"]
    assert run("callbacks", 5)["trace_hash"] != hashes["bare"]
    r = run("coroutines", 4)
    assert r["events"] == 50_000 and r["pending"] == 64 and r["events_per_s"] > 0


def test_run_until_and_step_semantics():
    """run(until) stops before events due at `until` and moves the clock there."""
    sim = kernbench.Simulation(seed=1)
    assert sim.step() is False
    assert sim.peek() == 2**63 - 1
    sim.run(until=500)
    assert sim.now == 500
    with pytest.raises(kernbench.UsageError, match="before the current time"):
        sim.run(until=100)


def test_errors_map_to_typed_python_exceptions():
    """C++ ConfigError arrives as kernbench.ConfigError, which is also a ValueError."""
    sim = kernbench.Simulation()
    with pytest.raises(kernbench.ConfigError, match="known: bare, callbacks, coroutines"):
        kernbench.run_phold(sim, engine="turbo")
    with pytest.raises(ValueError, match="servers must be >= 1"):
        kernbench.run_queue(sim, 1000, 500, servers=0)
    with pytest.raises(kernbench.KernbenchError, match="unknown service distribution 'gamma'"):
        kernbench.run_queue(sim, 1000, 500, service="gamma")
    assert issubclass(kernbench.CapacityError, kernbench.KernbenchError)


def test_time_units():
    """Time is integer picoseconds."""
    assert kernbench.NANOSECOND == 1_000
    assert kernbench.MICROSECOND == 1_000_000
    assert kernbench.SECOND == 10**12

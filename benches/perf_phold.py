"""perf-phold: how fast is the event engine? PHOLD on four engines, side by side.

For each pending-event population (N LPs x E events each) the same PHOLD
model runs on (a) our coroutine processes, (b) our plain callbacks, (c) a
bare std::priority_queue loop compiled into the same binary (the practical
limit) and (d) SimPy 4, for fewer events, scaled to events/s. Ratios are
measured in this one run, so they hold on whatever machine runs it. The
three C++ engines must end with the same trace hash (same events, same
order), which the bench checks.
"""

from __future__ import annotations

import kernbench
from kernbench import bench
from kernbench.overrides import Param, shape_check

# Targets from the foundation issue: the engine may cost at most this much
# over the bare loop, and must beat SimPy 4 by this factor.
TARGET_CALLBACKS_VS_BARE = 0.7
TARGET_COROUTINES_VS_BARE = 0.5
TARGET_VS_SIMPY = 7.0


@bench(
    name="perf-phold",
    description="event-engine speed: PHOLD on coroutines, callbacks, a bare loop and SimPy 4",
    params={
        "events": 10_000_000,          # events per C++ engine per population
        "simpy_events": 300_000,       # SimPy is ~20x slower: fewer events, scaled to a rate
        "populations": Param(["1024x1", "1024x16", "16384x16"], check=shape_check(2), size=True,
                             allowed="NxE: N LPs x E events per LP, positive integers"),  # N LPs x E events per LP
        "mean_delay_ns": 1000.0,       # a real time scale: 1 us mean delay
    },
    # Only the deterministic outputs are goldens (the event trace, memory per pending event), not rates.
    smoke={"bench.events": 20000, "bench.simpy_events": 2000, "bench.populations": ["64x1", "64x4"]},
    # CI (scripts/check_benches.py): every population and engine of the default, 20x fewer events
    full_check={"bench.events": 500_000, "bench.simpy_events": 15_000},
    golden={"key": "population", "metrics": ["trace_hash", "pending", "bare_bytes_per_pending",
                                             "callbacks_bytes_per_pending", "coroutines_bytes_per_pending"]},
)
def perf_phold(ctx):
    p = ctx.params
    mean_ps = int(round(p["mean_delay_ns"] * kernbench.NANOSECOND))
    from kernbench.benches._simpy_phold import run_simpy_phold

    results, failures = ctx.results, ctx.failures  # kept if the run is interrupted
    for pop in p["populations"]:
        try:
            n_lps, per_lp = _parse_population(pop)
        except ValueError as e:
            failures.append({"name": pop, "error": str(e)})
            continue
        row = {"population": pop, "lps": n_lps, "events_per_lp": per_lp, "pending": n_lps * per_lp}
        hashes = {}
        for engine in ("bare", "callbacks", "coroutines"):
            sim = kernbench.Simulation(seed=ctx.seed)
            r = kernbench.run_phold(
                sim, engine=engine, lps=n_lps, events_per_lp=per_lp, events=p["events"], mean_delay_ps=mean_ps
            )
            row[f"{engine}_events_per_s"] = r["events_per_s"]
            row[f"{engine}_bytes_per_pending"] = r["bytes_per_pending"]
            hashes[engine] = r["trace_hash"]
            ctx.log(f"  {pop:>9} {engine:<10} {r['events_per_s'] / 1e6:7.2f} M events/s")
        if len(set(hashes.values())) != 1:
            failures.append({"name": pop, "error": f"engines disagree on the event trace: {hashes}"})
        row["trace_hash"] = f"{hashes['bare']:016x}"
        try:
            s = run_simpy_phold(n_lps, per_lp, p["simpy_events"], mean_ps, ctx.seed)
            row["simpy_events_per_s"] = s["events_per_s"]
        except ImportError:
            row["simpy_events_per_s"] = None
            failures.append({"name": f"{pop}/simpy", "error": "simpy is not installed (pip install simpy)"})
        bare = row["bare_events_per_s"]
        row["callbacks_vs_bare"] = row["callbacks_events_per_s"] / bare
        row["coroutines_vs_bare"] = row["coroutines_events_per_s"] / bare
        simpy = row["simpy_events_per_s"]
        row["callbacks_vs_simpy"] = row["callbacks_events_per_s"] / simpy if simpy else None
        row["coroutines_vs_simpy"] = row["coroutines_events_per_s"] / simpy if simpy else None
        results.append(row)
        # Logged after the row is kept: whoever sees this line (and presses Ctrl-C) finds the row in sweep.json.
        if simpy:
            ctx.log(f"  {pop:>9} {'simpy':<10} {simpy / 1e6:7.2f} M events/s")

    if results:
        ctx.write_csv("phold.csv", results)
        _plot(ctx, results)
        ctx.log(_summary(results))
    targets = _check_targets(results)
    # Rates are wall-clock by nature: named in wall_clock_fields (docs/sweep-json.md), the rest is deterministic.
    return {"results": results, "failures": failures, "targets": targets,
            "wall_clock_fields": ["results[].*_events_per_s", "results[].*_vs_*", "targets[].value", "targets[].met"]}


def _parse_population(text: str) -> tuple[int, int]:
    try:
        n, e = (int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise ValueError(f"population {text!r}: expected NxE, e.g. 1024x16") from None
    if n < 1 or e < 1:
        raise ValueError(f"population {text!r}: N and E must be >= 1")
    return n, e


def _check_targets(rows: list[dict]) -> list[dict]:
    """Targets are reported (met or not) for the default 1K-pending population, and for every row."""
    out = []
    for r in rows:
        checks = [
            ("callbacks_vs_bare", TARGET_CALLBACKS_VS_BARE),
            ("coroutines_vs_bare", TARGET_COROUTINES_VS_BARE),
            ("coroutines_vs_simpy", TARGET_VS_SIMPY),
        ]
        for key, target in checks:
            value = r.get(key)
            out.append(
                {"population": r["population"], "ratio": key, "value": value, "target": target,
                 "met": value is not None and value >= target}
            )
    return out


def _summary(rows: list[dict]) -> str:
    lines = [
        "",
        "PHOLD events/s (M), same model on every engine; ratios measured in this run",
        f"{'N x E':>9} {'pending':>8} {'bare':>7} {'callbk':>7} {'corout':>7} {'simpy':>7}"
        f" {'cb/bare':>8} {'co/bare':>8} {'co/simpy':>9} {'B/pend cb':>10} {'B/pend co':>10}",
    ]
    for r in rows:
        simpy = r["simpy_events_per_s"]
        co_simpy = r["coroutines_vs_simpy"]
        lines.append(
            f"{r['population']:>9} {r['pending']:>8} {r['bare_events_per_s'] / 1e6:7.2f}"
            f" {r['callbacks_events_per_s'] / 1e6:7.2f} {r['coroutines_events_per_s'] / 1e6:7.2f}"
            f" {(simpy or 0) / 1e6:7.2f} {r['callbacks_vs_bare']:8.2f} {r['coroutines_vs_bare']:8.2f}"
            f" {co_simpy if co_simpy is not None else float('nan'):9.1f}"
            f" {r['callbacks_bytes_per_pending']:10.1f} {r['coroutines_bytes_per_pending']:10.1f}"
        )
    lines.append(
        f"targets: callbacks >= {TARGET_CALLBACKS_VS_BARE}x bare, coroutines >= {TARGET_COROUTINES_VS_BARE}x bare,"
        f" >= {TARGET_VS_SIMPY}x SimPy 4"
    )
    return "\n".join(lines)


def _plot(ctx, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    engines = [("bare", "bare loop"), ("callbacks", "callbacks"), ("coroutines", "coroutines"), ("simpy", "SimPy 4")]
    x = np.arange(len(rows))
    width = 0.2
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (key, label) in enumerate(engines):
        vals = [(r.get(f"{key}_events_per_s") or 0) / 1e6 for r in rows]
        ax.bar(x + (i - 1.5) * width, vals, width, label=label)
    ax.set_xticks(x, [f"{r['population']}\n({r['pending']} pending)" for r in rows])
    ax.set_ylabel("million events / s (wall)")
    ax.set_yscale("log")
    ax.set_title("PHOLD event rate by engine (same run)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, frameon=False)
    ax.grid(axis="y", which="both", alpha=0.3)
    ctx.save_figure(fig, "phold.png")
    plt.close(fig)

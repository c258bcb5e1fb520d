"""pe-dma-perf: what a PE's DMA costs, by distance and under congestion.

The standard PE DMA study of the reference (the earlier KernBench simulator's outputs (docs/references.md, `kernbench`)):
16 KB DMAs on the machine (the default one unless --config), first one PE alone at growing distances,
then groups of PEs contending for an HBM controller, a UCIe side, or one
slice. Each op's latency is split into node overhead, transmission, drain
and queuing, all measured from events. Utilisation is reported two ways:
util_single = effective bandwidth / what the first issuer's path gives a
lone transfer (its narrowest channel, with the lanes a transfer stripes
over), util_aggregate = effective bandwidth / the exact max-min fair
aggregate of all concurrent paths (so the two agree for a single issuer). ``--verify`` checks the reference's
invariants and fails the run on any violation.
"""

from __future__ import annotations

import numpy as np

from kernbench import bench
from kernbench._core import ConfigError
from kernbench.args import machine_range
from kernbench.pe_dma import LADDER, REFERENCE, run_scenario, scenarios, sips_of


@bench(
    name="pe-dma-perf",
    description="PE DMA latency by distance and under congestion, with the four-part breakdown",
    params={"bytes": 16384, "sip": 0, "flit_check": True},
    uses_config=True,
    primary=["makespan_ns", "effective_GBps"],
    # Golden regression: 2 SIPs of 2x2 cubes keep every scenario (REMOTE_SIP, ucie_east_8) in ~1 s.
    smoke={"system.sips.w": 2, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 2},
    golden={"key": "scenario", "metrics": ["hops", "makespan_ns", "latency_mean_ns", "latency_max_ns",
                                           "effective_GBps", "maxmin_peak_GBps", "overhead_ns",
                                           "transmission_ns", "drain_ns", "queuing_ns", "ucie_busy_ns"]},
)
def pe_dma_perf(ctx):
    p = ctx.params
    probe = ctx.load_system()
    sips = sips_of(probe)
    if sips:  # the SIP studied must be one of the machine's (a machine without SIPs is refused below)
        machine_range("sip", p["sip"], sips[0], sips[-1], ctx.machine_label(),
                      f"{len(sips)} SIP{'s' if len(sips) != 1 else ''}")
    try:
        scens = scenarios(probe, p["sip"])
    except (KeyError, ValueError, IndexError) as e:  # e.g. a GPU box: no cubes of PEs and HBM slices
        raise ConfigError(
            f"--config {ctx.config}: bench 'pe-dma-perf' studies a SIP's cubes of PEs and their HBM slices "
            f"(hbm_ctrl nodes); this machine has "
            + (f"none at (sip, cube, pe) = {e.args[0]}" if isinstance(e, KeyError) else f"none usable ({e})")) from None
    results, failures = ctx.results, ctx.failures  # kept if the run is interrupted
    for name, kind, ops in scens:
        try:
            # `kernbench run --trace FILE --trace-panel SCENARIO`
            results.append(run_scenario(ctx.load_system(), name, kind, ops, p["bytes"], on_run=ctx.trace))
            r = results[-1]
            ctx.log(f"  {name:<28} {r['n_issuers']:>4} PEs  makespan {r['makespan_ns']:9.1f} ns"
                    f"  eff {r['effective_GBps']:9.1f} GB/s")
        except Exception as e:  # a broken scenario never sinks the others
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})

    flit = None
    if p["flit_check"] and results:
        # The local case again at one flit per chunk: the wormhole drain term.
        flit = _flit_drain_check(ctx, scens[0], p["bytes"])

    if results:
        ctx.write_csv("summary.csv", results)
        _plot_breakdown(ctx, results)
        _plot_util(ctx, results)
        ctx.log(_summary(results, flit, ctx.machine_label() if not ctx.default_machine else None))
    checks = _verify(results, flit) if results else []
    if ctx.verify:
        bad = [c for c in checks if not c["ok"]]
        for c in checks:
            ctx.log(f"  verify {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
        failures += [{"name": f"verify: {c['check']}", "error": c["detail"]} for c in bad]
    return {"results": results, "failures": failures, "invariants": checks, "flit_check": flit}


# ---- the flit-level drain check ------------------------------------------------

def _flit_drain_check(ctx, local, nbytes):
    """Local read at chunk = flit: our drain vs (n_flits - 1) * flit / bottleneck."""
    probe = ctx.load_system()
    name, kind, ops = local
    flit = 64
    try:
        system = ctx.load_system({"fabric.chunk": f"{flit} B", "fabric.flit": f"{flit} B"})
    except Exception as e:
        return {"error": str(e)}
    system.dma(kind, ops[0][0], ops[0][1], nbytes)
    system.run()
    t = system.transfers_df()
    data = t.iloc[-1]  # the data leg
    info = probe.route_info(ops[0][1], ops[0][0])
    expected = (nbytes // flit - 1) * flit / info["bottleneck_Bps"] * 1e12
    return {"flit_bytes": flit, "drain_ps": int(data["drain_ps"]), "expected_ps": expected,
            "ratio": float(data["drain_ps"]) / expected}


# ---- invariants -----------------------------------------------------------------

def _verify(rows, flit):
    by = {r["scenario"]: r for r in rows}
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    ladder = [by[n]["latency_max_ns"] for n in LADDER if n in by]
    if len(ladder) == len(LADDER):
        check("distance ladder", all(a < b for a, b in zip(ladder, ladder[1:])),
              " < ".join(f"{n}={v:.1f}ns" for n, v in zip(LADDER, ladder)))
    for n in LADDER[:3]:
        if n in by:
            check(f"{n} carries no UCIe time", by[n]["ucie_busy_ns"] == 0, f"ucie busy {by[n]['ucie_busy_ns']:.1f} ns")
    for n in LADDER[3:] + ["REMOTE_SIP"]:
        if n in by:
            check(f"{n} carries UCIe time", by[n]["ucie_busy_ns"] > 0, f"ucie busy {by[n]['ucie_busy_ns']:.1f} ns")
    check("breakdown sums to latency", all(r["parts_sum_ok"] for r in rows), "every op, exactly (ps)")
    if flit and "ratio" in flit:
        check("local drain = (n_flits-1)*flit/bottleneck within 5%", abs(flit["ratio"] - 1) <= 0.05,
              f"{flit['drain_ps']} ps vs {flit['expected_ps']:.0f} ps (ratio {flit['ratio']:.3f})")
    hot = [by[f"ctrl_hot_{k}"]["makespan_ns"] for k in (1, 2, 3) if f"ctrl_hot_{k}" in by]
    if len(hot) == 3:
        check("congestion makespan grows with issuers", hot[0] < hot[1] < hot[2],
              " < ".join(f"{v:.1f}" for v in hot) + " ns")
    singles = [r for r in rows if r["n_issuers"] == 1]
    check("single issuer: util_single == util_aggregate",
          all(abs(r["util_single"] - r["util_aggregate"]) <= 1e-9 * r["util_single"] for r in singles),
          ", ".join(f"{r['scenario']} {r['util_single']:.3f}/{r['util_aggregate']:.3f}" for r in singles))
    if "ucie_east_8" in by:
        u = by["ucie_east_8"]
        check("UCIe east x8: util_single > 100%", u["util_single"] > 1.0, f"{u['util_single']:.0%}")
        check("UCIe east x8: util_aggregate near or below 100%", u["util_aggregate"] <= 1.05,
              f"{u['util_aggregate']:.0%}")
    if "hot_slice_8" in by:
        u = by["hot_slice_8"]
        check("8-PE hotspot saturates >= 70% of the shared peak", u["util_aggregate"] >= 0.7,
              f"{u['util_aggregate']:.0%}")
    return checks


# ---- output ---------------------------------------------------------------------------

def _summary(rows, flit, other_machine=None):
    """The table; the reference's magnitudes only beside the default machine (``other_machine``: the
    label of the machine actually run, which then gets no reference column)."""
    ref_of = REFERENCE if other_machine is None else {}
    lines = ["", f"{'scenario':<28} {'PEs':>4} {'makespan':>10} {'overhead':>9} {'transm':>8} {'drain':>8}"
             f" {'queuing':>8} {'eff GB/s':>9} {'u_single':>8} {'u_aggr':>7} {'reference':>12} {'ours/ref':>8}"]
    for r in rows:
        ref = ref_of.get(r["scenario"])
        if isinstance(ref, tuple):
            ref_text, ratio = ref[0], r["effective_GBps"] / ref[1]
        elif ref is not None:
            ref_text, ratio = f"{ref:.0f} ns", r["makespan_ns"] / ref
        else:
            ref_text, ratio = "", None
        lines.append(
            f"{r['scenario']:<28} {r['n_issuers']:>4} {r['makespan_ns']:8.1f}ns {r['overhead_ns']:8.1f}"
            f" {r['transmission_ns']:8.1f} {r['drain_ns']:8.1f} {r['queuing_ns']:8.1f} {r['effective_GBps']:9.1f}"
            f" {r['util_single']:7.0%} {r['util_aggregate']:6.0%} {ref_text:>12} "
            + (f"{ratio:8.2f}" if ratio is not None else f"{'':>8}")
        )
    if other_machine is None:
        lines.append("breakdown columns: the op that finished last (ns); reference = the earlier simulator's own "
                     "topology, set beside the default machine")
    else:
        lines.append(f"breakdown columns: the op that finished last (ns); machine: {other_machine} (no reference "
                     "column: the reference figures are set beside the default machine only)")
    if flit and "ratio" in flit:
        lines.append(f"flit-level local drain: {flit['drain_ps'] / 1e3:.2f} ns vs (n_flits-1)*flit/bw "
                     f"{flit['expected_ps'] / 1e3:.2f} ns")
    return "\n".join(lines)


def _plot_breakdown(ctx, rows):
    """Share of each part in the latency of the last op to finish, total written beside each bar.

    Shares on a linear axis: stacked bars on a log axis would misstate the parts.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["scenario"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.8))
    left = np.zeros(len(rows))
    totals = np.array([sum(r[f"{p}_ns"] for p in ("overhead", "transmission", "drain", "queuing")) for r in rows])
    colors = {"overhead": "#4c72b0", "transmission": "#55a868", "drain": "#c44e52", "queuing": "#8172b2"}
    for part, color in colors.items():
        vals = 100 * np.array([r[f"{part}_ns"] for r in rows]) / totals
        ax.barh(labels, vals, left=left, color=color, label=part)
        left += vals
    for i, t in enumerate(totals):
        ax.text(101, i, f"{t:,.1f} ns", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 118)
    ax.set_xlabel("share of the latency of the last op to finish (%)")
    ax.set_title("PE DMA latency breakdown (measured from events)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.45, -0.12), ncol=4, frameon=False)
    ctx.save_figure(fig, "breakdown.png")
    plt.close(fig)


def _plot_util(ctx, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    multi = [r for r in rows if r["n_issuers"] > 1] or rows
    x = np.arange(len(multi))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.2, [100 * r["util_single"] for r in multi], 0.4, label="util_single")
    ax.bar(x + 0.2, [100 * r["util_aggregate"] for r in multi], 0.4, label="util_aggregate (max-min)")
    ax.axhline(100, color="k", lw=0.8, ls="--")
    ax.set_yscale("log")  # util_single of independent paths runs to thousands of %
    ax.set_xticks(x, [r["scenario"] for r in multi], rotation=30, ha="right")
    ax.set_ylabel("% of peak (log)")
    ax.set_title("PE DMA utilisation under congestion")
    ax.legend()
    ctx.save_figure(fig, "utilization.png")
    plt.close(fig)

"""vgpu-whatif: what the poll quantum, batching, caching and guest count do.

For every combination of the round-trip split (A: one 5 ms poll wait +
17.5 ms firmware; B: four waits + 2.5 ms firmware -- both fit the measured
22.5 ms), the poll setting (5, 2, 1, 0.1 ms quantum, interrupt-driven),
batching all PDE forwards of a launch into one RPC, and caching accepted
windows across launches: the first launch's elapsed_ms and the guest/bare
ratios of P3 (first launch), P4 (warm launch p50) and P10 (launches per
second of a burst), p50 over ``seeds`` seeded repetitions. Then the guest
count sweep: 1..``max_guests`` guests launching at once on one GSP queue
(first launch of each), showing the queueing at the GSP.

Without --config the bench runs configs/vgpu.yaml (``@bench(config=...)``),
and --set vgpu.* overrides apply to it.
"""

from __future__ import annotations

import numpy as np

from kernbench import _core, bench
from kernbench import vgpu

METRICS = ("P3_first_launch_ms", "P4_warm_p50_ms", "P10_launches_per_s")


@bench(
    name="vgpu-whatif",
    description="vGPU what-ifs: poll quantum/interrupt x batching x caching (both splits); guests 1..8 on one GSP",
    params={"seeds": 5, "max_guests": 8, "warm_launches": 100, "burst": 100},
    config="vgpu.yaml",
    smoke={"bench.seeds": 1, "bench.max_guests": 3, "bench.warm_launches": 2, "bench.burst": 2},
    golden={"key": ["study", "split", "poll", "batching", "caching", "guests"],
            "metrics": ["elapsed_ms", "P4_warm_p50_ms_ratio"]},
)
def vgpu_whatif(ctx):
    p = ctx.params
    config = ctx.config
    base = dict(ctx.config_overrides)
    # The what-if study needs launches, not the copy sweep: one small copy keeps P5 defined.
    base.update({"vgpu.workload.warm_launches": str(p["warm_launches"]), "vgpu.workload.burst": str(p["burst"]),
                 "vgpu.workload.copy_min": "4 KiB", "vgpu.workload.copy_max": "4 KiB"})
    seeds = [ctx.seed + i for i in range(int(p["seeds"]))]
    results, failures = ctx.results, ctx.failures

    # Bare metal does not depend on the forwarding what-ifs: run it once per seed.
    bare = [vgpu.metrics(_core.vgpu_workload(vgpu.load(base, s, config)._core, True)) for s in seeds]
    bare50 = {k: float(np.percentile([b[k] for b in bare], 50)) for k in METRICS}

    for combo in vgpu.whatif_combinations():
        name = f"{combo['split'][:1]} {combo['poll']} batch={combo['batching']} cache={combo['caching']}"
        try:
            runs = []
            for s in seeds:
                w = _core.vgpu_workload(vgpu.load({**base, **combo["set"]}, s, config)._core, False)
                runs.append((w["first"]["elapsed_ms"], vgpu.metrics(w)))
            row = {"study": "whatif", "split": combo["split"], "poll": combo["poll"], "batching": combo["batching"],
                   "caching": combo["caching"],
                   "elapsed_ms_p50": float(np.percentile([e for e, _ in runs], 50))}
            row["elapsed_ms"] = row["elapsed_ms_p50"]
            for k in METRICS:
                g = float(np.percentile([m[k] for _, m in runs], 50))
                row[f"{k}_guest"] = g
                row[f"{k}_bare"] = bare50[k]
                row[f"{k}_ratio"] = g / bare50[k] if bare50[k] else float("nan")
            results.append(row)
        except Exception as e:
            failures.append({"name": f"whatif {name}", "error": f"{type(e).__name__}: {e}"})

    for split, sets in vgpu.SPLITS.items():
        for n in range(1, int(p["max_guests"]) + 1):
            try:
                run = vgpu.launches(1, guests=n, set={**base, **sets, "vgpu.guests": str(n)}, seed=ctx.seed,
                                    config=config)
                ctx.critical_path(vgpu.critical_path(run, f"vGPU {split}"), f"{split}: {n} guests")
                el = [l["elapsed_ms"] for l in run["launches"]]
                results.append({
                    "study": "guests", "split": split, "guests": n,
                    "elapsed_ms": float(np.mean(el)), "P4_warm_p50_ms_ratio": None,
                    "elapsed_ms_mean": float(np.mean(el)), "elapsed_ms_max": int(max(el)),
                    "gsp_wait_ms_mean": float(np.mean([l["gsp_wait_ps"] for l in run["launches"]])) / vgpu.MS,
                    "gsp_rpcs_waited": int(run["gsp_waited"]), "gsp_rpcs": int(run["gsp_grants"]),
                    "gsp_busy_ms": run["gsp_busy_ps"] / vgpu.MS,
                    "makespan_ms": max(l["end_ps"] for l in run["launches"]) / vgpu.MS,
                })
            except Exception as e:
                failures.append({"name": f"guests {split} {n}", "error": f"{type(e).__name__}: {e}"})

    what = [r for r in results if r["study"] == "whatif"]
    guests = [r for r in results if r["study"] == "guests"]
    if what:
        ctx.write_csv("whatif.csv", what)
        _plot_whatif(ctx, what)
    if guests:
        ctx.write_csv("guests.csv", guests)
        _plot_guests(ctx, guests)
    ctx.log(_summary(what, guests))
    return {"results": results, "failures": failures, "bare_p50": bare50}


def _summary(what, guests):
    lines = [f"  {'split':<3}{'poll':>10}{'batch':>7}{'cache':>7}{'elapsed':>9}{'P3 g/b':>10}{'P4 g/b':>10}"
             f"{'P10 g/b':>10}"]
    for r in what:
        lines.append(f"  {r['split'][:1]:<3}{r['poll']:>10}{str(r['batching']):>7}{str(r['caching']):>7}"
                     f"{r['elapsed_ms_p50']:>9.0f}{r['P3_first_launch_ms_ratio']:>10.1f}"
                     f"{r['P4_warm_p50_ms_ratio']:>10.1f}{r['P10_launches_per_s_ratio']:>10.2e}")
    for r in guests:
        lines.append(f"  guests {r['split'][:1]} {r['guests']}: first launch mean {r['elapsed_ms_mean']:.0f} ms, "
                     f"max {r['elapsed_ms_max']} ms, GSP wait/launch {r['gsp_wait_ms_mean']:.1f} ms")
    return "\n".join(lines)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_whatif(ctx, rows):
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    polls = list(vgpu.POLL_WHATIFS)
    variants = [(False, False), (True, False), (False, True), (True, True)]
    panels = [("elapsed_ms_p50", "first-launch elapsed_ms (p50)"), ("P4_warm_p50_ms_guest", "warm launch P4 p50 (ms)")]
    for row, (key, label) in enumerate(panels):
        for col, split in enumerate(vgpu.SPLITS):
            ax = axes[row][col]
            x = np.arange(len(polls))
            for i, (b, c) in enumerate(variants):
                y = [next((r[key] for r in rows if r["split"] == split and r["poll"] == p
                           and r["batching"] == b and r["caching"] == c), np.nan) for p in polls]
                ax.bar(x + (i - 1.5) * 0.2, y, width=0.2, label=f"batch={b} cache={c}")
            ax.set_xticks(x)
            ax.set_xticklabels(polls)
            if row == 0:
                ax.set_title(split)
                ax.axhline(vgpu.MEASURED["elapsed_ms"], color="k", ls=":", lw=1)
            else:
                ax.set_xlabel("poll setting")
            if col == 0:
                ax.set_ylabel(label)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("what-ifs (dotted: the measured 189 ms first launch at a 5 ms quantum)")
    fig.tight_layout()
    ctx.save_figure(fig, "whatif.png")
    plt.close(fig)


def _plot_guests(ctx, rows):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for split in vgpu.SPLITS:
        r = [x for x in rows if x["split"] == split]
        ax.plot([x["guests"] for x in r], [x["elapsed_ms_mean"] for x in r], marker="o", label=f"{split}: mean")
        ax.plot([x["guests"] for x in r], [x["elapsed_ms_max"] for x in r], ls="--", marker=".",
                label=f"{split}: slowest guest")
    ax.set_xlabel("guests launching at once (one GSP queue)")
    ax.set_ylabel("first-launch elapsed_ms")
    ax.legend(fontsize=8)
    fig.tight_layout()
    ctx.save_figure(fig, "guests.png")
    plt.close(fig)

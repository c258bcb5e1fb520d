"""k200-bandwidth: K200 copy bandwidth vs transfer size, every path, every knob.

The Kunlun K200 protocol model (src/platforms/k200/, configs/k200.yaml) runs
one copy per point: sizes 4 KiB .. 1 GiB, every copy kind (pinned,
pageable, stock driver, same-card P2P, cross-card staged, D2D), both
directions for host copies, with the production knobs and with each knob
flipped (kl1_dma_direct=0, kl1_bounce_pipe=0, kl1_pageable_pin=1,
kl1_bounce_d2h=2, kl1_p2p_stub=1). Bandwidth is GiB/s (bytes / 2^30 / s,
as the reference's tool).

Outputs: sweep.json (results, failures, the model-vs-measured tables),
bandwidth.csv (every point: path taken, bound resource), compare.csv (model
vs measured with ratio, each point marked fitted or predicted), launch.csv
(the launch figures: launch per call with 1 and 4 threads, the vendor
loop's per-kernel time, the single-kernel waits and the synchronous
"dispatch" round trips with 1 and 4 threads, model vs measured, fitted or
predicted, within the reference's tolerance or not),
bandwidth.png (the curves, reference points as markers). The machine is
configs/k200.yaml unless --config names another K200 config.
"""

from __future__ import annotations

from kernbench import bench, units

SERIES = [
    # (name, kind, directions, knob overrides)
    ("pinned", "pinned", ("h2d", "d2h"), {}),
    ("pinned, dma_direct=0", "pinned", ("h2d", "d2h"), {"k200.driver.kl1_dma_direct": 0}),
    ("pageable", "pageable", ("h2d", "d2h"), {}),
    ("pageable, bounce_pipe=0", "pageable", ("h2d", "d2h"), {"k200.driver.kl1_bounce_pipe": 0}),
    ("pageable, pageable_pin=1", "pageable", ("h2d", "d2h"), {"k200.driver.kl1_pageable_pin": 1}),
    ("pageable, bounce_d2h=2", "pageable", ("d2h",), {"k200.driver.kl1_bounce_d2h": 2}),
    ("stock driver", "stock", ("h2d", "d2h"), {}),
    ("peer (same card)", "peer", ("d2d",), {}),
    ("peer, p2p_stub=1", "peer", ("d2d",), {"k200.driver.kl1_p2p_stub": 1}),
    ("cross-card staged", "cross_card_staged", ("d2d",), {}),
    ("d2d (one die)", "d2d", ("d2d",), {}),
]


@bench(
    name="k200-bandwidth",
    description="K200 copy bandwidth vs size (4 KiB..1 GiB) for every path and knob, model vs measured",
    params={"min_bytes": 4096, "max_bytes": 1 << 30, "step": 4, "pin_max_bytes": 256 << 20},
    config="k200.yaml",
    smoke={"bench.min_bytes": 1 << 20, "bench.max_bytes": 4 << 20, "bench.pin_max_bytes": 1 << 20},
    golden={"key": ["series", "direction", "bytes"],
            "metrics": {"gib_per_s": "rel=1e-9", "path": "exact", "bound": "exact"}},
)
def k200_bandwidth(ctx):
    from kernbench import k200, k200_reference

    p = ctx.params
    if p["min_bytes"] <= 0 or p["max_bytes"] < p["min_bytes"] or p["step"] < 2:
        raise ValueError("bench.min_bytes > 0, bench.max_bytes >= bench.min_bytes and bench.step >= 2 are required")
    config = _config(ctx)
    # a machine without the K200 model (e.g. a GPU box) is one clear error before the sweep
    k200.info(k200.load_system(config, set=ctx.config_overrides, seed=ctx.seed))
    sizes = []
    s = int(p["min_bytes"])
    while s <= p["max_bytes"]:
        sizes.append(s)
        s *= int(p["step"])
    for ref in k200.SIZES + tuple(k200_reference.p2p_table()):
        if p["min_bytes"] <= ref <= p["max_bytes"] and ref not in sizes:
            sizes.append(ref)
    sizes.sort()
    results, failures = ctx.results, ctx.failures

    CRITICAL_PATH_BYTES = 64 << 20

    def point(series, kind, direction, knobs, nbytes):
        system = k200.load_system(config, set={**ctx.config_overrides, **knobs}, seed=ctx.seed)
        d = "h2d" if direction == "d2d" else direction
        r = k200.copy(system, kind, d, nbytes, peer=(1, 0) if kind == "cross_card_staged" else None)
        if nbytes == CRITICAL_PATH_BYTES and r.raw.get("log") is not None:  # one size per series: the summary
            ctx.critical_path(r.critical_path(), f"{series} {direction} {units.size(nbytes, largest='MiB')}")
        return {"series": series, "kind": kind, "direction": direction, "knobs": _knobs(knobs), "bytes": nbytes,
                "gib_per_s": r.gib_per_s, "elapsed_us": r.elapsed_s * 1e6, "path": r.path, "bound": r.bound}

    for series, kind, dirs, knobs in SERIES:
        for direction in dirs:
            for nbytes in sizes:
                if "pageable_pin" in series and nbytes > p["pin_max_bytes"]:
                    continue  # one eDMA per 4 KiB page: the slow path, kept to bench.pin_max_bytes
                try:
                    results.append(point(series, kind, direction, knobs, nbytes))
                except Exception as e:  # a failing point never sinks the others
                    failures.append({"name": f"{series} {direction} {nbytes}", "error": f"{type(e).__name__}: {e}"})
        ctx.log(f"  {series:<28} done")

    compare = _compare(ctx, config, results)
    ctx.write_csv("bandwidth.csv", results)
    ctx.write_csv("compare.csv", compare)
    try:
        launch = k200_reference.launch_table(config, set=ctx.config_overrides, seed=ctx.seed)
    except Exception as e:  # the copy sweep stands on its own
        launch = []
        failures.append({"name": "launch table", "error": f"{type(e).__name__}: {e}"})
    ctx.write_csv("launch.csv", [{**r, "fitted_on": ", ".join(r["fitted_on"])} for r in launch])
    _plot(ctx, results)
    if not ctx.default_machine:  # the measurements are of the card configs/k200.yaml models
        ctx.log(f"model on {ctx.machine_label('k200.yaml')}; 'measured' is the card k200.yaml was fitted to "
                "(shared/reference/k200-measured.md), so the ratios compare another machine with it")
    ctx.log(_table(compare))
    ctx.log(_launch_table(launch))
    worst = max((abs(c["ratio"] - 1) for c in compare if c["fitted"] == "predicted"), default=0.0)
    return {"results": results, "failures": failures, "compare": compare, "launch": launch, "config": str(config),
            "worst_predicted_error": worst}


def _config(ctx):
    return ctx.config  # @bench(config="k200.yaml") unless --config names another


def _knobs(knobs):
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in knobs.items()) or "production"


def _compare(ctx, config, results):
    """Model vs measured for every reference point (reusing sweep points where they exist)."""
    from kernbench import k200, k200_reference

    by = {(r["series"], r["direction"], r["bytes"]): r["gib_per_s"] for r in results}
    series_of = {"pinned": "pinned", "pageable pipeline on": "pageable", "pageable pipeline off": "pageable, bounce_pipe=0",
                 "stock driver pageable": "stock driver"}
    rows = []

    def model(series, kind, direction, knobs, nbytes):
        key = (series, direction, nbytes)
        if key not in by:
            system = k200.load_system(config, set={**ctx.config_overrides, **knobs}, seed=ctx.seed)
            by[key] = k200.copy(system, kind, "h2d" if direction == "d2d" else direction, nbytes).gib_per_s
        return by[key]

    for row, (kind, knobs, figs) in k200_reference.copy_table().items():
        for direction in ("h2d", "d2h"):
            for (d, nbytes), f in figs.items():
                if d == direction:
                    m = model(series_of[row], kind, direction, knobs, nbytes)
                    rows.append(_row(row, direction, nbytes, f.value, m, f.fitted))
    for nbytes, f in k200_reference.p2p_table().items():
        m = model("peer (same card)", "peer", "d2d", {}, nbytes)
        rows.append(_row("same-card P2P", "d2d", nbytes, f.value, m, f.fitted))
    for direction, f in k200_reference.pin_table().items():
        m = model("pageable, pageable_pin=1", "pageable", direction, dict(f.set), 64 << 20)
        rows.append(_row("page pinning (per-page eDMA)", direction, 64 << 20, f.value, m, f.fitted))
    return rows


def _row(name, direction, nbytes, measured, model, fitted):
    return {"row": name, "direction": direction, "bytes": nbytes, "measured_gib_s": measured,
            "model_gib_s": round(model, 4), "ratio": round(model / measured, 4),
            "fitted": "fitted" if fitted else "predicted"}


def _table(rows):
    lines = [f"  {'row':<30} {'dir':<4} {'size':>9} {'measured':>9} {'model':>8} {'ratio':>6}  point"]
    for r in rows:
        size = units.size(r["bytes"], largest="MiB")
        lines.append(f"  {r['row']:<30} {r['direction']:<4} {size:>9} {r['measured_gib_s']:9.2f} "
                     f"{r['model_gib_s']:8.2f} {r['ratio']:6.3f}  {r['fitted']}")
    return "\n".join(lines)


def _launch_table(rows):
    lines = [f"  {'launch figure':<44} {'measured':>11} {'model':>8} {'ratio':>6}  point"]
    for r in rows:
        measured = f"{r['measured_us']:.2f}"
        lines.append(f"  {r['row']:<44} {measured:>11} {r['model_us']:8.2f} {r['ratio']:6.3f}  {r['fitted']}"
                     f"{'' if r['within'] else '  (outside ' + format(r['tolerance'], '.0%') + ')'}")
    return "\n".join(lines)


def _plot(ctx, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from kernbench import k200, k200_reference

    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5), sharey=True)
    panels = {"h2d": axes[0], "d2h": axes[1], "d2d": axes[2]}
    series = sorted({(r["series"], r["direction"]) for r in results})
    for name, direction in series:
        pts = sorted((r["bytes"], r["gib_per_s"]) for r in results if r["series"] == name and r["direction"] == direction)
        ax = panels[direction]
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker=".", label=name)
    for row, (kind, knobs, figs) in k200_reference.copy_table().items():
        for (direction, nbytes), f in figs.items():
            panels[direction].scatter([nbytes], [f.value], marker="x", color="black", zorder=3)
    p2p = k200_reference.p2p_table()
    axes[2].scatter(list(p2p), [f.value for f in p2p.values()], marker="x", color="black",
                    zorder=3, label="measured (ref)")
    for direction, ax in panels.items():
        ax.set_xscale("log", base=2)
        ax.set_title({"h2d": "host -> device", "d2h": "device -> host", "d2d": "device <-> device"}[direction])
        ax.set_xlabel("transfer size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("GiB/s")
    fig.suptitle("K200 copy bandwidth: model curves, measured points (x)")
    ctx.save_figure(fig, "bandwidth.png")
    plt.close(fig)

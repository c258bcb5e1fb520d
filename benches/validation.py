"""validation: the model beside every measured reference and every closed form.

One report (report.md, with plots) that puts each figure the project was
given -- the K200 tables (the K200 measurements (docs/references.md, `k200`)), the vGPU
first launch (vgpu-forwarding.md), the KernBench magnitudes
(kernbench-model.md) -- beside the model's number, with the error and
whether the point was fitted, predicted or is only a magnitude; then the
closed forms (Server vs M/M/1, M/D/1, M/M/2; the ring all-reduce vs
alpha-beta; the flow fabric vs max-min fair share). The list of figures is
``kernbench.references.all_references()``; the rows come from
``kernbench.validation``.

``--set bench.quick=true`` (the smoke size CI runs, well under a minute):
the KernBench scenarios run on 2 SIPs of 2x2 cubes, 10 launch loops, 10
seeds for the vGPU spread, shorter queues. The full run takes a few
minutes.

Outputs: sweep.json (one result row per figure, the summary), report.md,
validation.csv, model_vs_reference.png (log-log, y = x), errors.png (|error|
per point, by source).
"""

from __future__ import annotations

import datetime

from kernbench import bench


@bench(
    name="validation",
    description="validation report: model vs every measured reference (K200, vGPU, KernBench, H100) and closed form",
    params={"quick": False},
    smoke={"bench.quick": "true"},
    golden={"key": ["group", "quantity"], "metrics": {"model": "rel=1e-6", "verdict": "exact", "status": "exact"}},
)
def validation(ctx):
    from kernbench import validation as v
    from kernbench import atomic_output as kio

    quick = bool(ctx.params["quick"])
    failures = ctx.failures
    rows = v.reference_rows(quick=quick, seed=ctx.seed, launch_loops=10 if quick else 100,
                            spread_seeds=10 if quick else 100, failures=failures)
    ctx.log(f"  {len(rows)} reference figures")
    rows += v.closed_form_rows(quick=quick, seed=ctx.seed, failures=failures)
    rows += v.case_prediction_rows(seed=ctx.seed, failures=failures)  # C1-C5: predictions, held-back references
    gpu = v.gpu_rows(failures=failures)  # H100 fitted (with cross-validation); A100/H200/L40S predicted
    ctx.log(f"  {len(gpu)} GPU target rows ({sum(r['status'] == 'fitted' for r in gpu)} fitted on H100)")
    rows += gpu
    ctx.results.extend(rows)
    figures = []
    if rows:
        ctx.write_csv("validation.csv", rows)
        figures = _plots(ctx, rows)
    size = "quick (smoke) size" if quick else "full size"
    preamble = (f"Written by `kernbench run --bench validation{' --smoke' if quick else ''}` (seed {ctx.seed}, "
                f"{size}) on {datetime.date.today().isoformat()}. Sources: the K200 measurements, the vGPU "
                "forwarding measurements, the earlier KernBench simulator's outputs and the measured H100 figures of the GPU "
                "target's calibration (docs/references.md); the list of figures is "
                "`kernbench.references.all_references()` and `configs/machines/h100.measured.yaml`.")
    text = v.report_markdown(rows, preamble=preamble, figures=figures)
    kio._atomic_write_bytes(ctx.out / "report.md", text.encode())
    ctx.files.append("report.md")
    summ = v.summary(rows)
    for s in summ:
        ok = f"{s['ok']}/{s['judged']} within tolerance" if s["judged"] else "ratios only"
        worst = f", worst |error| {100 * s['worst_abs_error']:.1f} %" if s["worst_abs_error"] is not None else ""
        ctx.log(f"  {s['status']:<12} {s['points']:>3} points, {ok}{worst}")
    return {"results": rows, "failures": failures, "summary": summ}


SOURCE_COLORS = {"k200": "tab:blue", "vgpu": "tab:orange", "kernbench": "tab:green", "closed form": "tab:purple",
                 "gpu": "tab:red"}
FLOOR_PCT = 1e-3
MARKERS = {"fitted": "o", "predicted": "^", "magnitude": "s", "closed form": "D"}


def _plots(ctx, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in rows if r["model"] is not None and r["model"] > 0 and r["reference"] is not None
           and r["reference"] > 0]
    fig, ax = plt.subplots(figsize=(7, 6.5))
    for (src, status), color in ((k, SOURCE_COLORS[k[0]]) for k in sorted({(r["source"], r["status"]) for r in pts})):
        sub = [r for r in pts if r["source"] == src and r["status"] == status]
        ax.scatter([r["reference"] for r in sub], [r["model"] for r in sub], color=color,
                   marker=MARKERS[status], label=f"{src}: {status} ({len(sub)})", alpha=0.8)
    if pts:
        lo = min(min(r["reference"], r["model"]) for r in pts) / 2
        hi = max(max(r["reference"], r["model"]) for r in pts) * 2
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, label="model = reference")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("reference (its own unit)")
    ax.set_ylabel("model (same unit)")
    ax.set_title("Model vs reference, every figure")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "model_vs_reference.png")
    plt.close(fig)

    errs = [r for r in rows if r["error"] is not None]
    sources = [s for s in SOURCE_COLORS if any(r["source"] == s for r in errs)]
    fig, axes = plt.subplots(1, max(1, len(sources)), figsize=(4.5 * max(1, len(sources)), 4.5), squeeze=False)
    for ax, src in zip(axes[0], sources):
        sub = [r for r in errs if r["source"] == src]
        vals = [max(abs(r["error"]) * 100, FLOOR_PCT) for r in sub]  # exact points sit on the floor
        colors = [{"fitted": "tab:blue", "predicted": "tab:orange", "magnitude": "tab:gray",
                   "closed form": "tab:purple"}[r["status"]] for r in sub]
        ax.bar(range(len(sub)), vals, color=colors)
        tols = [r["tolerance"] * 100 if r["tolerance"] else None for r in sub]
        for i, t in enumerate(tols):
            if t:
                ax.plot([i - 0.4, i + 0.4], [t, t], color="k", lw=1)
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR_PCT / 2)
        ax.set_xticks([])
        ax.set_title(f"{src}: |error| per point (bars), tolerance (lines)", fontsize=9)
        ax.set_ylabel(f"|error| % (floor {FLOOR_PCT:g} %: exact)")
        ax.set_xlabel("points (blue fitted, orange predicted, grey magnitude, purple closed form)", fontsize=7)
    fig.tight_layout()
    ctx.save_figure(fig, "errors.png")
    plt.close(fig)
    return ["model_vs_reference.png", "errors.png"]

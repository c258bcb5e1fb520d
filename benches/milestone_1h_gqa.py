"""milestone-1h-gqa: GQA attention of one KV-head group on 8 cubes x 8 PEs, four sharding cases.

LLaMA-3.1-70B, one KV-head group (h_q = 8, h_kv = 1, d_head = 128, fp16) on
the 2 x 4 snake of cubes of SIP 0 (see src/kernels/gqa.hpp for the cases,
the tiling and the op costs):
  prefill  T_q = S_kv in ``prefill_t_q`` (the K/V of the prompt itself);
  decode   T_q = ``decode_t_q`` (1: one token) against S_kv in ``decode_s_kv``.
Every case at every point is one simulated Program; a point that fails
(e.g. a CapacityError) lands in ``failures`` and never hides the others.

Outputs: sweep.json (results, failures, the per-phase best case and its
margin), gqa.csv, and per phase four figures: <phase>_latency.png,
<phase>_traffic.png (DMA and IPCQ bytes, link classes), <phase>_memory.png
(K/V bytes per cube, peak scratch per PE vs the budget) and
<phase>_parallelism.png (active PEs, compute work, engine occupancy).
"""

from __future__ import annotations

import time

from kernbench import bench
from kernbench.overrides import Param

CASES = (1, 2, 3, 4)


@bench(
    name="milestone-1h-gqa",
    description="GQA attention (LLaMA-70B KV group) on 8 cubes x 8 PEs: four sharding cases, prefill and decode",
    params={
        "prefill_t_q": [128, 512, 2048, 8192],
        "decode_s_kv": [8192, 32768, 131072],
        "decode_t_q": 1,
        "cases": Param([1, 2, 3, 4], choices=[1, 2, 3, 4], help="the GQA sharding cases (kernbench.gqa)"),
        "tile_q": 256,
        "tile_s": 256,
    },
    uses_config=True,
    smoke={"bench.prefill_t_q": [512], "bench.decode_s_kv": [2048]},
    golden={"key": ["phase", "case", "t_q", "s_kv"],
            "metrics": {"latency_ns": "rel=1e-6", "dma_ops": "exact", "ipcq_ops": "exact", "gemm_ops": "exact",
                        "compute_work": "exact", "kv_bytes_per_cube": "exact", "peak_scratch": "exact"}},
)
def milestone_1h_gqa(ctx):
    from kernbench import gqa

    t0 = time.perf_counter()
    p = ctx.params
    results, failures = ctx.results, ctx.failures

    def point(phase, case, t_q, s_kv):
        name = f"{phase} case{case} T_q={t_q} S_kv={s_kv}"
        w0 = time.perf_counter()
        try:
            system = ctx.load_system()
            r = gqa.run(system, phase, case, t_q, s_kv, tile_q=p["tile_q"], tile_s=p["tile_s"])
        except Exception as e:  # a failing point never sinks the others
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {name:<40} FAILED: {type(e).__name__}: {e}")
            return
        ctx.trace(r.run, name)  # `kernbench run --trace FILE --trace-panel NAME`
        row = r.row()
        row["name"] = name
        row["latency_ns"] = r.latency_ps / 1e3
        row["critical_path"] = ctx.critical_path(r.run, name)  # docs/critical-path.md
        row["wall_s"] = round(time.perf_counter() - w0, 3)
        results.append(row)
        ctx.log(f"  {name:<40} {row['latency_ns'] / 1e3:10.2f} us  dma {row['dma_ops']:6d}  ipcq {row['ipcq_ops']:6d}"
                f"  active {row['active_pes']:2d}  ({row['wall_s']:.2f} s)")

    for t_q in p["prefill_t_q"]:
        for case in p["cases"]:
            point("prefill", case, t_q, t_q)
    for s_kv in p["decode_s_kv"]:
        for case in p["cases"]:
            point("decode", case, p["decode_t_q"], s_kv)

    best = _best(results)
    for b in best:
        ctx.log(f"  best {b['phase']} at {b['at']}: case {b['case']}, {b['margin']:.2f}x faster than case "
                f"{b['runner_up']}")
    out = {"results": results, "failures": failures, "best": best}
    if results:
        ctx.write_csv("gqa.csv", [{k: v for k, v in r.items() if k != "critical_path"} for r in results])
        for phase in ("prefill", "decode"):
            rows = [r for r in results if r["phase"] == phase]
            if rows:
                _figures(ctx, phase, rows)
    wall = time.perf_counter() - t0
    ctx.log(f"milestone-1h-gqa: {len(results)} points, {len(failures)} failures in {wall:.1f} s")
    ctx.log(f"milestone-1h-gqa wall time: {wall:.1f} s")  # a log line (not on stdout with --quiet)
    return out  # the bench's wall time is sweep.json's top-level wall_s (the runner writes it)


def _xkey(row):
    return row["t_q"] if row["phase"] == "prefill" else row["s_kv"]


def _best(rows):
    """Per phase and sweep point: the fastest case and its margin over the next."""
    out = []
    for phase in ("prefill", "decode"):
        for x in sorted({_xkey(r) for r in rows if r["phase"] == phase}):
            pts = sorted((r for r in rows if r["phase"] == phase and _xkey(r) == x), key=lambda r: r["latency_ns"])
            if len(pts) >= 2:
                out.append({"phase": phase, "at": x, "case": pts[0]["case"], "runner_up": pts[1]["case"],
                            "margin": pts[1]["latency_ns"] / pts[0]["latency_ns"]})
    return out


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_MARKERS = ("o", "s", "^", "D", "v", "P")
_DASHES = ("-", "--", "-.", ":")


def plot_groups(series: dict, log: bool) -> tuple[list[tuple[str, tuple, tuple]], list]:
    """The lines to draw for {case: (xs, ys)}: cases whose series are identical are one line labelled together
    ("case 1 = case 3"; one would hide the other). On a log axis a zero or negative point is left out, and the cases
    that had one are returned, for the panel to say so instead of drawing them at an arbitrary floor."""
    drawn: dict[tuple, list] = {}
    for c, (xs, ys) in series.items():
        drawn.setdefault((tuple(xs), tuple(ys)), []).append(c)
    lines, zeros = [], []
    for (xs, ys), same in drawn.items():
        if log:
            if any(y <= 0 for y in ys):
                zeros.extend(same)
            kept = [(x, y) for x, y in zip(xs, ys) if y > 0]
            xs, ys = tuple(x for x, _ in kept), tuple(y for _, y in kept)
        lines.append(("case " + " = case ".join(str(c) for c in same), xs, ys))
    return lines, sorted(zeros)


def _figures(ctx, phase, rows):
    plt = _plt()
    xlabel = "T_q = S_kv (tokens)" if phase == "prefill" else "S_kv (tokens)"
    cases = sorted({r["case"] for r in rows})

    def series(case, key):
        pts = sorted((r for r in rows if r["case"] == case), key=_xkey)
        return [_xkey(r) for r in pts], [key(r) for r in pts]

    def panel(ax, key, ylabel, log=True):
        lines, zeros = plot_groups({c: series(c, key) for c in cases}, log)
        for k, (label, xs, ys) in enumerate(lines):
            ax.plot(xs, ys, marker=_MARKERS[k % len(_MARKERS)], ls=_DASHES[k % len(_DASHES)], ms=6 - k % 3,
                    label=label)
        ax.set_xscale("log", base=2)
        if log:
            ax.set_yscale("log")
        if zeros:
            ax.text(0.02, 0.02, "0 (not drawn on the log axis): case " + ", ".join(str(c) for c in sorted(zeros)),
                    transform=ax.transAxes, fontsize=7, va="bottom")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)

    fig, ax = plt.subplots(figsize=(6, 4))
    panel(ax, lambda r: r["latency_ns"] / 1e3, "latency (us)")
    ax.set_title(f"GQA {phase}: latency per case")
    ctx.save_figure(fig, f"{phase}_latency.png")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panel(axes[0], lambda r: r["dma_bytes"] / 2**20, "DMA bytes (MiB)")
    panel(axes[1], lambda r: r["ipcq_bytes"] / 2**20, "IPCQ bytes (MiB)")
    panel(axes[2], lambda r: r.get("link_bytes_ucie", 0) / 2**20, "UCIe link bytes (MiB)")
    fig.suptitle(f"GQA {phase}: traffic")
    ctx.save_figure(fig, f"{phase}_traffic.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    panel(axes[0], lambda r: r["kv_bytes_per_cube"] / 2**20, "K/V bytes per cube (MiB)")
    panel(axes[1], lambda r: r["peak_scratch"] / 2**10, "peak scratch per PE (KiB)", log=False)
    axes[1].axhline(1024, color="k", ls=":", lw=1)
    fig.suptitle(f"GQA {phase}: memory (dotted: the 1 MiB scratch budget)")
    ctx.save_figure(fig, f"{phase}_memory.png")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panel(axes[0], lambda r: r["active_pes"], "active PEs", log=False)
    panel(axes[1], lambda r: r["compute_work"], "compute work (rows x K/V tokens)")
    panel(axes[2], lambda r: r.get("occupancy_gemm", 0.0), "GEMM engine occupancy (64 PEs)", log=False)
    fig.suptitle(f"GQA {phase}: parallelism")
    ctx.save_figure(fig, f"{phase}_parallelism.png")

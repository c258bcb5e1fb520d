"""milestone-1h-gemm: the GEMM kernel model across shapes, precisions and PE counts.

C[M,N] = A[M,K] B[K,N] as composite tile pipelines (see src/kernels/gemm.hpp:
operands in each PE's own HBM slice, M and N split over the PEs, tiles
searched within the per-PE scratch). For every point the bench simulates
the Program and reports efficiency = achieved FLOP/s / peak of the PEs used,
next to the plan's steady-state stage limit ("dma" or "compute") and its
ideal time, so a gap between the two is the pipeline's own loss (fill,
drain, dispatch, DMA fixed costs), not the machine's bound.

Cases:
  square   M = N = K in ``square`` on 1, 8 and 64 PEs (the first PEs of the
           machine: one PE, one cube, eight cubes);
  skinny   e.g. 32x3072x32 (M x N x K), plain and with B pinned: the pinned
           B load runs before the composite, so the composite window leaves
           it out. The reference's tool saw the window go 1765 -> 992 ns on
           this case; ``skinny_fast_macs`` re-runs it with a faster GEMM
           engine (DMA-bound, as there) for the same comparison;
  llm      LLaMA-70B projections (hidden 8192, 64 query / 8 KV heads of 128,
           MLP 28672) for ``llm_tokens`` tokens, each whole projection
           spread over a group of ``llm_pes`` PEs.

Outputs: sweep.json (results, failures, pinned-window table, timelines),
gemm.csv, efficiency.png (efficiency vs shape), roofline.png (achieved
FLOP/s per PE vs arithmetic intensity under the per-PE roofs),
timeline.png (one tile loop from the op log) and energy.png (each point's
latency beside its energy by link, memory, compute and static, from the
config's ``energy:`` model; every row carries ``energy`` as in
docs/sweep-json.md). ``MILESTONE_FAST=1``
re-renders the figures from an existing sweep.json without simulating.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from kernbench import bench
from kernbench.args import machine_range
from kernbench.overrides import Param, shape_check

# LLaMA-3.1-70B projections as (name, N, K): C[T, N] = X[T, K] W[K, N].
LLAMA70B = [
    ("qkv", 8192 + 2 * 8 * 128, 8192),  # 64 query heads + 8 K + 8 V heads of 128
    ("o", 8192, 8192),
    ("gate_up", 2 * 28672, 8192),       # gate and up fused
    ("down", 8192, 28672),
]
# Stage lanes of the timeline figure, top to bottom (a tile's two loads,
# A and B, are stages "load 0" and "load 1" of the composite).
LANES = ["pinned", "load A", "load B", "compute", "store"]
TIMELINE_STEPS = 12  # pipeline tiles drawn per timeline panel


@bench(
    name="milestone-1h-gemm",
    description="GEMM as composite tile pipelines: efficiency vs the stage limit over shapes, precisions, PE counts",
    params={
        "square": [256, 512, 1024, 2048, 4096, 8192],
        "precisions": ["fp16", "fp32"],
        "pe_counts": [1, 8, 64],
        "skinny": Param(["32x3072x32"], check=shape_check(3), allowed="MxKxN, positive integers"),
        "skinny_fast_macs": 8192,  # fp16 MACs/cycle of the "reference-like" engine (0: skip)
        "llm_tokens": [1, 16, 128, 2048],
        "llm_pes": [64],
        "timeline": Param("32x3072x32", check=shape_check(3, allow=("none",)), allowed="MxKxN or none"),
    },
    uses_config=True,
    smoke={"bench.square": [256], "bench.pe_counts": [1, 8], "bench.precisions": ["fp16"],
           "bench.skinny": ["32x64x32"], "bench.llm_tokens": [1], "bench.llm_pes": [8], "bench.timeline": "none"},
    # CI (scripts/check_benches.py): every case, precision and PE count of the default (the skinny shape, its
    # pinned and fast-engine runs, the timeline), only the smaller squares and token counts
    full_check={"bench.square": [256, 1024], "bench.llm_tokens": [1, 128]},
    golden={"key": "name", "metrics": ["steps_total", "hbm_bytes", "limit", "makespan_ns", "window_ns",
                                       "critical_window_ns", "efficiency", "limit_efficiency"]},
)
def milestone_1h_gemm(ctx):
    t0 = time.perf_counter()
    if os.environ.get("MILESTONE_FAST") == "1":
        out = _rerender(ctx)
        ctx.log(f"milestone-1h-gemm: figures re-rendered from sweep.json in {time.perf_counter() - t0:.1f} s")
        return out
    p = ctx.params
    results, failures, timelines, pinned_rows = ctx.results, ctx.failures, [], []
    n_pes = len(ctx.load_system().pes())  # PE counts past the machine's are refused before any point runs
    for key in ("pe_counts", "llm_pes"):
        machine_range(key, p[key], 1, n_pes, ctx.machine_label(), f"{n_pes} PEs")

    def attempt(name, fn):
        try:
            return fn()
        except Exception as e:  # a failing point never sinks the others
            failures.append({"name": name, "error": f"{type(e).__name__}: {e}"})
            ctx.log(f"  {name:<40} FAILED: {type(e).__name__}: {e}")
            return None

    def record(row):
        results.append(row)
        ctx.log(f"  {row['name']:<40} {row['limit']:>7}-bound  eff {row['efficiency']:6.1%}"
                f"  vs limit {row['limit_efficiency']:6.1%}  {row['makespan_ns'] / 1e3:10.2f} us"
                f"  ({row['wall_s']:.2f} s)")

    # ---- square ----
    for s in p["square"]:
        for prec in p["precisions"]:
            for npe in p["pe_counts"]:
                name = f"square {s}x{s}x{s} {prec} {npe}PE"
                row = attempt(name, lambda: _point(ctx, "square", name, s, s, s, prec, npe, False)[0])
                if row:
                    record(row)

    # ---- skinny, plain and pinned ----
    for shape in p["skinny"]:
        m, n, k = _shape(shape)
        for prec in p["precisions"]:
            for pinned in (False, True):
                name = f"skinny {shape} {prec}{' pinned' if pinned else ''}"
                got = attempt(name, lambda: _point(ctx, "skinny", name, m, n, k, prec, 1, pinned,
                                                   timeline=shape == p["timeline"] and prec == p["precisions"][0]))
                if got:
                    record(got[0])
                    pinned_rows.append(_pinned_row(got[0], "config"))
                    if got[1]:
                        timelines.append(got[1])
        if p["skinny_fast_macs"] > 0 and "fp16" in p["precisions"]:
            extra = {"pe.gemm.fp16": p["skinny_fast_macs"]}
            for pinned in (False, True):
                name = f"skinny {shape} fp16 fast-engine{' pinned' if pinned else ''}"
                got = attempt(name, lambda: _point(ctx, "skinny-fast", name, m, n, k, "fp16", 1, pinned, extra=extra))
                if got:
                    pinned_rows.append(_pinned_row(got[0], f"pe.gemm.fp16 = {p['skinny_fast_macs']}"))

    # ---- LLM projections ----
    for tokens in p["llm_tokens"]:
        for proj, n, k in LLAMA70B:
            for prec in p["precisions"]:
                for npe in p["llm_pes"]:
                    name = f"llama70b {proj} T={tokens} {prec} {npe}PE"
                    row = attempt(name, lambda: _point(ctx, "llm", name, tokens, n, k, prec, npe, False)[0])
                    if row:
                        row["projection"] = proj
                        record(row)

    summary = _pinned_summary(pinned_rows, reference=ctx.default_machine)  # the tool ran the default machine
    for line in summary:
        ctx.log(line)
    out = {"results": results, "failures": failures, "pinned_window": pinned_rows, "timelines": timelines}
    _outputs(ctx, out)
    wall = time.perf_counter() - t0
    ctx.log(f"milestone-1h-gemm: {len(results)} points, {len(failures)} failures in {wall:.1f} s")
    return out  # the bench's wall time is sweep.json's top-level wall_s (the runner writes it)


# ---- one point ------------------------------------------------------------------

def _shape(text):
    """'32x3072x32' -> (M, N, K)."""
    parts = [int(v) for v in str(text).lower().split("x")]
    if len(parts) != 3:
        raise ValueError(f"shape {text!r}: expected MxNxK")
    return tuple(parts)


def _point(ctx, case, name, m, n, k, prec, npe, pinned, extra=None, timeline=False):
    """Plan, build and simulate one GEMM; returns (row, timeline or None)."""
    from kernbench import _core
    from kernbench import energy as kenergy

    t0 = time.perf_counter()
    system = ctx.load_system(extra)
    pes = list(system.pes())
    if npe > len(pes):
        raise ValueError(f"{npe} PEs asked, the machine has {len(pes)}")
    pes = pes[:npe]
    args = dict(precision=prec, pes=pes, pinned=pinned)
    plan = _core.gemm_plan(system._core, m, n, k, **args)
    prog = _core.gemm_program(system._core, m, n, k, **args)
    res = system.run_program(prog)
    ctx.trace(res, name)  # `kernbench run --trace FILE --trace-panel NAME`
    log = res.log()
    kinds = list(res.kind_names)
    tags = list(res.tags)
    kind = np.asarray(log["kind"])
    agent = np.asarray(log["agent"])
    start = np.asarray(log["start_ps"])
    end = np.asarray(log["end_ps"])
    comp = kind == kinds.index("composite")
    crit_pe = plan["shares"]["pe"][plan["critical"]]
    crit = comp & (agent == crit_pe)
    window_ps = int(end[comp].max() - start[comp].min())          # all composites
    crit_window_ps = int(end[crit].max() - start[crit].min())     # the critical PE's composite
    pinned_ps = 0
    if pinned:
        pin = tags.index("pinned")
        sel = np.asarray(log["tag"]) == pin
        pinned_ps = int((end[sel] - start[sel]).max())
    makespan = int(res.makespan_ps)
    flops = plan["flops"]
    peak = plan["peak_flops_per_s"]
    moved = int(res.op_bytes.get("dma", 0))
    gemm_rows = int(res.op_counts.get("gemm", 0))
    if gemm_rows != plan["steps_total"]:
        raise RuntimeError(f"{gemm_rows} GEMM stages ran, the plan has {plan['steps_total']} tiles")
    row = {
        "name": name,
        "case": case,
        "shape": f"{m}x{n}x{k}",
        "m": m, "n": n, "k": k,
        "precision": prec,
        "pes": npe,
        "pinned": pinned,
        "grid": f"{plan['grid_m']}x{plan['grid_n']}",
        "tiles": f"{plan['tile_m']}x{plan['tile_n']}x{plan['tile_k']}",
        "steps_total": plan["steps_total"],
        "scratch_per_pe": plan["scratch_per_pe"],
        "limit": plan["limit"],
        "flops": flops,
        "hbm_bytes": moved,
        "intensity": flops / moved if moved else None,
        "peak_tflops": peak / 1e12,
        "peak_pe_tflops": peak / npe / 1e12,
        "read_GBps_pe": plan["read_bytes_per_s"] / 1e9,
        "makespan_ns": makespan / 1e3,
        "window_ns": window_ps / 1e3,
        "critical_window_ns": crit_window_ps / 1e3,
        "pinned_ns": pinned_ps / 1e3,
        "ideal_ns": plan["ideal_ps"] / 1e3,
        "estimate_ns": plan["estimate_ps"] / 1e3,
        "achieved_tflops": flops / (makespan * 1e-12) / 1e12,
        "efficiency": flops / (makespan * 1e-12) / peak,
        "window_efficiency": flops / (window_ps * 1e-12) / peak,
        "limit_efficiency": plan["ideal_ps"] / crit_window_ps,
        "step_ns": plan["step_ps"] / 1e3,
        "load_ns": plan["load_ps"] / 1e3,
        "store_ns": plan["store_ps"] / 1e3,
        "compute_ns": plan["compute_ps"] / 1e3,
    }
    energy = kenergy.summarize(res)
    row["energy"] = energy
    row["energy_uj"] = energy["total_j"] * 1e6
    row["energy_pj_per_flop"] = energy["total_j"] / flops * 1e12
    row["critical_path"] = ctx.critical_path(res, name)  # docs/critical-path.md
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    tl = _timeline(res, log, tags, kinds, crit_pe, name) if timeline else None
    return row, tl


def _timeline(res, log, tags, kinds, pe, name):
    """The first TIMELINE_STEPS tiles of one PE's pipeline, stage by stage, from the op log."""
    agent = np.asarray(log["agent"])
    tag = np.asarray(log["tag"])
    start = np.asarray(log["start_ps"])
    end = np.asarray(log["end_ps"])
    kind = np.asarray(log["kind"])
    comp = (kind == kinds.index("composite")) & (agent == pe)
    names = res.log_names
    rows = []
    compute_seen = 0
    order = np.argsort(start, kind="stable")
    for i in order:
        if agent[i] != pe:
            continue
        lane = tags[tag[i]]
        if lane == "load":
            lane = "load B" if " load 1 " in names[i] else "load A"
        if lane not in LANES:
            continue
        if lane == "compute":
            compute_seen += 1
            if compute_seen > TIMELINE_STEPS:
                break
        rows.append({"lane": lane, "start_ns": float(start[i]) / 1e3, "end_ns": float(end[i]) / 1e3})
    return {
        "name": name,
        "window_ns": [float(start[comp].min()) / 1e3, float(end[comp].max()) / 1e3],
        "makespan_ns": float(res.makespan_ps) / 1e3,
        "rows": rows,
    }


def _pinned_row(row, engine):
    return {"engine": engine, "shape": row["shape"], "precision": row["precision"], "pinned": row["pinned"],
            "window_ns": row["window_ns"], "makespan_ns": row["makespan_ns"], "pinned_ns": row["pinned_ns"],
            "limit": row["limit"]}


def _pinned_summary(rows, reference=True):
    """One line per pinned pair; the reference tool's window (1765 -> 992 ns) only beside the default machine."""
    lines = []
    by = {}
    for r in rows:
        by.setdefault((r["engine"], r["shape"], r["precision"]), {})[r["pinned"]] = r
    for (engine, shape, prec), pair in by.items():
        if False in pair and True in pair:
            a, b = pair[False], pair[True]
            lines.append(f"  pinned window {shape} {prec} [{engine}]: window {a['window_ns']:.0f} -> "
                         f"{b['window_ns']:.0f} ns, pinned load {b['pinned_ns']:.0f} ns, end to end "
                         f"{a['makespan_ns']:.0f} -> {b['makespan_ns']:.0f} ns"
                         + (" (reference tool: 1765 -> 992 ns)" if reference else ""))
    return lines


# ---- outputs --------------------------------------------------------------------

def _outputs(ctx, out):
    if out["results"]:
        # The nested `energy` dict stays in sweep.json; the CSV keeps its totals (energy_uj, energy_pj_per_flop).
        ctx.write_csv("gemm.csv", [{k: v for k, v in r.items() if k not in ("energy", "critical_path")} for r in out["results"]])
        _plot_efficiency(ctx, out["results"])
        _plot_roofline(ctx, out["results"])
        _plot_energy(ctx, out["results"])
    if out.get("pinned_window"):
        ctx.write_csv("pinned_window.csv", out["pinned_window"])
    if out.get("timelines"):
        _plot_timeline(ctx, out["timelines"])


def _rerender(ctx):
    """MILESTONE_FAST=1: the figures again from out/sweep.json, no simulation."""
    path = ctx.out / "sweep.json"
    if not path.exists():
        raise FileNotFoundError(f"MILESTONE_FAST=1: {path} does not exist; run the bench once without it")
    old = json.loads(path.read_text())
    out = {"results": old.get("results", []), "failures": old.get("failures", []),
           "pinned_window": old.get("pinned_window", []), "timelines": old.get("timelines", []),
           "rerendered": True}
    _outputs(ctx, out)
    return out


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_efficiency(ctx, rows):
    """Square sizes as lines (per precision and PE count); other shapes as bars; the stage limit dotted."""
    plt = _plt()
    square = [r for r in rows if r["case"] == "square"]
    other = [r for r in rows if r["case"] != "square"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [1, 1.4]})
    ax = axes[0]
    groups = sorted({(r["precision"], r["pes"]) for r in square})
    for prec, npe in groups:
        pts = sorted((r for r in square if r["precision"] == prec and r["pes"] == npe), key=lambda r: r["m"])
        x = [r["m"] for r in pts]
        line, = ax.plot(x, [100 * r["efficiency"] for r in pts], "o-", label=f"{prec}, {npe} PE")
        # What the stage limit allows: FLOPs / ideal time / peak.
        ax.plot(x, [100 * r["flops"] / (r["ideal_ns"] * 1e-9) / (r["peak_tflops"] * 1e12) for r in pts], ":",
                color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("efficiency (% of peak, end to end)")
    ax.set_ylim(0, 105)
    ax.set_title("square GEMMs (dotted: steady-state stage limit)")
    ax.legend(fontsize=8)
    ax = axes[1]
    if other:
        labels = [r["name"].split(" ", 1)[1] for r in other]
        x = np.arange(len(other))
        colors = ["#c44e52" if r["limit"] == "dma" else "#4c72b0" for r in other]
        ax.bar(x, [100 * r["efficiency"] for r in other], color=colors)
        ax.plot(x, [100 * r["flops"] / (r["ideal_ns"] * 1e-9) / (r["peak_tflops"] * 1e12) for r in other], "k_",
                markersize=14, label="steady-state stage limit")
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 105)
        ax.set_ylabel("efficiency (% of peak, end to end)")
        ax.set_title("skinny and LLaMA-70B shapes (red: DMA-bound, blue: compute-bound)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    ctx.save_figure(fig, "efficiency.png")
    plt.close(fig)


def _plot_roofline(ctx, rows):
    """Achieved FLOP/s per PE against FLOPs per HBM byte, under each precision's per-PE roof."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    pts = [r for r in rows if r.get("intensity")]
    if not pts:
        plt.close(fig)
        return
    ai = np.array([r["intensity"] for r in pts])
    xs = np.logspace(np.log10(ai.min() / 2), np.log10(ai.max() * 2), 200)
    bw = max(r["read_GBps_pe"] for r in pts) * 1e9
    styles = {"square": "o", "skinny": "s", "llm": "^"}
    colors = {}
    for prec in sorted({r["precision"] for r in pts}):
        peak = max(r["peak_pe_tflops"] for r in pts if r["precision"] == prec) * 1e12
        line, = ax.plot(xs, np.minimum(peak, xs * bw) / 1e12, "-", lw=1.2, label=f"roof {prec} ({peak / 1e12:.2f} TFLOP/s, {bw / 1e9:.0f} GB/s)")
        colors[prec] = line.get_color()
    for case, marker in styles.items():
        for prec, color in colors.items():
            sel = [r for r in pts if r["case"] == case and r["precision"] == prec]
            if sel:
                ax.scatter([r["intensity"] for r in sel], [r["achieved_tflops"] / r["pes"] for r in sel],
                           marker=marker, color=color, edgecolor="k", linewidth=0.5, s=36, label=f"{case} {prec}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte moved)")
    ax.set_ylabel("achieved TFLOP/s per PE (end to end)")
    ax.set_title("GEMM roofline per PE (bandwidth: the PE's path to its HBM slice)")
    ax.legend(fontsize=7, loc="lower right")
    ctx.save_figure(fig, "roofline.png")
    plt.close(fig)


def _plot_energy(ctx, rows):
    """Each point's latency (left) beside its energy split into link, memory, compute and static (right)."""
    from kernbench import energy as kenergy

    rows = [r for r in rows if r.get("energy")]
    if not rows:
        return
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(15, 0.22 * len(rows) + 2.2), sharey=True)
    y = np.arange(len(rows))
    labels = [r["name"] for r in rows]
    axes[0].barh(y, [r["makespan_ns"] / 1e3 for r in rows], color="#4c72b0")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("latency (us, end to end)")
    axes[0].set_yticks(y, labels, fontsize=6)
    axes[0].invert_yaxis()
    axes[0].set_title("latency")
    colors = {"dynamic:link": "#55a868", "dynamic:memory": "#c44e52", "dynamic:compute": "#4c72b0",
              "static": "#8c8c8c"}
    groups = [kenergy.group(r["energy"]) for r in rows]
    totals = np.array([r["energy"]["total_j"] for r in rows])
    left = np.zeros(len(rows))
    for g in kenergy.GROUPS:
        share = np.array([gr[g] for gr in groups]) / np.where(totals > 0, totals, 1.0)
        axes[1].barh(y, 100 * share, left=left, color=colors[g], label=g)
        left += 100 * share
    for yi, t in zip(y, totals):
        axes[1].text(101, yi, f"{t * 1e6:.3g} uJ", va="center", fontsize=6)
    axes[1].set_xlim(0, 118)
    axes[1].set_xlabel("share of the run's energy (%); total at the right")
    axes[1].set_title("energy by part (config `energy:`; docs/energy.md)")
    axes[1].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=4)
    fig.tight_layout()
    ctx.save_figure(fig, "energy.png")
    plt.close(fig)


def _plot_timeline(ctx, timelines):
    """Stage bars of the first tiles of one PE's pipeline, one panel per run; the composite window shaded."""
    plt = _plt()
    fig, axes = plt.subplots(len(timelines), 1, figsize=(11, 2.2 * len(timelines) + 0.6), squeeze=False)
    colors = {"pinned": "#8172b2", "load A": "#55a868", "load B": "#8c9e3a", "compute": "#4c72b0", "store": "#c44e52"}
    for ax, tl in zip(axes[:, 0], timelines):
        for r in tl["rows"]:
            y = LANES.index(r["lane"])
            ax.barh(y, max(r["end_ns"] - r["start_ns"], 0.5), left=r["start_ns"], height=0.6,
                    color=colors[r["lane"]], edgecolor="k", linewidth=0.3)
        w0, w1 = tl["window_ns"]
        shown_end = max(r["end_ns"] for r in tl["rows"]) if tl["rows"] else w1
        ax.axvspan(w0, min(w1, shown_end), color="#f2f2f2", zorder=-1)
        ax.axvline(w0, color="k", lw=0.8, ls="--")
        ax.set_yticks(range(len(LANES)), LANES)
        ax.set_ylim(len(LANES) - 0.5, -0.5)
        ax.set_xlim(left=0)
        ax.set_xlabel("time (ns)")
        ax.set_title(f"{tl['name']}: first {TIMELINE_STEPS} tiles; composite window {w1 - w0:.0f} ns "
                     f"(shaded from its start), end to end {tl['makespan_ns']:.0f} ns", fontsize=9)
    fig.tight_layout()
    ctx.save_figure(fig, "timeline.png")
    plt.close(fig)

"""k200-cases: the five K200 end-to-end cases, with their what-ifs.

Each case is defined in configs/k200_cases/*.yaml (with its source): C1
ResNet-50 v1.5 (FP32, conv/fc lowered to GEMMs, batch 1/8/32), C2 a
DnCNN-style denoiser (FP16), C3 a two-stage MLP pipeline over the two dies
joined by P2P vs one die, C4 an MLP tower (FP32/FP16 x pageable/pinned),
C5 C4 on two cards at once vs one card. The K200 model runs each one end
to end (copies, per-layer launch and dispatch, GEMMs, waits) and reports
per variant and batch: latency per iteration, throughput (items/s), the
busiest resource and the step that takes the most time; then the what-if
answers as throughput ratios to the case's baseline (knobs off, pinned vs
pageable, FP16 vs FP32, one vs two dies/cards).

Outputs: sweep.json (rows, what_if answers, scaling check), cases.csv,
what_if.csv, cases.png. ``--set bench.quick=true`` runs one batch and one
iteration per variant (the smoke size the tests use).
"""

from __future__ import annotations

from kernbench import bench


@bench(
    name="k200-cases",
    description="K200 end-to-end cases C1-C5: throughput, latency, bounding resource and what-if answers",
    params={"cases": [], "quick": False},
    config="k200.yaml",
    smoke={"bench.quick": "true"},
    golden={"key": ["case", "variant", "batch"],
            "metrics": {"throughput_per_s": "rel=1e-9", "latency_ms": "rel=1e-9", "bound_resource": "exact"}},
)
def k200_cases(ctx):
    from kernbench import k200

    p = ctx.params
    config = ctx.config  # @bench(config="k200.yaml") unless --config names another
    # a machine without the K200 model (e.g. a GPU box) is one clear error, not a failure per row
    k200.info(k200.load_system(config, set=ctx.config_overrides, seed=ctx.seed))
    files = k200.case_files()
    if p["cases"]:
        wanted = {str(c).lower() for c in p["cases"]}
        files = [f for f in files if f.stem.lower() in wanted or f.stem.split("_")[0].lower() in wanted]
        if not files:
            raise ValueError(f"bench.cases: none of {sorted(wanted)} is a case (known: "
                             f"{', '.join(f.stem for f in k200.case_files())})")
    results, failures = ctx.results, ctx.failures
    for f in files:
        case = k200.load_case(f)
        if p["quick"]:
            case = _quick(case)
        variants = [None] + list(case.get("what_if") or [])
        for v in variants:
            label = "baseline" if v is None else v.get("name", "?")
            try:
                rows = k200.run_variant(case, v, config=config, seed=ctx.seed, on_run=_critical_path(ctx))
                for r in rows:
                    r["source"] = case["source_file"]
                    r["title"] = case.get("title", "")
                results.extend(rows)
                for r in rows:
                    ctx.log(f"  {case['name']} {label:<32} b={r['batch']:<4} {r['throughput_per_s']:10.1f}/s "
                            f"lat {r['latency_ms']:8.3f} ms  bound {r['bound_resource']} "
                            f"({r['busiest_share']:.0%}), top step {r['top_step']}")
            except Exception as e:  # a failing variant never sinks the others
                failures.append({"name": f"{case['name']} {label}", "error": f"{type(e).__name__}: {e}"})
    answers = _what_if(results)
    scaling = _scaling(results)
    if results:
        ctx.write_csv("cases.csv", [{k: v for k, v in r.items() if k not in ("step_time_ms", "step_share_ms")}
                                    for r in results])
        ctx.write_csv("what_if.csv", answers)
        _plot(ctx, results)
    for a in answers:
        ctx.log(f"  what-if {a['case']} b={a['batch']}: {a['variant']:<32} x{a['throughput_ratio']:.3f} throughput")
    if scaling:
        ctx.log(f"  C5 scaling: two cards give x{scaling['ratio']:.3f} the throughput of one (linear = 2)")
    return {"results": results, "failures": failures, "what_if": answers, "scaling": scaling}


def _critical_path(ctx):
    """Lists each run's exact critical path (the causes the model recorded) in the summary after the bench."""
    def take(label, result):
        if result.raw.get("log") is not None:
            ctx.critical_path(result.critical_path(label), label)
    return take


def _quick(case):
    c = dict(case)
    params = dict(c["params"])
    b = params.get("batch", [1])
    params["batch"] = [b[0] if isinstance(b, list) else b]
    params["iterations"] = 1
    c["params"] = params
    return c


def _what_if(rows):
    base = {(r["case"], r["batch"]): r for r in rows if r["variant"] == "baseline"}
    out = []
    for r in rows:
        b = base.get((r["case"], r["batch"]))
        if r["variant"] == "baseline" or b is None:
            continue
        out.append({"case": r["case"], "batch": r["batch"], "variant": r["variant"],
                    "throughput_ratio": r["throughput_per_s"] / b["throughput_per_s"],
                    "latency_ratio": r["latency_ms"] / b["latency_ms"],
                    "bound_baseline": b["bound_resource"], "bound_variant": r["bound_resource"]})
    return out


def _scaling(rows):
    two = [r for r in rows if r["case"] == "C5" and r["variant"] == "baseline"]
    one = [r for r in rows if r["case"] == "C5" and r["variant"] == "one card"]
    if not two or not one:
        return None
    return {"two_cards_per_s": two[0]["throughput_per_s"], "one_card_per_s": one[0]["throughput_per_s"],
            "ratio": two[0]["throughput_per_s"] / one[0]["throughput_per_s"]}


def _plot(ctx, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = sorted({r["case"] for r in rows})
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 4.5), squeeze=False)
    for ax, c in zip(axes[0], cases):
        sub = [r for r in rows if r["case"] == c]
        labels = [f"{r['variant']}\nb={r['batch']}" for r in sub]
        ax.bar(range(len(sub)), [r["throughput_per_s"] for r in sub], color="tab:blue")
        ax.set_xticks(range(len(sub)))
        ax.set_xticklabels(labels, rotation=70, fontsize=7)
        ax.set_title(c)
        ax.set_ylabel("items / s")
    fig.suptitle("K200 cases: throughput per variant")
    fig.tight_layout()
    ctx.save_figure(fig, "cases.png")
    plt.close(fig)

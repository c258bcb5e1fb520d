"""The K200 end-to-end predictions (C1, C2, C3, C5) under each assumed alternative of the model.

None of these cases has a released measurement (only C4 is calibration data), so every figure here is a
prediction from parameters fitted elsewhere; what changes between the columns is an *assumed* mechanism, each a
config knob (docs/k200.md, "Predictions under the assumed alternatives"):

| alternative | knob |
|---|---|
| baseline | configs/k200.yaml as committed |
| elementwise hbm | ``k200.compute.elementwise_rate: hbm`` (bytes past 5,120 elements at the 256 GB/s HBM link) |
| conv implicit | ``k200.compute.conv: implicit`` (no im2col copy) |
| d2d wake high | ``k200.d2d.wake: high`` (every D2D completion sleep wakes at 1 ms) |
| hbm + implicit | both of the above (the fastest reading) |
| framework N us | C1's ``framework_op_us`` (assumed 10 us) at 0, 5, 20, 100, 200 us |

    from kernbench import k200_predictions as kp
    rows = kp.run()                 # a row per (case, variant, batch, alternative), from k200.run_variant
    print(kp.markdown(rows))        # the table docs/k200.md carries (tests/python/test_k200_doc_table.py)
    python -m kernbench.k200_predictions   # the same, printed

Each row's ``bound`` is the run's busiest resource (``k200.run_variant``'s bound_resource) and ``critical`` the
label with the largest share of its exact critical path.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALTERNATIVES", "CASES", "run", "markdown"]

# (column name, k200 overrides, case-parameter overrides, cases it applies to (None: all))
ALTERNATIVES: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, ...] | None]] = [
    ("baseline", {}, {}, None),
    ("elementwise hbm", {"k200.compute.elementwise_rate": "hbm"}, {}, None),
    ("conv implicit", {"k200.compute.conv": "implicit"}, {}, ("C1", "C2")),
    ("d2d wake high", {"k200.d2d.wake": "high"}, {}, ("C2", "C3")),
    ("hbm + implicit", {"k200.compute.elementwise_rate": "hbm", "k200.compute.conv": "implicit"}, {},
     ("C1", "C2")),
] + [(f"framework {us} us", {}, {"framework_op_us": us}, ("C1",)) for us in (0, 5, 20, 100, 200)]
# (case file, variant name (None: the baseline), its case-file overrides)
CASES: list[tuple[str, str | None]] = [
    ("c1_resnet50.yaml", None), ("c2_denoiser.yaml", None), ("c3_pipeline.yaml", None),
    ("c3_pipeline.yaml", "solo (one die, D2D)"), ("c5_two_cards.yaml", None),
]


def run(config: str = "k200.yaml", seed: int = 1) -> list[dict[str, Any]]:
    """Every (case variant, alternative) of CASES x ALTERNATIVES that applies, as k200.run_variant rows with
    ``alternative`` and ``critical`` added."""
    from kernbench import k200

    rows: list[dict[str, Any]] = []
    for file, variant in CASES:
        case = k200.load_case(file)
        what = next((dict(w) for w in case.get("what_if") or [] if w.get("name") == variant), {}) if variant else {}
        for alt, sets, params, only in ALTERNATIVES:
            if only is not None and case["name"] not in only:
                continue
            over = {**what, **params, "set": {**(what.get("set") or {}), **sets}}
            over.setdefault("name", variant or "baseline")
            paths: list[Any] = []
            out = k200.run_variant(case, over, config=config, seed=seed,
                                   on_run=lambda label, r: paths.append(r.critical_path(label)))
            for r, cp in zip(out, paths):
                share = cp.share
                r["alternative"] = alt
                r["critical"] = next(iter(share), "")
                r["critical_share"] = share.get(r["critical"], 0.0)
                rows.append(r)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as docs/k200.md's table: per case variant and batch, throughput (items/s) and latency per
    iteration (ms) under each alternative, the bound and the critical path's largest label."""
    lines = ["| case | variant | batch | alternative | items/s | ms / iteration | bound | critical path's largest share |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['variant']} | {r['batch']} | {r['alternative']} | "
                     f"{r['throughput_per_s']:.1f} | {r['latency_ms']:.3f} | {r['bound_resource']} | "
                     f"{r['critical']} ({r['critical_share']:.0%}) |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - the docs' generator
    print(markdown(run()))

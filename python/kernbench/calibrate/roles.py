"""What a checked row is: fitted (on which parameters, exactly determined or not), predicted, a known miss.

``calibrate --check`` reads which rows a config was fitted on from the config itself: each fitted value
declares its rows beside it (kernbench.provenance). A fit with as many free parameters as rows reproduces
its rows whatever the model's structure, so those rows are reported as *exactly determined*: their error
says nothing of the model. A row that meets its own tolerance only because that tolerance is wider than
its role's bar (5 % fitted, 20 % predicted: DEFAULT_TOLERANCE) is a *known miss*, listed with the misses
and not with the passes. docs/calibrate.md, "Provenance and roles".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from kernbench._core import ConfigError

__all__ = ["provenance_fits", "components", "judge", "summary_lines", "result_lines"]


def provenance_fits(overlay: Any, config: Any, dataset: Any, own: Mapping[str, Any] | None = None
                    ) -> dict[str, list[str]]:
    """{row id: the parameters fitted on it} as the checked config declares: the overlay's own provenance
    when the overlay loads as a machine config (a preset, configs/k200.yaml, an overlay that includes its
    base), else ``config``'s with the overlay fragment's own records (``own``: read_overlay's ``records``) over
    it. A fitted record naming a row or group the data file lacks is a ConfigError, from either."""
    from kernbench import provenance

    for source in (overlay, config):
        if source is None:
            continue
        try:
            records = provenance.read(Path(source) if not isinstance(source, Path) else source)
        except ConfigError:
            continue
        if source is not overlay:
            records = {**records, **(own or {})}
        return provenance.fitted_on(records, dataset)
    return provenance.fitted_on(dict(own or {}), dataset)


def components(fitted_on: Mapping[str, Sequence[str]]) -> list[tuple[set[str], set[str]]]:
    """The fits a fitted_on map holds, as connected (parameters, rows) sets: parameters that share a row
    were fitted together."""
    param_rows: dict[str, set[str]] = {}
    for rid, params in fitted_on.items():
        for p in params:
            param_rows.setdefault(p, set()).add(rid)
    seen: set[str] = set()
    out: list[tuple[set[str], set[str]]] = []
    for start in param_rows:
        if start in seen:
            continue
        params, rows, todo = set(), set(), [start]
        while todo:
            p = todo.pop()
            if p in params:
                continue
            params.add(p)
            for rid in param_rows[p]:
                if rid not in rows:
                    rows.add(rid)
                    todo += [q for q in fitted_on[rid] if q not in params]
        seen |= params
        out.append((params, rows))
    return out


def judge(rows: list[dict[str, Any]], fitted_on: Mapping[str, Sequence[str]],
          bars: Mapping[str, float]) -> dict[str, Any]:
    """Marks each report row (``fitted_on``, ``determined``: "exactly" | "over" | None, ``known_miss``) and
    returns the summary: counts and the ids of the exactly determined rows, the known misses and the rows
    outside their tolerance."""
    exact: set[str] = set()
    over: set[str] = set()
    for params, ids in components(fitted_on):
        (exact if len(params) >= len(ids) else over).update(ids)
    for r in rows:
        r["fitted_on"] = list(fitted_on.get(r["id"], r.get("fitted_on") or []))
        r["determined"] = ("exactly" if r["id"] in exact else "over" if r["id"] in over else None) \
            if r["role"] == "fitted" else None
        bar = bars["fitted" if r["role"] == "fitted" else "predicted"]
        r["known_miss"] = bool(r["within"] and r["error"] is not None and abs(r["error"]) > bar + 1e-12)
    passes = [r["id"] for r in rows if r["within"] and not r["known_miss"]]
    return {
        "rows": len(rows),
        "fitted": sum(1 for r in rows if r["role"] == "fitted"),
        "predicted": sum(1 for r in rows if r["role"] == "predicted"),
        "exactly_determined": [r["id"] for r in rows if r["determined"] == "exactly"],
        "passes": len(passes),
        "known_misses": [r["id"] for r in rows if r["known_miss"]],
        "outside": [r["id"] for r in rows if not r["within"]],
        "bars": dict(bars),
    }


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary as the CLI prints it: passes, known misses (as misses), outside, exactly determined."""
    b = summary["bars"]
    lines = [f"{summary['rows']} rows: {summary['fitted']} fitted, {summary['predicted']} predicted; "
             f"{summary['passes']} pass (fitted within {100 * b['fitted']:g} %, predicted within "
             f"{100 * b['predicted']:g} %, or a tighter tolerance of their own)"]
    if summary["known_misses"]:
        lines.append(f"{len(summary['known_misses'])} known misses (within a widened tolerance of their own, not "
                     f"within their role's bar): {', '.join(summary['known_misses'])}")
    if summary["outside"]:
        lines.append(f"{len(summary['outside'])} outside their tolerance: {', '.join(summary['outside'])}")
    if summary["exactly_determined"]:
        lines.append(f"{len(summary['exactly_determined'])} fitted rows are exactly determined (as many parameters "
                     f"as rows: their error is not evidence of the model): "
                     f"{', '.join(summary['exactly_determined'])}")
    return lines


def result_lines(res: Mapping[str, Any]) -> list[str]:
    """What `kernbench calibrate` prints of a fit or a check: each free parameter, each row, the misfits, the
    exact determination and the summary."""
    from kernbench.calibrate.report import row_line

    lines = []
    for f in res.get("free", []):
        flag = "" if f["identifiable"] else f"  NOT IDENTIFIABLE: {f['why']}"
        lines.append(f"{f['path']} = {f['value']}  (start {f['start'] or '?'}, bounds {f['bounds'][0]}.."
                     f"{f['bounds'][1]}, fitted on {len(f['fitted_on'])} rows){flag}")
    lines += [row_line(r) for r in res["rows"]]
    lines += [f"MISFIT: {m['text']}" for m in res.get("misfit", [])]
    if res.get("determined") == "exactly":
        lines.append(f"EXACTLY DETERMINED: {len(res['free'])} free parameters on {len(res['fitted_rows'])} rows: "
                     "the fitted rows are reproduced whatever the model's structure; only the predicted rows test it")
    return lines + summary_lines(res["summary"])

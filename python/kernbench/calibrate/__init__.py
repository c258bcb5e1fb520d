"""``kernbench calibrate``: fit config parameters to measured figures, cross-validate, and check an overlay.

    from kernbench import calibrate as cal
    res = cal.calibrate("measured.yaml", ["k200.compute.fp32_efficiency=30..90"], fit_on=["gemm-square"])
    cal.write_outputs(res, "out/cal")          # overlay YAML, report.md, PNGs, result.json
    chk = cal.check("out/cal/overlay.yaml", "measured.yaml")   # the errors again, nothing refitted

Rows (kernbench.calibrate.data) name a registered measurement function (kernbench.calibrate.registry;
built-ins in kernbench.calibrate.functions and .gpu_functions, which this package imports) and its
parameters. The fit minimises a robust loss of log(model / measured) over the rows of the ``fit_on``
groups (scipy.optimize.least_squares); every other row is a prediction. Cross-validation refits without each held-out set and predicts it. docs/calibrate.md.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from kernbench.calibrate.data import Dataset, Row, load_data
from kernbench.calibrate.fit import Evaluator, Free, current_value, fit, folds, identifiability, parse_free
from kernbench.calibrate.misfit import residual_trends
from kernbench.calibrate.registry import (REGISTRY, CalibrationError, Context, Measurement, Registry,
                                          load_functions, measurement)
from kernbench.calibrate.report import read_overlay, write_outputs
from kernbench.calibrate.roles import judge, provenance_fits
# The built-in measurement functions register into REGISTRY as they are imported (the registry imports none).
from kernbench.calibrate import functions as _functions, gpu_functions as _gpu_functions  # noqa: F401
from kernbench.calibrate import gpu_parts_functions as _gpu_parts_functions  # noqa: F401

__all__ = ["calibrate", "check", "evaluate_rows", "load_data", "load_functions", "measurement", "parse_free",
           "read_overlay", "write_outputs", "CalibrationError", "Context", "Measurement", "Registry", "REGISTRY",
           "DEFAULT_TOLERANCE"]

#: Tolerance of a row that names none (and no --tolerance): the project's fitted / predicted bars.
DEFAULT_TOLERANCE = {"fitted": 0.05, "predicted": 0.20}


def _sets(sets: Mapping[str, Any] | Iterable[str] | None) -> dict[str, str]:
    from kernbench.system import override_pairs

    return dict(override_pairs(sets))


def _tol(row: Row, role: str, tolerance: float | None) -> float:
    if row.tolerance is not None:
        return row.tolerance
    if tolerance is not None:
        return tolerance
    return DEFAULT_TOLERANCE["fitted" if role == "fitted" else "predicted"]


def evaluate_rows(ev: Evaluator, rows: Sequence[Row], texts: Mapping[str, str], fitted: set[str],
                  tolerance: float | None = None, *, keep_going: bool = False) -> list[dict[str, Any]]:
    """One report row per data row at the config texts ``texts``.

    A row whose function raises is a CalibrationError naming the row; with ``keep_going`` it is recorded
    instead (``model`` and ``error`` None, ``within`` false, ``failure`` the error text) and the other rows
    still run. ``failure`` is None on every row that ran."""
    out = []
    for r in rows:
        role = "fitted" if r.id in fitted else "predicted"
        tol = _tol(r, role, tolerance)
        failure = None
        try:
            model: float | None = ev.model(r, texts)
        except CalibrationError as e:
            if not keep_going:
                raise
            model, failure = None, str(e)
        err = None if model is None else model / r.measured - 1.0
        out.append({"id": r.id, "group": r.group, "call": r.call, "metric": r.metric, "role": role,
                    "measured": r.measured, "unit": r.model_unit, "measured_as_given": r.value,
                    "unit_as_given": r.unit, "model": model, "error": err, "tolerance": tol,
                    "within": err is not None and bool(abs(err) <= tol), "cv_error": None, "cv_fold": None,
                    "source": r.source, "line": r.line, "failure": failure})
    return out


def calibrate(data: str | Path | Dataset, free: Sequence[str | Free] = (), fit_on: Sequence[str] | None = None, *,
              config: Any = None, sets: Mapping[str, Any] | Iterable[str] | None = None, seed: int = 1,
              cv_by: str = "group", loss: str = "soft_l1", f_scale: float = 0.1, diff_step: float = 1e-2,
              tolerance: float | None = None, registry: Registry | None = None, max_nfev: int | None = None,
              command: str = "") -> dict[str, Any]:
    """Fit ``free`` (``PATH=LO..HI`` texts) on the rows of ``fit_on`` (default: every group), predict the rest,
    cross-validate (``cv_by``: group | row | none | a parameter such as batch); returns the result dict."""
    t0 = time.perf_counter()
    reg = registry or REGISTRY
    ds = data if isinstance(data, Dataset) else load_data(data, reg)
    params = [f if isinstance(f, Free) else parse_free(f) for f in free]
    paths = [f.path for f in params]
    dup = {p for p in paths if paths.count(p) > 1}
    if dup:
        raise CalibrationError(f"--free {sorted(dup)[0]}: given twice")
    groups = ds.group_names()
    fit_groups = list(groups) if fit_on is None else [g.strip() for g in fit_on if g.strip()]
    for g in fit_groups:
        if g not in groups:
            raise CalibrationError(f"--fit-on {g}: no row of {ds.path} is in group {g!r} "
                                   f"(groups: {', '.join(groups)})")
    if params and not fit_groups:
        raise CalibrationError("--fit-on: no group to fit on")
    base = _sets(sets)
    for p in paths:
        if p in base:
            raise CalibrationError(f"--free {p}: also fixed with --set {p}={base[p]}; give one of them")
    for r in ds.rows:
        for p in paths:
            if p in r.set:
                raise CalibrationError(f"{r.where()}: its set fixes {p}, a free parameter (the row would not "
                                       "see the fitted value)")
    if cv_by not in ("group", "row", "none"):
        known = {k for r in ds.rows for k in list(r.params) + list(r.set)} | {"function", "metric", "unit", "source"}
        if cv_by not in known:
            raise CalibrationError(f"--cv-by {cv_by}: no row has such a parameter (rows have: "
                                   f"{', '.join(sorted(known)) or 'none'})")
    ev = Evaluator(params, config=config, sets=base, seed=seed, registry=reg)
    fit_rows = [r for r in ds.rows if r.group in fit_groups] if params else []
    start_texts: dict[str, str] = {}
    x0 = []
    for f in params:
        cfg = config if config is not None else _default_config(ds, reg)
        v = current_value(f, cfg, base)
        x0.append(f.x_of(v) if v is not None else 0.5)
        start_texts[f.path] = f.text(v, 6) if v is not None else ""
    result: dict[str, Any] = {
        "kind": "calibration", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "data": ds.path, "config": None if config is None else str(config), "base_config": _base_for(ds, config, reg),
        "sets": base, "command": command, "seed": seed, "fit_on": fit_groups if params else [],
        "cv_by": cv_by, "loss": loss, "f_scale": f_scale, "diff_step": diff_step,
    }
    fitted: set[str] = set()
    texts: dict[str, str] = {}
    info: dict[str, Any] = {"stderr_rel": [], "correlation": [], "unidentifiable": {}, "depends": {}}
    fr = None
    if params:
        ev.model(fit_rows[0], ev.texts(x0))  # a bad call fails here, naming its row
        fr = fit(ev, fit_rows, x0, loss=loss, f_scale=f_scale, diff_step=diff_step, max_nfev=max_nfev)
        texts = fr.texts
        fitted = {r.id for r in fit_rows}
        info = identifiability(params, fr.jac, [r.id for r in fit_rows])
    rows = evaluate_rows(ev, ds.rows, texts, fitted, tolerance)
    by_id = {r["id"]: r for r in rows}
    fold_out = []
    if params:
        for label, held in folds(fit_rows, cv_by):
            held_ids = {r.id for r in held}
            train = [r for r in fit_rows if r.id not in held_ids]
            entry: dict[str, Any] = {"left_out": label, "fit_rows": [r.id for r in train],
                                     "predicted_rows": sorted(held_ids, key=[r.id for r in held].index)}
            if not train:
                entry["note"] = "no rows left to fit on"
                fold_out.append(entry)
                continue
            # Each fold starts where the whole fit started, not at its result, and a parameter its rows cannot
            # pin down (by the identifiability check on the whole fit's Jacobian, restricted to the fold's
            # rows: no row depends on it, or it trades off with another) stays at its start: what only the
            # left-out rows determine is then predicted from the prior, not from the value those rows gave
            # it, nor from a wander along a valley the fold's rows leave flat.
            ids = [r.id for r in fit_rows]
            J = np.asarray(fr.jac, dtype=float)[[ids.index(r.id) for r in train]]
            loose = identifiability(params, J, [r.id for r in train])["unidentifiable"]
            hold = [j for j, f in enumerate(params) if f.path in loose]
            f2 = fit(ev, train, x0, loss=loss, f_scale=f_scale, diff_step=diff_step, max_nfev=max_nfev, hold=hold)
            if hold:
                entry["held_at_start"] = [params[j].path for j in hold]
            entry["values"] = f2.texts
            for r in held:
                by_id[r.id]["cv_error"] = ev.model(r, f2.texts) / r.measured - 1.0
                by_id[r.id]["cv_fold"] = label
            fold_out.append(entry)
    for row in rows:  # a prediction is out of sample already: its cross-validated error is its error
        if row["role"] == "predicted":
            row["cv_error"], row["cv_fold"] = row["error"], "prediction"
    result["free"] = []
    for j, f in enumerate(params):
        result["free"].append({
            "path": f.path, "bounds": [f.text(f.lo, 6), f.text(f.hi, 6)], "scale": "log" if f.log else "linear",
            "unit": f.unit, "type": f.kind, "start": start_texts.get(f.path, ""), "value": texts.get(f.path),
            "at_bound": bool(fr is not None and (fr.x[j] <= 1e-6 or fr.x[j] >= 1 - 1e-6)),
            "stderr_rel": info["stderr_rel"][j] if info["stderr_rel"] else None,
            "fitted_on": info["depends"].get(f.path, []),
            "identifiable": f.path not in info["unidentifiable"],
            "why": info["unidentifiable"].get(f.path, ""),
        })
    result["misfit"] = residual_trends(rows, {r.id: r.params for r in ds.rows},
                                       {r.id: r.function for r in ds.rows}) if params else []
    result["correlation"] = info["correlation"]
    result["unidentifiable"] = dict(info["unidentifiable"])
    result["fit"] = ({"cost": fr.cost, "nfev": fr.nfev, "message": fr.message} if fr is not None else None)
    depends: dict[str, list[str]] = {}
    for f in params:
        for rid in info["depends"].get(f.path, []):
            depends.setdefault(rid, []).append(f.path)
    result["summary"] = judge(rows, {rid: depends.get(rid, []) for rid in fitted}, DEFAULT_TOLERANCE)
    # as many free parameters as rows fitted on: the fit reproduces its rows whatever the model's structure
    result["determined"] = (None if not params else "exactly" if len(params) >= len(fit_rows) else "over")
    result["rows"] = rows
    result["folds"] = fold_out
    result["fitted_rows"] = sorted(fitted, key=[r.id for r in ds.rows].index)
    result["overlay_values"] = {**base, **texts}
    result["model_calls"] = ev.calls
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def _default_config(ds: Dataset, reg: Registry) -> Any:
    cfgs = {r.config if r.config is not None else reg.get(r.function).config for r in ds.rows}
    return next(iter(cfgs)) if len(cfgs) == 1 else None


def _base_for(ds: Dataset, config: Any, reg: Registry) -> str | None:
    """The config an overlay includes: --config, else the one config every row runs on (None: several)."""
    if config is not None:
        return str(config)
    cfg = _default_config(ds, reg)
    return None if cfg is None else str(cfg)


def check(overlay: str | Path, data: str | Path | Dataset, *, config: Any = None,
          sets: Mapping[str, Any] | Iterable[str] | None = None, seed: int | None = None,
          tolerance: float | None = None, registry: Registry | None = None, command: str = "") -> dict[str, Any]:
    """Recompute every row's error with ``overlay`` applied (its values as config overrides); nothing is refitted.
    Rows the overlay was fitted on are judged as fitted, the others as predictions. A row whose function raises
    is reported (``within`` false, ``model`` and ``error`` None, the error text in ``failure``; its id in
    ``outside`` and ``failed``) and the other rows still run."""
    t0 = time.perf_counter()
    reg = registry or REGISTRY
    ov = read_overlay(overlay)
    ds = data if isinstance(data, Dataset) else load_data(data, reg)
    values = {**ov["values"], **_sets(sets)}
    meta = ov["meta"]
    cfg = config if config is not None else meta.get("config")
    ev = Evaluator([], config=cfg, sets=values, seed=int(seed if seed is not None else meta.get("seed", 1)),
                   registry=reg)
    # The rows the config was fitted on: those its values declare beside them (kernbench.provenance), and
    # those an overlay written by `kernbench calibrate` names in its metadata.
    declared = provenance_fits(overlay, cfg, ds, ov["records"])
    fitted = set(meta.get("fitted_rows", [])) | set(declared)
    # a row whose function raises is recorded (within: false, its error text in `failure`), not fatal
    rows = evaluate_rows(ev, ds.rows, {}, fitted, tolerance, keep_going=True)
    summary = judge(rows, declared, DEFAULT_TOLERANCE)
    bad = [r for r in rows if not r["within"]]
    return {"kind": "check", "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "overlay": str(overlay), "data": ds.path, "config": None if cfg is None else str(cfg), "values": values,
            "command": command, "rows": rows, "outside": [r["id"] for r in bad],
            "failed": [r["id"] for r in rows if r["failure"] is not None], "ok": not bad, "summary": summary,
            "seconds": round(time.perf_counter() - t0, 3)}

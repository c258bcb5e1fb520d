"""Misfit diagnosis: when the fitted rows' errors follow a call parameter, the model's structure cannot fit the
data, whatever the free parameters' values.

A least-squares fit leaves errors that look like noise when the model has the data's shape. When it lacks a
mechanism (a term in the size, a regime), the errors line up with the call parameter that drives the missing
term instead: the model too slow at one end and too fast at the other (a *trend*), or too fast at mid sizes and
too slow at both ends (a *bow*). "Identifiable: yes" says the parameters are pinned down; it does not say the
model is right. For each function and each numeric call parameter of at least ``MIN_ROWS`` fitted rows, taking at
least ``MIN_VALUES`` distinct values, ``residual_trends`` tests both shapes on the errors, against the parameter on
a log axis when it spans a decade or more:

- trend: Spearman's rank correlation |rho| >= ``STRENGTH``;
- a smooth shape (a bow, a wave): a polynomial of degree 2 or 3 explains at least ``STRENGTH`` of the errors'
  variance, adjusted for its number of terms (so noise on a few rows does not pass), where a line does not;

each only when the errors spread by at least ``MIN_SPREAD`` (a fit within noise of the data shows no misfit).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import spearmanr

MIN_ROWS = 4
MIN_VALUES = 3
STRENGTH = 0.8
MIN_SPREAD = 0.02


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    try:
        x = float(str(v))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def adjusted_r2(x: np.ndarray, e: np.ndarray, degree: int) -> float:
    """The share of the errors' variance a polynomial of ``degree`` explains, adjusted for its terms (so that a
    curve through a few noisy points does not pass for a shape): 1 - (1 - R^2)(n - 1)/(n - degree - 1)."""
    n = len(e)
    coef = np.polyfit(x, e, degree)
    resid = e - np.polyval(coef, x)
    total = float(((e - e.mean()) ** 2).sum())
    if total <= 0 or n <= degree + 1:
        return 0.0
    r2 = 1.0 - float((resid ** 2).sum()) / total
    return 1.0 - (1.0 - r2) * (n - 1) / (n - degree - 1)


def _smooth(x: np.ndarray, e: np.ndarray, distinct: int) -> tuple[int, float] | None:
    """(degree, adjusted R^2) of the lowest-degree polynomial (2 or 3, with at least 3 rows to spare) that explains
    the errors to STRENGTH, when a line does not (that is a trend); None when neither does."""
    if adjusted_r2(x, e, 1) >= STRENGTH:
        return None
    for degree in (2, 3):
        if len(e) >= degree + 3 and distinct >= degree + 2 and (adj := adjusted_r2(x, e, degree)) >= STRENGTH:
            return degree, adj
    return None


def residual_trends(rows: Sequence[Mapping[str, Any]], params: Mapping[str, Mapping[str, Any]],
                    functions: Mapping[str, str]) -> list[dict[str, Any]]:
    """The misfits of a fit: ``rows`` are the result's rows (``id``, ``role``, ``error``), ``params`` each row id's
    call parameters, ``functions`` each row id's function. One entry per (function, parameter) whose errors trend
    or bow, with the shape, its statistic, the errors' range and a sentence for the report."""
    fitted = [r for r in rows if r.get("role") == "fitted" and r.get("error") is not None]
    out: list[dict[str, Any]] = []
    for fn in sorted({functions[r["id"]] for r in fitted}):
        mine = [r for r in fitted if functions[r["id"]] == fn]
        names = sorted({k for r in mine for k in params[r["id"]]})
        for name in names:
            pts = [(_number(params[r["id"]].get(name)), float(r["error"])) for r in mine]
            pts = [(x, e) for x, e in pts if x is not None]
            distinct = len({x for x, _ in pts})
            if len(pts) < MIN_ROWS or distinct < MIN_VALUES:
                continue
            x = np.array([p[0] for p in pts])
            e = np.array([p[1] for p in pts])
            spread = float(e.max() - e.min())
            if spread < MIN_SPREAD:
                continue
            log = bool(x.min() > 0 and x.max() / x.min() >= 10)
            xs = np.log(x) if log else x
            axis = f"log {name}" if log else name
            rho = float(spearmanr(xs, e).statistic)
            entry = {"function": fn, "parameter": name, "rows": len(pts), "log_axis": log,
                     "errors": [float(e.min()), float(e.max())]}
            lo = f"{100 * e[x == x.min()].mean():+.1f} %"  # the mean error of the rows at each end
            hi = f"{100 * e[x == x.max()].mean():+.1f} %"
            if abs(rho) >= STRENGTH:
                entry.update(shape="trend", statistic=rho,
                             text=f"{fn}: the fitted rows' errors trend with {name} (Spearman rho {rho:+.2f} over "
                                  f"{len(pts)} rows on {axis}: {lo} at {name}={x.min():g}, {hi} at {name}={x.max():g})")
            else:
                shape = _smooth(xs, e, distinct)
                if shape is None:
                    continue
                degree, adj = shape
                hi_at, lo_at = x[int(np.argmax(e))], x[int(np.argmin(e))]
                entry.update(shape="bow" if degree == 2 else "wave", statistic=adj,
                             text=f"{fn}: the fitted rows' errors follow {name} (a degree-{degree} polynomial on "
                                  f"{axis} explains {100 * adj:.0f} % of them, adjusted for its terms, over "
                                  f"{len(pts)} rows: {100 * e.max():+.1f} % at {name}={hi_at:g}, "
                                  f"{100 * e.min():+.1f} % at {name}={lo_at:g})")
            entry["text"] += ("; the model's structure cannot fit these rows, whatever the free parameters: a "
                              "mechanism that depends on " + name + " is missing or wrong")
            out.append(entry)
    return out

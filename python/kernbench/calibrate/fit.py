"""Free parameters, the evaluator (memoised model calls) and the robust fit with its identifiability check.

A free parameter is a config path with bounds in the key's own units (``k200.compute.fc_overhead=1 us..50 us``).
The optimiser works on x in [0, 1] per parameter: log-scaled between the bounds when the lower bound is > 0,
linear otherwise. Each evaluation turns x into config texts (``"12.3456789 us"``, the way ``--set`` works),
builds the machine with them and runs the rows' functions; results are memoised per (row, texts).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from kernbench._core import KernbenchError
from kernbench.calibrate.data import Row, convert, schema_key, unit_factor
from kernbench.calibrate.registry import REGISTRY, CalibrationError, Context, Registry, raised_at

#: The measurement noise the identifiability check assumes (relative, per row).
NOISE = 0.01
CORR_LIMIT = 0.99
SE_LIMIT = 0.5      # relative standard error at NOISE above which a parameter is "not pinned down"
_BOUND = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S.*?)?\s*$")


@dataclass
class Free:
    """One free parameter: config path, bounds (in ``unit``; '' for plain numbers), scale and type."""

    path: str
    lo: float
    hi: float
    unit: str
    kind: str            # the schema type: int, float, time, bytes, bandwidth, ...
    log: bool
    spec: str = ""

    @property
    def integer(self) -> bool:
        return self.kind in ("int", "bytes")

    def value(self, x: float) -> float:
        x = min(max(float(x), 0.0), 1.0)
        v = self.lo * (self.hi / self.lo) ** x if self.log else self.lo + x * (self.hi - self.lo)
        return float(round(v)) if self.integer and not self.unit else v

    def x_of(self, v: float) -> float:
        v = min(max(v, self.lo), self.hi)
        x = math.log(v / self.lo) / math.log(self.hi / self.lo) if self.log else (v - self.lo) / (self.hi - self.lo)
        return min(max(x, 0.0), 1.0)

    def text(self, v: float, digits: int = 10) -> str:
        """The config text of value ``v`` (in ``unit``)."""
        if self.kind == "bytes":
            return f"{int(round(convert(v, self.unit, 'B')))} B"
        if self.kind == "int":
            return str(int(round(v)))
        num = f"{v:.{digits}g}"
        return f"{num} {self.unit}" if self.unit else num

    def log_span(self) -> float:
        """d log(value) / dx at value v is log_span (log scale) or (hi - lo) / v (linear)."""
        return math.log(self.hi / self.lo) if self.log else (self.hi - self.lo)


def parse_free(spec: str) -> Free:
    """``PATH=LO..HI`` -> Free; CalibrationError for an unknown path, reversed bounds or foreign units."""
    path, sep, rng = str(spec).partition("=")
    path = path.strip()
    where = f"--free {spec}"
    if not sep or not path or ".." not in rng:
        raise CalibrationError(f"{where}: expected PATH=LO..HI, e.g. k200.compute.fc_overhead=\"1 us..50 us\"")
    key = schema_key(path)
    if key is None:
        raise CalibrationError(f"{where}: {path}: unknown config path (see `kernbench schema --markdown`)")
    kind = str(key.get("type", ""))
    if kind in ("map", "list", "string", "bool", "enum") or kind.startswith("enum"):
        raise CalibrationError(f"{where}: {path} is a {kind}, not a number; only numeric keys can be fitted")
    units = key.get("units") or []
    units = [units] if isinstance(units, str) else list(units)
    lo_t, _, hi_t = rng.partition("..")
    bounds = []
    for text in (lo_t, hi_t):
        m = _BOUND.match(text)
        if not m:
            raise CalibrationError(f"{where}: bound {text.strip()!r} is not a number"
                                   + (f" with a unit ({', '.join(units)})" if units else ""))
        bounds.append((float(m.group(1)), (m.group(2) or "").strip()))
    (lo, ulo), (hi, uhi) = bounds
    if units:
        for u in (ulo, uhi):
            if u not in units:
                raise CalibrationError(f"{where}: bound unit {u or '(none)'!r} is not one of the key's units "
                                       f"({', '.join(units)})")
        if uhi != ulo:
            try:
                hi = convert(hi, uhi, ulo)
            except ValueError:
                raise CalibrationError(f"{where}: give both bounds in one unit ({ulo} and {uhi})") from None
    elif ulo or uhi:
        raise CalibrationError(f"{where}: {path} is a plain {kind} (no unit); got {ulo or uhi!r}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise CalibrationError(f"{where}: bounds must be finite")
    if lo >= hi:
        raise CalibrationError(f"{where}: bounds reversed or empty (low {lo:g} >= high {hi:g})")
    constraint = str(key.get("constraint", ""))
    if (constraint.startswith("> 0") and lo <= 0) or (constraint.startswith(">= 0") and lo < 0):
        raise CalibrationError(f"{where}: the low bound {lo:g} breaks the key's constraint ({constraint})")
    return Free(path, lo, hi, ulo, kind, lo > 0, spec)


def current_value(free: Free, config: Any, sets: Mapping[str, str]) -> float | None:
    """The value the config (with its includes and ``sets``) gives ``free.path``, in ``free.unit``; None if unknown."""
    text = sets.get(free.path)
    if text is None:
        try:
            text = config_lookup(config, free.path)
        except Exception:
            text = None
    if text is None:
        d = schema_key(free.path) or {}
        text = d.get("default")
    if text is None:
        return None
    try:
        s = str(text).strip()
        m = _BOUND.match(s)
        if not m:
            return None
        v, u = float(m.group(1)), (m.group(2) or "").strip()
        return convert(v, u, free.unit) if free.unit and u else v
    except ValueError:
        return None


def config_lookup(config: Any, path: str) -> Any:
    """The value at the dotted ``path`` (list items by index) of the YAML config ``config`` (a name or a path),
    with its ``include:`` files merged under it (the including file's keys win)."""
    import yaml
    from pathlib import Path

    from kernbench.system import config_path

    def load(p: Path, depth: int = 0) -> Any:
        data = yaml.safe_load(p.read_text()) or {}
        inc = data.pop("include", None) if isinstance(data, dict) else None
        merged: Any = {}
        for f in ([inc] if isinstance(inc, str) else inc or []):
            if depth < 8:
                merged = _merge(merged, load(p.parent / f, depth + 1))
        return _merge(merged, data)

    node = load(Path(config_path(config)))
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    from kernbench.provenance import plain

    return plain(node)  # {value: V, fitted: ...}: the value, its provenance set aside


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _merge(out.get(k), v) if k in out else v
        return out
    return b


class Evaluator:
    """Runs rows' functions for candidate values; memoised per (row, config texts)."""

    def __init__(self, free: Sequence[Free], *, config: Any = None, sets: Mapping[str, str] | None = None,
                 seed: int = 1, registry: Registry | None = None):
        self.free = list(free)
        self.config = config
        self.sets = {str(k): str(v) for k, v in (sets or {}).items()}
        self.seed = seed
        self.registry = registry or REGISTRY
        self.cache: dict[tuple, float] = {}
        self.calls = 0

    def texts(self, x: Sequence[float], digits: int = 10) -> dict[str, str]:
        return {f.path: f.text(f.value(xi), digits) for f, xi in zip(self.free, x)}

    def model(self, row: Row, texts: Mapping[str, str]) -> float:
        key = (row.id, tuple(sorted(texts.items())))
        if key in self.cache:
            return self.cache[key]
        m = self.registry.get(row.function)
        sets = {**self.sets, **texts, **row.set}
        ctx = Context(config=self.config if self.config is not None else row.config, sets=sets, seed=self.seed,
                      default_config=m.config)
        at = f" (at {', '.join(f'{k}={v}' for k, v in texts.items())})" if texts else ""
        try:
            out = m.fn(ctx, **row.params)
        except (KernbenchError, ValueError, KeyError, IndexError, LookupError, RuntimeError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise CalibrationError(f"{row.where()}: {row.function}: {msg}{at}") from None
        except Exception as e:  # anything else a function raises (a bug, a bad parameter): named by its row too
            raise CalibrationError(f"{row.where()}: {row.function} raised {type(e).__name__}: "
                                   f"{raised_at(e, m.fn)}{e}{at}") from None
        self.calls += 1
        if isinstance(out, Mapping):
            if row.metric not in out:
                raise CalibrationError(f"{row.where()}: {row.function} gave no metric {row.metric!r} "
                                       f"(it gave: {', '.join(map(str, out))})")
            out = out[row.metric]
        try:
            v = float(out)
        except (TypeError, ValueError):
            raise CalibrationError(f"{row.where()}: {row.function} returned {out!r}, not a number") from None
        if not math.isfinite(v) or v <= 0:
            raise CalibrationError(f"{row.where()}: {row.function} {row.metric} = {v:g}{at}: the model must give a "
                                   "finite number > 0 to compare on a log scale")
        ratio = v / row.measured
        if not (math.isfinite(ratio) and ratio > 0):
            raise CalibrationError(f"{row.where()}: {row.function} {row.metric} = {v:g}{at} and the measured "
                                   f"{row.measured:g} {row.model_unit} differ by more than a float can hold")
        self.cache[key] = v
        return v

    def residuals(self, rows: Sequence[Row], x: Sequence[float]) -> np.ndarray:
        t = self.texts(x)
        return np.array([r.weight * math.log(self.model(r, t) / r.measured) for r in rows])


@dataclass
class FitResult:
    x: np.ndarray
    texts: dict[str, str]
    jac: np.ndarray          # d residual / d log(value), rows x params
    cost: float
    nfev: int
    message: str
    rows: list[str] = field(default_factory=list)


def _steps(free: Sequence[Free], diff_step: float) -> np.ndarray:
    out = []
    for f in free:
        s = diff_step
        if f.integer:  # an integer key moves by at least one unit (bytes: one byte is plenty)
            one = convert(1.0, "B", f.unit) if f.kind == "bytes" else 1.0
            s = max(s, math.log((f.lo + one) / f.lo) / f.log_span() if f.log else one / f.log_span())
        out.append(min(s, 0.25))
    return np.array(out)


def fit(ev: Evaluator, rows: Sequence[Row], x0: Sequence[float], *, loss: str = "soft_l1", f_scale: float = 0.1,
        diff_step: float = 1e-2, max_nfev: int | None = None, digits: int = 6, starts_random: int = 4,
        polish: int = 2, hold: Sequence[int] = ()) -> FitResult:
    """Robust least squares of log(model / measured) over ``rows``, then the fitted texts at ``digits``.

    ``hold``: indices of free parameters kept at ``x0`` (a cross-validation fold whose rows do not depend on
    them: they keep their start value rather than one a random start gives them)."""
    from scipy.optimize import least_squares

    free = ev.free
    x0 = np.clip(np.asarray(x0, dtype=float), 0.0, 1.0)
    if hold:
        held = sorted(set(int(i) for i in hold))
        move = [j for j in range(len(free)) if j not in held]
        if not move:
            texts = ev.texts(x0, digits)
            return FitResult(x=x0, texts=texts, jac=np.zeros((len(rows), len(free))), cost=0.0, nfev=0,
                             message="every parameter held", rows=[r.id for r in rows])
        sub = _Subspace(ev, x0, move)
        r = fit(sub, rows, x0[move], loss=loss, f_scale=f_scale, diff_step=diff_step, max_nfev=max_nfev,
                digits=digits, starts_random=starts_random, polish=polish)
        x = sub.full(r.x)
        return FitResult(x=x, texts=ev.texts(x, digits), jac=jacobian(ev, rows, x, _steps(free, diff_step)),
                         cost=r.cost, nfev=r.nfev, message=r.message, rows=r.rows)
    steps = _steps(free, diff_step)
    lb, ub = np.zeros(len(free)), np.ones(len(free))

    def cost_of(xx):
        return float(np.sum(_rho(ev.residuals(rows, xx), loss, f_scale)))

    # Starts: the given point, the centre of the box and a few seeded points; the fit runs from the best
    # `polish` of them (a simulator's cost has plateaus that trap a single local fit).
    rng = np.random.default_rng(12345)
    starts = [x0, np.full(len(free), 0.5)] + [rng.uniform(0.05, 0.95, len(free)) for _ in range(starts_random)]
    ranked = sorted(starts, key=cost_of)[:max(1, polish)]
    res = None
    for s in ranked:
        r = least_squares(lambda x: ev.residuals(rows, x), s, bounds=(lb, ub), loss=loss, f_scale=f_scale,
                          diff_step=steps, method="trf", jac="3-point", max_nfev=max_nfev or 60 * (len(free) + 1))
        if res is None or r.cost < res.cost:
            res = r
    x = res.x
    # Integer keys: the best of the neighbouring whole values (the trust region sees steps, not slopes).
    ints = [i for i, f in enumerate(free) if f.integer and not f.unit]
    if ints and len(ints) <= 4:
        import itertools

        def cost(xx):
            r = ev.residuals(rows, xx)
            return float(np.sum(_rho(r, loss, f_scale)))

        best, best_c = x.copy(), cost(x)
        opts = []
        for i in ints:
            v = free[i].value(x[i])
            opts.append(sorted({free[i].x_of(c) for c in (v - 1, v, v + 1) if free[i].lo <= c <= free[i].hi}))
        for combo in itertools.product(*opts):
            xx = x.copy()
            xx[ints] = combo
            c = cost(xx)
            if c < best_c - 1e-15:
                best, best_c = xx, c
        x = best
    texts = ev.texts(x, digits)
    # The Jacobian at the rounded point, per log(value) (forward/backward differences of the step above).
    jac = jacobian(ev, rows, x, steps)
    return FitResult(x=x, texts=texts, jac=jac, cost=float(res.cost), nfev=int(res.nfev), message=str(res.message),
                     rows=[r.id for r in rows])


class _Subspace:
    """An evaluator over some of the free parameters, the others fixed at a point (fit's ``hold``)."""

    def __init__(self, ev, x0, move):
        self.ev, self.x0, self.move = ev, np.asarray(x0, dtype=float), list(move)
        self.free = [ev.free[j] for j in self.move]

    def full(self, x):
        out = self.x0.copy()
        out[self.move] = x
        return out

    def residuals(self, rows, x):
        return self.ev.residuals(rows, self.full(x))

    def texts(self, x, digits=6):
        return self.ev.texts(self.full(x), digits)


def _rho(r: np.ndarray, loss: str, f_scale: float) -> np.ndarray:
    z = (r / f_scale) ** 2
    if loss == "linear":
        return z
    if loss == "soft_l1":
        return 2 * (np.sqrt(1 + z) - 1)
    if loss == "huber":
        return np.where(z <= 1, z, 2 * np.sqrt(z) - 1)
    if loss == "cauchy":
        return np.log1p(z)
    if loss == "arctan":
        return np.arctan(z)
    raise ValueError(f"unknown loss {loss!r}")


def jacobian(ev: Evaluator, rows: Sequence[Row], x: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """d (weighted log error) / d log(parameter value) at x: central differences over +-step (one-sided at a
    bound), so a simulator's small steps (poll periods, whole picoseconds) average out over the step."""
    J = np.zeros((len(rows), len(ev.free)))
    for j, f in enumerate(ev.free):
        lo_x, hi_x = max(x[j] - steps[j], 0.0), min(x[j] + steps[j], 1.0)
        xa, xb = np.array(x, dtype=float), np.array(x, dtype=float)
        xa[j], xb[j] = lo_x, hi_x
        va, vb = f.value(xa[j]), f.value(xb[j])
        if vb == va or va <= 0:
            continue
        J[:, j] = (ev.residuals(rows, xb) - ev.residuals(rows, xa)) / math.log(vb / va)
    return J


def identifiability(free: Sequence[Free], jac: np.ndarray, rows: Sequence[str]) -> dict[str, Any]:
    """Standard errors (relative, for NOISE relative error per row), correlations, and which parameters the
    rows cannot pin down (no row depends on it, |corr| > CORR_LIMIT, near-singular, or large error)."""
    n = len(free)
    out: dict[str, Any] = {"noise": NOISE, "stderr_rel": [None] * n, "correlation": np.eye(n).tolist(),
                           "unidentifiable": {}, "depends": {}}
    if n == 0:
        return out
    J = np.asarray(jac, dtype=float)
    for j, f in enumerate(free):
        out["depends"][f.path] = [rows[i] for i in range(len(rows)) if abs(J[i, j]) > 1e-6]
    JTJ = J.T @ J
    scale = np.sqrt(np.diag(JTJ))
    why: dict[str, str] = {}
    for j, f in enumerate(free):
        if scale[j] < 1e-9:
            why[f.path] = "no fitted row depends on it"
    ok = scale > 1e-9
    cov = np.full((n, n), np.nan)
    if ok.any():
        idx = np.flatnonzero(ok)
        A = JTJ[np.ix_(idx, idx)] / np.outer(scale[idx], scale[idx])
        w, V = np.linalg.eigh(A)
        cond = w.max() / max(w.min(), 1e-300)
        Ainv = np.linalg.pinv(A, rcond=1e-10)
        cov[np.ix_(idx, idx)] = NOISE ** 2 * Ainv / np.outer(scale[idx], scale[idx])
        if cond > 1e8:  # the directions of the near-null eigenvectors
            for k in np.flatnonzero(w < w.max() * 1e-8):
                for i in idx[np.abs(V[:, k]) > 0.1]:
                    why.setdefault(free[i].path, "near-singular: the rows constrain only a combination of it "
                                                 "with " + ", ".join(free[m].path for m in idx[np.abs(V[:, k]) > 0.1]
                                                                      if m != i))
    d = np.sqrt(np.abs(np.diag(cov)))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(d, d)
    corr = np.where(np.isfinite(corr), corr, 0.0)
    np.fill_diagonal(corr, 1.0)
    for j, f in enumerate(free):
        se = float(d[j]) if np.isfinite(d[j]) else None
        out["stderr_rel"][j] = se
        if f.path in why:
            continue
        for m in range(n):
            if m != j and abs(corr[j, m]) > CORR_LIMIT:
                why[f.path] = f"|correlation| with {free[m].path} = {abs(corr[j, m]):.3f} > {CORR_LIMIT}"
                break
        else:
            if se is not None and se > SE_LIMIT:
                why[f.path] = (f"a {NOISE:.0%} change in the measurements moves it by {se:.0%} (> {SE_LIMIT:.0%})")
    out["correlation"] = corr.tolist()
    out["unidentifiable"] = why
    return out


def folds(rows: Sequence[Row], by: str) -> list[tuple[str, list[Row]]]:
    """The held-out sets of cross-validation over the fitted rows: by group, by row, or by a parameter's values."""
    if by in ("none", ""):
        return []
    if by == "row":
        return [(f"row {r.id}", [r]) for r in rows]
    if by == "group":
        keys = []
        for r in rows:
            if r.group not in keys:
                keys.append(r.group)
        return [(f"group {g}", [r for r in rows if r.group == g]) for g in keys]
    values: list[Any] = []
    for r in rows:
        v = r.param(by)
        if v is not None and v not in values:
            values.append(v)
    return [(f"{by}={v}", [r for r in rows if r.param(by) == v]) for v in values]

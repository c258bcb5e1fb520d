"""Measurement functions: the model calls a measured row names, registered by name.

    from kernbench.calibrate import measurement

    @measurement("k200.gemm", metrics={"gflops": "GFLOPS", "time": "us"}, doc="one xdnn fc GEMM")
    def gemm(ctx, m: int, n: int, k: int, precision: str = "fp32", ncluster: int = 0):
        r = k200.gemm(ctx.load(), m, n, k, precision, ncluster=ncluster)
        return {"gflops": r.gflops, "time": r.elapsed_s * 1e6}

A function takes a ``Context`` (``ctx.load()`` builds the machine with the
calibration's config, its ``--set`` overrides, the row's own ``set`` and the
candidate values of the free parameters) and the row's parameters, and
returns one number (in ``unit``) or a dict metric -> number (in
``metrics[metric]``). The parameters are typed from the signature's
annotations or defaults; an unknown one is an error naming the row.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from kernbench._core import ConfigError
from kernbench.overrides import parse_bool
from kernbench.units import UNITS, parse_size, split_quantity

__all__ = ["CalibrationError", "Context", "Measurement", "Registry", "REGISTRY", "measurement", "load_functions",
           "raised_at"]


class CalibrationError(ConfigError):
    """Bad calibration input (data file, free parameter, function): names the file, the row and its line."""


@dataclass
class Context:
    """What a measurement function may use: the machine of this evaluation and its settings.

    ``config``: the config file (None: the function's own default); ``sets``: config overrides as
    text (the calibration's --set, the candidate values, then the row's own ``set``); ``seed``.
    """

    config: Any
    sets: dict[str, str]
    seed: int = 1
    default_config: Any = None

    @property
    def config_path(self) -> Any:
        return self.config if self.config is not None else self.default_config

    def load(self, *, set: Mapping[str, Any] | None = None, seed: int | None = None):
        """A fresh kernbench.System: the config with every override of this evaluation (``set`` on top)."""
        from kernbench.system import System

        sets = dict(self.sets)
        sets.update({k: str(v) for k, v in (set or {}).items()})
        return System.load(self.config_path, set=sets, seed=self.seed if seed is None else seed)


@dataclass
class Measurement:
    """A registered measurement function: name, metrics (metric -> unit), default metric and config."""

    name: str
    fn: Callable[..., Any]
    metrics: dict[str, str]
    default_metric: str
    doc: str = ""
    config: Any = None
    metric_unit: Callable[[str], str | None] | None = None
    params: dict[str, inspect.Parameter] = field(default_factory=dict)
    source: str = ""

    def unit_of(self, metric: str) -> str | None:
        if metric in self.metrics:
            return self.metrics[metric]
        return self.metric_unit(metric) if self.metric_unit is not None else None

    def typed_params(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The row's parameters typed for the function; ValueError names the bad one."""
        out: dict[str, Any] = {}
        var_kw = any(p.kind is p.VAR_KEYWORD for p in self.params.values())
        for name, value in raw.items():
            p = self.params.get(name)
            if p is None or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                if not var_kw:
                    known = ", ".join(n for n, q in self.params.items() if q.kind not in (q.VAR_KEYWORD,
                                                                                        q.VAR_POSITIONAL))
                    raise ValueError(f"{self.name} has no parameter {name!r} (known: {known or 'none'})")
                out[name] = value
                continue
            out[name] = _convert(value, p, name)
        for name, p in self.params.items():
            if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name not in out:
                raise ValueError(f"{self.name}: parameter {name!r} is required")
        return out


def _convert(value: Any, p: inspect.Parameter, name: str) -> Any:
    ann = p.annotation
    if isinstance(ann, str):
        ann = {"int": int, "float": float, "str": str, "bool": bool}.get(ann.split("|")[0].strip(), None)
    if ann in (None, p.empty):
        ann = type(p.default) if p.default not in (p.empty, None) else None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"parameter {name}={value!r}: not a finite number")
    try:
        if ann is bool:
            return parse_bool(value)
        if ann is int:
            if isinstance(value, bool):
                raise ValueError(f"expected an integer, got {value!r}")
            if isinstance(value, int):
                return value
            q = split_quantity(str(value))  # a size such as 64 MiB: read by the config's parser
            if q is not None and UNITS.get(q[1], ("",))[0] == "B":
                return parse_size(str(value))
            x = float(value)
            if not x.is_integer():
                raise ValueError(f"expected an integer, got {value!r}")
            return int(x)
        if ann is float:
            x = float(value)
            if not math.isfinite(x):
                raise ValueError(f"not a finite number: {value!r}")
            return x
        if ann is str:
            return str(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"parameter {name}={value!r}: {e}") from None
    return value


def raised_at(e: BaseException, fn: Any) -> str:
    """``in FILE:LINE, FUNC: ``: the last frame of the traceback in the function's own file (else the last)."""
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return ""
    own = getattr(getattr(fn, "__code__", None), "co_filename", None)
    mine = [f for f in frames if f.filename == own]
    f = (mine or frames)[-1]
    return f"in {f.filename}:{f.lineno}, {f.name}: "


class Registry:
    """Name -> Measurement. ``REGISTRY`` is the default one (the built-ins and ``--functions`` files).

    This module imports no measurement function: the package (``kernbench.calibrate``, which importing this
    module runs first) imports the built-in modules, functions and gpu_functions, which register into
    ``REGISTRY``."""

    def __init__(self) -> None:
        self._items: dict[str, Measurement] = {}

    def register(self, m: Measurement, *, replace: bool = False) -> Measurement:
        old = self._items.get(m.name)
        if old is not None and not replace and old.fn is not m.fn and old.source != m.source:
            raise CalibrationError(f"measurement function {m.name!r} is already registered (by {old.source}); "
                                   "give another name or replace=True")
        self._items[m.name] = m
        return m

    def get(self, name: str) -> Measurement:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown measurement function {name!r} (known: {', '.join(sorted(self._items))})") \
                from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items


REGISTRY = Registry()


def measurement(name: str, *, unit: str | None = None, metrics: Mapping[str, str] | None = None,
                metric: str | None = None, doc: str = "", config: Any = None,
                metric_unit: Callable[[str], str | None] | None = None, registry: Registry | None = None,
                replace: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx, **params)`` as the measurement function ``name``.

    ``unit``: the unit of a function that returns one number (its metric is called ``value``);
    ``metrics``: metric -> unit for a function that returns a dict; ``metric``: the metric a row that
    names none reads (default: the first); ``config``: the machine config the function runs on when
    the calibration gives none (e.g. ``"k200.yaml"``); ``metric_unit``: unit of a metric not in
    ``metrics`` (None: unknown).
    """
    if (unit is None) == (metrics is None):
        raise ValueError(f"measurement {name!r}: give unit= (one number) or metrics= (a dict), not both")
    mets = {"value": unit} if unit is not None else dict(metrics or {})
    if not mets and metric_unit is None:
        raise ValueError(f"measurement {name!r}: no metrics")
    default = metric or next(iter(mets), "value")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        params = dict(list(sig.parameters.items())[1:])  # the first is ctx
        src = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
        (registry or REGISTRY).register(Measurement(name, fn, mets, default, doc or (fn.__doc__ or "").strip(),
                                                    config, metric_unit, params, src), replace=replace)
        return fn

    return deco


def load_functions(path: str | Path) -> None:
    """Import a Python file that registers measurement functions (``--functions FILE``)."""
    p = Path(path)
    if not p.is_file():
        raise CalibrationError(f"--functions {p}: no such file")
    mod_name = f"kernbench_calibrate_user_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise CalibrationError(f"--functions {p}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except ConfigError:
        raise
    except SystemExit as e:  # the file ends the process (sys.exit, raise SystemExit(0)): its functions never load
        sys.modules.pop(mod_name, None)
        raise CalibrationError(f"--functions {p}: the file calls SystemExit({e.code!r}) while it is imported; a "
                               "functions file only registers @measurement functions") from None
    except Exception as e:
        sys.modules.pop(mod_name, None)
        raise CalibrationError(f"--functions {p}: the file does not import: {type(e).__name__}: {e}") from None

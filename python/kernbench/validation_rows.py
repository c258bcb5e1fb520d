"""The rows of the validation report: the relative error, the verdict (ok | known miss | outside | magnitude |
error), the reference's text and one row's record (kernbench.validation builds the report from them; the GPU
target's rows in kernbench.validation_gpu use them too). A *known miss* meets a tolerance of its own that is
wider than its status' bar (kernbench.references.TOLERANCE: 5 % fitted, 20 % predicted) and misses the bar:
it is reported as a miss, never as a pass."""

from __future__ import annotations

import math
from typing import Any

from kernbench.references import TOLERANCE

__all__ = ["STATUSES", "relative_error", "verdict", "reference_text", "make_row", "number_text"]

STATUSES = ("fitted", "predicted", "magnitude", "closed form")


def relative_error(model: float, reference: float) -> float:
    """(model - reference) / reference; a zero reference is refused by name."""
    if reference == 0:
        raise ValueError("relative error against a zero reference is undefined")
    return (model - reference) / reference


def verdict(model: float | None, value: Any, status: str, tolerance: float | None) -> str:
    """ok | known miss | outside | magnitude | error for one row (see the module docstring)."""
    if model is None or (isinstance(model, float) and not math.isfinite(model)):
        return "error"
    if status == "magnitude":
        return "magnitude"
    if isinstance(value, tuple) and value and value[0] == "<":
        return "ok" if model < float(value[1]) else "outside"
    if isinstance(value, tuple):
        return "ok" if float(value[0]) <= model <= float(value[1]) else "outside"
    err = abs(relative_error(model, float(value)))
    if err > (tolerance or 0.0):
        return "outside"
    bar = TOLERANCE.get(status)
    return "known miss" if bar is not None and err > bar + 1e-12 else "ok"


def reference_text(value: Any) -> str:
    if isinstance(value, tuple) and value and value[0] == "<":
        return f"< {value[1]:g}"
    if isinstance(value, tuple):
        return f"{value[0]:g}-{value[1]:g}"
    return number_text(float(value))


def make_row(*, source: str, group: str, quantity: str, unit: str, status: str, value: Any,
             model: float | None, tolerance: float | None, note: str = "", error_text: str = "",
             fitted_on: str = "", cv_error: float | None = None) -> dict[str, Any]:
    """One report row: the figure, the model's number, the error and the verdict."""
    if isinstance(value, tuple):
        center = float(value[1]) if value[0] == "<" else 0.5 * (float(value[0]) + float(value[1]))
    else:
        center = float(value)
    err = relative_error(model, center) if model is not None and center != 0 else None
    # A range or a bound is judged by inclusion, not by a tolerance around its midpoint.
    check = "point"
    if isinstance(value, tuple):
        check = "bound" if value[0] == "<" else "range"
    return {"source": source, "group": group, "quantity": quantity, "unit": unit, "status": status,
            "reference": center, "reference_text": reference_text(value), "check": check, "model": model,
            "error": err, "tolerance": tolerance if check == "point" else None,
            "verdict": verdict(model, value, status, tolerance),
            "fitted_on": fitted_on, "cv_error": cv_error,
            "note": note if not error_text else (note + "; " if note else "") + error_text}


def number_text(v: float | None) -> str:
    """A number for the report: four significant digits, no exponent between 0.01 and 1e7."""
    if v is None:
        return "--"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e7 or a < 1e-2:
        return f"{v:.4g}"
    if a >= 1000:
        return f"{v:.0f}"
    return f"{v:.4g}"

"""A --functions file whose measurement function raises TypeError (the bad-input corpus, issue 31)."""
from kernbench.calibrate import measurement


@measurement("r3.type_error", unit="us", doc="adds a text to a number: TypeError")
def type_error(ctx, n: int):
    return "x" + n


@measurement("r3.bad_metric_unit", metrics={"t": "us"}, metric_unit=lambda m: m + 1, doc="metric_unit raises")
def bad_metric_unit(ctx, n: int):
    return {"t": 1.0}

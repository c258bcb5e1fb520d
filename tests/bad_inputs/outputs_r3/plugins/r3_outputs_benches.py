"""Plugin benches of the round-3 outputs corpus (tests/bad_inputs/cases_r3_outputs.yaml, test_r3_outputs.py).

r3-nan-metric returns a NaN metric (bench.bad=nan), +inf (inf) or a finite one (none);
r3-slow sleeps bench.seconds per point and writes a file each time (the SIGKILL test's sweep).
"""

import math
import time

from kernbench import bench


@bench(name="r3-nan-metric", description="one row whose metric is NaN, inf or finite (bench.bad)",
       params={"bad": "nan", "n": 1})
def nan_metric(ctx):
    value = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "none": 1.5}[ctx.params["bad"]]
    rows = [{"n": ctx.params["n"], "latency_ns": value, "ok_ns": 2.0}]
    ctx.write_csv("extra.csv", [{"a": 1}])
    return {"results": rows}


@bench(name="r3-slow", description="sleeps bench.seconds, then writes one row (and a file)",
       params={"seconds": 1.0, "i": 0})
def slow(ctx):
    time.sleep(float(ctx.params["seconds"]))
    ctx.write_csv("tick.csv", [{"i": ctx.params["i"], "t": time.time()}])
    return {"results": [{"i": ctx.params["i"], "slept_s": float(ctx.params["seconds"])}]}

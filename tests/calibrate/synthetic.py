"""Synthetic measurement functions for tests/python/test_calibrate.py (loaded with --functions).

They read the free parameters straight from the evaluation's config texts (no machine is built), so the
true values behind a data set are known exactly:

  test.linear n   -> a * n + b                [us], a = k200.launch.queue_submit, b = k200.launch.wait_overhead
  test.product n  -> p * q * n                [us], p = k200.driver.segment_overhead, q = k200.driver.edma_setup (us)
"""

from kernbench._core import parse_time
from kernbench.calibrate import measurement

A, B = "k200.launch.queue_submit", "k200.launch.wait_overhead"
P, Q = "k200.driver.segment_overhead", "k200.driver.edma_setup"
DEFAULTS = {A: "3 ns", B: "2 us", P: "0.2 us", Q: "1 us"}


def us(ctx, path):
    return parse_time(ctx.sets.get(path, DEFAULTS[path])) / 1e6


@measurement("test.linear", unit="us", doc="a * n + b")
def linear(ctx, n: int):
    return us(ctx, A) * n + us(ctx, B)


@measurement("test.product", unit="us", doc="p * q * n: only the product is identifiable")
def product(ctx, n: int):
    return us(ctx, P) * us(ctx, Q) * n

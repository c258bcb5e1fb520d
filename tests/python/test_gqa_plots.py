"""The GQA bench's plots hide nothing: identical series are drawn once and labelled together, and zeros on a log
axis are named instead of drawn at an arbitrary floor (benches/milestone_1h_gqa.py, plot_groups)."""
from __future__ import annotations

import importlib


def bench_module():
    # Under the name the registry loads it by: a second copy under another name would register the bench twice.
    return importlib.import_module("kernbench.benches.milestone_1h_gqa")


def test_identical_series_are_one_line_labelled_together():
    """Cases 1 and 3 with the same points become one line "case 1 = case 3"; case 2 keeps its own; nothing is
    lost on a linear axis."""
    lines, zeros = bench_module().plot_groups({1: ([1, 2], [5.0, 6.0]), 2: ([1, 2], [5.0, 7.0]),
                                               3: ([1, 2], [5.0, 6.0])}, log=False)
    assert lines == [("case 1 = case 3", (1, 2), (5.0, 6.0)), ("case 2", (1, 2), (5.0, 7.0))]
    assert zeros == []


def test_zeros_on_a_log_axis_are_named_not_drawn():
    """On a log axis a zero point is left out of its line and its case is returned to be named; on a linear axis
    the zero is drawn."""
    mod = bench_module()
    series = {1: ([1, 2, 4], [0.0, 3.0, 4.0]), 2: ([1, 2, 4], [0.0, 0.0, 0.0]), 4: ([1, 2, 4], [1.0, 2.0, 3.0])}
    lines, zeros = mod.plot_groups(series, log=True)
    assert zeros == [1, 2]
    assert ("case 1", (2, 4), (3.0, 4.0)) in lines and ("case 2", (), ()) in lines
    assert ("case 4", (1, 2, 4), (1.0, 2.0, 3.0)) in lines
    lines, zeros = mod.plot_groups(series, log=False)
    assert zeros == [] and ("case 2", (1, 2, 4), (0.0, 0.0, 0.0)) in lines

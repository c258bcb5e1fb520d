"""Time read off a lowered program's run, per span: the active time of a set of spans, and a cut of the run
into parts that add up to it (``Lowered.intervals``, ``Lowered.partition``).

A step of a model's training is 10**5 to 10**6 program ops; these read the run's op columns as numpy arrays
(``OpTimes``, built once per run and Lowered) instead of op by op. They give the same figures as a loop over
the ops would, to the last bit: lengths are integer ps, and a part's float total is the left-to-right sum of
the same per-interval shares (``numpy.cumsum`` adds in order, as the loop did).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["OpTimes", "op_times", "union_length", "intervals", "merged", "extent", "partition"]


class OpTimes:
    """A run's op start/end (ps) and, per op, the span that holds it (-1: none) and whether it is a GPU kernel's
    host launch. Ops on the lowering's stand-in PEs (``Lowered.stand_ins``: tensor-parallel ranks not lowered,
    present only in their group's collectives) read as not run (start -1): they stand for no time of the step."""

    def __init__(self, lo, res):
        t = res._core.ops()
        self.start = np.asarray(t["start_ps"], dtype=np.int64)
        self.end = np.asarray(t["end_ps"], dtype=np.int64)
        n = len(self.start)
        first = np.fromiter((s.first for s in lo.spans), dtype=np.int64, count=len(lo.spans))
        end = np.fromiter((s.end for s in lo.spans), dtype=np.int64, count=len(lo.spans))
        lens = np.maximum(end - first, 0)
        self.span_first, self.span_len = first, lens
        if lo.stand_ins:
            ids = np.fromiter((lo.program._id(pe) for pe in lo.stand_ins), dtype=np.int64)
            agent = np.asarray(lo.program._core.op_columns()["agent"], dtype=np.int64)
            self.start = np.where(np.isin(agent[:n], ids), -1, self.start)
        self.launch = np.zeros(n, dtype=bool)
        if lo.launches:
            self.launch[np.fromiter(lo.launches, dtype=np.int64, count=len(lo.launches))] = True

    def ops_of(self, chosen: np.ndarray) -> np.ndarray:
        """Op ids of the chosen spans (a bool mask over ``lo.spans``), span by span in order."""
        first, lens = self.span_first[chosen], self.span_len[chosen]
        total = int(lens.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        starts = np.repeat(first - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
        return starts + np.arange(total, dtype=np.int64)


def op_times(lo, res) -> OpTimes:
    """The run's OpTimes for ``lo``, cached on the result (one per Lowered)."""
    cache = res.__dict__.setdefault("_op_times", {})
    key = (id(lo), len(lo.spans))
    if key not in cache:
        cache[key] = OpTimes(lo, res)
    return cache[key]


def _runs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals [a, b) merged where they touch or overlap: the runs' starts and ends, in time order."""
    if len(a) == 0:
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    reach = np.maximum.accumulate(b)
    new = np.empty(len(a), dtype=bool)
    new[0] = True
    new[1:] = a[1:] > reach[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:] - 1, len(a) - 1)
    return a[starts], reach[ends]


def union_length(a: np.ndarray, b: np.ndarray) -> int:
    """ps covered by the union of the intervals [a, b)."""
    lo, hi = _runs(a, b)
    return int((hi - lo).sum())


def _mask(lo, select: Callable) -> np.ndarray:
    return np.fromiter((bool(select(s)) for s in lo.spans), dtype=bool, count=len(lo.spans))


def intervals(lo, res, select: Callable) -> int:
    """Active time (ps) of the union of the selected spans' op intervals, host launches left out."""
    t = op_times(lo, res)
    ops = t.ops_of(_mask(lo, select))
    a, b = t.start[ops], t.end[ops]
    keep = (a >= 0) & (b > a) & ~t.launch[ops]
    return union_length(a[keep], b[keep])


def merged(lo, res, select: Callable, launches: bool = False) -> list[tuple[int, int]]:
    """The selected spans' op intervals [start, end) that ran, merged where they touch or overlap, in time order;
    a GPU kernel's host launch only with ``launches``."""
    t = op_times(lo, res)
    ops = t.ops_of(_mask(lo, select))
    a, b = t.start[ops], t.end[ops]
    keep = (a >= 0) & (b > a)
    if not launches:
        keep &= ~t.launch[ops]
    lo, hi = _runs(a[keep], b[keep])
    return list(zip(lo.tolist(), hi.tolist()))


def extent(lo, res, select: Callable) -> int:
    """From the first start to the last end (ps) of the selected spans' ops that ran (0 when none did)."""
    t = op_times(lo, res)
    ops = t.ops_of(_mask(lo, select))
    ran = t.start[ops] >= 0
    if not ran.any():
        return 0
    return int(t.end[ops][ran].max() - t.start[ops][ran].min())


def partition(lo, res, label: Callable, t0: int, t1: int, comm: Callable) -> dict[str, float]:
    """[t0, t1) cut into parts that add up to t1 - t0 (Lowered.partition's doc)."""
    t = op_times(lo, res)
    names: list[str] = ["exposed_communication", "launch"]
    index = {n: i for i, n in enumerate(names)}
    key = np.full(len(lo.spans), -1, dtype=np.int64)
    for j, s in enumerate(lo.spans):
        name = label(s)
        if name is None:
            continue
        k = "exposed_communication" if comm(s) else name
        if k not in index:
            index[k] = len(names)
            names.append(k)
        key[j] = index[k]
    chosen = key >= 0
    ops = t.ops_of(chosen)
    lab = np.repeat(key[chosen], t.span_len[chosen])
    a, b = t.start[ops], t.end[ops]
    lab = np.where(t.launch[ops], 1, lab)
    keep = (a >= 0) & (b > a)
    a, b, lab = np.maximum(a[keep], t0), np.minimum(b[keep], t1), lab[keep]
    keep = b > a
    a, b, lab = a[keep], b[keep], lab[keep]
    L = len(names)
    out = [0.0] * L
    if len(a) == 0:
        return {"idle": float(t1 - t0)}
    # events (time, -1 before +1, label), as a sort of (time, sign, label) tuples orders them
    time = np.concatenate((a, b))
    sign = np.concatenate((np.ones(len(a), dtype=np.int64), -np.ones(len(b), dtype=np.int64)))
    labs = np.concatenate((lab, lab))
    order = np.lexsort((labs, sign, time))
    time, sign, labs = time[order], sign[order], labs[order]
    delta = np.zeros((len(time), L), dtype=np.int32)
    delta[np.arange(len(time)), labs] = sign
    active = np.cumsum(delta, axis=0) > 0           # the state after each event
    span = np.diff(np.append(time, t1))             # until the next event (0 between events at one instant)
    lead = int(time[0] - t0)                        # before the first event: nothing active
    comp = active[:, 2:]
    ncomp = comp.sum(axis=1)
    share = np.where(ncomp > 0, span / np.maximum(ncomp, 1), 0.0)
    for k in range(2, L):
        col = np.where(comp[:, k - 2], share, 0.0)
        out[k] = float(np.cumsum(col)[-1]) if len(col) else 0.0
    exposed = (ncomp == 0) & active[:, 0]
    launch = (ncomp == 0) & ~active[:, 0] & active[:, 1]
    none = (ncomp == 0) & ~active[:, 0] & ~active[:, 1]
    out[0] = float(np.cumsum(np.where(exposed, span, 0).astype(np.float64))[-1])
    out[1] = float(np.cumsum(np.where(launch, span, 0).astype(np.float64))[-1])
    idle_steps = np.concatenate(([float(lead)], np.where(none, span, 0).astype(np.float64)))
    idle = float(np.cumsum(idle_steps)[-1])
    parts = {n: v for n, v in zip(names, out) if v > 0}
    parts["idle"] = idle
    return parts

"""Time read off a lowered program's run, per span: the active time of a set of spans, and a cut of the run
into parts that add up to it (``Lowered.intervals``, ``Lowered.partition``).

A step of a model's training is 10**5 to 10**6 program ops; these read the run's op columns as numpy arrays
(``OpTimes``, built once per run and Lowered) instead of op by op. They give the same figures as a loop over
the ops would, to the last bit: lengths are integer ps, and a part's float total is the left-to-right sum of
the same per-interval shares (``numpy.cumsum`` adds in order, as the loop did).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Iterable

import numpy as np

__all__ = ["OpTimes", "op_times", "SpanColumns", "span_columns", "union_length", "intervals", "merged", "extent",
           "partition", "partition_codes"]


class OpTimes:
    """A run's op start/end (ps) and, per op, the span that holds it (-1: none) and whether it is a GPU kernel's
    host launch. Ops on the lowering's stand-in PEs (``Lowered.stand_ins``: tensor-parallel ranks not lowered,
    present only in their group's collectives) read as not run (start -1): they stand for no time of the step."""

    def __init__(self, lo, res):
        t = res._core.ops()
        self.start = np.asarray(t["start_ps"], dtype=np.int64)
        self.end = np.asarray(t["end_ps"], dtype=np.int64)
        n = len(self.start)
        first, end = _ints(lo.spans, "first"), _ints(lo.spans, "end")
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


class SpanColumns:
    """The spans' fields a step's figures select on, as arrays over ``lo.spans``: ``stage``, ``op`` (the graph op,
    -1 for none), and ``pass_`` and ``kind`` as codes into the names ``passes`` and ``kinds`` (in order of first
    appearance). A selection over 10**5 spans is then a few numpy operations, not a Python call per span."""

    def __init__(self, spans):
        self.stage, self.op = _ints(spans, "stage"), _ints(spans, "op")
        self.passes, self.pass_code = _codes(map(attrgetter("pass_"), spans), len(spans))
        self.kinds, self.kind_code = _codes(map(attrgetter("kind"), spans), len(spans))

    def pass_in(self, names) -> np.ndarray:
        """Whether each span's pass is one of ``names``."""
        return np.isin(self.pass_code, [i for i, p in enumerate(self.passes) if p in names])

    def kind_in(self, names) -> np.ndarray:
        """Whether each span's kind is one of ``names``."""
        return np.isin(self.kind_code, [i for i, k in enumerate(self.kinds) if k in names])


def _ints(spans, field: str) -> np.ndarray:
    """An integer field of every span."""
    return np.fromiter(map(attrgetter(field), spans), dtype=np.int64, count=len(spans))


def _codes(values: Iterable[str], n: int) -> tuple[list[str], np.ndarray]:
    """The ``n`` values' distinct ones in order of first appearance, and each value's index among them."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=n)
    return list(index), codes


def span_columns(lo) -> SpanColumns:
    """``lo``'s SpanColumns, cached on it (per count of spans: a lowering may append more)."""
    cache = lo.__dict__.setdefault("_span_columns", {})
    if len(lo.spans) not in cache:
        cache[len(lo.spans)] = SpanColumns(lo.spans)
    return cache[len(lo.spans)]


def _runs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals [a, b) merged where they touch or overlap: the runs' starts and ends, in time order."""
    if len(a) == 0:
        return a, b
    # By start, then end. Where no interval ends before it starts, the runs do not depend on how intervals of one
    # start are ordered (the first of them decides whether a run begins there), so one sort by start does.
    order = np.argsort(a, kind="stable") if (b >= a).all() else np.lexsort((b, a))
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


def _mask(lo, select: Callable | np.ndarray) -> np.ndarray:
    """Which spans ``select`` picks: a predicate of a Span, or already a bool array over ``lo.spans``
    (SpanColumns)."""
    if isinstance(select, np.ndarray):
        return select
    return np.fromiter((bool(select(s)) for s in lo.spans), dtype=bool, count=len(lo.spans))


def intervals(lo, res, select: Callable | np.ndarray) -> int:
    """Active time (ps) of the union of the selected spans' op intervals, host launches left out."""
    t = op_times(lo, res)
    ops = t.ops_of(_mask(lo, select))
    a, b = t.start[ops], t.end[ops]
    keep = (a >= 0) & (b > a) & ~t.launch[ops]
    return union_length(a[keep], b[keep])


def merged(lo, res, select: Callable | np.ndarray, launches: bool = False) -> list[tuple[int, int]]:
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


def extent(lo, res, select: Callable | np.ndarray) -> int:
    """From the first start to the last end (ps) of the selected spans' ops that ran (0 when none did)."""
    t = op_times(lo, res)
    ops = t.ops_of(_mask(lo, select))
    ran = t.start[ops] >= 0
    if not ran.any():
        return 0
    return int(t.end[ops][ran].max() - t.start[ops][ran].min())


def _event_order(time: np.ndarray, sign: np.ndarray, labs: np.ndarray, labels: int) -> np.ndarray:
    """The stable order of the events by (time, sign, label): ``np.lexsort((labs, sign, time))``, as one sort of a
    packed key where the times leave room for sign and label in an int64 (below 2**(62 - label bits) ps: hours)."""
    bits = max(1, int(labels - 1).bit_length())
    if len(time) == 0 or time.min() < 0 or int(time.max()) >= 1 << (62 - bits):
        return np.lexsort((labs, sign, time))
    key = (time << (bits + 1)) | ((sign > 0).astype(np.int64) << bits) | labs
    return np.argsort(key, kind="stable")


def partition(lo, res, label: Callable, t0: int, t1: int, comm: Callable) -> dict[str, float]:
    """[t0, t1) cut into parts that add up to t1 - t0 (Lowered.partition's doc)."""
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
    return _cut(op_times(lo, res), key, names, t0, t1)


def partition_codes(lo, res, codes: np.ndarray, labels: list[str], comm: np.ndarray, t0: int,
                    t1: int) -> dict[str, float]:
    """``partition`` with the spans' labels given as arrays: span j's label is ``labels[codes[j]]`` (none where
    ``codes[j]`` < 0), ``comm`` says which spans are communication. The same parts, to the last bit, as
    ``partition`` with the predicates these arrays tabulate."""
    key = np.where(comm, 0, codes + 2)  # labels after exposed_communication (0) and launch (1), as partition's
    key = np.where(codes >= 0, key, -1)
    names: list[str] = ["exposed_communication", "launch"]
    index = {n: i for i, n in enumerate(names)}
    used, first = np.unique(key[key >= 2], return_index=True)
    renumber = np.full(len(labels) + 2, -1, dtype=np.int64)
    renumber[:2] = (0, 1)
    for k in used[np.argsort(first)]:  # numbered in order of first appearance, as partition numbers them
        name = labels[k - 2]
        if name not in index:
            index[name] = len(names)
            names.append(name)
        renumber[k] = index[name]
    key = np.where(key >= 0, renumber[np.maximum(key, 0)], -1)
    return _cut(op_times(lo, res), key, names, t0, t1)


def _cut(t: OpTimes, key: np.ndarray, names: list[str], t0: int, t1: int) -> dict[str, float]:
    """[t0, t1) cut among the ops of the spans with ``key`` >= 0, span j's ops labelled ``names[key[j]]`` (0:
    exposed_communication, 1: launch, then the compute labels)."""
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
    order = _event_order(time, sign, labs, L)
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

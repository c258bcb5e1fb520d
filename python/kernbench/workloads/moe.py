"""Mixture-of-experts routing: how many tokens each expert gets, exactly, from a stated distribution or a file.

    counts = routing_counts(tokens=4096, experts=8, top_k=2)                      # uniform: 1024 each
    counts = routing_counts(4096, 8, 2, skew={"kind": "zipf", "s": 1.1}, seed=0)  # zipf over a seeded order
    counts = routing_counts(4096, 8, 2, hot={"expert": 3, "factor": 4})           # expert 3: 4x the others' share
    counts = routing_counts(4096, 8, 2, counts="counts.json")                     # a per-expert list (JSON or CSV)
    cap = capacity(4096, 8, 2, capacity_factor=1.25)                              # 1280 per expert

An MoE layer (the ``moe`` op of a workload graph, built by ``handbuilt.decoder_graph`` when its dims name
``experts``) routes each of a microbatch's ``tokens`` to ``top_k`` distinct experts: ``tokens x top_k``
assignments. ``routing_counts`` turns a distribution into whole per-expert counts that sum to exactly
``tokens x top_k`` with no expert over ``tokens`` (a token picks an expert at most once):

* the weights: ``uniform`` (default) every expert 1; ``skew={"kind": "zipf", "s": s}`` the expert at
  popularity rank r (1-based) ``1 / r**s``, the ranks a permutation of the experts drawn from ``seed``;
  ``hot={"expert": e, "factor": f}`` every expert 1, expert e ``f``;
* the quotas ``tokens x top_k x w_e / sum(w)``: a quota over ``tokens`` is held at ``tokens`` and the rest
  share what is left (again, until none is over); then each expert gets its quota's floor and the units
  left go by largest remainder, ties broken by the seeded order -- so equal inputs and seed give equal
  counts, bit for bit;
* ``counts=``: a JSON list (or ``{"counts": [...]}``) or a CSV of per-expert integers (one row, or one
  per line), or a list given directly; refused, naming the file and what is wrong, when malformed, when
  its length is not ``experts``, when a count is negative or over ``tokens``, or when the counts do not
  sum to ``tokens x top_k``.

Every source rank (each data-parallel replica of an EP group; each tensor-parallel rank's token slice,
``split_counts``) routes by the same distribution. ``capacity``: with a ``capacity_factor`` an expert takes at
most ``ceil(capacity_factor x tokens x top_k / experts)`` tokens from one source (GShard's capacity per
group); the tokens past it are dropped (the lowering counts them); None is dropless (Mixtral, MegaBlocks).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

from kernbench.workloads.graph import WorkloadError, whole

__all__ = ["routing_counts", "capacity", "split_counts", "load_counts", "SKEWS"]

#: The stated distributions ``skew`` may name (``hot`` is its own argument).
SKEWS = ("uniform", "zipf")


def load_counts(path: str | Path, where: str = "moe") -> list[int]:
    """Per-expert token counts from a JSON or CSV file (module doc); WorkloadError naming the file when malformed."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise WorkloadError(f"{where}: count file {str(p)!r}: cannot read it ({e.strerror or e})") from None
    if p.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{where}: count file {str(p)!r}: not valid JSON (line {e.lineno}: {e.msg})") from None
        if isinstance(data, Mapping):
            if "counts" not in data:
                raise WorkloadError(f"{where}: count file {str(p)!r}: a JSON object needs a 'counts' list "
                                    f"(keys: {', '.join(map(str, data)) or 'none'})")
            data = data["counts"]
        if not isinstance(data, list):
            raise WorkloadError(f"{where}: count file {str(p)!r}: expected a list of per-expert token counts, "
                                f"got {type(data).__name__}")
        cells = [(f"entry {i}", v) for i, v in enumerate(data)]
    else:
        cells = []
        for r, row in enumerate(csv.reader(io.StringIO(text))):
            for c, v in enumerate(row):
                if v.strip():
                    cells.append((f"row {r + 1} column {c + 1}", v.strip()))
    out = []
    for what, v in cells:
        if isinstance(v, str):
            try:
                v = int(v)
            except ValueError:
                raise WorkloadError(f"{where}: count file {str(p)!r}: {what} = {v!r} is not a whole number") from None
        out.append(whole(v, f"{where}: count file {str(p)!r}: {what}", 0))
    if not out:
        raise WorkloadError(f"{where}: count file {str(p)!r}: no counts in it")
    return out


def _weights(experts: int, skew: Mapping[str, Any] | None, hot: Mapping[str, Any] | None, order: list[int],
             where: str) -> list[float]:
    if skew is not None and hot is not None:
        raise WorkloadError(f"{where}: give skew or hot, not both")
    if hot is not None:
        if not isinstance(hot, Mapping) or set(hot) - {"expert", "factor"} or "expert" not in hot:
            raise WorkloadError(f"{where}: hot = {hot!r}: expected {{'expert': e, 'factor': f}}")
        e = whole(hot["expert"], f"{where}: hot['expert']", 0)
        if e >= experts:
            raise WorkloadError(f"{where}: hot['expert'] = {e}: the layer has experts 0..{experts - 1}")
        f = hot.get("factor", 4)
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
            raise WorkloadError(f"{where}: hot['factor'] = {f!r}: expected a number > 0")
        return [float(f) if i == e else 1.0 for i in range(experts)]
    kind = "uniform" if skew is None else skew.get("kind") if isinstance(skew, Mapping) else None
    if kind not in SKEWS:
        raise WorkloadError(f"{where}: skew = {skew!r}: expected {{'kind': one of {', '.join(SKEWS)}, ...}}")
    if kind == "uniform":
        if set(skew or {}) - {"kind"}:
            raise WorkloadError(f"{where}: skew uniform takes no parameters, got {sorted(set(skew) - {'kind'})}")
        return [1.0] * experts
    if set(skew) - {"kind", "s"}:
        raise WorkloadError(f"{where}: skew zipf takes 's' only, got {sorted(set(skew) - {'kind', 's'})}")
    s = skew.get("s", 1.0)
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
        raise WorkloadError(f"{where}: skew['s'] = {s!r}: expected a number >= 0")
    w = [0.0] * experts
    for r, e in enumerate(order):
        w[e] = 1.0 / (r + 1) ** s
    return w


def routing_counts(tokens: int, experts: int, top_k: int, *, skew: Mapping[str, Any] | None = None,
                   hot: Mapping[str, Any] | None = None, counts: str | Path | Sequence[int] | None = None,
                   seed: int = 0, where: str = "moe") -> list[int]:
    """Whole tokens per expert, summing to ``tokens x top_k``, each at most ``tokens`` (module doc)."""
    tokens = whole(tokens, f"{where}: tokens", 1)
    experts = whole(experts, f"{where}: experts", 1)
    top_k = whole(top_k, f"{where}: top_k", 1)
    seed = whole(seed, f"{where}: seed", 0)
    if top_k > experts:
        raise WorkloadError(f"{where}: top_k = {top_k} exceeds the {experts} experts")
    total = tokens * top_k
    if counts is not None:
        if skew is not None or hot is not None:
            raise WorkloadError(f"{where}: give counts or a distribution (skew, hot), not both")
        src = f"count file {str(counts)!r}" if isinstance(counts, (str, Path)) else "counts"
        got = load_counts(counts, where) if isinstance(counts, (str, Path)) else \
            [whole(v, f"{where}: counts[{i}]", 0) for i, v in enumerate(counts)]
        if len(got) != experts:
            raise WorkloadError(f"{where}: {src}: {len(got)} counts for {experts} experts")
        over = [i for i, c in enumerate(got) if c > tokens]
        if over:
            raise WorkloadError(f"{where}: {src}: expert {over[0]} gets {got[over[0]]} tokens, more than the "
                                f"{tokens} tokens (a token picks an expert at most once)")
        if sum(got) != total:
            raise WorkloadError(f"{where}: {src}: the counts sum to {sum(got)}, not tokens x top_k = "
                                f"{tokens} x {top_k} = {total}")
        return got
    order = list(range(experts))
    random.Random(seed).shuffle(order)
    w = _weights(experts, skew, hot, order, where)
    quota = [0.0] * experts
    free, left = set(range(experts)), float(total)
    while True:  # hold quotas over `tokens` at `tokens`; the rest share what is left
        ws = sum(w[e] for e in free)
        over = [e for e in free if left * w[e] / ws > tokens]
        if not over:
            for e in free:
                quota[e] = left * w[e] / ws
            break
        for e in over:
            quota[e] = float(tokens)
            free.discard(e)
            left -= tokens
    out = [min(tokens, int(math.floor(q))) for q in quota]
    rank = {e: r for r, e in enumerate(order)}
    rest = sorted((e for e in range(experts) if out[e] < tokens), key=lambda e: (-(quota[e] - out[e]), rank[e]))
    for e in rest[:total - sum(out)]:
        out[e] += 1
    if sum(out) != total:  # cannot happen with top_k <= experts; guard the invariant the lowering relies on
        raise WorkloadError(f"{where}: routing produced {sum(out)} assignments, not {total}")
    return out


def capacity(tokens: int, experts: int, top_k: int, capacity_factor: float | None) -> int | None:
    """Tokens an expert takes from one source: ``ceil(capacity_factor x tokens x top_k / experts)``; None
    (dropless) without a factor."""
    if capacity_factor is None:
        return None
    if isinstance(capacity_factor, bool) or not isinstance(capacity_factor, (int, float)) \
            or not math.isfinite(capacity_factor) or capacity_factor <= 0:
        raise WorkloadError(f"moe: capacity_factor = {capacity_factor!r}: expected a number > 0 (None: dropless)")
    return int(math.ceil(capacity_factor * tokens * top_k / experts - 1e-9))


def split_counts(counts: Sequence[int], parts: int) -> list[list[int]]:
    """Each expert's count cut into ``parts`` whole shares that add up to it (the tensor-parallel ranks' token
    slices): share t of expert e is ``c // parts``, plus one for the ``c % parts`` shares from ``e % parts``
    on (so the remainders spread over the ranks)."""
    return [[c // parts + (1 if (t - e) % parts < c % parts else 0) for e, c in enumerate(counts)]
            for t in range(parts)]

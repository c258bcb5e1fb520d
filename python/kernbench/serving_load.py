"""The load of a serving run (kernbench.serving): length distributions, arrival processes, traces, SLOs."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernbench.serving_args import MAX_ARRIVAL_S, MAX_TOKENS, ServingError, check_run_args
from kernbench.units import UNITS

__all__ = ["Dist", "Trace", "make_trace", "read_trace", "parse_slo", "ServingError", "SHAREGPT"]

#: ShareGPT-like lengths: the means are the ShareGPT dataset's as the vLLM paper measured it (Kwon et al.,
#: "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP 2023, sec. 6.1:
#: mean input 161.31, mean output 337.99 tokens). The spread (lognormal sigma 1.0) is assumed: the paper
#: gives histograms, not a fitted shape. Lengths are clipped to [1, 4096].
SHAREGPT = {"prompt": "lognormal:mean=161.31,sigma=1.0,max=4096", "output": "lognormal:mean=337.99,sigma=1.0,max=4096"}


def _unique_pairs(items, what: str, text: str) -> dict[str, str]:
    """``k=v`` items as a dict; a key given twice is refused (neither silently wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(item)
        if key in out:
            raise ServingError(f"{what}: {key} is given twice in {text!r}")
        out[key] = val
    return out


def _read_hist(path: str, what: str) -> tuple:
    """``hist:FILE``: rows ``tokens,weight`` (a header row and ``#`` comments allowed); each bad row is refused
    naming the file and the line."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a BOM is not part of the first cell
    except (OSError, UnicodeDecodeError) as e:
        raise ServingError(f"{what}: hist:{path}: cannot read the histogram: {e}") from None
    pts = []
    for ln, r in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in r]
        if not cells or not "".join(cells) or cells[0].startswith("#") or cells[0] == "tokens":
            continue
        if len(cells) != 2:
            raise ServingError(f"{what}: {path}:{ln}: a row is tokens,weight (2 cells), got {len(cells)}")
        try:
            n, w = int(cells[0]), float(cells[1])
        except ValueError:
            raise ServingError(f"{what}: {path}:{ln}: tokens must be an integer and weight a number, got "
                               f"{cells[0]!r}, {cells[1]!r}") from None
        if not 1 <= n <= MAX_TOKENS:
            raise ServingError(f"{what}: {path}:{ln}: tokens = {n} is out of range (allowed: 1 .. {MAX_TOKENS})")
        if not (math.isfinite(w) and w >= 0):
            raise ServingError(f"{what}: {path}:{ln}: weight = {cells[1]} must be a finite number >= 0")
        pts.append((n, w))
    if not pts or sum(w for _, w in pts) <= 0:
        raise ServingError(f"{what}: hist:{path}: no row with a positive weight")
    return tuple(pts)


# ---- load ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dist:
    """A length distribution: ``fixed:N``, ``uniform:LO:HI``, ``lognormal:mean=M,sigma=S[,max=X]`` (mean of the
    lognormal itself), or ``hist:FILE`` (CSV ``tokens,weight``); ``sharegpt-prompt`` / ``sharegpt-output``."""

    kind: str
    params: tuple = ()

    @staticmethod
    def parse(text: str | int, what: str = "length") -> "Dist":
        if isinstance(text, (int, np.integer)):
            return Dist("fixed", (int(text),))
        t = str(text).strip()
        if t in ("sharegpt-prompt", "sharegpt-output"):
            return Dist.parse(SHAREGPT[t.split("-")[1]], what)
        kind, _, rest = t.partition(":")
        if kind == "hist":
            return Dist("hist", _read_hist(rest, what))
        try:
            if kind == "fixed":
                n = int(rest)
                if not 1 <= n <= MAX_TOKENS:
                    raise ValueError
                return Dist("fixed", (n,))
            if kind == "uniform":
                lo, hi = (int(x) for x in rest.split(":"))
                if not 1 <= lo <= hi <= MAX_TOKENS:
                    raise ValueError
                return Dist("uniform", (lo, hi))
            if kind == "lognormal":
                kv = _unique_pairs(rest.split(","), what, t)
                mean, sigma = float(kv.pop("mean")), float(kv.pop("sigma"))
                top = int(kv.pop("max", 1 << 20))
                if kv or not (1 <= mean <= MAX_TOKENS and 0 <= sigma <= 10 and 1 <= top <= MAX_TOKENS):
                    raise ValueError
                return Dist("lognormal", (mean, sigma, top))
        except (ValueError, KeyError):
            raise ServingError(f"{what}: {t!r} is not a length distribution (fixed:N, uniform:LO:HI with 1 <= LO <= HI, "
                               f"lognormal:mean=M,sigma=S[,max=X] with 0 <= S <= 10, hist:FILE of tokens,weight rows, "
                               f"sharegpt-prompt, sharegpt-output; lengths 1 .. {MAX_TOKENS})") from None
        raise ServingError(f"{what}: unknown distribution {kind!r} in {t!r} (fixed, uniform, lognormal, hist, "
                           "sharegpt-prompt, sharegpt-output)")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, self.params[0], dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.params[0], self.params[1] + 1, size=n, dtype=np.int64)
        if self.kind == "lognormal":
            mean, sigma, top = self.params
            mu = math.log(mean) - sigma * sigma / 2  # E[X] = exp(mu + sigma^2 / 2) = mean
            return np.clip(np.rint(rng.lognormal(mu, sigma, size=n)), 1, top).astype(np.int64)
        toks = np.array([p[0] for p in self.params], dtype=np.int64)
        w = np.array([p[1] for p in self.params], dtype=float)
        return toks[rng.choice(len(toks), size=n, p=w / w.sum())]


@dataclass
class Trace:
    """Requests in arrival order: arrival (s), prompt and output tokens."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    source: str = "generated"
    prefix_group: np.ndarray | None = None   # the shared prefix each prompt starts with (-1: none)
    prefix_tokens: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Every trace is checked as it is made (generated, read or the user's own) and again by ``serving.run``:
        columns of one length, at least one request, whole token counts of 1 .. MAX_TOKENS (nothing truncated),
        arrivals finite, in order and within the clock's reach. The columns become numpy arrays."""
        n = None
        for col in ("arrival_s", "prompt", "output", "prefix_group", "prefix_tokens"):
            v = getattr(self, col)
            if v is None:
                continue
            a = np.asarray(v)
            if a.ndim != 1 or a.dtype.kind not in "iuf" or (n is not None and len(a) != n):
                raise ServingError(f"Trace: {col} must be one list of numbers per request"
                                   + (f" ({n} requests)" if n is not None else "") + f", got {_short(v)}")
            n = len(a)
            if col == "arrival_s":
                a = a.astype(float)
            else:
                bad = ~np.isfinite(a) | (a != np.round(a)) if a.dtype.kind == "f" else np.zeros(len(a), bool)
                if bad.any():
                    i = int(np.argmax(bad))
                    raise ServingError(f"Trace: {col}[{i}] = {float(a[i])!r} is not a whole number of tokens (nothing is "
                                       "truncated)")
                if a.dtype.kind == "f" and len(a) and np.abs(a).max() > MAX_TOKENS:
                    i = int(np.argmax(np.abs(a) > MAX_TOKENS))
                    raise ServingError(f"Trace: {col}[{i}] = {float(a[i])!r} is out of range (allowed: .. {MAX_TOKENS})")
                a = a.astype(np.int64)
            setattr(self, col, a)
        if not n:
            raise ServingError("Trace: the trace has no requests")
        _check_columns(self)

    def __len__(self) -> int:
        return len(self.arrival_s)


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_columns(tr: "Trace") -> None:
    """The ranges of a trace's columns (request i counts from 0)."""
    arr = tr.arrival_s
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ServingError(f"Trace: arrival_s[{i}] = {float(arr[i])!r} must be a finite time >= 0 (seconds)")
    if len(arr) > 1 and (np.diff(arr) < 0).any():
        i = int(np.argmax(np.diff(arr) < 0)) + 1
        raise ServingError(f"Trace: arrival_s[{i}] = {arr[i]} is before arrival_s[{i - 1}] = {arr[i - 1]} "
                           "(requests in arrival order)")
    if arr[-1] > MAX_ARRIVAL_S:
        raise ServingError(f"Trace: the last arrival, at {arr[-1]:.6g} s, is past {MAX_ARRIVAL_S:g} s, what the "
                           f"simulated clock (int64 ps) can run to; raise qps or serve fewer requests ({tr.source})")
    for col in ("prompt", "output"):
        a = getattr(tr, col)
        bad = (a < 1) | (a > MAX_TOKENS)
        if bad.any():
            i = int(np.argmax(bad))
            raise ServingError(f"Trace: {col}[{i}] = {a[i]} is out of range (allowed: 1 .. {MAX_TOKENS} tokens)")
    if (tr.prefix_group is None) != (tr.prefix_tokens is None):
        raise ServingError("Trace: prefix_group and prefix_tokens go together (give both or neither)")
    if tr.prefix_group is not None:
        shared = tr.prefix_group >= 0
        bad = shared & ((tr.prefix_tokens < 1) | (tr.prefix_tokens >= tr.prompt))
        if bad.any():
            i = int(np.argmax(bad))
            raise ServingError(f"Trace: prefix_tokens[{i}] = {tr.prefix_tokens[i]}: a shared prefix is 1 .. "
                               f"prompt - 1 = {tr.prompt[i] - 1} tokens")


def make_trace(requests: int, qps: float, *, arrival: str = "poisson", cv: float = 1.0,
               prompt: str | int | Dist = "sharegpt-prompt", output: str | int | Dist = "sharegpt-output",
               seed: int = 1, prefix_groups: int = 0, prefix_tokens: int = 0) -> Trace:
    """``requests`` arrivals at ``qps`` per second: ``poisson`` (exponential gaps), ``gamma`` (gaps of
    coefficient of variation ``cv``: bursty above 1), ``constant``; lengths from ``prompt`` / ``output``
    (Dist or its text). ``prefix_groups`` > 0: each prompt starts with one of that many shared prefixes of
    ``prefix_tokens`` tokens (a system prompt; a prompt is at least one token longer), drawn uniformly.
    Seeded (numpy PCG64): the same seed gives the same trace."""
    check_run_args({"requests": requests, "qps": qps, "arrival": arrival, "cv": cv, "prompt": prompt,
                    "output": output, "seed": seed, "prefix_groups": prefix_groups, "prefix_tokens": prefix_tokens},
                   "make_trace")
    rng = np.random.Generator(np.random.PCG64(seed))
    n = int(requests)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / qps, size=n)
    elif arrival == "gamma":
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / (qps * shape), size=n)
    elif arrival == "constant":
        gaps = np.full(n, 1.0 / qps)
    gaps[0] = 0.0  # the first request opens the run
    p = prompt if isinstance(prompt, Dist) else Dist.parse(prompt, "prompt")
    o = output if isinstance(output, Dist) else Dist.parse(output, "output")
    prompts, outputs = p.sample(rng, n), o.sample(rng, n)
    groups = lengths = None
    if prefix_tokens and not prefix_groups:
        raise ServingError(f"make_trace: prefix_tokens {prefix_tokens} without prefix_groups: give the number of "
                           "shared prefixes too")
    if prefix_groups:
        if prefix_tokens < 1 or prefix_tokens >= MAX_TOKENS:
            raise ServingError(f"make_trace: shared prefixes need prefix_tokens 1 .. {MAX_TOKENS - 1}, got "
                               f"{prefix_tokens} (with prefix_groups {prefix_groups})")
        groups = rng.integers(0, prefix_groups, size=n, dtype=np.int64)
        lengths = np.full(n, int(prefix_tokens), dtype=np.int64)
        prompts = np.maximum(prompts, lengths + 1)
    return Trace(np.cumsum(gaps), prompts, outputs, f"{arrival} {qps:g}/s seed {seed}", groups, lengths)


def read_trace(path: str | Path) -> Trace:
    """A CSV with columns ``arrival_s,prompt_tokens,output_tokens`` (any order, a header row), and optionally
    ``prefix_id,prefix_tokens`` (the shared prefix a prompt starts with; prefix_id -1 or empty: none); each bad
    value is refused naming the file, line and column."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # a BOM (Excel's CSV) is not part of the first column's name
    except (OSError, UnicodeDecodeError) as e:
        raise ServingError(f"{p}: cannot read the trace: {e}") from None
    rows = list(csv.reader(text.splitlines()))
    need = ("arrival_s", "prompt_tokens", "output_tokens")
    if not rows or any(c not in [h.strip() for h in rows[0]] for c in need):
        raise ServingError(f"{p}:1: a trace needs the columns {', '.join(need)} in a header row")
    head = [h.strip() for h in rows[0]]
    for c in set(head):
        if c and head.count(c) > 1:  # neither copy silently wins
            cols = [str(i + 1) for i, h in enumerate(head) if h == c]
            raise ServingError(f"{p}:1: column {c} appears {len(cols)} times (columns {', '.join(cols)})")
    col = {c: head.index(c) for c in need}
    shared = "prefix_id" in head and "prefix_tokens" in head
    arr, pr, out, gid, glen = [], [], [], [], []
    for ln, r in enumerate(rows[1:], start=2):
        if not r or not "".join(r).strip():
            continue
        try:
            a = float(r[col["arrival_s"]])
        except (ValueError, IndexError):
            raise ServingError(f"{p}:{ln}: arrival_s {r[col['arrival_s']] if len(r) > col['arrival_s'] else ''!r} "
                               "is not a number") from None
        if not math.isfinite(a) or a < 0:
            raise ServingError(f"{p}:{ln}: arrival_s {a!r} must be a finite time >= 0 (seconds)")
        if a > MAX_ARRIVAL_S:
            raise ServingError(f"{p}:{ln}: arrival_s {a:g} is past {MAX_ARRIVAL_S:g} s, what the simulated clock "
                               "(int64 ps) can run to")
        if arr and a < arr[-1]:
            raise ServingError(f"{p}:{ln}: arrival_s {a} is before the previous row's {arr[-1]} (rows in arrival order)")
        vals = []
        for c in ("prompt_tokens", "output_tokens"):
            try:
                v = int(r[col[c]])
            except (ValueError, IndexError):
                raise ServingError(f"{p}:{ln}: {c} is not an integer") from None
            if v < 1:
                raise ServingError(f"{p}:{ln}: {c} = {v}: at least 1 token")
            if v > MAX_TOKENS:
                raise ServingError(f"{p}:{ln}: {c} = {v} is out of range (allowed: 1 .. {MAX_TOKENS} tokens)")
            vals.append(v)
        arr.append(a)
        pr.append(vals[0])
        out.append(vals[1])
        if shared:
            try:
                g_txt, n_txt = r[head.index("prefix_id")].strip(), r[head.index("prefix_tokens")].strip()
                g = int(g_txt) if g_txt else -1
                n = int(n_txt) if n_txt else 0
            except (ValueError, IndexError):
                raise ServingError(f"{p}:{ln}: prefix_id and prefix_tokens must be integers (or empty)") from None
            if g >= 2**31:
                raise ServingError(f"{p}:{ln}: prefix_id = {g} is out of range (allowed: -1 .. {2**31 - 1})")
            if g >= 0 and not 1 <= n < vals[0]:
                raise ServingError(f"{p}:{ln}: prefix_tokens = {n}: a shared prefix is 1 .. prompt_tokens - 1 tokens")
            gid.append(g if g >= 0 else -1)
            glen.append(n if g >= 0 else 0)
    if not arr:
        raise ServingError(f"{p}: the trace has no requests")
    return Trace(np.array(arr), np.array(pr, dtype=np.int64), np.array(out, dtype=np.int64), str(p),
                 np.array(gid, dtype=np.int64) if shared else None, np.array(glen, dtype=np.int64) if shared else None)


#: The SLO units, ms per unit, from the one unit table (kernbench.units, the C++ one).
_UNITS = {u: UNITS[u][1] / UNITS["ms"][1] for u in ("ms", "s", "us")}


def parse_slo(text: str | dict | None) -> dict[str, float]:
    """``ttft=200ms,tpot=50ms`` (units ms, s, us) -> {"ttft_ms": 200.0, "tpot_ms": 50.0}; either may be left out."""
    if text is None or text == "":
        return {}
    if isinstance(text, dict):
        items = [f"{k}={v}" for k, v in text.items()]
    else:
        items = [x for x in str(text).split(",") if x.strip()]
    out = {}
    for item in items:
        key, _, val = item.partition("=")
        key, val = key.strip().lower(), val.strip().lower()
        if key not in ("ttft", "tpot", "e2e"):
            raise ServingError(f"slo: unknown bound {key!r} in {text!r} (ttft, tpot, e2e)")
        num = val.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = val[len(num):]
        if unit not in _UNITS:
            raise ServingError(f"slo: {key}={val!r}: give a time with a unit (ms, s or us), e.g. {key}=200ms")
        try:
            v = float(num) * _UNITS[unit]
        except ValueError:
            raise ServingError(f"slo: {key}={val!r} is not a number with a unit") from None
        if not math.isfinite(v) or v <= 0:
            raise ServingError(f"slo: {key}={val!r} must be a positive time")
        if f"{key}_ms" in out:  # neither bound silently wins
            raise ServingError(f"slo: {key} is given twice in {text!r}")
        out[f"{key}_ms"] = v
    return out

"""The load of a serving run (kernbench.serving): length distributions, arrival processes, traces, SLOs."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernbench.units import UNITS
from kernbench.workloads.graph import WorkloadError

__all__ = ["Dist", "Trace", "make_trace", "read_trace", "parse_slo", "ServingError", "SHAREGPT"]

#: ShareGPT-like lengths: the means are the ShareGPT dataset's as the vLLM paper measured it (Kwon et al.,
#: "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP 2023, sec. 6.1:
#: mean input 161.31, mean output 337.99 tokens). The spread (lognormal sigma 1.0) is assumed: the paper
#: gives histograms, not a fitted shape. Lengths are clipped to [1, 4096].
SHAREGPT = {"prompt": "lognormal:mean=161.31,sigma=1.0,max=4096", "output": "lognormal:mean=337.99,sigma=1.0,max=4096"}


class ServingError(WorkloadError):
    """Bad serving input (a trace row, a distribution, an SLO, a plan with no room for the KV cache)."""


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
        try:
            if kind == "fixed":
                n = int(rest)
                if n < 1:
                    raise ValueError
                return Dist("fixed", (n,))
            if kind == "uniform":
                lo, hi = (int(x) for x in rest.split(":"))
                if not 1 <= lo <= hi:
                    raise ValueError
                return Dist("uniform", (lo, hi))
            if kind == "lognormal":
                kv = dict(p.split("=") for p in rest.split(","))
                mean, sigma = float(kv.pop("mean")), float(kv.pop("sigma"))
                top = int(kv.pop("max", 1 << 20))
                if kv or mean < 1 or sigma < 0 or top < 1 or not math.isfinite(mean + sigma):
                    raise ValueError
                return Dist("lognormal", (mean, sigma, top))
            if kind == "hist":
                rows = list(csv.reader(Path(rest).read_text(encoding="utf-8").splitlines()))
                pts = [(int(r[0]), float(r[1])) for r in rows if r and not r[0].startswith("#") and r[0] != "tokens"]
                if not pts or any(n < 1 or w < 0 for n, w in pts) or sum(w for _, w in pts) <= 0:
                    raise ValueError
                return Dist("hist", tuple(pts))
        except (ValueError, KeyError, OSError, UnicodeDecodeError) as e:
            raise ServingError(f"{what}: {t!r} is not a length distribution (fixed:N, uniform:LO:HI with 1 <= LO <= HI, "
                               f"lognormal:mean=M,sigma=S[,max=X], hist:FILE of tokens,weight rows, sharegpt-prompt, "
                               f"sharegpt-output){': ' + str(e) if isinstance(e, OSError) else ''}") from None
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

    def __len__(self) -> int:
        return len(self.arrival_s)


def make_trace(requests: int, qps: float, *, arrival: str = "poisson", cv: float = 1.0,
               prompt: str | int | Dist = "sharegpt-prompt", output: str | int | Dist = "sharegpt-output",
               seed: int = 1, prefix_groups: int = 0, prefix_tokens: int = 0) -> Trace:
    """``requests`` arrivals at ``qps`` per second: ``poisson`` (exponential gaps), ``gamma`` (gaps of
    coefficient of variation ``cv``: bursty above 1), ``constant``; lengths from ``prompt`` / ``output``
    (Dist or its text). ``prefix_groups`` > 0: each prompt starts with one of that many shared prefixes of
    ``prefix_tokens`` tokens (a system prompt; a prompt is at least one token longer), drawn uniformly.
    Seeded (numpy PCG64): the same seed gives the same trace."""
    if not isinstance(requests, (int, np.integer)) or requests < 1:
        raise ServingError(f"requests must be a positive integer, got {requests!r}")
    if not (isinstance(qps, (int, float)) and math.isfinite(qps) and qps > 0):
        raise ServingError(f"qps must be a positive number of requests per second, got {qps!r}")
    rng = np.random.Generator(np.random.PCG64(seed))
    n = int(requests)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / qps, size=n)
    elif arrival == "gamma":
        if not (math.isfinite(cv) and cv > 0):
            raise ServingError(f"gamma arrivals need cv > 0, got {cv!r}")
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, 1.0 / (qps * shape), size=n)
    elif arrival == "constant":
        gaps = np.full(n, 1.0 / qps)
    else:
        raise ServingError(f"unknown arrival process {arrival!r} (poisson, gamma, constant)")
    gaps[0] = 0.0  # the first request opens the run
    p = prompt if isinstance(prompt, Dist) else Dist.parse(prompt, "prompt")
    o = output if isinstance(output, Dist) else Dist.parse(output, "output")
    prompts, outputs = p.sample(rng, n), o.sample(rng, n)
    groups = lengths = None
    if prefix_groups:
        if prefix_groups < 0 or prefix_tokens < 1:
            raise ServingError(f"shared prefixes need prefix_groups >= 1 and prefix_tokens >= 1, got {prefix_groups} "
                               f"and {prefix_tokens}")
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
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ServingError(f"{p}: cannot read the trace: {e}") from None
    rows = list(csv.reader(text.splitlines()))
    need = ("arrival_s", "prompt_tokens", "output_tokens")
    if not rows or any(c not in [h.strip() for h in rows[0]] for c in need):
        raise ServingError(f"{p}:1: a trace needs the columns {', '.join(need)} in a header row")
    head = [h.strip() for h in rows[0]]
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
        out[f"{key}_ms"] = v
    return out

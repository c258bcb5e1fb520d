"""The GQA numeric check: the executed Program, interpreted in NumPy float64.

``check`` builds the Program of a case (``src/kernels/gqa.cpp``, the one
``kernbench.gqa.run`` times), runs it on the executor, and replays its ops on
random Q, K and V in the order the run did them: every op reads its inputs
when it started and writes its outputs when it ended. What each op does to
the data comes with the Program (``GqaOpData``: its role -- load a Q tile,
load / receive / send K or V into buffer b, QK^T, the online-softmax update,
PV, send / receive a partial's O, m or l, merge, normalise, store O -- the K/V
tokens it loads and the query rows it loads or stores); per PE the buffers
are ``q``, ``k[b]``, ``v[b]``, ``s`` (scores, then P), the partial state
``m``, ``l``, ``o`` and the received partial ``m_in``, ``l_in``, ``o_in``. A
send's payload is what its buffer held when it started; the recv that takes
it is the one the Program matches it with: the same (receiver, sender, key).

So a missing dependency (an op that ran before its input was there, or after
its buffer was overwritten) or a wrong merge key shows as a wrong output, and
``check`` returns the largest error against plain attention
``softmax(Q K^T / sqrt(d)) V`` (``inf`` when some output is missing or was
computed from a buffer never written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from kernbench import _core

__all__ = ["attention", "Execution", "execute", "check"]


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Plain attention: q [T, H, d], k and v [S, d] (one K/V head) -> [T, H, d]."""
    d = q.shape[-1]
    s = np.einsum("thd,sd->ths", q, k) / np.sqrt(d)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return np.einsum("ths,sd->thd", p / p.sum(axis=-1, keepdims=True), v)


@dataclass
class Execution:
    """A GQA Program, run and interpreted: its ops (columns), the output it computed, the timed latency."""

    ops: dict[str, list[Any]]
    plan: dict
    latency_ps: int
    out: np.ndarray  # [T, H, d]; NaN where never written (or computed from a buffer never written)
    reference: np.ndarray  # plain attention of the same inputs

    @property
    def error(self) -> float:
        """Max abs error against plain attention (inf if any output is NaN)."""
        if np.isnan(self.out).any():
            return float("inf")
        return float(np.abs(self.out - self.reference).max())


def _core_system(system):
    return system._core if hasattr(system, "_core") else system


def _interpret(ops: dict[str, list[Any]], q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Replays the ops in the run's order (reads at start, writes at end) on q [T*H, d], k, v [S, d]."""
    n = len(ops["role"])
    d = q.shape[-1]
    out = np.full_like(q, np.nan)
    role, agent, peer, key = ops["role"], ops["agent"], ops["peer"], ops["key"]
    buffer, first, lo, hi, rows = ops["buffer"], ops["first"], ops["lo"], ops["hi"], ops["rows"]
    start, end = ops["start_ps"], ops["end_ps"]
    if any(e < 0 for e in end):
        raise AssertionError("the run did not finish every op")
    # Events: (time, 0 = end before 1 = start at the same time, op). A dependent op always starts after
    # the ends it waits for (a dispatch later), so the tie rule only orders unrelated ops.
    events = sorted([(end[i], 0, i) for i in range(n) if role[i] != "none"] +
                    [(start[i], 1, i) for i in range(n) if role[i] != "none"])
    state: dict[int, dict[str, Any]] = {}  # per PE: buffer name -> array (None: computed from nothing)
    messages: dict[tuple[int, int, int], Any] = {}  # (receiver, sender, key) -> payload
    pending: dict[int, dict[str, Any]] = {}  # op -> the buffers it writes at its end

    def poison(*xs):
        return any(x is None for x in xs)

    def on_start(i: int) -> None:  # read the inputs, compute what the op will write
        r = role[i]
        pe = state.setdefault(agent[i], {})
        w: dict[str, Any] = {}
        b = buffer[i]
        if r == "load_q":
            w["q"] = q[rows[i]]
        elif r in ("load_k", "load_v"):
            w[f"{r[-1]}{b}"] = (k if r == "load_k" else v)[lo[i]:hi[i]]
        elif r in ("send_k", "send_v", "send_o", "send_m", "send_l"):
            src = f"k{b}" if r == "send_k" else f"v{b}" if r == "send_v" else r[-1]
            messages[(peer[i], agent[i], key[i])] = pe.get(src)
        elif r == "qk":
            qq, kk = pe.get("q"), pe.get(f"k{b}")
            w["s"] = None if poison(qq, kk) else qq @ kk.T / np.sqrt(d)
        elif r == "softmax":
            s = pe.get("s")
            if first[i]:
                rows_ = None if s is None else s.shape[0]
                m0 = None if s is None else np.full(rows_, -np.inf)
                l0 = None if s is None else np.zeros(rows_)
                o0 = None if s is None else np.zeros((rows_, d))
            else:
                m0, l0, o0 = pe.get("m"), pe.get("l"), pe.get("o")
            if poison(s, m0, l0, o0) or s.shape[0] != m0.shape[0]:
                w.update(s=None, m=None, l=None, o=None)
            else:
                m = np.maximum(m0, s.max(axis=1))
                scale = np.exp(m0 - m)
                p = np.exp(s - m[:, None])
                w.update(s=p, m=m, l=l0 * scale + p.sum(axis=1), o=o0 * scale[:, None])
        elif r == "pv":
            p, vv, o = pe.get("s"), pe.get(f"v{b}"), pe.get("o")
            ok = not poison(p, vv, o) and p.shape[1] == vv.shape[0] and p.shape[0] == o.shape[0]
            w["o"] = o + p @ vv if ok else None
        elif r == "merge":
            m0, l0, o0 = pe.get("m"), pe.get("l"), pe.get("o")
            m1, l1, o1 = pe.get("m_in"), pe.get("l_in"), pe.get("o_in")
            ok = not poison(m0, l0, o0, m1, l1, o1) and m0.shape == m1.shape == l0.shape == l1.shape \
                and o0.shape == o1.shape and o0.shape[0] == m0.shape[0]
            if ok:
                m = np.maximum(m0, m1)
                a, c = np.exp(m0 - m), np.exp(m1 - m)
                w.update(m=m, l=l0 * a + l1 * c, o=o0 * a[:, None] + o1 * c[:, None])
            else:
                w.update(m=None, l=None, o=None)
        elif r == "finalize":
            o, l = pe.get("o"), pe.get("l")
            w["o"] = o / l[:, None] if not poison(o, l) and o.shape[0] == l.shape[0] else None
        elif r == "store_o":
            w["out"] = pe.get("o")
        pending[i] = w

    def on_end(i: int) -> None:  # write
        r = role[i]
        pe = state.setdefault(agent[i], {})
        if i not in pending:  # an op that took no time
            on_start(i)
        w = pending.pop(i)
        if r in ("recv_k", "recv_v", "recv_o", "recv_m", "recv_l"):
            m_key = (agent[i], peer[i], key[i])
            if m_key not in messages:
                raise AssertionError(f"op {i} '{ops['name'][i]}' ended before its send started")
            payload = messages.pop(m_key)
            dst = f"k{buffer[i]}" if r == "recv_k" else f"v{buffer[i]}" if r == "recv_v" else f"{r[-1]}_in"
            pe[dst] = payload
        elif r == "store_o":
            o = w["out"]
            if o is None or o.shape[0] != len(rows[i]):
                out[rows[i]] = np.nan
            else:
                out[rows[i]] = o
        else:
            pe.update(w)

    done: set[int] = set()
    for _, phase, i in events:
        if phase == 1:
            if i not in done:
                on_start(i)
        else:
            on_end(i)
            done.add(i)
    return out


def execute(system, phase: str, case: int, *, t_q: int, s_kv: int, tile_q: int = 256, tile_s: int = 256,
            kv_buffers: int = 2, sip: int = 0, cubes: Sequence[int] | None = None, seed: int = 0,
            drop_deps: Sequence[tuple[int, int]] = (), set_keys: Sequence[tuple[int, int]] = ()) -> Execution:
    """Runs the Program of one case on ``system`` and interprets it on random inputs.

    ``drop_deps`` [(op, on)] and ``set_keys`` [(op, key)] edit the Program before the run (test hooks)."""
    d = _core.gqa_dataflow_run(_core_system(system), phase, int(case), int(t_q), int(s_kv), int(tile_q), int(tile_s),
                               int(kv_buffers), int(sip), list(cubes or []), "fp16",
                               [tuple(map(int, e)) for e in drop_deps], [tuple(map(int, e)) for e in set_keys])
    plan = dict(d["plan"])
    h, dh = int(plan["h_q"]), int(plan["d_head"])
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((t_q, h, dh))
    k = rng.standard_normal((s_kv, dh))
    v = rng.standard_normal((s_kv, dh))
    ops = {name: list(col) for name, col in dict(d["ops"]).items()}
    out = _interpret(ops, q.reshape(t_q * h, dh), k, v).reshape(t_q, h, dh)
    return Execution(ops=ops, plan=plan, latency_ps=int(d["latency_ps"]), out=out, reference=attention(q, k, v))


def check(system, phase: str, case: int, *, t_q: int, s_kv: int, tile_q: int = 256, tile_s: int = 256,
          seed: int = 0, drop_deps: Sequence[tuple[int, int]] = (),
          set_keys: Sequence[tuple[int, int]] = ()) -> float:
    """Max abs error of the executed Program's output against plain attention (inf: outputs missing)."""
    return execute(system, phase, case, t_q=t_q, s_kv=s_kv, tile_q=tile_q, tile_s=tile_s, seed=seed,
                   drop_deps=drop_deps, set_keys=set_keys).error

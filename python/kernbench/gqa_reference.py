"""A NumPy float64 reference of the GQA schedules the simulator times.

For each case and phase it splits Q, K and V over ``n_cubes`` x ``pes`` the
way ``src/kernels/gqa.cpp`` does (query rows = (token, head) pairs, Q tiles of
``tile_q`` rows, K/V tiles of ``tile_s`` tokens, the ring order of cases 1/4
in prefill -- at step r a cube's PEs process the chunk of the cube r places
back, taken tile-major (tile j of every step, then tile j + 1) --,
binomial-tree merges of (m, l, O) partials to the writer), runs the
online-softmax (flash) update tile by tile, merges, normalises, and assembles
the writers' outputs. ``check`` compares that with plain attention.
"""

from __future__ import annotations

import numpy as np

__all__ = ["attention", "schedule_attention", "check"]


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Plain attention: q [T, H, d], k and v [S, d] (one K/V head) -> [T, H, d]."""
    d = q.shape[-1]
    s = np.einsum("thd,sd->ths", q, k) / np.sqrt(d)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return np.einsum("ths,sd->thd", p / p.sum(axis=-1, keepdims=True), v)


def _parts(total: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi) of n parts of total, as in gqa.cpp (i * total // n)."""
    return [(i * total // n, (i + 1) * total // n) for i in range(n)]


class _Partial:
    """Online-softmax state of a set of rows: running max m, sum l, unnormalised O."""

    def __init__(self, rows: int, d: int):
        self.m = np.full(rows, -np.inf)
        self.l = np.zeros(rows)
        self.o = np.zeros((rows, d))

    def update(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        s = q @ k.T / np.sqrt(q.shape[-1])
        m = np.maximum(self.m, s.max(axis=1))
        scale = np.exp(self.m - m)
        p = np.exp(s - m[:, None])
        self.l = self.l * scale + p.sum(axis=1)
        self.o = self.o * scale[:, None] + p @ v
        self.m = m

    def merge(self, other: "_Partial") -> None:
        m = np.maximum(self.m, other.m)
        a, b = np.exp(self.m - m), np.exp(other.m - m)
        self.o = self.o * a[:, None] + other.o * b[:, None]
        self.l = self.l * a + other.l * b
        self.m = m

    def result(self) -> np.ndarray:
        return self.o / self.l[:, None]


def _tree(parts: list[_Partial]) -> _Partial:
    """Binomial tree to parts[0], in gqa.cpp's order (stride 1, 2, 4, ...)."""
    g = len(parts)
    stride = 1
    while stride < g:
        for i in range(stride, g, 2 * stride):
            parts[i - stride].merge(parts[i])
        stride *= 2
    return parts[0]


def schedule_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, phase: str, case: int, *, n_cubes: int = 8,
                       pes: int = 8, tile_q: int = 256, tile_s: int = 256) -> np.ndarray:
    """Attention computed by the schedule of ``case`` in ``phase`` (see gqa.hpp)."""
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase {phase!r}: expected 'prefill' or 'decode'")
    if case not in (1, 2, 3, 4):
        raise ValueError(f"case {case}: expected 1, 2, 3 or 4")
    T, H, d = q.shape
    S = k.shape[0]
    n, P = n_cubes, pes
    out = np.full((T, H, d), np.nan)

    def rows_of(pos: int, p: int) -> list[tuple[int, int]]:
        """The (token, head) rows of PE (pos, p), token-major."""
        if phase == "prefill":
            shares = {1: n * P, 2: P, 3: 1, 4: n}[case]
            idx = {1: pos * P + p, 2: p, 3: 0, 4: pos}[case]
            if T % shares:
                raise ValueError(f"case {case} splits T_q {shares} ways; T_q = {T} is not a multiple")
            t0 = idx * (T // shares)
            return [(t, h) for t in range(t0, t0 + T // shares) for h in range(H)]
        if case in (1, 2):  # TP over heads
            hp = H // P
            return [(t, h) for t in range(T) for h in range(p * hp, (p + 1) * hp)]
        return [(t, h) for t in range(T) for h in range(H)]

    def chunks_of(pos: int, p: int) -> list[tuple[int, int]]:
        """The K/V token ranges PE (pos, p) streams, in order (one per ring step)."""
        if case == 1:
            cube = _parts(S, n)
            if phase == "prefill":
                return [cube[(pos - r) % n] for r in range(n)]
            return [cube[pos]]
        if case == 2:
            return [(0, S)]
        if case == 3:
            return [_parts(S, P)[p]]
        fine = _parts(S, n * P)
        if phase == "prefill":
            return [fine[((pos - r) % n) * P + p] for r in range(n)]
        return [fine[pos * P + p]]

    def stream(pos: int, p: int, rows: list[tuple[int, int]]) -> _Partial:
        qr = np.stack([q[t, h] for t, h in rows])
        st = _Partial(len(rows), d)
        # Tile-major, as gqa.cpp: tile j of every ring step, then tile j + 1.
        tiles = [[(j, min(j + tile_s, hi)) for j in range(lo, hi, tile_s)] for lo, hi in chunks_of(pos, p)]
        for j in range(max(len(t) for t in tiles)):
            for step in tiles:
                if j < len(step):
                    lo, hi = step[j]
                    st.update(qr, k[lo:hi], v[lo:hi])
        return st

    def write(rows: list[tuple[int, int]], st: _Partial) -> None:
        res = st.result()
        for i, (t, h) in enumerate(rows):
            out[t, h] = res[i]

    working = [0] if case == 2 else list(range(n))
    all_rows = {(pos, p): rows_of(pos, p) for pos in working for p in range(P)}
    n_rows = len(all_rows[(working[0], 0)])
    for q0 in range(0, n_rows, tile_q):
        tile = {key: rows[q0:q0 + tile_q] for key, rows in all_rows.items()}
        parts = {key: stream(*key, rows) for key, rows in tile.items()}
        if case in (1, 2) and (phase == "prefill" or case == 2):
            for key, st in parts.items():
                write(tile[key], st)
        elif case == 1:  # decode: per head group, merge over the cubes
            for p in range(P):
                write(tile[(0, p)], _tree([parts[(pos, p)] for pos in range(n)]))
        else:
            roots = [_tree([parts[(pos, p)] for p in range(P)]) for pos in range(n)]
            if case == 4 and phase == "decode":
                write(tile[(0, 0)], _tree(roots))
            else:
                for pos in range(n):
                    write(tile[(pos, 0)], roots[pos])
    return out


def check(phase: str, case: int, *, t_q: int, s_kv: int, h_q: int = 8, d_head: int = 16, n_cubes: int = 8,
          pes: int = 8, tile_q: int = 256, tile_s: int = 256, seed: int = 0) -> float:
    """Max abs error of the schedule against plain attention on random tensors."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((t_q, h_q, d_head))
    k = rng.standard_normal((s_kv, d_head))
    v = rng.standard_normal((s_kv, d_head))
    got = schedule_attention(q, k, v, phase, case, n_cubes=n_cubes, pes=pes, tile_q=tile_q, tile_s=tile_s)
    if np.isnan(got).any():
        raise AssertionError(f"case {case} {phase}: some outputs were never written")
    return float(np.abs(got - attention(q, k, v)).max())

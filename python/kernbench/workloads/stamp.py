"""Stamping repeated blocks: a trace that holds blocks 0 and 1 of a layer stack becomes the whole stack.

``from_torch`` traces a model with its layer list cut to two blocks; ``stamp``
checks that block 1 is block 0 renamed (the same kinds, shapes, FLOPs and
attrs) and writes out blocks 2..count-1 from block 1, so an 80-layer model
costs a two-layer trace.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from kernbench.workloads.graph import Block, Op, ParamRef

__all__ = ["rename", "renamed", "block_range", "stamp"]


def rename(s: str, src: str, dst: str) -> str:
    return dst + s[len(src):] if s.startswith(src) else s


def renamed(op: Op, src: str, dst: str, deps: tuple[int, ...]) -> Op:
    attrs = {k: (rename(v, src, dst) if isinstance(v, str) else v) for k, v in op.attrs.items()}
    return replace(op, name=rename(op.name, src, dst),
                   params=tuple(ParamRef(rename(p.name, src, dst), p.spec) for p in op.params),
                   attrs=attrs, deps=deps)


def block_range(ops: Sequence[Op], stem: str) -> tuple[int, int] | None:
    idx = [i for i, op in enumerate(ops) if op.name == stem or op.name.startswith(stem + ".")]
    if not idx or idx[-1] - idx[0] + 1 != len(idx):
        return None
    return idx[0], idx[-1] + 1


def stamp(ops: list[Op], prefix: str, count: int) -> tuple[list[Op], Block | None, str]:
    """Ops of a trace holding blocks 0 and 1 of ``prefix``, with blocks 2..count-1 stamped from block 1."""
    r0, r1 = block_range(ops, f"{prefix}.0"), block_range(ops, f"{prefix}.1")
    if r0 is None or r1 is None or r1[0] != r0[1] or r1[1] - r1[0] != r0[1] - r0[0]:
        return ops, None, "the two traced blocks are not back to back"
    (a0, e0), (a1, e1) = r0, r1
    size = e0 - a0
    for i in range(size):  # block 1 must be block 0 renamed (same kinds, shapes, FLOPs, attrs)
        p, q = ops[a0 + i], renamed(ops[a1 + i], f"{prefix}.1.", f"{prefix}.0.", ops[a0 + i].deps)
        if (p.name, p.kind, p.target, p.inputs, p.outputs, p.params, p.flops, dict(p.attrs)) != \
                (q.name, q.kind, q.target, q.inputs, q.outputs, q.params, q.flops, dict(q.attrs)):
            return ops, None, f"traced blocks 0 and 1 differ at {p.name!r}"
    out = list(ops[:e1])
    src = f"{prefix}.1."
    for i in range(2, count):
        shift = (i - 1) * size
        for op in ops[a1:e1]:
            deps = tuple(d + shift if d >= a0 else d for d in op.deps)
            out.append(renamed(op, src, f"{prefix}.{i}.", deps))
    tail_shift = (count - 2) * size
    for op in ops[e1:]:  # after the blocks: what read block 1 reads the last block
        deps = tuple(d + tail_shift if d >= a1 else d for d in op.deps)
        out.append(replace(op, deps=deps) if deps != op.deps else op)
    return out, Block(prefix, a0, e0, count), "stamped"

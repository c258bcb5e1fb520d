"""``from_execution_trace``: PyTorch's execution-trace JSON (``torch.profiler.ExecutionTraceObserver``) as a WorkloadGraph.

The trace records every operator call of a real run with its input and
output shapes, types and tensor ids (schema ``1.x-chakra``): ``nodes`` with
``id``, ``name`` (``aten::linear``), ``ctrl_deps`` (the id of the calling
node) and ``inputs``/``outputs`` (``values``, ``shapes``, ``types``). A
tensor value is ``[tensor_id, storage_id, offset, numel, elem_bytes,
device]``.

Which calls become ops: the outermost ATen calls -- an ``aten::linear``
is one ``matmul`` op; the ``aten::t`` and ``aten::addmm`` it calls are its
implementation and are not counted again. Calls under a
``record_function`` scope (any non-``aten::`` node) are taken from inside
it, and the scope's name prefixes their names. Each op is classified by the
same table as ``from_torch`` (``kernbench.workloads.torch_ops``), so kinds
and FLOPs agree with a trace of the same model.

What the trace cannot say: module paths (names are ``scope.op`` with a
counter) and which tensors are weights. A tensor that no recorded op
produced and that an op reads as its weight or bias (the weight operand of
a matmul or conv, a norm's weight, an embedding's table) is a param named
``tensor<id>``; other such tensors are the graph's inputs. Deps follow
tensor ids (a view passes its producer through).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernbench.workloads import torch_ops as T
from kernbench.workloads.graph import Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph

__all__ = ["from_execution_trace"]

_TYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16", "long int": "int64",
          "int": "int32", "short int": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
          "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8"}
_TENSOR = re.compile(r"^Tensor\((.*)\)$")


class _T:
    """A tensor argument of a recorded call."""

    __slots__ = ("tid", "shape", "dtype", "strides")

    def __init__(self, tid, shape, dtype, strides):
        self.tid, self.shape, self.dtype, self.strides = tid, tuple(int(d) for d in shape), dtype, strides

    def contiguous(self) -> bool:
        expect, ok = 1, True
        for d, s in zip(reversed(self.shape), reversed(list(self.strides or []))):
            if d != 1 and s != expect:
                ok = False
            expect *= d
        return ok or not self.strides


def _dtype(t: str, where: str) -> str:
    m = _TENSOR.match(t)
    key = m.group(1) if m else t
    if key not in _TYPES:
        raise WorkloadError(f"{where}: tensor type {t!r} has no kernbench dtype")
    return _TYPES[key]


def _args(side: dict, where: str) -> list:
    """The call's arguments, tensors (and lists of them) as _T, other values as recorded."""
    vals, shapes, types = side.get("values", []), side.get("shapes", []), side.get("types", [])
    strides = side.get("strides", [[]] * len(vals))
    out = []
    for v, s, t, st in zip(vals, shapes, types, strides):
        if t.startswith("Tensor("):
            out.append(_T(v[0], s, _dtype(t, where), st))
        elif t.startswith("GenericList[Tensor"):
            inner = re.findall(r"Tensor\([^)]*\)", t)
            out.append([_T(vi[0], si, _dtype(inner[min(j, len(inner) - 1)] if inner else "Tensor(float)", where),
                           sti) for j, (vi, si, sti) in enumerate(zip(v, s, st or [[]] * len(v)))])
        elif v == "<None>":
            out.append(None)
        else:
            out.append(v)
    return out


def _tensors(args) -> list[_T]:
    return [x for a in args for x in (a if isinstance(a, list) else [a]) if isinstance(x, _T)]


def from_execution_trace(path, *, name: str | None = None) -> WorkloadGraph:
    """Import an execution-trace JSON file (or its parsed dict)."""
    if isinstance(path, (str, Path)):
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise WorkloadError(f"from_execution_trace: no file {p}") from None
        except json.JSONDecodeError as e:
            raise WorkloadError(f"from_execution_trace: {p} is not JSON: {e}") from None
        default = p.stem
    else:
        data, default = path, "execution-trace"
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise WorkloadError("from_execution_trace: not an execution trace (no 'nodes' list)")
    nodes = {n["id"]: n for n in data["nodes"]}
    children: dict[Any, list] = {}
    for n in data["nodes"]:
        if n.get("ctrl_deps") != n["id"]:
            children.setdefault(n.get("ctrl_deps"), []).append(n)
    roots = [n for n in data["nodes"] if n.get("ctrl_deps") not in nodes or n.get("ctrl_deps") == n["id"]]

    calls: list[tuple[dict, str]] = []  # (node, scope) of the outermost aten calls, in call order

    def walk(n, scope):
        for c in sorted(children.get(n["id"], []), key=lambda x: x["id"]):
            nm = c.get("name", "")
            if nm.startswith("aten::"):
                calls.append((c, scope))
            elif not nm.startswith("[pytorch|profiler"):
                walk(c, f"{scope}.{nm}" if scope else nm)
            else:
                walk(c, scope)

    for r in sorted(roots, key=lambda x: x["id"]):
        walk(r, "")
    produced = {int(o[0]) for c, _ in calls for o in c.get("outputs", {}).get("values", [])
                if isinstance(o, list) and o and isinstance(o[0], int)}

    prod: dict[int, int] = {}
    params: dict[int, TensorSpec] = {}
    inputs: list[TensorSpec] = []
    seen_inputs: set[int] = set()
    ops: list[Op] = []
    counts: dict[str, int] = {}
    for node, scope in calls:
        op = node["name"].split("::", 1)[1]
        where = f"execution-trace node {node['id']} ({node['name']})"
        args = _args(node.get("inputs", {}), where)
        outs = _tensors(_args(node.get("outputs", {}), where))
        by_tid = {}
        for x in _tensors(args):
            by_tid[x.tid] = x
        shape_of = lambda x: x.shape if isinstance(x, _T) else None  # noqa: E731
        param_of = lambda x: f"tensor{x.tid}" if isinstance(x, _T) and x.tid not in produced else None  # noqa: E731
        c = T.Call(op, args, {}, [o.shape for o in outs], shape_of, param_of,
                   lambda x: x.contiguous() if isinstance(x, _T) else True,
                   lambda x, shape: x.contiguous() if isinstance(x, _T) else True,
                   lambda x: x.dtype if isinstance(x, _T) else None, outs[0].dtype if outs else None)
        try:
            cls = T.classify(c)
        except KeyError:
            raise WorkloadError(f"{where} in scope {scope or '(top level)'!r} has no kernbench kind") from None
        if cls is None:
            continue
        kind, flops, attrs = cls
        weights = {attrs.get("weight"), attrs.get("bias")} - {None}
        if kind == "norm" and op in T.NORM_OPS:
            _, wi, bi = T.NORM_OPS[op]
            weights |= {param_of(args[i]) for i in (wi, bi) if 0 <= i < len(args) and param_of(args[i])}
        prefs, act, deps = [], [], set()
        for x in _tensors(args):
            pn = param_of(x)
            if pn in weights:
                if pn not in {q.name for q in prefs}:
                    params.setdefault(x.tid, TensorSpec(x.shape, x.dtype))
                    prefs.append(ParamRef(pn, TensorSpec(x.shape, x.dtype)))
                continue
            act.append(TensorSpec(x.shape, x.dtype))
            if x.tid in prod:
                deps.add(prod[x.tid])
            elif x.tid not in produced and x.tid not in seen_inputs:
                seen_inputs.add(x.tid)
                inputs.append(TensorSpec(x.shape, x.dtype))
        out_specs = tuple(TensorSpec(o.shape, o.dtype) for o in outs)
        if kind == "copy":
            attrs = {**attrs, "bytes": sum(t.nbytes for t in out_specs)}
        short = {"scaled_dot_product_attention": "sdpa"}.get(op, op.rstrip("_") or op)
        base = f"{scope}.{short}" if scope else short
        j = counts.get(base, 0)
        counts[base] = j + 1
        ops.append(Op(base if j == 0 else f"{base}_{j}", kind, node["name"], tuple(act), out_specs,
                      tuple(prefs) if kind != "view" else (), int(flops), attrs, tuple(sorted(deps))))
        src = _tensors(args)
        for o in outs:
            if kind == "view":
                if src and src[0].tid in prod:
                    prod[o.tid] = prod[src[0].tid]
            else:
                prod[o.tid] = len(ops) - 1
    return WorkloadGraph(name or default, ops, source="execution-trace", inputs=inputs,
                         meta={"schema": data.get("schema"), "buffers": []})

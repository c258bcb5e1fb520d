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
from kernbench.workloads.graph import Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph, whole

__all__ = ["from_execution_trace"]

_TYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16", "long int": "int64",
          "int": "int32", "short int": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
          "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8"}
_TENSOR = re.compile(r"^Tensor\((.*)\)$")


#: How deep the ``ctrl_deps`` tree of a trace may nest (a real trace nests a few tens deep).
MAX_DEPTH = 1000


class _T:
    """A tensor argument of a recorded call."""

    __slots__ = ("tid", "shape", "dtype", "strides")

    def __init__(self, tid, shape, dtype, strides, where):
        if isinstance(tid, bool) or not isinstance(tid, int):
            raise WorkloadError(f"{where}: tensor id {tid!r} is not an integer")
        if not isinstance(shape, list):
            raise WorkloadError(f"{where}: tensor {tid} shape {shape!r} is not a list")
        if strides is not None and not isinstance(strides, list):
            raise WorkloadError(f"{where}: tensor {tid} strides {strides!r} is not a list")
        self.tid, self.dtype, self.strides = tid, dtype, strides
        self.shape = tuple(whole(d, f"{where}: tensor {tid} dimension {i}", 0) for i, d in enumerate(shape))

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


def _side_list(side: dict, key: str, where: str, n: int | None) -> list:
    v = side.get(key, [] if n is None else [[]] * n)
    if not isinstance(v, list):
        raise WorkloadError(f"{where}: {key} is not a list ({type(v).__name__})")
    return v


def _args(side: Any, where: str) -> list:
    """The call's arguments, tensors (and lists of them) as _T, other values as recorded."""
    if side is None:
        return []
    if not isinstance(side, dict):
        raise WorkloadError(f"{where}: inputs/outputs is not a map of values, shapes and types")
    vals, shapes, types = (_side_list(side, k, where, None) for k in ("values", "shapes", "types"))
    if not len(vals) == len(shapes) == len(types):
        raise WorkloadError(f"{where}: {len(vals)} values, {len(shapes)} shapes and {len(types)} types")
    strides = _side_list(side, "strides", where, len(vals))
    out = []
    for j, (v, s, t) in enumerate(zip(vals, shapes, types)):
        st = strides[j] if j < len(strides) else []
        if not isinstance(t, str):
            raise WorkloadError(f"{where}: argument {j}: type {t!r} is not a string")
        if t.startswith("Tensor("):
            if not isinstance(v, list) or not v:
                raise WorkloadError(f"{where}: argument {j}: tensor value {v!r} is not [tensor_id, ...]")
            out.append(_T(v[0], s, _dtype(t, where), st, where))
        elif t.startswith("GenericList[Tensor"):
            if not isinstance(v, list) or not isinstance(s, list) or not all(isinstance(x, list) and x for x in v):
                raise WorkloadError(f"{where}: argument {j}: a tensor list's values and shapes are not lists of "
                                    "tensors")
            inner = re.findall(r"Tensor\([^)]*\)", t)
            st = st if isinstance(st, list) and len(st) == len(v) else [[]] * len(v)
            out.append([_T(vi[0], si, _dtype(inner[min(i, len(inner) - 1)] if inner else "Tensor(float)", where),
                           sti, where) for i, (vi, si, sti) in enumerate(zip(v, s, st))])
        elif v == "<None>":
            out.append(None)
        else:
            out.append(v)
    return out


def _tensors(args) -> list[_T]:
    return [x for a in args for x in (a if isinstance(a, list) else [a]) if isinstance(x, _T)]


def _read(path) -> tuple[Any, str, str]:
    """(the trace's data, its default name, how messages name it)."""
    if not isinstance(path, (str, Path)):
        return path, "execution-trace", "from_execution_trace"
    p = Path(path)
    src = f"from_execution_trace: {p}"
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise WorkloadError(f"from_execution_trace: no file {p}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError(f"{src}: cannot be read as text ({e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{src} is not JSON: {e}") from None
    except (RecursionError, ValueError) as e:
        raise WorkloadError(f"{src} is not JSON this reader accepts ({type(e).__name__}: {e})") from None
    return data, p.stem, src


def _nodes(data: Any, src: str) -> dict[int, dict]:
    """The trace's nodes by id, each checked to be a map with an integer id (unique), a string name and an
    integer (or no) ctrl_deps."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise WorkloadError(f"{src}: not an execution trace (no 'nodes' list)")
    nodes: dict[int, dict] = {}
    for i, n in enumerate(data["nodes"]):
        if not isinstance(n, dict):
            raise WorkloadError(f"{src}: nodes[{i}] is not a map")
        nid = n.get("id")
        if isinstance(nid, bool) or not isinstance(nid, int):
            raise WorkloadError(f"{src}: nodes[{i}]: id {nid!r} is not an integer")
        if not isinstance(n.get("name", ""), str):
            raise WorkloadError(f"{src}: node {nid}: name {n['name']!r} is not a string")
        parent = n.get("ctrl_deps")
        if parent is not None and (isinstance(parent, bool) or not isinstance(parent, int)):
            raise WorkloadError(f"{src}: node {nid} ({n.get('name', '')}): ctrl_deps {parent!r} is not a node id")
        if nid in nodes:
            raise WorkloadError(f"{src}: node id {nid} appears twice (nodes[{i}])")
        nodes[nid] = n
    return nodes


def _parent(n: dict, nodes: dict) -> int | None:
    p = n.get("ctrl_deps")
    return p if p in nodes and p != n["id"] else None


def _check_tree(nodes: dict[int, dict], src: str) -> None:
    """Refuses a ``ctrl_deps`` cycle (naming its nodes: they and the nodes under them would vanish) and a tree
    nested deeper than MAX_DEPTH."""
    depth: dict[int, int] = {}
    for start in nodes:
        path, on_path, nid = [], set(), start
        while nid is not None and nid not in depth:
            if nid in on_path:
                cyc = path[path.index(nid):] + [nid]
                raise WorkloadError(f"{src}: ctrl_deps cycle: nodes {' -> '.join(map(str, cyc))} (each calls the "
                                    "next: no root reaches them)")
            path.append(nid)
            on_path.add(nid)
            nid = _parent(nodes[nid], nodes)
        d = depth[nid] if nid is not None else -1
        for x in reversed(path):
            d += 1
            depth[x] = d
            if d > MAX_DEPTH:
                raise WorkloadError(f"{src}: node {x} ({nodes[x].get('name', '')}) is nested {d} calls deep "
                                    f"(ctrl_deps): over the limit of {MAX_DEPTH}")


def from_execution_trace(path, *, name: str | None = None) -> WorkloadGraph:
    """Import an execution-trace JSON file (or its parsed dict). A malformed trace is a WorkloadError naming
    the file and, where there is one, the node."""
    data, default, src = _read(path)
    nodes = _nodes(data, src)
    _check_tree(nodes, src)
    children: dict[Any, list] = {}
    for n in nodes.values():
        children.setdefault(_parent(n, nodes), []).append(n)
    for v in children.values():
        v.sort(key=lambda x: x["id"])

    calls: list[tuple[dict, str]] = []  # (node, scope) of the outermost aten calls, in call order
    stack = []  # (node, scope), walked depth first in id order: each root's calls, the root itself not an op
    for r in reversed(children.get(None, [])):
        stack.extend((x, "") for x in reversed(children.get(r["id"], [])))
    while stack:
        c, scope = stack.pop()
        nm = c.get("name", "")
        if nm.startswith("aten::"):
            calls.append((c, scope))
            continue
        inner = scope if nm.startswith("[pytorch|profiler") else (f"{scope}.{nm}" if scope else nm)
        stack.extend((x, inner) for x in reversed(children.get(c["id"], [])))
    produced = {o[0] for c, _ in calls if isinstance(c.get("outputs"), dict)
                and isinstance(c["outputs"].get("values"), list) for o in c["outputs"]["values"]
                if isinstance(o, list) and o and isinstance(o[0], int)}
    try:
        return _build(data, calls, produced, name or default, src)
    except WorkloadError as e:
        if str(e).startswith(src):
            raise
        raise WorkloadError(f"{src}: {e}") from None


def _build(data: dict, calls: list, produced: set, gname: str, src: str) -> WorkloadGraph:
    prod: dict[int, int] = {}
    params: dict[int, TensorSpec] = {}
    inputs: list[TensorSpec] = []
    seen_inputs: set[int] = set()
    ops: list[Op] = []
    counts: dict[str, int] = {}
    for node, scope in calls:
        op = node["name"].split("::", 1)[1]
        where = f"{src}: node {node['id']} ({node['name']})"
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
        except WorkloadError as e:
            raise WorkloadError(f"{where}: {e}") from None
        except (TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as e:
            # the recorded arguments are not what the operator takes (a tensor where a list is, one missing)
            raise WorkloadError(f"{where}: its recorded arguments do not fit {node['name']} "
                                f"({type(e).__name__}: {e})") from None
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
        try:
            ops.append(Op(base if j == 0 else f"{base}_{j}", kind, node["name"], tuple(act), out_specs,
                          tuple(prefs) if kind != "view" else (), flops, attrs, tuple(sorted(deps))))
        except WorkloadError as e:
            raise WorkloadError(f"{where}: {e}") from None
        first = _tensors(args)
        for o in outs:
            if kind == "view":
                if first and first[0].tid in prod:
                    prod[o.tid] = prod[first[0].tid]
            else:
                prod[o.tid] = len(ops) - 1
    return WorkloadGraph(gname, ops, source="execution-trace", inputs=inputs,
                         meta={"schema": data.get("schema"), "buffers": []})

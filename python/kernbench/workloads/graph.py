"""The op graph that every imported workload becomes, whatever it came from.

A ``WorkloadGraph`` is a list of ``Op`` records in a valid execution order
(each op's ``deps`` are earlier ops), plus the ``Block``s that say which runs
of ops are repeated instances of one traced block (a decoder layer traced
once and stamped out ``count`` times). Importers (``from_torch``,
``from_onnx``, ``from_execution_trace``) produce it; the lowering
(``kernbench.workloads.lower``) places it on a machine. Nothing here knows
about a machine.

What is counted, so that the totals can be checked against analytic counts:

* ``Op.flops``: multiply-adds count 2 (a matmul of m x k by k x n is
  ``2 m n k`` per batch element); elementwise ops count the FLOPs per output
  element that their kind documents (``ELEMENTWISE_FLOPS`` in the importer);
  views and copies count 0.
* ``Op.params``: the parameter (and buffer) tensors the op reads, by name.
  ``WorkloadGraph.param_bytes`` counts each distinct name once, so tied
  weights (GPT-2's embedding and LM head) count once.
* ``WorkloadGraph.activation_bytes``: the bytes of every output of every op
  that materialises one (views are free and write nothing).

The records are plain data: ``to_dict``/``from_dict`` round-trip them
exactly (``save``/``load`` as JSON).
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from kernbench import atomic_output as kio
from kernbench._core import UsageError

__all__ = ["DTYPE_BYTES", "KINDS", "TensorSpec", "ParamRef", "Op", "Block", "WorkloadGraph", "WorkloadError"]


class WorkloadError(UsageError):
    """A workload graph that is malformed, or an op that cannot be imported or lowered (the message names it).
    A kernbench UsageError (so a ValueError and a KernbenchError), as every error the library raises."""


#: Element sizes of the dtypes an op record may carry (the names follow the
#: rest of kernbench: ``fp32``, ``bf16``...).
DTYPE_BYTES: dict[str, int] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int64": 8, "int32": 4, "int16": 2,
    "int8": 1, "uint8": 1, "bool": 1,
}

#: Op kinds, and what each means for the lowering:
#: ``matmul`` (linear/matmul/bmm; attrs m, n, k, batch), ``conv`` (attrs of the
#: convolution and its lowered GEMM m, n, k), ``attention`` (scaled dot-product;
#: attrs batch, heads, kv_heads, q_len, kv_len, head_dim, causal),
#: ``elementwise`` (pointwise maths, activations, residual adds), ``norm``
#: (layer/RMS/batch norm), ``softmax``, ``reduce`` (sum/mean/max over axes),
#: ``embedding`` (a gather from a table), ``view`` (reshape/transpose/slice that
#: moves no data: free), ``copy`` (a data movement that materialises a new
#: layout: contiguous, cat, transpose that copies), ``moe`` (the routed experts of an MoE layer; attrs hidden,
#: experts, top_k, ffn, tokens, counts: kernbench.workloads.moe, lowered by kernbench.workloads.moe_lower).
KINDS: tuple[str, ...] = ("matmul", "conv", "attention", "elementwise", "norm", "softmax", "reduce", "embedding",
                          "view", "copy", "moe")

#: Attrs that are a dimension of the op's work: a whole number >= 1 where present (a zero or negative dimension
#: would lower to nothing, a fraction would be truncated).
DIM_ATTRS = ("m", "n", "k", "batch", "gemm_m", "gemm_n", "gemm_k", "groups", "heads", "kv_heads", "q_len",
             "kv_len", "head_dim", "v_head_dim", "in_channels", "out_channels")
#: Attrs that are a count or a size: a whole number >= 0 where present (``bytes`` may also be None before an
#: importer fills it in; ``dim`` is a size only in an embedding, elsewhere an axis).
COUNT_ATTRS = ("elements", "operands", "out_elements", "bytes", "tokens", "rows", "bias_flops", "window")


def whole(v: Any, what: str, low: int) -> int:
    """``v`` as an int when it is a whole number >= ``low`` (an int, or a float with no fraction); else a
    WorkloadError naming ``what`` and the value. Never truncates (4.7 is refused, not 4)."""
    if isinstance(v, bool):
        raise WorkloadError(f"{what} = {v!r}: expected a whole number >= {low}, got a boolean")
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise WorkloadError(f"{what} = {v!r}: expected a whole number >= {low}")
        n = int(v)
    else:
        try:
            n = operator.index(v)
        except TypeError:
            raise WorkloadError(f"{what} = {v!r}: expected a whole number >= {low}") from None
    if n < low:
        raise WorkloadError(f"{what} = {n}: expected a whole number >= {low}")
    return n


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's shape and element type (no data)."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        if self.dtype not in DTYPE_BYTES:
            raise WorkloadError(f"unknown dtype {self.dtype!r} (known: {', '.join(DTYPE_BYTES)})")
        try:
            dims = tuple(self.shape)
        except TypeError:
            raise WorkloadError(f"shape {self.shape!r}: expected a list of dimensions") from None
        shape = tuple(whole(d, f"dimension {i} of shape {list(dims)!r}", 0) for i, d in enumerate(dims))
        object.__setattr__(self, "shape", shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TensorSpec":
        return cls(tuple(d["shape"]), d["dtype"])


@dataclass(frozen=True)
class ParamRef:
    """A parameter or buffer an op reads: its fully qualified name (``model.layers.3.mlp.down_proj.weight``)."""

    name: str
    spec: TensorSpec

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.spec.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ParamRef":
        return cls(d["name"], TensorSpec.from_dict(d))


@dataclass(frozen=True)
class Op:
    """One op of a workload.

    ``name`` is the module path it came from plus, where a module runs several
    ops, a suffix (``model.layers.3.mlp.down_proj``, ``model.layers.3.self_attn.sdpa``);
    ``target`` the source operator (``aten.mm.default``, ``onnx::MatMul``).
    ``inputs`` are activations (not parameters); ``params`` what it reads of
    the weights; ``deps`` the indices of the earlier ops whose outputs it reads.
    """

    name: str
    kind: str
    target: str
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    params: tuple[ParamRef, ...] = ()
    flops: int = 0
    attrs: Mapping[str, Any] = field(default_factory=dict)
    deps: tuple[int, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise WorkloadError(f"op {self.name!r}: unknown kind {self.kind!r} (known: {', '.join(KINDS)})")
        object.__setattr__(self, "flops", whole(self.flops, f"op {self.name!r}: flops", 0))
        if not isinstance(self.attrs, Mapping):
            raise WorkloadError(f"op {self.name!r}: attrs must be a map, got {type(self.attrs).__name__}")
        attrs = dict(self.attrs)
        for key in DIM_ATTRS + COUNT_ATTRS + (("dim",) if self.kind == "embedding" else ()):
            if key in attrs and not (key == "bytes" and attrs[key] is None):
                attrs[key] = whole(attrs[key], f"op {self.name!r}: attrs[{key!r}]", 1 if key in DIM_ATTRS else 0)
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "deps", tuple(whole(d, f"op {self.name!r}: a dep", 0) for d in self.deps))

    @property
    def dtype(self) -> str:
        """The op's compute type: that of its first output (else first input)."""
        for t in self.outputs or self.inputs:
            return t.dtype
        return "fp32"

    @property
    def param_bytes(self) -> int:
        return sum(p.spec.nbytes for p in self.params)

    @property
    def bytes_read(self) -> int:
        """Activation and parameter bytes read (0 for a view)."""
        if self.kind == "view":
            return 0
        return sum(t.nbytes for t in self.inputs) + self.param_bytes

    @property
    def bytes_written(self) -> int:
        return 0 if self.kind == "view" else sum(t.nbytes for t in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "target": self.target,
                "inputs": [t.to_dict() for t in self.inputs], "outputs": [t.to_dict() for t in self.outputs],
                "params": [p.to_dict() for p in self.params], "flops": int(self.flops),
                "attrs": dict(self.attrs), "deps": list(self.deps)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Op":
        return cls(d["name"], d["kind"], d["target"], tuple(TensorSpec.from_dict(t) for t in d["inputs"]),
                   tuple(TensorSpec.from_dict(t) for t in d["outputs"]),
                   tuple(ParamRef.from_dict(p) for p in d["params"]), int(d["flops"]), dict(d["attrs"]),
                   tuple(d["deps"]))


@dataclass(frozen=True)
class Block:
    """``ops[first:end]`` is instance 0 of a block repeated ``count`` times back to back.

    Instance i occupies ``ops[first + i*size : first + (i+1)*size]`` (``size =
    end - first``) and is instance 0 with ``{prefix}.0.`` renamed
    ``{prefix}.{i}.`` in op names, parameter names and string attrs. The lowering may simulate one
    instance and reuse its time; the op list holds all of them.
    """

    prefix: str  # e.g. "model.layers"
    first: int
    end: int
    count: int

    def __post_init__(self):
        for key in ("first", "end", "count"):
            object.__setattr__(self, key, whole(getattr(self, key), f"block {self.prefix!r}: {key}", 0))

    @property
    def size(self) -> int:
        return self.end - self.first


def _timed(op: Op, src: str, dst: str, lo: int, hi: int, shift: int) -> tuple:
    """What the lowering times of ``op`` (an op of a block instance), named as instance 0: its kind, target,
    shapes, parameter shapes, FLOPs, attrs (strings renamed ``src`` -> ``dst``) and its deps inside the
    instance ``[lo, hi)`` (as instance 0's indices, ``shift`` back)."""
    def ren(v):
        return dst + v[len(src):] if isinstance(v, str) and v.startswith(src) else v
    return (op.kind, op.target, op.inputs, op.outputs, tuple(p.spec for p in op.params), op.flops,
            {k: ren(v) for k, v in op.attrs.items()}, tuple(d - shift for d in op.deps if lo <= d < hi))


class WorkloadGraph:
    """An imported workload: ops in execution order, its repeated blocks, inputs and where it came from."""

    def __init__(self, name: str, ops: Sequence[Op], *, source: str = "hand", inputs: Sequence[TensorSpec] = (),
                 blocks: Sequence[Block] = (), meta: Mapping[str, Any] | None = None):
        self.name = name
        self.ops: list[Op] = list(ops)
        self.source = source
        self.inputs: list[TensorSpec] = list(inputs)
        self.blocks: list[Block] = list(blocks)
        self.meta: dict[str, Any] = dict(meta or {})
        self.check()

    # ---- invariants ------------------------------------------------------------
    def check(self) -> None:
        """Raises WorkloadError naming the first op whose deps are not earlier ops, or a block out of range."""
        for i, op in enumerate(self.ops):
            for d in op.deps:
                if not 0 <= d < i:
                    raise WorkloadError(f"{self.name}: op {i} ({op.name!r}) depends on op {d}, "
                                        "which is not an earlier op")
        for b in self.blocks:
            if not (0 <= b.first < b.end and b.count >= 1 and b.first + b.size * b.count <= len(self.ops)):
                raise WorkloadError(f"{self.name}: block {b.prefix!r} [{b.first}, {b.end}) x {b.count} "
                                    f"does not fit in {len(self.ops)} ops")
            self._check_instances(b)

    _FIELDS = ("kind", "target", "input shapes", "output shapes", "parameter shapes", "flops", "attrs",
               "deps inside the instance")

    def _check_instances(self, b: Block) -> None:
        """Every instance of ``b`` is timed like instance 0 (the lowering may simulate one and reuse it): each
        op's kind, shapes, FLOPs, attrs and in-block deps must be instance 0's, else a WorkloadError naming the
        block, the instance, the op and what differs."""
        base = [_timed(self.ops[b.first + j], "", "", b.first, b.end, 0) for j in range(b.size)]
        src0 = f"{b.prefix}.0."
        for i in range(1, b.count):
            shift = i * b.size
            for j in range(b.size):
                op = self.ops[b.first + shift + j]
                got = _timed(op, f"{b.prefix}.{i}.", src0, b.first + shift, b.end + shift, shift)
                if got != base[j]:
                    what = next(f for f, x, y in zip(self._FIELDS, got, base[j]) if x != y)
                    x, y = got[self._FIELDS.index(what)], base[j][self._FIELDS.index(what)]
                    raise WorkloadError(
                        f"{self.name}: block {b.prefix!r}: instance {i} differs from instance 0 at op "
                        f"{b.first + shift + j} ({op.name!r}): {what} {x!r}, instance 0 has {y!r} (a block's "
                        f"instances are timed from one: declare only identical instances as a block)")

    # ---- totals ----------------------------------------------------------------
    @property
    def flops(self) -> int:
        return sum(op.flops for op in self.ops)

    @property
    def param_bytes(self) -> int:
        """Bytes of the distinct parameters and buffers read (each name once)."""
        seen: dict[str, int] = {}
        for op in self.ops:
            for p in op.params:
                seen.setdefault(p.name, p.spec.nbytes)
        return sum(seen.values())

    @property
    def param_count(self) -> int:
        seen: dict[str, int] = {}
        for op in self.ops:
            for p in op.params:
                seen.setdefault(p.name, p.spec.numel)
        return sum(seen.values())

    @property
    def activation_bytes(self) -> int:
        """Bytes written by every op that materialises its outputs (views write nothing)."""
        return sum(op.bytes_written for op in self.ops)

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Per kind: op count, FLOPs, bytes read and written."""
        out: dict[str, dict[str, int]] = {}
        for op in self.ops:
            row = out.setdefault(op.kind, {"ops": 0, "flops": 0, "bytes_read": 0, "bytes_written": 0})
            row["ops"] += 1
            row["flops"] += op.flops
            row["bytes_read"] += op.bytes_read
            row["bytes_written"] += op.bytes_written
        return out

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def find(self, prefix: str) -> list[Op]:
        """The ops whose name starts with ``prefix`` (a module path)."""
        return [op for op in self.ops if op.name == prefix or op.name.startswith(prefix + ".")]

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per op (for a table or a DataFrame)."""
        return [{"index": i, "name": op.name, "kind": op.kind, "target": op.target, "dtype": op.dtype,
                 "flops": op.flops, "bytes_read": op.bytes_read, "bytes_written": op.bytes_written,
                 "param_bytes": op.param_bytes,
                 "outputs": " ".join("x".join(map(str, t.shape)) or "scalar" for t in op.outputs)}
                for i, op in enumerate(self.ops)]

    def summary(self) -> str:
        lines = [f"{self.name} ({self.source}): {len(self.ops)} ops, {self.flops / 1e9:.3f} GFLOP, "
                 f"{self.param_count:,} parameters ({self.param_bytes / 2**20:.1f} MiB), "
                 f"activations {self.activation_bytes / 2**20:.1f} MiB"]
        for kind, row in sorted(self.by_kind().items()):
            lines.append(f"  {kind:<12} {row['ops']:6d} ops  {row['flops'] / 1e9:12.3f} GFLOP  "
                         f"read {row['bytes_read'] / 2**20:10.1f} MiB  written {row['bytes_written'] / 2**20:10.1f} MiB")
        return "\n".join(lines)

    # ---- building --------------------------------------------------------------
    @staticmethod
    def repeat_block(ops: Sequence[Op], prefix: str, count: int, *, offset: int = 0,
                     carry: Mapping[int, int] | None = None) -> list[Op]:
        """Instances 1..count-1 of the block ``ops`` (instance 0, named ``{prefix}.0.``), renamed and re-indexed.

        ``offset`` is the index of the block's first op in the whole graph. A
        dep inside the block moves with its instance. A dep on an op before the
        block is either carried or shared: ``carry`` maps such a dep (a graph
        index) to the block position (0-based) of the op whose output the next
        instance reads in its place -- for a decoder, the hidden state that
        enters layer 0 -> the residual add that ends it. Any other dep before
        the block (rotary tables, a mask) is shared: every instance reads the
        same op. Default ``carry``: the op just before the block is carried
        from the block's last op.
        """
        size = len(ops)
        carry = {offset - 1: size - 1} if carry is None else dict(carry)
        for d, pos in carry.items():
            if not (0 <= d < offset and 0 <= pos < size):
                raise WorkloadError(f"repeat_block {prefix!r}: carry {d} -> {pos} must map an op before the "
                                    f"block (index < {offset}) to a block position in 0..{size - 1}")
        src0, out = f"{prefix}.0.", []
        for i in range(1, count):
            dst = f"{prefix}.{i}."
            shift = i * size
            first = offset + shift  # this instance's first op; the previous instance starts at first - size
            for op in ops:
                deps = tuple(d + shift if d >= offset else (first - size + carry[d] if d in carry else d)
                             for d in op.deps)
                attrs = {k: (v.replace(src0, dst, 1) if isinstance(v, str) and v.startswith(src0) else v)
                         for k, v in op.attrs.items()}  # e.g. a matmul's weight name
                out.append(replace(op, name=op.name.replace(src0, dst, 1),
                                   params=tuple(ParamRef(p.name.replace(src0, dst, 1), p.spec) for p in op.params),
                                   attrs=attrs, deps=deps))
        return out

    # ---- persistence -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "inputs": [t.to_dict() for t in self.inputs],
                "blocks": [dict(vars(b)) for b in self.blocks], "meta": self.meta,
                "ops": [op.to_dict() for op in self.ops]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadGraph":
        """The graph of ``to_dict``'s record; a malformed record is a WorkloadError naming the op (or part)."""
        if not isinstance(d, Mapping):
            raise WorkloadError(f"a workload graph record is a map, got {type(d).__name__}")
        ops = []
        for i, o in enumerate(_list(d, "ops")):
            try:
                ops.append(Op.from_dict(o))
            except (KeyError, TypeError, AttributeError, ValueError) as e:
                detail = f"key {e} missing" if isinstance(e, KeyError) else str(e)
                if isinstance(e, WorkloadError):
                    raise WorkloadError(f"ops[{i}]: {e}") from None
                raise WorkloadError(f"ops[{i}]: malformed op record ({detail})") from None
        try:
            inputs = [TensorSpec.from_dict(t) for t in _list(d, "inputs", [])]
            blocks = [Block(**b) for b in _list(d, "blocks", [])]
        except (KeyError, TypeError, AttributeError) as e:
            raise WorkloadError(f"malformed inputs or blocks ({e})") from None
        return cls(d.get("name", "graph"), ops, source=d.get("source", "hand"), inputs=inputs, blocks=blocks,
                   meta=d.get("meta", {}))

    def save(self, path: str | Path) -> Path:
        """Writes the graph as JSON, atomically."""
        return kio.write_json(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "WorkloadGraph":
        """A graph ``save`` wrote; an unreadable or malformed file is a WorkloadError naming it."""
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            raise WorkloadError(f"WorkloadGraph.load: {p}: not a readable JSON file ({e})") from None
        try:
            return cls.from_dict(data)
        except WorkloadError as e:
            raise WorkloadError(f"WorkloadGraph.load: {p}: {e}") from None

    def __repr__(self) -> str:
        return f"<WorkloadGraph {self.name!r}: {len(self.ops)} ops, {self.flops / 1e9:.3f} GFLOP>"


def _list(d: Mapping[str, Any], key: str, default: Any = None) -> list:
    v = d.get(key, default)
    if not isinstance(v, list):
        raise WorkloadError(f"{key}: expected a list, got {type(v).__name__}")
    return v


def ops_of(items: Iterable[Op | Mapping[str, Any]]) -> list[Op]:
    """Ops from records or dicts (a convenience for hand-written graphs)."""
    return [o if isinstance(o, Op) else Op.from_dict(o) for o in items]

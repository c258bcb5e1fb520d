"""``from_onnx``: an ONNX model (file or ModelProto) as a WorkloadGraph, shapes from ONNX shape inference.

Every node is one op of the same kinds and FLOPs conventions as
``from_torch`` (``kernbench.workloads.torch_ops``): MatMul/Gemm are
``matmul`` (Gemm's C adds ``m n``), Conv is ``conv``, LayerNormalization /
BatchNormalization / RMSNormalization ``norm``, Softmax ``softmax``, the
pointwise operators ``elementwise``, Reduce*/pooling ``reduce``, Gather of
an initializer ``embedding``. Reshape/Flatten/Squeeze/Unsqueeze/Slice/
Split/Expand/Identity/Dropout are ``view``; Transpose and Concat are
``copy`` (ONNX has no strided views: a runtime materialises a transpose).
Shape, Constant and the other shape-only operators are no op.
Initializers are the params (by their names); a node whose output shapes
inference could not determine, or an operator not in the table, is an
error naming the node and its operator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernbench.workloads.graph import Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph
from kernbench.workloads.torch_ops import matmul_dims, numel

__all__ = ["from_onnx", "ONNX_ELEMENTWISE", "ONNX_VIEWS"]

#: Pointwise operators and their FLOPs per output element (the torch table's values).
ONNX_ELEMENTWISE: dict[str, int] = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Neg", "Abs", "Reciprocal", "Sqrt", "Pow", "Max", "Min",
                     "Clip", "Relu", "LeakyRelu", "Elu", "Exp", "Log", "Tanh", "Sigmoid", "Erf", "Sin", "Cos",
                     "Sign", "Floor", "Ceil", "Round", "Mod", "Equal", "Less", "LessOrEqual", "Greater",
                     "GreaterOrEqual", "And", "Or", "Not", "Xor", "Where", "IsNaN", "IsInf", "CumSum", "Trilu"), 1),
    "Softplus": 2, "HardSigmoid": 2, "HardSwish": 3, "Mish": 3, "Gelu": 5, "FastGelu": 8,
    **dict.fromkeys(("Cast", "CastLike", "ConstantOfShape", "Range", "RandomNormal", "RandomUniform",
                     "RandomNormalLike", "RandomUniformLike"), 0),
}
ONNX_VIEWS = frozenset(("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Split", "Expand", "Identity",
                        "Dropout"))
ONNX_COPIES = frozenset(("Transpose", "Concat", "Tile", "Pad", "GatherElements", "GatherND", "ScatterND",
                         "ScatterElements", "Resize", "DepthToSpace", "SpaceToDepth", "OneHot"))
ONNX_NO_OP = frozenset(("Shape", "Size", "Constant"))
ONNX_REDUCE = {**dict.fromkeys(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ArgMax",
                                "ArgMin", "ReduceL2", "ReduceL1", "ReduceLogSumExp", "ReduceSumSquare"), 1)}
ONNX_POOL = frozenset(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"))
ONNX_NORM = {"LayerNormalization": (5, 1, 2), "BatchNormalization": (2, 1, 2), "RMSNormalization": (3, 1, -1),
             "GroupNormalization": (5, 1, 2), "InstanceNormalization": (5, 1, 2),
             "SimplifiedLayerNormalization": (3, 1, -1)}

_ELEM_TYPES = {1: "fp32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "fp16",
               11: "fp64", 16: "bf16", 17: "fp8", 18: "fp8", 19: "fp8", 20: "fp8"}


def _onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise WorkloadError("from_onnx needs the onnx package: pip install 'kernbench[onnx]'") from e
    return onnx


def _type_spec(tp, what: str) -> TensorSpec | None:
    t = tp.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None  # symbolic: fixed shapes only
        dims.append(int(d.dim_value))
    if t.elem_type not in _ELEM_TYPES:
        raise WorkloadError(f"{what}: ONNX element type {t.elem_type} has no kernbench dtype")
    return TensorSpec(tuple(dims), _ELEM_TYPES[t.elem_type])


def _attr(node, name: str, default: Any = None) -> Any:
    onnx = _onnx()
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _name(node, i: int) -> str:
    n = node.name.strip("/").replace("/", ".") if node.name else ""
    return n or f"{node.op_type.lower()}_{i}"


def _load(p: Path, onnx):
    """The ModelProto in file ``p``: an empty file, bytes protobuf cannot decode or a model without a graph
    are a WorkloadError naming the file."""
    try:
        data = p.read_bytes()
    except OSError as e:
        raise WorkloadError(f"from_onnx: {p}: cannot be read ({e})") from None
    if not data:
        raise WorkloadError(f"from_onnx: {p}: empty file (0 bytes), not an ONNX model")
    try:
        model = onnx.load_from_string(data)
    except Exception as e:  # protobuf's DecodeError, or onnx's own errors on bytes that decode to nonsense
        raise WorkloadError(f"from_onnx: {p}: not an ONNX model ({type(e).__name__}: "
                            f"{(str(e).splitlines() or [''])[0]})") from None
    if not model.HasField("graph"):
        raise WorkloadError(f"from_onnx: {p}: not an ONNX model (no graph)")
    bad = _not_text(model, "model")
    if bad:
        raise WorkloadError(f"from_onnx: {p}: not an ONNX model ({bad} is not UTF-8 text)")
    return model


def _not_text(msg, where: str) -> str | None:
    """The first string field of ``msg`` (recursively) that protobuf left as bytes, which it does for a
    proto2 string that is not UTF-8; None when every one is text."""
    for fd, value in msg.ListFields():
        name = f"{where}.{fd.name}"
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        items = list(enumerate(value)) if repeated else [(None, value)]
        for i, v in items:
            at = f"{name}[{i}]" if repeated else name
            if fd.type == fd.TYPE_STRING and not isinstance(v, str):
                return at
            if fd.type == fd.TYPE_MESSAGE:
                bad = _not_text(v, at)
                if bad:
                    return bad
    return None


def from_onnx(path_or_model, *, name: str | None = None) -> WorkloadGraph:
    """Import an ONNX model (a path or an ``onnx.ModelProto``) with fixed input shapes. A malformed model is a
    WorkloadError naming the file (``from_onnx: FILE: ...``) and, where there is one, the node."""
    onnx = _onnx()
    if isinstance(path_or_model, (str, Path)):
        p = Path(path_or_model)
        if not p.is_file():
            raise WorkloadError(f"from_onnx: no file {p}")
        src = f"from_onnx: {p}"
        model = _load(p, onnx)
        default_name = p.stem
    else:
        model = path_or_model
        default_name = model.graph.name or "onnx"
        src = f"from_onnx: model {default_name!r}"
    try:
        return _import(model, name or default_name, onnx)
    except WorkloadError as e:
        raise WorkloadError(f"{src}: {e}") from None


def _import(model, gname: str, onnx) -> WorkloadGraph:
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:
        raise WorkloadError(f"shape inference failed: {(str(e).splitlines() or [''])[0]}") from e
    g = model.graph
    specs: dict[str, TensorSpec | None] = {}
    params: dict[str, TensorSpec] = {}
    for init in g.initializer:
        if init.data_type not in _ELEM_TYPES:
            raise WorkloadError(f"initializer {init.name!r}: ONNX element type {init.data_type} unsupported")
        params[init.name] = TensorSpec(tuple(int(d) for d in init.dims), _ELEM_TYPES[init.data_type])
        specs[init.name] = params[init.name]
    inputs = []
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name not in specs:
            specs[vi.name] = _type_spec(vi.type, f"value {vi.name!r}")
    for vi in g.input:
        if vi.name not in params and specs.get(vi.name) is not None:
            inputs.append(specs[vi.name])
    consts: set[str] = set()
    param_of: dict[str, str] = dict((n, n) for n in params)
    prod: dict[str, int] = {}
    ops: list[Op] = []
    for i, node in enumerate(g.node):
        t = node.op_type
        nm = _name(node, i)
        where = f"ONNX node {nm!r} ({t})"
        try:
            if t in ONNX_NO_OP or (node.domain not in ("", "ai.onnx") and t in ONNX_NO_OP):
                consts.update(node.output)
                continue
            ins = [x for x in node.input if x]
            outs = [specs.get(o) for o in node.output if o]
            if any(o is None for o in outs):
                raise WorkloadError(f"{where}: shape inference left an output shape unknown (fixed shapes only)")
            if any(x not in specs and x not in consts for x in ins):
                raise WorkloadError(f"{where}: input of unknown shape")
            if t in ONNX_VIEWS and ins:
                src = ins[0]
                for o in node.output:
                    if src in param_of:
                        param_of[o] = param_of[src]
                    elif src in prod:
                        prod[o] = prod[src]
                if src in param_of:
                    continue  # a view of a weight is that weight
            shape = lambda x: specs[x].shape if specs.get(x) is not None else None  # noqa: E731
            act = [x for x in ins if x not in param_of and x not in consts and specs.get(x) is not None]
            prefs = []
            for x in ins:
                if x in param_of and param_of[x] not in {p.name for p in prefs}:
                    prefs.append(ParamRef(param_of[x], params[param_of[x]]))
            out0 = outs[0].shape if outs else ()
            flops, attrs = 0, {}
            if t in ("MatMul", "Gemm"):
                sa, sb = list(shape(ins[0])), list(shape(ins[1]))
                if t == "Gemm":
                    if _attr(node, "transA", 0):
                        sa = sa[::-1]
                    if _attr(node, "transB", 0):
                        sb = sb[::-1]
                m, n, k, batch = matmul_dims(sa, sb)  # numpy's rules: a 1-D operand is a row or a column
                bias = ins[2] if t == "Gemm" and len(ins) > 2 else None
                bias_flops = m * n * batch if bias is not None else 0
                kind, flops = "matmul", 2 * batch * m * n * k + bias_flops
                attrs = {"m": m, "n": n, "k": k, "batch": batch, "weight": param_of.get(ins[1]) or param_of.get(ins[0]),
                         "bias": param_of.get(bias) if bias else None, "bias_flops": bias_flops}
            elif t == "Conv":
                sx, sw = shape(ins[0]), shape(ins[1])
                if len(sw) != 4:
                    raise WorkloadError(f"{where}: only 2-d convolutions are modelled")
                groups = int(_attr(node, "group", 1))
                cout, kh, kw = sw[0], sw[2], sw[3]
                oh, ow = out0[2], out0[3]
                gm, gn, gk = sx[0] * oh * ow, cout // groups, sx[1] // groups * kh * kw
                bias_flops = sx[0] * cout * oh * ow if len(ins) > 2 else 0
                kind, flops = "conv", 2 * gm * gn * gk * groups + bias_flops
                pads = list(_attr(node, "pads", [0, 0, 0, 0]))
                attrs = {"batch": sx[0], "in_channels": sx[1], "out_channels": cout, "kernel": [kh, kw],
                         "stride": list(_attr(node, "strides", [1, 1])), "padding": pads[:2],
                         "dilation": list(_attr(node, "dilations", [1, 1])), "groups": groups, "out_hw": [oh, ow],
                         "gemm_m": gm, "gemm_n": gn, "gemm_k": gk, "weight": param_of.get(ins[1]),
                         "bias": param_of.get(ins[2]) if len(ins) > 2 else None, "bias_flops": bias_flops}
            elif t in ONNX_NORM:
                per, wi, bi = ONNX_NORM[t]
                e = numel(shape(ins[0]))
                has_w = wi < len(ins) and bool(ins[wi])
                has_b = 0 <= bi < len(ins) and bool(ins[bi])
                kind, flops = "norm", e * (per + has_w + has_b)
                attrs = {"elements": e, "operands": 1, "norm": t}
            elif t in ("Softmax", "LogSoftmax"):
                kind, flops = "softmax", numel(out0) * 5
                attrs = {"elements": numel(out0), "operands": 1, "dim": _attr(node, "axis", -1)}
            elif t in ONNX_REDUCE:
                e = numel(shape(ins[0]))
                kind, flops, attrs = "reduce", e * ONNX_REDUCE[t], {"elements": e, "operands": 1,
                                                                   "out_elements": numel(out0)}
            elif t in ONNX_POOL:
                sx = shape(ins[0])
                window = numel(sx[2:]) if t.startswith("Global") else numel(_attr(node, "kernel_shape", [1]))
                kind, flops = "reduce", numel(out0) * window
                attrs = {"elements": numel(sx), "operands": 1, "out_elements": numel(out0), "window": window, "pool": t}
            elif t == "Gather" and ins[0] in param_of:
                rows, dim = shape(ins[0])[0], numel(shape(ins[0])[1:])
                kind, attrs = "embedding", {"rows": rows, "dim": dim, "tokens": numel(shape(ins[1])),
                                            "weight": param_of[ins[0]]}
            elif t in ONNX_VIEWS:
                kind = "view"
            elif t in ONNX_COPIES or t == "Gather":
                kind, attrs = "copy", {"bytes": sum(o.nbytes for o in outs)}
            elif t in ONNX_ELEMENTWISE:
                per = ONNX_ELEMENTWISE[t]
                if t == "Gelu" and _attr(node, "approximate", "none") == "tanh":
                    per = 8
                kind, flops = "elementwise", numel(out0) * per
                attrs = {"elements": numel(out0), "operands": len(act) + len(prefs)}
            else:
                raise WorkloadError(f"{where} has no kernbench kind: add it to kernbench.workloads.onnx_import")
            deps = sorted({prod[x] for x in act if x in prod})
            ops.append(Op(nm, kind, f"onnx::{t}", tuple(specs[x] for x in act), tuple(outs),
                          tuple(prefs) if kind != "view" else (), int(flops), attrs, tuple(deps)))
            for o in node.output:
                if kind == "view":
                    if ins and ins[0] in prod:
                        prod[o] = prod[ins[0]]
                else:
                    prod[o] = len(ops) - 1
        except WorkloadError as e:
            raise WorkloadError(e if str(e).startswith(where) else f"{where}: {e}") from None
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError) as e:
            # a node whose inputs, attributes or shapes are not what its operator takes
            raise WorkloadError(f"{where}: its inputs or attributes do not fit {t} ({type(e).__name__}: {e})") from None
    return WorkloadGraph(gname, ops, source="onnx", inputs=inputs,
                         meta={"opset": [int(o.version) for o in model.opset_import],
                               "onnx": onnx.__version__, "buffers": []})

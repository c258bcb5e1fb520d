"""The ATen op table of ``from_torch``: which kind each op is, its FLOPs and its attrs.

``torch.export`` (default, pre-dispatch ATen IR) keeps the ops a model is
written in -- ``aten.linear``, ``aten.conv2d``, ``aten.scaled_dot_product_attention``,
``aten.layer_norm`` -- so each is recognised whole here. A function that
is not in these tables is an error naming it (``classify`` raises), never a
silent zero.

What is counted (the FLOPs conventions every analytic test derives from):

* matmul: ``2 m n k`` per batch element; a bias (``linear``/``addmm`` with
  bias) adds ``m n`` (one add per output element, ``attrs["bias_flops"]``).
  A two-operand ``einsum`` is a batched GEMM (shared output letters are the
  batch, letters summed away ``k``); other einsums are unknown ops.
* conv: ``2 gemm_m gemm_n gemm_k`` per group (the im2col GEMM), plus
  ``batch * out_channels * oh * ow`` for a bias.
* attention (``scaled_dot_product_attention``): the two GEMMs,
  ``2 b h q_len kv_len (head_dim + v_head_dim)``, over the full score matrix
  even when causal (``attrs["causal"]`` says so; a kernel that skips the
  masked half may halve it). Scale, mask and softmax are not counted.
* elementwise: ``ELEMENTWISE_FLOPS[op]`` per output element (1 for one
  arithmetic operation, comparison, selection or elementary function --
  exp, tanh, erf, rsqrt, sigmoid...; a composite activation counts its
  elementary operations: gelu 5 (erf form) or 8 (tanh form), silu 2; casts
  and tensor creation 0).
* norm: per element 5 to normalise (mean, subtract, square, variance sum,
  scale by the reciprocal standard deviation) plus 1 each for weight and
  bias; RMS norm 3 (square, sum, scale) plus 1 for weight; batch norm in
  inference 2 (subtract mean, scale; the per-channel reciprocal is not
  counted) plus weight and bias.
* softmax: 5 per element (max, subtract, exp, sum, divide).
* reduce: 1 per input element (3 for var/std); pooling: 1 per output
  element per window tap.
* view, copy, embedding: 0 (they move data: their bytes are what count).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from kernbench.workloads.graph import WorkloadError, whole

__all__ = ["ELEMENTWISE_FLOPS", "VIEW_OPS", "COPY_OPS", "IGNORED_OPS", "REDUCE_FLOPS", "NORM_OPS", "classify",
           "dtype_name", "numel", "matmul_dims"]

#: FLOPs per output element of the pointwise ops (see the module docstring).
ELEMENTWISE_FLOPS: dict[str, int] = {
    **dict.fromkeys((
        "add", "sub", "rsub", "mul", "div", "neg", "abs", "reciprocal", "sqrt", "rsqrt", "pow", "square",
        "maximum", "minimum", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "relu", "relu6", "hardtanh",
        "threshold", "leaky_relu", "elu", "exp", "exp2", "log", "log2", "log1p", "expm1", "tanh", "sigmoid", "erf",
        "sin", "cos", "sign", "floor", "ceil", "round", "trunc", "fmod", "remainder", "floor_divide",
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "logical_xor",
        "__and__", "__or__", "__xor__", "__invert__", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor",
        "where", "masked_fill", "isnan", "isinf", "cumsum", "diff", "triu", "tril"), 1),
    **dict.fromkeys(("lerp", "addcmul", "addcdiv"), 2),
    "silu": 2,    # x * sigmoid(x)
    "mish": 3,    # x * tanh(softplus(x))
    "softplus": 2,
    "hardswish": 3, "hardsigmoid": 2,
    "gelu": 5,    # 0.5 x (1 + erf(x / sqrt 2)); the tanh form counts 8 (see _gelu_flops)
    # Casts and creation write a tensor but do no arithmetic.
    **dict.fromkeys(("_to_copy", "to", "type_as", "fill", "zero", "arange", "zeros", "ones", "full", "empty",
                     "empty_like", "zeros_like", "ones_like", "full_like", "new_ones", "new_zeros", "new_full",
                     "new_empty", "scalar_tensor", "rand", "randn", "rand_like", "randn_like",
                     "empty_strided", "lift_fresh_copy", "native_dropout", "bernoulli"), 0),
}

#: Ops that move no data (a new view of the same storage): kind "view", free.
VIEW_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "expand_as", "slice", "select",
    "narrow", "unsqueeze", "squeeze", "alias", "detach", "view_as", "unflatten", "flatten", "split",
    "split_with_sizes", "chunk", "unbind", "movedim", "swapaxes", "swapdims", "diagonal", "as_strided",
    "unfold", "dropout", "feature_dropout", "alpha_dropout", "contiguous", "clone", "identity"))
# dropout is a view only when not training (checked in classify); contiguous and
# reshape are views only when the input's layout allows it, clone never:
# classify turns them into copies.

#: Ops that materialise data in a new layout (kind "copy", bytes = output bytes).
COPY_OPS = frozenset(("cat", "concat", "concatenate", "stack", "copy", "copy_", "index", "index_select", "gather",
                      "take", "repeat", "repeat_interleave", "roll", "flip", "pad", "constant_pad_nd",
                      "index_put", "index_put_", "scatter", "scatter_add", "masked_scatter", "_unsafe_index",
                      "upsample_nearest2d", "one_hot"))

#: Nodes that are no op at all (asserts, shape queries, grad-mode switches).
IGNORED_OPS = frozenset(("_assert_tensor_metadata", "_assert_async", "_assert_scalar", "sym_size", "sym_numel",
                         "sym_stride", "sym_storage_offset", "_local_scalar_dense", "item", "_set_grad_enabled",
                         "_functional_assert_async", "_functional_sym_constrain_range", "sym_constrain_range",
                         "sym_constrain_range_for_size", "resize_"))

#: FLOPs per input element of the reductions.
REDUCE_FLOPS: dict[str, int] = {
    **dict.fromkeys(("sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "any", "all",
                     "nansum", "count_nonzero", "logsumexp", "linalg_vector_norm", "norm"), 1),
    **dict.fromkeys(("var", "std", "var_mean", "std_mean"), 3),
}
POOL_OPS = frozenset(("max_pool1d", "max_pool2d", "max_pool2d_with_indices", "avg_pool1d", "avg_pool2d",
                      "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "_adaptive_avg_pool2d"))

#: Norm ops: (FLOPs per element to normalise, index of weight arg, index of bias arg).
NORM_OPS: dict[str, tuple[int, int, int]] = {
    "layer_norm": (5, 2, 3), "native_layer_norm": (5, 2, 3), "group_norm": (5, 2, 3),
    "native_group_norm": (5, 1, 2), "rms_norm": (3, 2, -1), "_fused_rms_norm": (3, 2, -1),
    "batch_norm": (2, 1, 2), "_native_batch_norm_legit_no_training": (2, 1, 2), "instance_norm": (5, 1, 2),
}
SOFTMAX_OPS = frozenset(("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"))
SOFTMAX_FLOPS = 5
MATMUL_OPS = frozenset(("linear", "mm", "addmm", "bmm", "baddbmm", "matmul", "addbmm"))
CONV_OPS = frozenset(("conv1d", "conv2d", "convolution", "_convolution"))
SDPA_OPS = frozenset(("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
                      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention"))

_DTYPES = {"float32": "fp32", "float": "fp32", "float64": "fp64", "double": "fp64", "float16": "fp16",
           "half": "fp16", "bfloat16": "bf16", "int64": "int64", "long": "int64", "int32": "int32",
           "int": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8"}


def dtype_name(dtype) -> str:
    """kernbench's dtype name of a torch dtype (``torch.bfloat16`` -> ``bf16``)."""
    key = str(dtype).removeprefix("torch.")
    if key not in _DTYPES:
        raise WorkloadError(f"torch dtype {dtype} has no kernbench dtype (known: {', '.join(sorted(_DTYPES))})")
    return _DTYPES[key]


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def matmul_dims(sa: Sequence[int], sb: Sequence[int]) -> tuple[int, int, int, int]:
    """``(m, n, k, batch)`` of ``a @ b`` by numpy's matmul rules: a 1-D ``a`` is a row (``m = 1``), a 1-D ``b`` a
    column (``n = 1``), the leading dims broadcast into the batch; with a 2-D ``b`` every leading dim of ``a`` is
    rows (one GEMM, the same FLOPs)."""
    sa, sb = [int(d) for d in sa], [int(d) for d in sb]
    if not sa or not sb:
        raise WorkloadError(f"matmul of a scalar (shapes {sa} and {sb})")
    if len(sa) == 1:
        sa = [1] + sa
    if len(sb) == 1:
        sb = sb + [1]
    k, n = sa[-1], sb[-1]
    if len(sb) == 2:
        return numel(sa[:-1]), n, k, 1
    la, lb = sa[:-2], sb[:-2]
    width = max(len(la), len(lb))
    la, lb = [1] * (width - len(la)) + la, [1] * (width - len(lb)) + lb
    return sa[-2], n, k, numel(max(x, y) for x, y in zip(la, lb))


class Call:
    """What ``classify`` sees of one FX node: the op's base name, args, and the meta shapes.

    ``arg(i)`` is the i-th positional argument (or keyword ``name``) as the
    graph holds it; ``shape(x)`` the shape of an argument that is a tensor
    node; ``param(x)`` the parameter name behind it (through views) or None.
    """

    def __init__(self, op: str, args: Sequence[Any], kwargs: dict, out_shapes: list[tuple[int, ...]],
                 shape_of: Callable[[Any], tuple[int, ...] | None], param_of: Callable[[Any], str | None],
                 contiguous_of: Callable[[Any], bool], viewable: Callable[[Any, tuple[int, ...]], bool],
                 dtype_of: Callable[[Any], str | None], out_dtype: str | None):
        self.op, self.args, self.kwargs, self.out_shapes = op, list(args), dict(kwargs), out_shapes
        self.shape, self.param, self.contiguous, self.viewable = shape_of, param_of, contiguous_of, viewable
        self.dtype, self.out_dtype = dtype_of, out_dtype

    def arg(self, i: int, name: str | None = None, default: Any = None) -> Any:
        if i < len(self.args):
            return self.args[i]
        if name is not None and name in self.kwargs:
            return self.kwargs[name]
        return default

    @property
    def out(self) -> tuple[int, ...]:
        return self.out_shapes[0] if self.out_shapes else ()

    def tensor_args(self) -> list[Any]:
        out = []
        for a in list(self.args) + list(self.kwargs.values()):
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if self.shape(x) is not None:
                    out.append(x)
        return out


def _pair(v, n=2, what="a stride, padding or dilation") -> list[int]:
    """``v`` (one int or a list) as ``n`` whole numbers (a recorded 1.5 is refused, not truncated)."""
    if isinstance(v, (list, tuple)):
        v = [whole(x, what, 0) for x in v]
        return v * n if len(v) == 1 else v
    return [whole(v, what, 0)] * n


def _matmul(c: Call) -> tuple[int, dict]:
    op = c.op
    bias = None
    if op == "linear":
        a, w, bias = c.arg(0), c.arg(1), c.arg(2, "bias")
        sa, sw = c.shape(a), c.shape(w)
        k, n = sa[-1], sw[0]
        m, batch, weight = numel(sa[:-1]), 1, c.param(w)
    elif op in ("mm", "addmm"):
        if op == "addmm":
            bias, a, b = c.arg(0), c.arg(1), c.arg(2)
        else:
            a, b = c.arg(0), c.arg(1)
        (m, k), n, batch = c.shape(a), c.shape(b)[1], 1
        weight = c.param(b) or c.param(a)
    elif op in ("bmm", "baddbmm", "addbmm"):
        if op != "bmm":
            bias, a, b = c.arg(0), c.arg(1), c.arg(2)
        else:
            a, b = c.arg(0), c.arg(1)
        sa, sb = c.shape(a), c.shape(b)
        batch, m, k, n = sa[0], sa[1], sa[2], sb[2]
        weight = c.param(b) or c.param(a)
    else:  # matmul: numpy's rules (1-D operands, broadcast batch dims)
        a, b = c.arg(0), c.arg(1)
        m, n, k, batch = matmul_dims(c.shape(a), c.shape(b))
        weight = c.param(b) or c.param(a)
    flops = 2 * batch * m * n * k
    bias_flops = 0
    if bias is not None and c.shape(bias) is not None:
        bias_flops = batch * m * n
    attrs = {"m": int(m), "n": int(n), "k": int(k), "batch": int(batch), "weight": weight,
             "bias": c.param(bias) if bias is not None else None, "bias_flops": int(bias_flops)}
    return flops + bias_flops, attrs


def _einsum(c: Call) -> tuple[int, dict]:
    """A two-operand einsum as a batched GEMM: letters in both inputs and the output are the batch,
    in both inputs only the contraction (k), in one input and the output m or n."""
    eq, operands = c.arg(0), c.arg(1)
    if not isinstance(eq, str) or not isinstance(operands, (list, tuple)) or len(operands) != 2 or "..." in eq:
        raise KeyError("einsum")  # only the explicit two-operand form is a GEMM
    lhs, out = eq.replace(" ", "").split("->") if "->" in eq else (eq.replace(" ", ""), None)
    sa, sb = lhs.split(",")
    if out is None:
        raise KeyError("einsum")
    size = {}
    for letters, x in ((sa, operands[0]), (sb, operands[1])):
        for ch, d in zip(letters, c.shape(x)):
            size[ch] = int(d)
    batch = numel([size[ch] for ch in size if ch in sa and ch in sb and ch in out])
    k = numel([size[ch] for ch in size if ch in sa and ch in sb and ch not in out])
    m = numel([size[ch] for ch in size if ch in sa and ch not in sb])
    n = numel([size[ch] for ch in size if ch in sb and ch not in sa])
    weight = c.param(operands[1]) or c.param(operands[0])
    return 2 * batch * m * n * k, {"m": m, "n": n, "k": k, "batch": batch, "weight": weight, "bias": None,
                                   "bias_flops": 0, "equation": eq}


def _conv(c: Call) -> tuple[int, dict]:
    x, w = c.arg(0), c.arg(1)
    sx, sw, so = c.shape(x), c.shape(w), c.out
    if len(sw) not in (3, 4):
        raise WorkloadError(f"aten.{c.op}: a {len(sw) - 2}-d convolution (only 1-d and 2-d are modelled)")
    two_d = len(sw) == 4
    if c.op in ("convolution", "_convolution"):
        bias, stride, padding, dilation, transposed, groups = (c.arg(2), c.arg(3), c.arg(4), c.arg(5), c.arg(6),
                                                               c.arg(8))
        if transposed:
            raise WorkloadError(f"aten.{c.op}: transposed convolution is not modelled")
    else:
        bias, stride, padding = c.arg(2, "bias"), c.arg(3, "stride", 1), c.arg(4, "padding", 0)
        dilation, groups = c.arg(5, "dilation", 1), c.arg(6, "groups", 1)
    groups = whole(groups or 1, f"aten.{c.op}: groups", 1)
    batch, cin, cout = sx[0], sx[1], sw[0]
    if cout % groups:
        raise WorkloadError(f"aten.{c.op}: groups = {groups} does not divide the {cout} output channels")
    kernel = list(sw[2:]) if two_d else [1, sw[2]]
    out_hw = list(so[2:]) if two_d else [1, so[2]]
    pad = padding if isinstance(padding, str) else (_pair(padding, 2 if two_d else 1))
    gm, gn, gk = batch * out_hw[0] * out_hw[1], cout // groups, cin // groups * kernel[0] * kernel[1]
    bias_flops = batch * cout * out_hw[0] * out_hw[1] if bias is not None and c.shape(bias) is not None else 0
    attrs = {"batch": int(batch), "in_channels": int(cin), "out_channels": int(cout), "kernel": kernel,
             "stride": _pair(stride, 2 if two_d else 1), "padding": pad,
             "dilation": _pair(dilation, 2 if two_d else 1), "groups": groups, "out_hw": out_hw,
             "gemm_m": int(gm), "gemm_n": int(gn), "gemm_k": int(gk), "weight": c.param(w),
             "bias": c.param(bias) if bias is not None else None, "bias_flops": int(bias_flops)}
    return 2 * gm * gn * gk * groups + bias_flops, attrs


def _sdpa(c: Call) -> tuple[int, dict]:
    q, k, v = c.shape(c.arg(0)), c.shape(c.arg(1)), c.shape(c.arg(2))
    mask = c.arg(3, "attn_mask")
    causal = bool(c.arg(5, "is_causal", False)) if c.op == "scaled_dot_product_attention" else \
        bool(c.arg(4 if "flash" in c.op else 5, "is_causal", False))
    batch, heads, q_len, head_dim = numel(q[:-3]), q[-3], q[-2], q[-1]
    kv_heads, kv_len, v_dim = k[-3], k[-2], v[-1]
    flops = 2 * batch * heads * q_len * kv_len * (head_dim + v_dim)
    attrs = {"batch": int(batch), "heads": int(heads), "kv_heads": int(kv_heads), "q_len": int(q_len),
             "kv_len": int(kv_len), "head_dim": int(head_dim), "v_head_dim": int(v_dim), "causal": causal,
             "mask": mask is not None and c.shape(mask) is not None,
             "enable_gqa": bool(c.kwargs.get("enable_gqa", c.arg(7) if c.op == "scaled_dot_product_attention"
                                             else False))}
    return flops, attrs


def _elementwise_attrs(c: Call) -> dict:
    return {"elements": numel(c.out), "operands": len(c.tensor_args())}


def classify(c: Call) -> tuple[str, int, dict] | None:
    """``(kind, flops, attrs)`` of one call, or None for a node that is no op. Raises for an unknown op."""
    op = c.op
    if op in IGNORED_OPS:
        return None
    if op in MATMUL_OPS:
        f, a = _matmul(c)
        return "matmul", f, a
    if op == "einsum":
        f, a = _einsum(c)
        return "matmul", f, a
    if op in CONV_OPS:
        f, a = _conv(c)
        return "conv", f, a
    if op in SDPA_OPS:
        f, a = _sdpa(c)
        return "attention", f, a
    if op == "embedding":
        w, idx = c.arg(0), c.arg(1)
        rows, dim = c.shape(w)
        return "embedding", 0, {"rows": int(rows), "dim": int(dim), "tokens": numel(c.shape(idx)),
                                "weight": c.param(w)}
    if op in NORM_OPS:
        per, wi, bi = NORM_OPS[op]
        x = c.shape(c.arg(0))
        has_w = wi >= 0 and c.shape(c.arg(wi)) is not None
        has_b = bi >= 0 and c.shape(c.arg(bi)) is not None
        elements = numel(x)
        return "norm", elements * (per + has_w + has_b), {"elements": elements, "operands": 1, "norm": op}
    if op in SOFTMAX_OPS:
        e = numel(c.out)
        return "softmax", e * SOFTMAX_FLOPS, {"elements": e, "operands": 1, "dim": c.arg(1)}
    if op in REDUCE_FLOPS:
        src = c.tensor_args()
        e_in = numel(c.shape(src[0])) if src else 0
        return "reduce", e_in * REDUCE_FLOPS[op], {"elements": e_in, "operands": 1, "out_elements": numel(c.out)}
    if op in POOL_OPS:
        sx, so = c.shape(c.arg(0)), c.out
        if op.startswith("adaptive") or op.startswith("_adaptive"):
            window = numel(sx[2:]) // max(1, numel(so[2:]))
        else:
            window = numel(_pair(c.arg(1), len(sx) - 2))
        e_in = numel(sx)
        return "reduce", numel(so) * window, {"elements": e_in, "operands": 1, "out_elements": numel(so),
                                              "window": int(window), "pool": op}
    if op in ("dropout", "feature_dropout", "alpha_dropout"):
        if c.arg(2, "train", False):
            return "elementwise", numel(c.out), _elementwise_attrs(c)  # a mask multiply
        return "view", 0, {}
    if op in ("contiguous", "clone"):
        x = c.arg(0)
        if op == "contiguous" and c.contiguous(x):
            return "view", 0, {}
        return "copy", 0, {"bytes": None}
    if op == "reshape" and not c.viewable(c.arg(0), c.out):
        return "copy", 0, {"bytes": None}
    if op in VIEW_OPS:
        return "view", 0, {}
    if op in COPY_OPS:
        return "copy", 0, {"bytes": None}
    if op in ("to", "_to_copy", "type_as"):
        x = c.arg(0)
        if c.dtype(x) == c.out_dtype and c.shape(x) == c.out:
            return "view", 0, {}  # to() of the dtype it has returns the tensor itself
        return "elementwise", 0, {**_elementwise_attrs(c), "cast": f"{c.dtype(x)}->{c.out_dtype}"}
    if op == "gelu":
        per = 8 if c.kwargs.get("approximate", c.arg(1, default="none")) == "tanh" else 5
        return "elementwise", numel(c.out) * per, _elementwise_attrs(c)
    # An in-place op (add_) counts as its out-of-place one; a dunder (__and__) keeps its underscores.
    base = op[:-1] if op.endswith("_") and not op.endswith("__") else op
    if base in ELEMENTWISE_FLOPS:
        return "elementwise", numel(c.out) * ELEMENTWISE_FLOPS[base], _elementwise_attrs(c)
    raise KeyError(op)

"""from_onnx: a model built with onnx.helper imports into the same op graph (kinds, FLOPs, bytes) as its torch twin."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from kernbench.workloads import WorkloadError, from_onnx  # noqa: E402


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _mlp_model(batch=4):
    """Gemm(16->32, bias) -> Relu -> Gemm(32->8) -> LayerNormalization -> Softmax, weights stored [out, in]."""
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h1"], ["h2"], name="/act/Relu"),
        helper.make_node("Gemm", ["h2", "fc2.weight"], ["h3"], name="/fc2/Gemm", transB=1),
        helper.make_node("LayerNormalization", ["h3", "norm.weight", "norm.bias"], ["h4"], name="/norm/LN", axis=-1),
        helper.make_node("Softmax", ["h4"], ["y"], name="/softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8])],
        [_init("fc1.weight", (32, 16)), _init("fc1.bias", (32,)), _init("fc2.weight", (8, 32)),
         _init("norm.weight", (8,)), _init("norm.bias", (8,))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_mlp_counts(tmp_path):
    """An ONNX MLP imports to its five ops in order (Gemm as matmul with its bias FLOPs, Relu, LayerNorm, Softmax)
    with the right GEMM shape, weight name, deps, parameter count and total FLOPs."""
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp_model(), str(path))
    g = from_onnx(path)
    assert [(op.name, op.kind) for op in g.ops] == [("fc1.Gemm", "matmul"), ("act.Relu", "elementwise"),
                                                   ("fc2.Gemm", "matmul"), ("norm.LN", "norm"),
                                                   ("softmax", "softmax")]
    fc1 = g.ops[0]
    assert (fc1.attrs["m"], fc1.attrs["k"], fc1.attrs["n"]) == (4, 16, 32)
    assert fc1.flops == 2 * 4 * 16 * 32 + 4 * 32 and fc1.attrs["weight"] == "fc1.weight"
    assert [op.deps for op in g.ops] == [(), (0,), (1,), (2,), (3,)]
    assert g.param_count == 32 * 16 + 32 + 8 * 32 + 8 + 8
    assert g.flops == (2 * 4 * 16 * 32 + 4 * 32) + 4 * 32 + 2 * 4 * 32 * 8 + 4 * 8 * 7 + 4 * 8 * 5


def test_onnx_equals_the_same_model_from_torch():
    """The same MLP imported from ONNX and traced from torch has the same op kinds, per-op FLOPs and bytes, totals,
    GEMM shapes and weight names: the importers agree."""
    torch = pytest.importorskip("torch")
    from kernbench.workloads import from_torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 32)
            self.act = torch.nn.ReLU()
            self.fc2 = torch.nn.Linear(32, 8, bias=False)
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x):
            return torch.softmax(self.norm(self.fc2(self.act(self.fc1(x)))), dim=-1)

    with torch.device("meta"):
        m = MLP()
    t = from_torch(m, (torch.zeros(4, 16, device="meta"),))
    o = from_onnx(_mlp_model())
    assert [op.kind for op in t.ops] == [op.kind for op in o.ops]
    assert [op.flops for op in t.ops] == [op.flops for op in o.ops]
    assert [(op.bytes_read, op.bytes_written) for op in t.ops] == [(op.bytes_read, op.bytes_written) for op in o.ops]
    assert (t.flops, t.param_bytes, t.activation_bytes) == (o.flops, o.param_bytes, o.activation_bytes)
    for a, b in zip(t.ops, o.ops):
        if a.kind == "matmul":
            assert {k: a.attrs[k] for k in "mnk"} == {k: b.attrs[k] for k in "mnk"}
            assert a.attrs["weight"] == b.attrs["weight"]


def test_onnx_conv_views_and_embedding():
    """ONNX Conv becomes a conv with its strided output size and im2col GEMM shape and FLOPs, Reshape a view,
    Transpose a copy depending through the view on the conv, and Gather on a weight an embedding."""
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "shape"], ["r"], name="/flat/Reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="/t/Transpose", perm=[1, 0]),
        helper.make_node("Gather", ["emb.weight", "ids"], ["e"], name="/emb/Gather"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                     helper.make_tensor_value_info("ids", TensorProto.INT64, [5])],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [64, 1]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, [5, 4])],
        [_init("conv.weight", (4, 3, 3, 3)), numpy_helper.from_array(np.array([1, 64], dtype=np.int64), "shape"),
         _init("emb.weight", (10, 4))])
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    conv, view, tr, emb = g.ops
    assert conv.kind == "conv" and conv.attrs["out_hw"] == [4, 4]
    assert (conv.attrs["gemm_m"], conv.attrs["gemm_n"], conv.attrs["gemm_k"]) == (16, 4, 27)
    assert conv.flops == 2 * 16 * 4 * 27
    assert view.kind == "view" and tr.kind == "copy" and tr.deps == (0,)  # through the reshape to the conv
    assert emb.kind == "embedding" and emb.attrs == {"rows": 10, "dim": 4, "tokens": 5, "weight": "emb.weight"}


def test_onnx_unknown_operator_is_named():
    """An ONNX operator with no kernbench kind is a WorkloadError naming the node and operator, and a missing file
    says there is no file."""
    graph = helper.make_graph([helper.make_node("Det", ["x"], ["y"], name="/blk/Det")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(WorkloadError, match=r"'blk\.Det' \(Det\) has no kernbench kind"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(WorkloadError, match="no file"):
        from_onnx("/nonexistent/model.onnx")

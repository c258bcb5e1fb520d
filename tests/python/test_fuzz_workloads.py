"""Fuzz the workload readers (issue 31): execution traces and ONNX files import cleanly or raise one WorkloadError.

Every generated input -- a small valid trace or ONNX model with one or more parts replaced by other JSON
values, other node ids, other dims or attributes, or its bytes cut and flipped -- must either import to a
WorkloadGraph (whose ops then hold whole-number FLOPs and dims, as Op guarantees) or raise WorkloadError
whose message names the file. Any other exception (KeyError, TypeError, RecursionError, protobuf's
DecodeError, ...) is a finding: fix it in the reader and add it to tests/python/test_r3_workloads.py.

Default: a short run (well under 20 s, fixed seeds). ``KERNBENCH_FUZZ_SECONDS=60`` keeps fuzzing with fresh
seeds for that long (``.ci/run`` does, as for tests/python/test_fuzz_cli.py).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernbench.workloads import WorkloadError, WorkloadGraph, from_execution_trace  # noqa: E402

_T = "Tensor(float)"


def _tensor(tid, storage, n):
    return [tid, storage, 0, n, 4, "cpu"]


def _node(nid, name, parent, ins=(), outs=()):
    def side(args):
        return {"values": [a[0] for a in args], "shapes": [a[1] for a in args], "types": [a[2] for a in args],
                "strides": [a[3] for a in args]}
    return {"id": nid, "name": name, "ctrl_deps": parent, "inputs": side(ins), "outputs": side(outs)}


def _base_trace() -> dict:
    """What torch's ExecutionTraceObserver records of ``relu(linear(x))`` inside record_function('mlp'): the
    process and thread roots, the scope, a linear (x, W, b) and a relu, plus an inner aten call of the linear."""
    x = (_tensor(6, 7, 8), [2, 4], _T, [4, 1])
    w = (_tensor(10, 11, 12), [3, 4], _T, [4, 1])
    b = (_tensor(12, 13, 3), [3], _T, [1])
    y = (_tensor(23, 24, 6), [2, 3], _T, [3, 1])
    z = (_tensor(17, 29, 6), [2, 3], _T, [3, 1])
    return {"schema": "1.1.1-chakra.0.0.4", "nodes": [
        _node(1, "[pytorch|profiler|execution_trace|process]", 1),
        _node(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _node(3, "mlp", 2),
        _node(9, "aten::linear", 3, [x, w, b], [y]),
        _node(14, "aten::t", 9, [w], [(_tensor(17, 11, 12), [4, 3], _T, [1, 4])]),
        _node(27, "aten::relu", 3, [y], [z]),
        _node(28, "aten::softmax", 3, [z, (-1, [], "Int", []), (False, [], "Bool", [])], [y]),
    ]}


def _json_values():
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 40), st.integers(-(2**70), 2**70),
                        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.5, 4.7, -0.0, 1e300]),
                        st.text(max_size=8), st.sampled_from(["<None>", "Tensor(float)", "Tensor(c10::Half)",
                                                              "GenericList[Tensor(float)]", "aten::mm", "Int"]))
    return st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                        st.dictionaries(st.text(max_size=6), kids, max_size=3)),
                        max_leaves=8)


def _paths(obj, prefix=()):
    """Every (path, value) inside ``obj``."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _set(obj, path, value, delete=False):
    for k in path[:-1]:
        obj = obj[k]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@st.composite
def _mutated_traces(draw):
    data = _base_trace()
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        how = draw(st.integers(0, 9))
        if how == 0:
            _set(data, path, None, delete=True)
        elif how <= 2 and path[-1] in ("ctrl_deps", "id"):
            _set(data, path, draw(st.sampled_from([1, 2, 3, 9, 14, 27, 28, 99, -1])))
        elif how == 3 and isinstance(path[-1], int):
            parent = data
            for k in path[:-1]:
                parent = parent[k]
            if isinstance(parent, list):
                parent.append(copy.deepcopy(parent[path[-1]]))  # a duplicate entry (a node id twice, ...)
        else:
            _set(data, path, draw(_json_values()))
    return data


def _check_graph(g: WorkloadGraph) -> None:
    for op in g.ops:
        assert isinstance(op.flops, int) and op.flops >= 0, op
        for k in ("m", "n", "k", "batch", "elements"):
            if k in op.attrs:
                assert isinstance(op.attrs[k], int), op


def _one_trace(path: Path, data) -> None:
    text = data if isinstance(data, (str, bytes)) else json.dumps(data)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    try:
        g = from_execution_trace(path)
    except WorkloadError as e:
        assert str(e).startswith(f"from_execution_trace: {path}"), f"message does not name the file: {e}"
        return
    _check_graph(g)


def _text_mutations():
    base = json.dumps(_base_trace())
    cut = st.integers(0, len(base)).map(lambda n: base[:n])
    flip = st.tuples(st.integers(0, len(base) - 1), st.sampled_from(list('{}[],:"0a-.e\\\x00'))).map(
        lambda t: base[:t[0]] + t[1] + base[t[0] + 1:])
    deep = st.integers(500, 3000).map(lambda n: '{"nodes": [' + '{"a": [' * n + "1" + "]}" * n + "]}")
    junk = st.binary(max_size=40)
    return st.one_of(cut, flip, deep, junk)


def _run(strategy, check, examples: int, at_seed: int) -> None:
    @seed(at_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(strategy)
    def run(x):
        check(x)

    run()


def _fuzz(strategy, check, examples: int, at_seed: int) -> None:
    budget = float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)
    _run(strategy, check, examples, at_seed)
    deadline, n = time.monotonic() + budget, 1
    while time.monotonic() < deadline:
        _run(strategy, check, 200, at_seed + n)
        n += 1


def test_base_trace_imports():
    """The fuzzers' starting trace is a valid one: linear, relu and softmax in the scope 'mlp'."""
    g = from_execution_trace(_base_trace())
    assert [(op.name, op.kind) for op in g.ops] == [("mlp.linear", "matmul"), ("mlp.relu", "elementwise"),
                                                   ("mlp.softmax", "softmax")]


def test_fuzz_execution_trace_structure(tmp_path):
    """Traces with parts replaced by other JSON values, node ids, parents, deleted keys or duplicated entries
    import or raise a WorkloadError naming the file (seeded; longer with KERNBENCH_FUZZ_SECONDS)."""
    path = tmp_path / "et.json"
    _fuzz(_mutated_traces(), lambda d: _one_trace(path, d), examples=60, at_seed=31)


def test_fuzz_execution_trace_text(tmp_path):
    """Trace files cut short, with a character flipped, nested thousands deep or random bytes import or raise a
    WorkloadError naming the file."""
    path = tmp_path / "et.json"
    _fuzz(_text_mutations(), lambda t: _one_trace(path, t), examples=150, at_seed=32)


# ---- ONNX -------------------------------------------------------------------------------------------
def _base_onnx():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def init(name, shape):
        return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
             helper.make_node("Relu", ["h1"], ["h2"], name="/act/Relu"),
             helper.make_node("MatMul", ["h2", "fc2.weight"], ["h3"], name="/fc2/MatMul"),
             helper.make_node("Softmax", ["h3"], ["y"], name="/softmax", axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              [init("fc1.weight", (32, 16)), init("fc1.bias", (32,)), init("fc2.weight", (32, 8))])
    return onnx, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_OPS = ["MatMul", "Gemm", "Relu", "Conv", "Softmax", "Add", "Reshape", "Gather", "LayerNormalization",
        "ReduceMean", "MaxPool", "GlobalAveragePool", "Transpose", "Identity", "Where", "NonZero", "Bogus"]


@st.composite
def _mutated_models(draw):
    onnx, model = _base_onnx()
    from onnx import helper
    m = copy.deepcopy(model)
    g = m.graph
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.integers(0, 6))
        node = g.node[draw(st.integers(0, len(g.node) - 1))]
        if how == 0:  # another operator
            node.op_type = draw(st.sampled_from(_OPS))
        elif how == 1:  # an input dimension
            d = g.input[0].type.tensor_type.shape.dim[draw(st.integers(0, 1))]
            d.dim_value = draw(st.sampled_from([0, 1, 3, 7, 2**31, 2**40]))
        elif how == 2:  # an attribute
            key = draw(st.sampled_from(["transA", "transB", "axis", "group", "kernel_shape", "pads", "strides"]))
            val = draw(st.one_of(st.integers(-3, 5), st.lists(st.integers(-2, 4), min_size=1, max_size=4)))
            del node.attribute[:]
            node.attribute.append(helper.make_attribute(key, val))
        elif how == 3:  # an input dropped or renamed
            if node.input:
                if draw(st.booleans()):
                    del node.input[-1]
                else:
                    node.input[0] = draw(st.sampled_from(["x", "h1", "y", "nope", "", "fc1.weight"]))
        elif how == 4:  # an initializer's shape
            t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
            dims = draw(st.lists(st.integers(0, 40), min_size=0, max_size=3))
            t.ClearField("raw_data")
            del t.dims[:]
            t.dims.extend(dims)
            t.raw_data = bytes(4 * int(np.prod(dims, dtype=np.int64)) if dims else 4)
        elif how == 5:  # the output's declared shape
            d = g.output[0].type.tensor_type.shape.dim[draw(st.integers(0, 1))]
            d.dim_value = draw(st.sampled_from([1, 5, 32]))
        else:  # a node removed
            if len(g.node) > 1:
                del g.node[draw(st.integers(0, len(g.node) - 1))]
    return m.SerializeToString()


def _byte_mutations():
    _, model = _base_onnx()
    base = model.SerializeToString()
    cut = st.integers(0, len(base)).map(lambda n: base[:n])
    flip = st.tuples(st.integers(0, len(base) - 1), st.integers(0, 255)).map(
        lambda t: base[:t[0]] + bytes([t[1]]) + base[t[0] + 1:])
    return st.one_of(cut, flip, st.binary(max_size=64))


def _one_onnx(path: Path, data: bytes) -> None:
    from kernbench.workloads import from_onnx
    path.write_bytes(data)
    try:
        g = from_onnx(path)
    except WorkloadError as e:
        assert str(e).startswith(f"from_onnx: {path}"), f"message does not name the file: {e}"
        return
    _check_graph(g)


def test_base_onnx_imports(tmp_path):
    """The fuzzers' starting model is a valid one: Gemm, Relu, MatMul, Softmax."""
    from kernbench.workloads import from_onnx
    onnx, model = _base_onnx()
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    assert [op.kind for op in from_onnx(p).ops] == ["matmul", "elementwise", "matmul", "softmax"]


def test_fuzz_onnx_structure(tmp_path):
    """Models with another operator, dims, attributes, inputs, initializer shapes or a node removed import or
    raise a WorkloadError naming the file (seeded; longer with KERNBENCH_FUZZ_SECONDS)."""
    _base_onnx()
    path = tmp_path / "m.onnx"
    _fuzz(_mutated_models(), lambda b: _one_onnx(path, b), examples=150, at_seed=33)


def test_fuzz_onnx_bytes(tmp_path):
    """ONNX files cut short, with a byte flipped, or random bytes import or raise a WorkloadError naming the
    file (never protobuf's bare DecodeError)."""
    _base_onnx()
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "m.onnx"
    _fuzz(_byte_mutations(), lambda b: _one_onnx(path, b), examples=150, at_seed=34)

"""Issue 31 (reliability round 3), the workload importers: Python API reproducers of families 4, 9, 10 and 11.

Malformed ``.onnx`` files and execution traces refused naming the file and the node (4); attrs that are not whole
numbers >= 1, NaN FLOPs and a Block whose instances differ refused naming the op, attr or instance (9); an ONNX
MatMul with a 1-D operand counted by numpy's rules, a 0-byte ``.onnx`` and a ``ctrl_deps`` cycle refused, a
calibrate ``call`` parameter given twice refused (10); a plan of 10**6 microbatches refused before any work (11).
The CLI cases are in tests/bad_inputs/cases_r3_workloads.yaml (inputs in tests/bad_inputs/workloads_r3/); the
fuzz tests of both readers in tests/python/test_fuzz_workloads.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import kernbench
from kernbench import calibrate as cal
from kernbench.workloads import Block, Op, TensorSpec, WorkloadError, WorkloadGraph, from_execution_trace, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.plan import ParallelPlan

R3 = Path(__file__).resolve().parents[1] / "bad_inputs" / "workloads_r3"
ROOT = {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1}


def _relu(nid, parent, tin=5, tout=7):
    """One recorded aten::relu call of a 4-element float tensor."""
    return {"id": nid, "name": "aten::relu", "ctrl_deps": parent,
            "inputs": {"values": [[tin, tin + 1, 0, 4, 4, "cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]},
            "outputs": {"values": [[tout, tout + 1, 0, 4, 4, "cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]}}


def _trace(tmp_path, data, name="et.json"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


# ---- family 4: malformed execution traces -------------------------------------------------------------
def test_trace_node_without_id_names_the_file_and_node(tmp_path):
    """A node with no id (was a bare KeyError 'id') is a WorkloadError naming the file and nodes[i]."""
    p = _trace(tmp_path, {"nodes": [ROOT, {"name": "aten::relu", "ctrl_deps": 1}]})
    with pytest.raises(WorkloadError, match=r"from_execution_trace: .*et\.json: nodes\[1\]: id None is not an "
                                            r"integer"):
        from_execution_trace(p)


def test_trace_nodes_that_are_not_maps_are_refused(tmp_path):
    """Nodes that are numbers (was TypeError 'int' object is not subscriptable) name the file and the entry."""
    with pytest.raises(WorkloadError, match=r"et\.json: nodes\[0\] is not a map"):
        from_execution_trace(_trace(tmp_path, {"nodes": [1, 2]}))


def test_trace_nested_5000_deep_is_refused_not_recursion(tmp_path):
    """JSON nested 5,000 deep (was a bare RecursionError) is a WorkloadError naming the file."""
    p = _trace(tmp_path, '{"nodes": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(WorkloadError, match=r"et\.json is not JSON this reader accepts \(RecursionError"):
        from_execution_trace(p)


def test_trace_ctrl_deps_chain_5000_deep_is_refused_naming_the_node(tmp_path):
    """A ctrl_deps chain 5,000 calls deep (the old recursive walk raised RecursionError) is refused naming the
    node past the depth limit."""
    nodes = [ROOT] + [{"id": i, "name": f"f{i}", "ctrl_deps": i - 1} for i in range(2, 5002)]
    with pytest.raises(WorkloadError, match=r"et\.json: node \d+ \(f\d+\) is nested \d+ calls deep .*over the "
                                            r"limit of 1000"):
        from_execution_trace(_trace(tmp_path, {"nodes": nodes}))


def test_trace_with_malformed_arguments_names_the_node(tmp_path):
    """A call whose shapes are a number (was TypeError) or whose tensor value is not [id, ...] names the file, the
    node id and its operator."""
    bad = _relu(2, 1)
    bad["inputs"]["shapes"] = 4
    with pytest.raises(WorkloadError, match=r"et\.json: node 2 \(aten::relu\): shapes is not a list"):
        from_execution_trace(_trace(tmp_path, {"nodes": [ROOT, bad]}))
    bad = _relu(2, 1)
    bad["inputs"]["values"] = ["x"]
    with pytest.raises(WorkloadError, match=r"node 2 \(aten::relu\): argument 0: tensor value 'x' is not "
                                            r"\[tensor_id"):
        from_execution_trace(_trace(tmp_path, {"nodes": [ROOT, bad]}))
    bad = _relu(2, 1)
    bad["inputs"]["shapes"] = [[4.5]]
    with pytest.raises(WorkloadError, match=r"node 2 \(aten::relu\): tensor 5 dimension 0 = 4\.5"):
        from_execution_trace(_trace(tmp_path, {"nodes": [ROOT, bad]}))


def test_trace_that_is_not_text_names_the_file(tmp_path):
    """A trace file of bytes that are not UTF-8 is a WorkloadError naming the file (not UnicodeDecodeError)."""
    p = tmp_path / "et.json"
    p.write_bytes(b'{"nodes": ["\xff\xfe"]}')
    with pytest.raises(WorkloadError, match=r"et\.json: cannot be read as text"):
        from_execution_trace(p)


# ---- family 10: ctrl_deps cycles ----------------------------------------------------------------------
def test_trace_ctrl_deps_cycle_is_refused_naming_its_nodes(tmp_path):
    """Nodes 2 and 3 each other's parent, an aten call under them: they used to vanish (0 ops); now refused naming
    the cycle's nodes."""
    nodes = [ROOT, {"id": 2, "name": "a", "ctrl_deps": 3}, {"id": 3, "name": "b", "ctrl_deps": 2}, _relu(4, 3)]
    with pytest.raises(WorkloadError, match=r"cyc\.json: ctrl_deps cycle: nodes 2 -> 3 -> 2"):
        from_execution_trace(_trace(tmp_path, {"nodes": nodes}, "cyc.json"))


def test_trace_ctrl_deps_cycle_of_aten_calls_is_refused(tmp_path):
    """A three-node cycle of aten calls beside a good root is refused naming all three (variant)."""
    nodes = [ROOT, _relu(2, 1), _relu(10, 30, 7, 9), _relu(20, 10, 9, 11), _relu(30, 20, 11, 13)]
    with pytest.raises(WorkloadError, match=r"ctrl_deps cycle: nodes 10 -> 30 -> 20 -> 10"):
        from_execution_trace({"nodes": nodes})


def test_trace_self_parented_root_still_imports():
    """The recorder's process node is its own parent (ctrl_deps == id): a root, not a cycle."""
    g = from_execution_trace({"nodes": [ROOT, _relu(2, 1)]})
    assert [op.kind for op in g.ops] == ["elementwise"] and g.ops[0].flops == 4


# ---- family 4 and 10: ONNX files -----------------------------------------------------------------------
def _onnx():
    return pytest.importorskip("onnx")


def _matmul_model(sa, sb, weight=True):
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper
    out = list(np.matmul(np.zeros(sa), np.zeros(sb)).shape)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(sa))]
    inits = [numpy_helper.from_array(np.zeros(sb, np.float32), "w")] if weight else []
    if not weight:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(sb)))
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    return onnx.helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_garbage_bytes_name_the_file(tmp_path):
    """Bytes protobuf cannot decode (was a bare DecodeError) are a WorkloadError naming the file."""
    _onnx()
    from kernbench.workloads import from_onnx
    p = tmp_path / "bad.onnx"
    p.write_bytes(b"\x08\x07garbage\xff\xff\xff")
    with pytest.raises(WorkloadError, match=r"from_onnx: .*bad\.onnx: not an ONNX model \(DecodeError"):
        from_onnx(p)


def test_onnx_truncated_model_names_the_file(tmp_path):
    """A real model cut in half is refused naming the file (variant of the DecodeError)."""
    _onnx()
    from kernbench.workloads import from_onnx
    data = _matmul_model((4, 8), (8, 5)).SerializeToString()
    p = tmp_path / "half.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkloadError, match=r"half\.onnx: not an ONNX model"):
        from_onnx(p)


def test_onnx_empty_file_is_refused(tmp_path):
    """A 0-byte .onnx used to import as an empty model (0 ops); it is refused naming the file."""
    _onnx()
    from kernbench.workloads import from_onnx
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(WorkloadError, match=r"empty\.onnx: empty file \(0 bytes\)"):
        from_onnx(p)


def test_onnx_model_without_graph_is_refused(tmp_path):
    """A ModelProto with no graph (decodes fine, also imported as 0 ops) is refused naming the file (variant)."""
    onnx = _onnx()
    from kernbench.workloads import from_onnx
    p = tmp_path / "nograph.onnx"
    p.write_bytes(onnx.ModelProto(ir_version=8).SerializeToString())
    with pytest.raises(WorkloadError, match=r"nograph\.onnx: not an ONNX model \(no graph\)"):
        from_onnx(p)


@pytest.mark.parametrize("sa, sb, mnk_batch", [
    ((4, 8), (8,), (4, 1, 8, 1)),          # the reproducer: a 1-D right operand is a column
    ((3, 4, 8), (8,), (12, 1, 8, 1)),      # variant: batched left operand, 1-D right
    ((8,), (3, 8, 5), (1, 5, 8, 3)),       # variant: 1-D left operand against a batch of matrices
])
def test_onnx_matmul_with_a_1d_operand_counts_numpy_flops(sa, sb, mnk_batch):
    """MatMul with a 1-D operand follows numpy: a 1-D right operand is a column (n = 1), a 1-D left one a row
    (m = 1); FLOPs are 2 x m x n x k x batch (the right 1-D case counted k x the FLOPs before)."""
    from kernbench.workloads import from_onnx
    op = from_onnx(_matmul_model(sa, sb, weight=len(sb) == 1)).ops[0]
    m, n, k, batch = mnk_batch
    assert (op.attrs["m"], op.attrs["n"], op.attrs["k"], op.attrs["batch"]) == (m, n, k, batch)
    assert op.flops == 2 * m * n * k * batch


def test_onnx_node_error_names_the_file(tmp_path):
    """A node the importer cannot model names the file and the node (the file now leads every message)."""
    onnx = _onnx()
    from onnx import TensorProto, helper
    from kernbench.workloads import from_onnx
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    p = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
    with pytest.raises(WorkloadError, match=r"from_onnx: .*nz\.onnx: .*ONNX node 'nz' \(NonZero\)"):
        from_onnx(p)


# ---- family 9: attrs that mean nothing ---------------------------------------------------------------
@pytest.mark.parametrize("attrs, words", [
    ({"m": 4.7, "n": 2, "k": 2}, r"op 'mm': attrs\['m'\] = 4\.7: expected a whole number >= 1"),  # was m = 4
    ({"m": 4, "n": 2, "k": "8"}, r"op 'mm': attrs\['k'\] = '8': expected a whole number"),
    ({"m": 0, "n": 2, "k": 2}, r"op 'mm': attrs\['m'\] = 0: expected a whole number >= 1"),
    ({"m": 4, "n": -3, "k": 2}, r"op 'mm': attrs\['n'\] = -3: expected a whole number >= 1"),
    ({"m": 4, "n": 2, "k": 2, "batch": 0}, r"attrs\['batch'\] = 0"),
])
def test_op_attrs_must_be_whole_numbers_at_least_one(attrs, words):
    """A fractional dim (4.7 was truncated to 4), a zero or negative one (lowered to nothing) or a text one is
    refused naming the op and the attr."""
    with pytest.raises(WorkloadError, match=words):
        Op("mm", "matmul", "aten.mm.default", attrs=attrs)


@pytest.mark.parametrize("flops", [float("nan"), float("inf"), 2.5, -1])
def test_op_flops_must_be_a_whole_number(flops):
    """flops = nan (passed before), inf, a fraction or a negative count is refused naming the op."""
    with pytest.raises(WorkloadError, match=r"op 'mm': flops = "):
        Op("mm", "matmul", "aten.mm.default", flops=flops, attrs={"m": 2, "n": 2, "k": 2})


def test_whole_float_attrs_are_accepted_as_ints():
    """A float with no fraction (a JSON 4.0) is the int 4: nothing refused that meant a whole number."""
    op = Op("mm", "matmul", "aten.mm.default", flops=64.0, attrs={"m": 4.0, "n": 2, "k": 4})
    assert op.attrs["m"] == 4 and isinstance(op.attrs["m"], int) and op.flops == 64


def test_graph_json_with_fractional_attr_names_file_and_op(tmp_path):
    """A saved graph whose op has m = 4.7 is refused on load naming the file, the op's index and the attr."""
    g = WorkloadGraph("g", [Op("mm", "matmul", "t", flops=16, attrs={"m": 2, "n": 2, "k": 2})])
    d = g.to_dict()
    d["ops"][0]["attrs"]["m"] = 4.7
    p = tmp_path / "g.json"
    p.write_text(json.dumps(d))
    with pytest.raises(WorkloadError, match=r"g\.json: ops\[0\]: op 'mm': attrs\['m'\] = 4\.7"):
        WorkloadGraph.load(p)


@pytest.mark.parametrize("kw, words", [
    ({"batch": 4.7}, r"llama: batch = 4\.7"),   # was a graph of 4.7 x seq tokens, truncated per op
    ({"layers": 1.5}, r"llama: layers = 1\.5"),  # was 1 layer
    ({"seq": -2}, r"llama: seq = -2"),
])
def test_handbuilt_sizes_must_be_whole(kw, words):
    """The hand-built decoder's sizes enter as whole numbers >= 1, refused by name otherwise."""
    args = {"batch": 1, "seq": 16, "layers": 1, **kw}
    with pytest.raises(WorkloadError, match=words):
        handbuilt.llama_graph(args["batch"], args["seq"], layers=args["layers"])


def _stack(widths):
    """Layers ``layers.i`` of a matmul (2 x 2 by 2 x n) and an activation, each matmul after the previous act."""
    ops = []
    for i, n in enumerate(widths):
        a, y = TensorSpec((2, 2), "fp32"), TensorSpec((2, n), "fp32")
        ops.append(Op(f"layers.{i}.mm", "matmul", "t", (a,), (y,), flops=8 * n,
                      attrs={"m": 2, "n": n, "k": 2, "weight": f"layers.{i}.w"}, deps=(len(ops) - 1,) if ops else ()))
        ops.append(Op(f"layers.{i}.act", "elementwise", "t", (y,), (y,), flops=2 * n,
                      attrs={"elements": 2 * n, "operands": 1}, deps=(len(ops) - 1,)))
    return ops


def test_block_whose_instance_differs_is_refused_naming_it():
    """A Block of 3 layers whose layer 2 is 3.2x wider was timed from layer 0 (3.2x off); now refused naming the
    block, the instance, the op and what differs."""
    with pytest.raises(WorkloadError, match=r"block 'layers': instance 2 differs from instance 0 at op 4 "
                                            r"\('layers\.2\.mm'\): output shapes"):
        WorkloadGraph("g", _stack([10, 10, 32]), blocks=[Block("layers", 0, 2, 3)])


def test_block_whose_instance_differs_in_flops_only_is_refused():
    """Same shapes, different FLOPs in instance 1 (variant): refused naming 'flops' and both figures."""
    ops = _stack([4, 4])
    ops[2] = Op(ops[2].name, "matmul", "t", ops[2].inputs, ops[2].outputs, (), 99, ops[2].attrs, ops[2].deps)
    with pytest.raises(WorkloadError, match=r"instance 1 differs from instance 0 at op 2 \('layers\.1\.mm'\): flops "
                                            r"99, instance 0 has 32"):
        WorkloadGraph("g", ops, blocks=[Block("layers", 0, 2, 2)])


def test_identical_block_instances_are_accepted():
    """Instances that differ only by their names (weight 'layers.1.w' for 'layers.0.w') and their deps' offset
    are one block; the hand-built LLaMA's layers are too."""
    g = WorkloadGraph("g", _stack([4, 4, 4]), blocks=[Block("layers", 0, 2, 3)])
    assert g.blocks[0].count == 3
    assert handbuilt.llama_graph(1, 16, layers=3).blocks


# ---- family 11: unbounded work ----------------------------------------------------------------------
def test_plan_of_a_million_microbatches_is_refused_at_once():
    """ParallelPlan(microbatches=10**6) (a lowering that ran for over 12 minutes) is refused when made, naming
    the key, the figure and the limit."""
    t0 = time.perf_counter()
    with pytest.raises(WorkloadError, match=r"plan: microbatches = 1000000: over the limit of 4096"):
        ParallelPlan(microbatches=10**6)
    assert time.perf_counter() - t0 < 1
    ParallelPlan(microbatches=4096)  # the limit itself is a plan


def test_lowering_past_its_work_limit_is_refused_before_work():
    """A plan within the microbatch limit whose lowering would still append millions of op instances (here
    4096 microbatches of a 1,000-op graph, train phase) is refused before any work, naming the figures."""
    ops = [Op(f"e{i}", "elementwise", "t", flops=1, attrs={"elements": 1, "operands": 1}) for i in range(1000)]
    g = WorkloadGraph("big", ops)
    system = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    t0 = time.perf_counter()
    with pytest.raises(WorkloadError, match=r"lower: big: 1000 ops x microbatches 4096 x dp 1 x 3 \(train\) = "
                                            r"12288000 op instances: over the limit"):
        lower(g, system, ParallelPlan(microbatches=4096), phase="train")
    assert time.perf_counter() - t0 < 5


# ---- family 10: a calibrate call's parameter given twice -----------------------------------------------
@pytest.mark.parametrize("name, words", [
    ("call_param_twice.yaml", r"call_param_twice\.yaml:3: row 'a': call .*parameter 'n' given twice"),
    ("call_set_twice.csv", r"call_set_twice\.csv:2: row 'a': call .*parameter 'k200\.driver\.kl1_bounce_pipe' "
                           r"given twice"),
])
def test_calibrate_call_parameter_given_twice_is_refused(name, words):
    """`call: test.linear n=10 n=20` kept n = 20; a parameter (or a row override) given twice is refused naming
    the file, the line, the row and the parameter."""
    with pytest.raises(cal.CalibrationError, match=words):
        cal.load_data(R3 / name)


def _conv_trace(groups, stride=(1, 1)):
    """A recorded aten::conv2d of a 1 x 4 x 8 x 8 input by 4 x 2 x 3 x 3 weights (padding 1)."""
    t = "Tensor(float)"
    return {"nodes": [ROOT, {
        "id": 2, "name": "aten::conv2d", "ctrl_deps": 1,
        "inputs": {"values": [[5, 6, 0, 256, 4, "cpu"], [7, 8, 0, 72, 4, "cpu"], "<None>", list(stride), [1, 1],
                              [1, 1], groups],
                   "shapes": [[1, 4, 8, 8], [4, 2, 3, 3], [], [[], []], [[], []], [[], []], []],
                   "types": [t, t, "None", "GenericList[Int,Int]", "GenericList[Int,Int]", "GenericList[Int,Int]",
                             "Int"]},
        "outputs": {"values": [[9, 10, 0, 256, 4, "cpu"]], "shapes": [[1, 4, 8, 8]], "types": [t]}}]}


def test_trace_conv_with_fractional_groups_is_refused():
    """A recorded conv2d whose groups is 2.5 (was truncated to 2) or whose stride is 1.5 is refused naming the node
    and the argument; groups = 2 imports (finding of reviewing the readers' int() calls)."""
    assert from_execution_trace(_conv_trace(2)).ops[0].attrs["groups"] == 2
    with pytest.raises(WorkloadError, match=r"node 2 \(aten::conv2d\): aten\.conv2d: groups = 2\.5"):
        from_execution_trace(_conv_trace(2.5))
    with pytest.raises(WorkloadError, match=r"node 2 \(aten::conv2d\): a stride, padding or dilation = 1\.5"):
        from_execution_trace(_conv_trace(2, stride=(1.5, 1)))


def test_onnx_name_that_is_not_utf8_names_the_file_and_field(tmp_path):
    """A node name with a byte that is not UTF-8 decodes (protobuf keeps it as bytes) and then failed with a bare
    TypeError; it is refused naming the file and the field (finding of test_fuzz_workloads.py)."""
    onnx = _onnx()
    from onnx import TensorProto, helper
    from kernbench.workloads import from_onnx
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="QQQQ")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    p = tmp_path / "latin.onnx"
    p.write_bytes(data.replace(b"QQQQ", b"\x80QQQ"))
    with pytest.raises(WorkloadError, match=r"latin\.onnx: not an ONNX model \(model\.graph\.node\[0\]\.name is not "
                                            r"UTF-8 text\)"):
        from_onnx(p)
    assert onnx  # the extra is there

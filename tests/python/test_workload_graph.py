"""The op-graph format (kernbench.workloads.graph): totals, repeated blocks, round trip, bad input."""

import pytest

from kernbench.workloads import Block, Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph


def _layer(prefix: str, first_dep: tuple[int, ...], base: int):
    x = TensorSpec((4, 8), "bf16")
    w = ParamRef(f"{prefix}.fc.weight", TensorSpec((8, 8), "bf16"))
    fc = Op(f"{prefix}.fc", "matmul", "aten.mm.default", (x,), (x,), (w,), 2 * 4 * 8 * 8,
            {"m": 4, "n": 8, "k": 8, "batch": 1, "weight": w.name}, first_dep)
    view = Op(f"{prefix}.view", "view", "aten.view.default", (x,), (TensorSpec((32,), "bf16"),), (), 0, {}, (base,))
    act = Op(f"{prefix}.act", "elementwise", "aten.relu.default", (x,), (x,), (), 32, {"elements": 32, "operands": 1},
             (base + 1,))
    return [fc, view, act]


def test_repeat_block_equals_writing_every_layer_out():
    """repeat_block stamps copies of a layer with renamed ops and shifted deps identical to writing every layer out,
    and the graph's FLOPs, parameter bytes and count (each name once), activation bytes (views write nothing),
    per-kind totals and find() follow."""
    embed_out = TensorSpec((4, 8), "bf16")
    table = ParamRef("embed.weight", TensorSpec((100, 8), "bf16"))
    embed = Op("embed", "embedding", "aten.embedding.default", (), (embed_out,), (table,), 0,
               {"rows": 100, "dim": 8, "tokens": 4})
    layer0 = _layer("layers.0", (0,), 1)
    stamped = [embed] + layer0 + WorkloadGraph.repeat_block(layer0, "layers", 3, offset=1)
    written = [embed] + _layer("layers.0", (0,), 1) + _layer("layers.1", (3,), 4) + _layer("layers.2", (6,), 7)
    assert [o.to_dict() for o in stamped] == [o.to_dict() for o in written]
    g = WorkloadGraph("toy", stamped, blocks=[Block("layers", 1, 4, 3)])
    assert g.flops == 3 * (2 * 4 * 8 * 8 + 32)
    assert g.param_bytes == 100 * 8 * 2 + 3 * 8 * 8 * 2          # each distinct name once
    assert g.param_count == 100 * 8 + 3 * 64
    assert g.activation_bytes == 4 * 8 * 2 * (1 + 3 * 2)          # views write nothing
    assert g.by_kind()["view"] == {"ops": 3, "flops": 0, "bytes_read": 0, "bytes_written": 0}
    assert [o.name for o in g.find("layers.1")] == ["layers.1.fc", "layers.1.view", "layers.1.act"]


def test_tied_weights_count_once():
    """A weight shared by two ops (tied embedding and LM head) counts once in param_bytes."""
    x = TensorSpec((2, 4), "fp32")
    w = ParamRef("wte.weight", TensorSpec((10, 4), "fp32"))
    ops = [Op("wte", "embedding", "aten.embedding.default", (), (x,), (w,)),
           Op("lm_head", "matmul", "aten.mm.default", (x,), (TensorSpec((2, 10), "fp32"),), (w,), 2 * 2 * 4 * 10,
              {"m": 2, "n": 10, "k": 4, "batch": 1}, (0,))]
    assert WorkloadGraph("tied", ops).param_bytes == 10 * 4 * 4


def test_round_trip_is_exact(tmp_path):
    """A graph saved to JSON and loaded back has the same dict, blocks and meta included."""
    g = WorkloadGraph("toy", _layer("layers.0", (), 0), blocks=[Block("layers", 0, 3, 1)], meta={"batch": 4})
    path = g.save(tmp_path / "g.json")
    assert WorkloadGraph.load(path).to_dict() == g.to_dict()


def test_bad_records_name_what_is_wrong():
    """An unknown op kind or dtype, an op depending on itself or later, and a block that does not fit the ops are
    each a WorkloadError naming the problem."""
    x = TensorSpec((2,), "fp32")
    with pytest.raises(WorkloadError, match="unknown kind 'gemm'"):
        Op("a.b", "gemm", "aten.mm")
    with pytest.raises(WorkloadError, match="unknown dtype 'float'"):
        TensorSpec((2,), "float")
    with pytest.raises(WorkloadError, match=r"op 1 \('second'\) depends on op 1"):
        WorkloadGraph("g", [Op("first", "elementwise", "t", (x,), (x,)), Op("second", "elementwise", "t", deps=(1,))])
    with pytest.raises(WorkloadError, match="does not fit in 1 ops"):
        WorkloadGraph("g", [Op("first", "elementwise", "t")], blocks=[Block("layers", 0, 1, 2)])


def test_repeat_block_carries_the_hidden_state_and_shares_the_rest():
    """A decoder layer reads the hidden state (carried from the previous layer) and a rotary table (shared)."""
    x = TensorSpec((4, 8), "bf16")
    hidden = Op("embed", "embedding", "aten.embedding.default", (), (x,), (), 0, {"rows": 10, "dim": 8, "tokens": 4})
    rope = Op("rotary", "elementwise", "aten.cos.default", (), (x,), (), 32, {"elements": 32, "operands": 1})
    mix = Op("layers.0.mix", "elementwise", "aten.mul.Tensor", (x, x), (x,), (), 32, {"elements": 32, "operands": 2},
             (0, 1))
    out = Op("layers.0.add", "elementwise", "aten.add.Tensor", (x, x), (x,), (), 32, {"elements": 32, "operands": 2},
             (0, 2))
    stamped = WorkloadGraph.repeat_block([mix, out], "layers", 3, offset=2, carry={0: 1})
    assert [(o.name, o.deps) for o in stamped] == [
        ("layers.1.mix", (3, 1)), ("layers.1.add", (3, 4)),     # hidden from layers.0.add; rotary shared
        ("layers.2.mix", (5, 1)), ("layers.2.add", (5, 6))]
    # The default carries the op just before the block (here the rotary table), which is wrong for this block.
    assert WorkloadGraph.repeat_block([mix, out], "layers", 2, offset=2)[0].deps == (0, 3)
    with pytest.raises(WorkloadError, match="carry 2 -> 0 must map an op before the block"):
        WorkloadGraph.repeat_block([mix, out], "layers", 2, offset=2, carry={2: 0})

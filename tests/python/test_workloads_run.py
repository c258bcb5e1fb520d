"""Every imported model (kernbench[torch]) goes through import, lowering and a run on the default machine and
on the K200 host (issue 19 item 4): a time comes out of each, never an error or a silent zero."""

import pytest

import kernbench
from kernbench import k200

pytest.importorskip("torch")
pytest.importorskip("transformers")

from kernbench.workloads import import_model  # noqa: E402
from kernbench.workloads.lower import lower  # noqa: E402
from kernbench.workloads.plan import ParallelPlan  # noqa: E402

# (model, import args, tp): the 70B LM head (8192 x 128256 bf16, 1.96 GiB) does not fit one PE's 1 GiB HBM
# slice -- a CapacityError at tp 1 -- so it is split over 8 PEs.
MODELS = [("gpt2", {"seq": 32, "layers": 1}, 1), ("bert_base", {"seq": 32, "layers": 1}, 1),
          ("llama3_8b", {"seq": 32, "layers": 1}, 1), ("llama3_70b", {"seq": 32, "layers": 1}, 8),
          ("resnet50", {}, 1)]


@pytest.fixture(scope="module")
def k200_host():
    return k200.load_system()


@pytest.mark.slow
@pytest.mark.parametrize("name,kw,tp", MODELS, ids=[m for m, _, _ in MODELS])
def test_imported_model_runs_on_the_default_machine_and_the_k200(name, kw, tp, k200_host):
    """Each imported model lowers and runs on the default machine with every matmul and conv a GEMM of exactly its
    FLOPs (a tp padding of at most 0.1 %), and runs on the K200 with at least one softmax launch per attention."""
    g = import_model(name, batch=1, **kw)
    system = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    lo = lower(g, system, ParallelPlan(tp=tp), precision="bf16")
    res = lo.run()
    # Every matmul and conv became a GEMM of exactly its FLOPs (no bias, which the vector ops carry).
    want = sum(2 * op.attrs["m"] * op.attrs["n"] * op.attrs["k"] * op.attrs.get("batch", 1)
               for op in g.ops if op.kind == "matmul")
    want += sum(2 * op.attrs["gemm_m"] * op.attrs["gemm_n"] * op.attrs["gemm_k"] * op.attrs.get("groups", 1)
                for op in g.ops if op.kind == "conv")
    if tp == 1:
        assert lo.gemm_flops == want > 0
    else:  # tp pads a column-parallel n up to a multiple of tp (the vocabulary: 128256 = 8 x 16032, none here)
        assert want <= lo.gemm_flops <= want * 1.001
    assert res.makespan_ps > 0
    r = k200.run_ops(k200_host, g.ops, precision="fp16")
    launched = [st for st in r["steps"] if st.get("op") == "launch"]
    assert r["latency_ms"] > 0 and launched
    # Attention runs as score GEMM, softmax and context GEMM on the K200 (no fused kernel).
    n_attention = sum(op.kind == "attention" for op in g.ops)
    assert sum(st["label"] == "softmax" for st in launched) >= n_attention


def test_two_identical_layers_are_a_block_that_pipeline_stages_split():
    """An imported 2-layer LLaMA has one repeated block model.layers of 2 that stage_ranges splits one layer per
    pipeline stage, and a 1-layer import has no block."""
    from kernbench.workloads.lower import stage_ranges

    g = import_model("llama3_8b", batch=1, seq=8, layers=2)
    (b,) = g.blocks
    assert (b.prefix, b.count) == ("model.layers", 2)
    assert g.ops[b.first].name.startswith("model.layers.0.") and g.ops[b.end].name.startswith("model.layers.1.")
    stages = stage_ranges(g, 2)
    assert stages[b.first:b.end] == [0] * b.size and stages[b.end:b.end + b.size] == [1] * b.size
    assert import_model("llama3_8b", batch=1, seq=8, layers=1).blocks == []

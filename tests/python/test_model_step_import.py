"""model-step on the imported LLaMA-3-8B (kernbench[torch]) against the hand-built op graph the golden uses."""

import json

import pytest

from kernbench.runner import get_bench, run_bench

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _run(tmp_path, source):
    out = tmp_path / source
    smoke = {**get_bench("model-step").smoke, "bench.source": source, "bench.mode": "inference"}
    sets = [f"{k}={json.dumps(v) if isinstance(v, (list, bool)) else v}" for k, v in smoke.items()]
    run_bench("model-step", out=out, sets=sets, quiet=True)
    return json.loads((out / "sweep.json").read_text())["results"][0]


@pytest.mark.slow
def test_imported_llama_agrees_with_the_hand_built_graph(tmp_path):
    """model-step on the LLaMA graph imported through torch has exactly the hand-built graph's GEMM FLOPs and a time
    within 2 % of it (but not equal: the imported graph keeps elementwise ops the hand graph fuses)."""
    imp, hand = _run(tmp_path, "import"), _run(tmp_path, "hand")
    assert imp["source"] == "import" and hand["source"] == "hand"
    # The same GEMMs exactly (the importer's shapes are the hand graph's); the time within 2 % (the
    # imported graph keeps RoPE's and the residual's elementwise ops that the hand graph fuses: see
    # docs/model-estimates.md).
    assert imp["gemm_flops"] == hand["gemm_flops"]
    assert imp["time_ms"] == pytest.approx(hand["time_ms"], rel=0.02)
    assert imp["time_ms"] != hand["time_ms"]  # two graphs, not one run twice


@pytest.mark.slow
def test_imported_llama70b_layer_matches_hand_built_llama_layer():
    """One imported LLaMA-3.1-70B decoder layer at tp 8 (transformers' LlamaForCausalLM, traced on meta):
    the same GEMM, attention and all-reduce counts as the hand-built llama-layer, its GEMM FLOPs exactly,
    and its time within 2 % (chunks = 1, the same schedule; docs/model-estimates.md)."""
    from dataclasses import replace

    import kernbench
    from kernbench import llama
    from kernbench.workloads import WorkloadGraph, import_model
    from kernbench.workloads.lower import lower
    from kernbench.workloads.plan import ParallelPlan

    T, sip = 128, {"system.sips.w": 1, "system.sips.h": 1}
    g = import_model("llama3_70b", batch=1, seq=T, layers=1)
    keep = [i for i, op in enumerate(g.ops) if op.name.startswith("model.layers.0.")]
    index = {old: new for new, old in enumerate(keep)}
    layer = WorkloadGraph("layer0", [replace(g.ops[i], deps=tuple(index[d] for d in g.ops[i].deps if d in index))
                                     for i in keep], source=g.source)
    lo = lower(layer, kernbench.System.load(set=sip), ParallelPlan(tp=8), precision="bf16")
    res = lo.run()
    ref = llama.layer(kernbench.System.load(set=sip), "prefill", T, tp=8, chunks=1)
    assert lo.counts["gemm"] == 4 * 8          # q/k/v fused, o_proj, gate/up fused, down_proj; per rank
    assert lo.counts["attention"] == 8         # one GQA program per KV group
    assert lo.counts["all_reduce"] == 2        # after o_proj and down_proj (row-parallel)
    assert lo.gemm_flops == ref.plan["flops_model"] - ref.plan["flops_attention"]
    assert res.makespan_ps == pytest.approx(ref.latency_ps, rel=0.02)

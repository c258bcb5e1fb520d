"""The model catalog (kernbench.workloads.MODELS): published configurations, hand-built and imported graphs."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

import kernbench.workloads as W
from kernbench.workloads import MODELS, ModelSpec, WorkloadError, get_model, handbuilt, models

#: Published totals (model cards and papers): parameters, embeddings included.
PUBLISHED = {"llama2-7b": 6.74e9, "llama2-13b": 13.0e9, "llama2-70b": 69.0e9, "mpt-7b": 6.7e9, "gpt3-175b": 175e9,
             "llama3-8b": 8.03e9, "llama3-70b": 70.6e9, "megatron-22b": 22e9, "gpt2": 124e6,
             # Korthikanti et al. 2022, Table 1 (the 1T as Narayanan et al. 2021, Table 1)
             "turing-530b": 530e9, "megatron-1t": 1.0e12}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_totals(name):
    """The parameter count computed from a spec's numbers is the published total within 2 %, and the weights
    take that many elements of the dtype."""
    spec = MODELS[name]
    assert spec.params == pytest.approx(PUBLISHED[name], rel=0.02)
    assert spec.weight_bytes("fp32") == 4 * spec.params
    assert spec.weight_bytes() == spec.params * W.DTYPE_BYTES[spec.dtype]


@pytest.mark.parametrize("name", sorted(n for n in MODELS if not MODELS[n].experts))  # MoE: tests/python/test_moe.py
def test_prefill_gemm_flops_are_twice_the_parameters_per_token(name):
    """A hand-built prefill: its GEMMs do 2 x (non-embedding parameters) FLOPs per token (the LM head adds
    2 x vocab x hidden), one attention per layer, and its graph reads exactly the spec's parameters."""
    spec = MODELS[name]
    seq = min(2048, spec.max_positions)
    body = spec.graph(1, seq, head=False)
    gemm = body.by_kind()["matmul"]["flops"]
    assert gemm == pytest.approx(2 * (spec.params - spec.embedding_params) * seq, rel=0.01)
    full = spec.graph(1, seq)
    assert full.by_kind()["matmul"]["flops"] - gemm == 2 * spec.vocab * spec.hidden * seq
    assert full.by_kind()["attention"]["ops"] == spec.layers
    assert full.blocks[0].count == spec.layers
    assert full.param_count == spec.params


def test_llama_entries_build_the_llama_graph():
    """The catalog's LLaMA-3 entries are ``handbuilt.llama_graph`` with its dims: the same op list."""
    for name, dims in (("llama3-8b", handbuilt.LLAMA3_8B), ("llama3-70b", handbuilt.LLAMA3_70B)):
        a = MODELS[name].graph(2, 16, layers=2)
        b = handbuilt.llama_graph(2, 16, dims=dims, layers=2)
        assert [op.to_dict() for op in a.ops] == [op.to_dict() for op in b.ops]


def test_positions_and_decode_shape_the_graph():
    """ALiBi adds no op but marks the attention; learned positions are a second embedding (2048 rows) and an
    add, and cap kv_len; a builder's decode step attends the cache with one new token."""
    mpt = MODELS["mpt-7b"].graph(1, 64, layers=1)
    assert [op.attrs.get("alibi") for op in mpt.ops if op.kind == "attention"] == [True]
    assert sum(op.kind == "embedding" for op in mpt.ops) == 1
    meg = MODELS["megatron-22b"].graph(1, 64, layers=1)
    assert [op.attrs["rows"] for op in meg.ops if op.kind == "embedding"] == [51200, 2048]
    assert meg.ops[2].name == "transformer.add" and meg.ops[2].deps == (0, 1)
    with pytest.raises(WorkloadError, match="exceeds the 2048 learned positions"):
        MODELS["gpt3-175b"].graph(1, 1, 4096, layers=1)
    step = MODELS["llama2-70b"].builder(layers=2)(4, 1, 100)
    att = [op.attrs for op in step.ops if op.kind == "attention"]
    assert len(att) == 2 and att[0]["q_len"] == 1 and att[0]["kv_len"] == 100 and att[0]["kv_heads"] == 8
    assert not att[0]["causal"] and all(op.attrs["m"] == 4 for op in step.ops if op.kind == "matmul")


def test_lookup_accepts_underscores_and_any_case():
    """Names are hyphenated lower case; ``_`` for ``-`` and upper case find the same spec."""
    assert all(n == n.lower() and "_" not in n for n in MODELS)
    assert get_model("llama2_7b") is MODELS["llama2-7b"] is MODELS["Llama2_7B"]
    assert "gpt3_175b" in MODELS and MODELS.get("mpt_13b") is MODELS["mpt-13b"] and MODELS.get("nope") is None
    assert isinstance(get_model("megatron-22b"), ModelSpec)


def test_unknown_name_lists_the_known_names():
    """An unknown name raises WorkloadError (KeyError through ``MODELS[...]``) listing the catalog."""
    with pytest.raises(WorkloadError, match=r"unknown model 'llama9-1b' \(known: llama3-8b, .*llama2-7b.*gpt3-175b"):
        get_model("llama9-1b")
    with pytest.raises(KeyError, match="unknown model 'nope'"):
        MODELS["nope"]


def test_catalog_is_exported_and_every_entry_has_a_torch_builder():
    """``kernbench.workloads`` exports the catalog; ``models.MODELS`` (the torch builders) still works and has a
    builder for every catalog name."""
    assert {"MODELS", "ModelSpec", "get_model"} <= set(W.__all__)
    assert W.MODELS is MODELS and models.MODELS is models.TORCH_BUILDERS
    # the MoE entries are hand-built only (no transformers builder yet: tests/python/test_moe.py covers them)
    hand_only = {n for n in MODELS if MODELS[n].experts}
    assert hand_only == {"mixtral-8x7b", "deepseek-moe-16b", "grok-1", "qwen3-30b-a3b", "qwen3-235b-a22b",
                         "deepseek-v3", "gpt-oss-120b"}
    assert set(MODELS) - hand_only <= set(models.TORCH_BUILDERS)
    assert all(spec.source for spec in MODELS.values())


def test_imported_without_torch_names_the_extra(monkeypatch):
    """Without torch, ``imported`` raises WorkloadError naming the extra to install."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(WorkloadError, match=r"pip install 'kernbench\[torch\]'"):
        MODELS["llama2-7b"].imported(1, 8, layers=1)


@pytest.mark.parametrize("name", ["llama2-7b", "mpt-7b", "megatron-22b", "megatron-1t"])
def test_imported_layer_agrees_with_the_hand_built_one(name):
    """One imported layer (transformers' model from the same numbers, meta device) and the hand-built layer:
    the same GEMM FLOPs (within 1 %), attention ops and parameters (the imported graph also reads the rotary
    ``inv_freq`` buffer)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    spec = MODELS[name]
    imp, hand = spec.imported(1, 16, layers=1), spec.graph(1, 16, layers=1)
    ki, kh = imp.by_kind(), hand.by_kind()
    assert ki["matmul"]["flops"] == pytest.approx(kh["matmul"]["flops"], rel=0.01)
    assert ki["attention"]["ops"] == kh["attention"]["ops"] == 1
    buffers = {p.name: p.spec.numel for op in imp.ops for p in op.params if p.name in imp.meta.get("buffers", [])}
    assert imp.param_count - sum(buffers.values()) == replace(spec, layers=1).params == hand.param_count
    assert {op.dtype for op in imp.ops if op.kind == "matmul"} == {spec.dtype}

"""Imports as users write them: ``from_torch(LlamaForCausalLM(cfg), (ids,))`` on a config that keeps its default
``use_cache=True`` traces (the KV cache is turned off for the trace, and the graph says so), and a caller's own
``use_cache`` choice is left alone."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from kernbench.workloads import from_torch  # noqa: E402


def tiny_llama():
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    assert cfg.use_cache  # the default a user gets
    return transformers.LlamaForCausalLM(cfg)


def test_a_default_config_traces_with_the_cache_turned_off():
    """The model as built (use_cache true) imports without the DynamicCache error; meta names the change; the
    graph holds the layers' matmuls (2 layers x 7 projections + the LM head) and their attention."""
    ids = torch.zeros((1, 8), dtype=torch.long)
    g = from_torch(tiny_llama(), (ids,), repeat=False)
    assert "turned off" in g.meta["use_cache"]
    kinds = g.by_kind()
    assert kinds["matmul"]["ops"] == 2 * 7 + 1
    assert kinds["attention"]["ops"] == 2


def test_the_callers_choice_is_kept():
    """With kwargs={"use_cache": False} given by the caller, nothing is changed and meta has no use_cache note;
    the graph is the same as the one traced with the cache turned off."""
    ids = torch.zeros((1, 8), dtype=torch.long)
    model = tiny_llama()
    own = from_torch(model, (ids,), kwargs={"use_cache": False}, repeat=False)
    assert "use_cache" not in own.meta
    auto = from_torch(model, (ids,), repeat=False)
    assert [op.kind for op in own.ops] == [op.kind for op in auto.ops]

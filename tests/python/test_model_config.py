"""Models by config (issue 53 item 3): ``get_model`` of a Hugging Face config.json or a YAML spec, the new
catalog entries' published totals, DeepSeek's multi-head latent attention (its weights, projections, FLOPs,
compressed KV cache and absorbed decode kernel) and the named errors of bad model files."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

import kernbench
from kernbench import _core
from kernbench.workloads import MODELS, ParallelPlan, WorkloadError, estimate, get_model
from kernbench.workloads.model_config import HF_TYPES, YAML_KEYS, to_yaml_spec
from kernbench.workloads.targets import gpu_attention_plan

H100 = "machines/h100-8x-nvswitch.yaml"

#: https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json, as published (keys kernbench does not
#: read included: they are ignored).
LLAMA3_8B_JSON = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0", "use_cache": True, "vocab_size": 128256,
}
#: https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json (the keys kernbench reads, and a few it
#: ignores).
DEEPSEEK_V3_JSON = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_act": "silu",
    "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "first_k_dense_replace": 3, "tie_word_embeddings": False,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "v_head_dim": 128, "vocab_size": 129280,
}


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return str(p)


def _fields(spec):
    return replace(spec, name="x", source="x")


def test_hf_llama3_8b_is_the_catalog_model_and_steps_in_the_same_time(tmp_path):
    """Llama-3-8B's published config.json (in a folder named after it) is the catalog's llama3-8b: the same
    numbers, parameters exactly, and a 2-layer training step on the H100 box in bit-identical time."""
    path = _write(tmp_path, "Meta-Llama-3-8B/config.json", LLAMA3_8B_JSON)
    spec, cat = get_model(path), get_model("llama3-8b")
    assert spec.name == "Meta-Llama-3-8B" and spec.source == path
    assert spec.params == cat.params == 8030261248
    assert _fields(spec) == _fields(cat)
    times = []
    for s in (spec, cat):
        tr = estimate.training_step(s.graph(1, 256, layers=2), kernbench.System.load(H100), ParallelPlan(tp=2))
        times.append(tr.step_ms)
    assert times[0] == times[1] > 0


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "mixtral-8x7b",
                                  "llama3.1-405b"])
def test_catalog_entries_round_trip_through_yaml(tmp_path, name):
    """A catalog spec written as a YAML spec (every key of YAML_KEYS) reads back as the same spec (Mixtral's
    HF module names are not YAML keys: compared without them)."""
    cat = MODELS[name]
    path = _write(tmp_path, f"{name}.yaml", to_yaml_spec(cat))
    spec = get_model(path)
    with open(path) as f:
        assert set(yaml.safe_load(f)) == set(YAML_KEYS)
    assert spec.name == name and spec.params == cat.params and spec.active_params == cat.active_params
    assert replace(spec, source="x") == replace(cat, source="x", moe_module="mlp",
                                                expert_linears=("gate_proj", "up_proj", "down_proj"))


def test_small_yaml_spec_fills_the_derived_keys(tmp_path):
    """A minimal YAML spec: name from the file, kv_heads = heads, head_dim = hidden / heads, the LLaMA
    defaults; ``activation`` sets the MLP (the field ``mlp``, which callers keep using)."""
    path = _write(tmp_path, "gpt-1.7b.yaml", {"hidden": 2304, "layers": 24, "heads": 24, "ffn": 9216, "vocab": 51200,
                                               "norm": "layer", "activation": "gelu", "positions": "learned",
                                               "tied": True, "bias": True, "family": "gpt"})
    spec = get_model(path)
    assert (spec.name, spec.kv_heads, spec.head_dim, spec.mlp, spec.activation) == ("gpt-1.7b", 24, 96, "gelu", "gelu")
    # Megatron's 1.7B GPT (Narayanan et al. 2021, Table 1: 24 heads, hidden 2304, 24 layers)
    assert spec.params == pytest.approx(1.7e9, rel=0.03)
    assert spec.graph(1, 32, layers=1).param_count == replace(spec, layers=1).params


def test_hf_types_cover_the_catalog_families():
    """Each supported model_type reads a config of its own keys into the catalog spec of that model."""
    assert set(HF_TYPES) >= {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3", "gpt_oss"}
    from kernbench.workloads.model_config import from_hf_config
    ds = from_hf_config(DEEPSEEK_V3_JSON, name="deepseek-v3")
    assert _fields(ds) == _fields(MODELS["deepseek-v3"])
    qwen = {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48,
            "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
            "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    assert _fields(from_hf_config(qwen)) == _fields(MODELS["qwen3-30b-a3b"])
    oss = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
           "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 36, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
           "attention_bias": True, "sliding_window": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    assert _fields(from_hf_config(oss)) == _fields(MODELS["gpt-oss-120b"])
    q2 = from_hf_config({**LLAMA3_8B_JSON, "model_type": "qwen2"})
    assert q2.params - MODELS["llama3-8b"].params == 32 * (4096 + 2 * 1024)  # q, k, v biases per layer


def test_published_totals_of_the_new_entries():
    """DeepSeek-V3's main model (the MTP module excluded) is 671B and activates 37B a token (the report's figure;
    its README_WEIGHTS.md's 36.6B includes the 0.9B output head and leaves out the input embedding, a lookup);
    Grok-1 314B, Llama-3.1-405B 405B, Qwen3-30B-A3B 30.5B / 3.3B, Qwen3-235B-A22B 235B / 22B, GPT-OSS-120B
    116.8B; each hand-built graph holds exactly the spec's parameters."""
    ds = MODELS["deepseek-v3"]
    assert round(ds.params / 1e9) == 671
    assert round((ds.active_params - ds.vocab * ds.hidden) / 1e8) == 366
    assert round((ds.active_params - ds.vocab * ds.hidden) / 1e9) == 37
    for name, total, rel in (("grok-1", 314e9, 0.01), ("llama3.1-405b", 405e9, 0.005),
                             ("qwen3-30b-a3b", 30.5e9, 0.005), ("qwen3-235b-a22b", 235e9, 0.005),
                             ("gpt-oss-120b", 116.8e9, 0.001)):
        assert MODELS[name].params == pytest.approx(total, rel=rel), name
    assert MODELS["qwen3-30b-a3b"].active_params == pytest.approx(3.3e9, rel=0.02)
    assert MODELS["qwen3-235b-a22b"].active_params == pytest.approx(22e9, rel=0.02)
    assert MODELS["llama3.1-70b"].params == MODELS["llama3.3-70b"].params == MODELS["llama3-70b"].params
    assert MODELS["llama3.1-405b"].max_positions == 131072
    for name in ("deepseek-v3", "gpt-oss-120b", "grok-1"):
        assert MODELS[name].graph(1, 16).param_count == MODELS[name].params, name


def test_mla_kv_cache_is_the_latent_closed_form():
    """MLA caches kv_lora_rank + qk_rope_head_dim elements per token per layer, on every tensor-parallel rank:
    (512 + 64) x 61 x 2 bytes for DeepSeek-V3, 1/85 of the same heads' GQA (MHA) cache; GQA's is
    2 x kv_heads / tp x head_dim x layers x bytes."""
    ds = MODELS["deepseek-v3"]
    assert ds.kv_bytes_per_token() == (512 + 64) * 61 * 2 == ds.kv_bytes_per_token(tp=8)
    assert ds.kv_bytes_per_token("fp8", layers=2) == 576 * 2
    gqa = replace(ds, attention="gqa")
    assert gqa.kv_bytes_per_token() == 2 * 128 * 192 * 61 * 2 > 80 * ds.kv_bytes_per_token()
    ll = MODELS["llama3-70b"]
    assert ll.kv_bytes_per_token(tp=16) == 2 * 1 * 128 * 80 * 2 and ll.kv_bytes_per_token(tp=4) == 2 * 2 * 128 * 80 * 2
    from kernbench.workloads.memory import inference_footprint
    fp = inference_footprint(ds, tp=8, pp=1, batch=3, prompt=16, tokens=100)
    assert fp.kv_cache == 3 * 100 * 576 * 61 * 2


def test_mla_graph_has_the_latent_projections_and_flops():
    """A prefill layer: q_a, q_b, kv_a (its norms), kv_b over the attended tokens, multi-head attention of qk dim
    192 and v dim 128, o_proj; a decode layer: kv_b folded into q_absorb and o_absorb, and one attention of all
    heads over one latent KV head of 576 with values 512 wide."""
    ds = MODELS["deepseek-v3"]
    pre = ds.graph(2, 64, layers=1, embed=False, head=False)
    mm = {op.name.split("self_attn.")[1]: op.attrs for op in pre.ops if op.kind == "matmul" and "self_attn" in op.name}
    assert {k: (a["m"], a["n"], a["k"]) for k, a in mm.items()} == {
        "q_a_proj": (128, 1536, 7168), "q_b_proj": (128, 128 * 192, 1536), "kv_a_proj_with_mqa": (128, 576, 7168),
        "kv_b_proj": (128, 128 * 256, 512), "o_proj": (128, 7168, 128 * 128)}
    (at,) = [op for op in pre.ops if op.kind == "attention"]
    a = at.attrs
    assert (a["heads"], a["kv_heads"], a["head_dim"], a["v_head_dim"]) == (128, 128, 192, 128)
    assert at.flops == 2 * 2 * 128 * 64 * 64 * (192 + 128)
    dec = ds.graph(4, 1, 300, layers=1, embed=False, head=False)
    names = [op.name.split("self_attn.")[1] for op in dec.ops if "self_attn" in op.name]
    assert "kv_b_proj" not in names and {"kv_b_proj.q_absorb", "kv_b_proj.o_absorb"} <= set(names)
    (at,) = [op for op in dec.ops if op.kind == "attention"]
    assert (at.attrs["kv_heads"], at.attrs["head_dim"], at.attrs["v_head_dim"], at.attrs["kv_shared"]) == (1, 576, 512,
                                                                                                          True)
    assert at.flops == 2 * 4 * 128 * 1 * 300 * (576 + 512)
    assert dec.param_count == pre.param_count  # the absorbed products read kv_b_proj's weight


def test_mla_decode_kernel_streams_the_latent_once():
    """The absorbed decode kernel on an H100: its FLOPs are QK^T over 576 and PV over 512 for every query head;
    its bytes are the latent cache read once (batch x keys x 576 x 2), not a K and a V; the prefill kernel's
    bytes are K and Q of 192 and V and O of 128. A GQA op without the new attrs prices as before."""
    sysm = kernbench.System.load(H100)
    dec = {"head_dim": 576, "v_head_dim": 512, "kv_shared": True}
    p = gpu_attention_plan(sysm, "gpu0", 4, 16, 1, 1, 4096, dec, 2, False, "bf16")
    assert p["decode"] and p["flops"] == 2 * 4 * 16 * 4096 * (576 + 512)
    assert p["bytes"] == 4 * 4096 * 576 * 2
    assert p["duration_ps"] >= max(p["compute_ps"], p["memory_ps"])
    pre = gpu_attention_plan(sysm, "gpu0", 1, 16, 16, 1024, 1024, {"head_dim": 192, "v_head_dim": 128}, 2, False,
                             "bf16")
    assert pre["flops"] == 2 * 16 * 1024 * 1024 * (192 + 128)
    assert pre["bytes"] == 16 * 1024 * (192 + 128) * 2 * 2  # K + V, Q + O
    same = gpu_attention_plan(sysm, "gpu0", 2, 32, 8, 1, 512, {"head_dim": 128}, 2, False, "bf16")
    assert dict(same) == dict(_core.gpu_attention(sysm._core, "gpu0", 2, 32, 8, 1, 512, 128, 2, False, "bf16"))


def test_deepseek_v3_decode_step_estimate_runs():
    """Four layers of DeepSeek-V3 (three dense, one MoE) served at tp 8 on the H100 box: a prefill and decode
    steps whose KV cache is the latent's closed form, decode faster than prefill, and the latent projections
    of q_a and kv_a fused into one replicated GEMM per rank."""
    ds = MODELS["deepseek-v3"]
    est = estimate.inference(ds.builder(layers=4), kernbench.System.load(H100), ParallelPlan(tp=8), batch=4,
                             prompt=64, decode_steps=2, kv_samples=None)
    assert est.steps[-1]["kv_cache_bytes"] == 4 * (64 + 2) * 4 * 576 * 2
    assert 0 < est.tpot_ms < est.ttft_ms


def test_get_model_names_every_form():
    """get_model takes a catalog name, a path or a spec; an unknown name lists the catalog and the file forms."""
    assert get_model(MODELS["grok-1"]) is MODELS["grok-1"] and get_model("Llama3.1_8B") is MODELS["llama3.1-8b"]
    with pytest.raises(WorkloadError, match=r"unknown model 'llama9'.*llama3\.1-405b.*config\.json or a YAML"):
        get_model("llama9")
    with pytest.raises(WorkloadError, match=r"model file '.*nope\.yaml' not found"):
        get_model("/nonexistent/nope.yaml")


BASE = {"hidden": 1024, "layers": 2, "heads": 8, "ffn": 4096, "vocab": 1000}


@pytest.mark.parametrize("data,message", [
    ({**BASE, "hiden": 1}, r"spec\.yaml: unknown key 'hiden' \(known: name, family, hidden"),
    ({k: v for k, v in BASE.items() if k != "vocab"}, r"spec\.yaml: missing key 'vocab'"),
    ({**BASE, "heads": 7}, r"spec\.yaml: heads = 7 does not divide hidden = 1024 \(and no head_dim"),
    ({**BASE, "kv_heads": 3}, r"spec\.yaml: heads = 8 is not a multiple of kv_heads = 3"),
    ({**BASE, "experts": 2, "top_k": 4}, r"spec\.yaml: experts = 2 experts need 1 <= top_k \(4\) <= experts"),
    ({**BASE, "layers": 0}, r"spec\.yaml: layers = 0: expected a whole number >= 1"),
    ({**BASE, "ffn": 2.5}, r"spec\.yaml: ffn = 2\.5: expected a whole number"),
    ({**BASE, "activation": "relu"}, r"spec\.yaml: activation = 'relu': expected one of swiglu, gelu"),
    ({**BASE, "attention": "mla", "kv_lora_rank": 64}, r"spec\.yaml: .*MLA needs kv_lora_rank, qk_nope_head_dim"),
    ([1, 2], r"spec\.yaml: a model spec is a mapping"),
])
def test_bad_yaml_specs_are_named_errors(tmp_path, data, message):
    """Each bad YAML spec is a WorkloadError naming the file and the key."""
    with pytest.raises(WorkloadError, match=message):
        get_model(_write(tmp_path, "spec.yaml", data))


@pytest.mark.parametrize("change,message", [
    ({"hidden_size": None}, r"config\.json: key 'hidden_size' not found \(model_type 'llama' needs it\)"),
    ({"model_type": "falcon"}, r"config\.json: model_type 'falcon' is not supported \(supported: llama, mistral"),
    ({"model_type": None}, r"config\.json: key 'model_type' not found"),
    ({"num_attention_heads": 30}, r"config\.json: num_attention_heads = 30 does not divide hidden_size = 4096"),
    ({"num_key_value_heads": 5}, r"num_attention_heads = 32 is not a multiple of num_key_value_heads = 5"),
    ({"num_hidden_layers": -1}, r"config\.json: num_hidden_layers = -1: expected a whole number >= 1"),
    ({"hidden_act": "gelu"}, r"config\.json: hidden_act = 'gelu'"),
    ({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3},
     r"config\.json: num_experts \(or n_routed_experts, num_local_experts\) = 2 experts need 1 <= num_experts_per_tok"),
    ({"model_type": "mixtral"}, r"config\.json: key 'num_local_experts' not found \(model_type 'mixtral'"),
])
def test_bad_hf_configs_are_named_errors(tmp_path, change, message):
    """A config.json missing a key kernbench needs, of an unsupported model_type or of an impossible shape is a
    WorkloadError naming the key and the file."""
    data = {k: v for k, v in {**LLAMA3_8B_JSON, **change}.items() if v is not None}
    with pytest.raises(WorkloadError, match=message):
        get_model(_write(tmp_path, "m/config.json", data))


def test_deepseek_config_without_mla_key_names_it(tmp_path):
    """DeepSeek-V3's config.json without kv_lora_rank names the key and the file."""
    data = {k: v for k, v in DEEPSEEK_V3_JSON.items() if k != "kv_lora_rank"}
    with pytest.raises(WorkloadError, match=r"ds/config\.json: key 'kv_lora_rank' not found"):
        get_model(_write(tmp_path, "ds/config.json", data))


def test_mla_lowering_fuses_the_replicated_latent_projections():
    """At tp 4 the latent projections q_a and kv_a are one replicated GEMM per rank, q_b and the absorbed
    products column-parallel (split by heads, no collective), o_proj row-parallel (its all-reduce)."""
    from kernbench.workloads.lower import lower

    g = MODELS["deepseek-v3"].graph(2, 1, 200, layers=1, embed=False, head=False)
    lw = lower(g, kernbench.System.load(H100), ParallelPlan(tp=4))
    rules = {k.split("self_attn.")[-1]: v for k, v in lw.rules.items() if "self_attn" in k}
    assert rules == {"q_a_proj": ("replicated", 2), "q_b_proj": ("column", 1), "kv_b_proj.q_absorb": ("column", 1),
                     "kv_b_proj.o_absorb": ("column", 1), "o_proj": ("row", 1)}


def test_front_ends_take_a_model_file(tmp_path):
    """``kernbench serve --model`` (its dry check) and the calibrate function model.inference take a YAML spec's
    path; a bad spec's error names the file and the key."""
    from kernbench.calibrate import REGISTRY, Context
    from kernbench.cli_check import check_command
    from kernbench._core import ConfigError

    path = _write(tmp_path, "tiny.yaml", {"hidden": 512, "layers": 2, "heads": 8, "kv_heads": 2, "ffn": 1536,
                                          "vocab": 4096})
    assert check_command(["serve", "--model", path, "--config", H100]) == f"serve {path}"
    res = REGISTRY.get("model.inference").fn(Context(config=H100, sets={}), model=path, prompt=32, output=2)
    assert 0 < res["tpot"] < res["latency"]
    bad = _write(tmp_path, "bad.yaml", {**BASE, "layer": 2})
    with pytest.raises(ConfigError, match=r"--model .*bad\.yaml: .*bad\.yaml: unknown key 'layer'"):
        check_command(["serve", "--model", bad, "--config", H100])

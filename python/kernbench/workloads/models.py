"""Real models nobody here wrote: ``transformers`` classes built from their published configurations.

Each builder constructs the model's Config class from the numbers of the
model's published ``config.json`` (written out below, with where they come
from), instantiates the model under ``torch.device("meta")`` -- no
download, no weights allocated -- and returns ``(module, example_inputs)``::

    from kernbench.workloads import models, from_torch
    module, inputs = models.llama3_8b(batch=1, seq=2048)
    g = from_torch(module, inputs)                  # or: models.import_model("llama3-8b", seq=2048)
    g.find("model.layers.3.mlp.down_proj")

Attention: the transformer models run HF's own SDPA attention
(``transformers.integrations.sdpa_attention``) registered under the name
``kernbench_sdpa`` without an attention-mask builder, so the (causal or
bidirectional) pattern reaches ``scaled_dot_product_attention`` as its
``is_causal`` flag -- what HF does outside ``torch.export`` when no token is
padded. Under export HF would otherwise materialise a ``batch x 1 x seq x
seq`` boolean mask in some twenty small ops before the first layer (its
documented export behaviour: the traced graph cannot rely on ``is_causal``
for other shapes); the example inputs here are unpadded, so both are the
same attention, and the op graph stays the model's own work.

Versions are pinned (``pip install 'kernbench[torch]'``: torch==2.13.0,
transformers==5.24.0): the traced op list depends on the modelling code of
the transformers release.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from kernbench.workloads.graph import WorkloadError, WorkloadGraph

__all__ = ["LLAMA3_8B", "LLAMA3_70B", "LLAMA2_7B", "LLAMA2_13B", "LLAMA2_70B", "MPT_7B", "MPT_13B", "MEGATRON_22B",
           "GPT3_175B", "TURING_530B", "MEGATRON_1T", "GPT2", "BERT_BASE", "RESNET50", "TORCH_BUILDERS", "MODELS",
           "LLAMA3_1_8B", "LLAMA3_1_70B", "LLAMA3_1_405B", "llama3_1_8b", "llama3_1_70b", "llama3_1_405b",
           "ATTENTION", "llama3_8b", "llama3_70b", "llama2_7b", "llama2_13b", "llama2_70b", "mpt_7b", "mpt_13b",
           "megatron_22b", "gpt3_175b", "turing_530b", "megatron_1t", "gpt2", "bert_base", "resnet50", "build",
           "import_model"]

#: meta-llama/Meta-Llama-3-8B, config.json (https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json).
LLAMA3_8B: dict[str, Any] = {
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001, "torch_dtype": "bfloat16",
}
#: meta-llama/Meta-Llama-3-70B, config.json (https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json).
LLAMA3_70B: dict[str, Any] = {
    **LLAMA3_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8,
}
#: meta-llama/Llama-3.1-8B, config.json (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json):
#: Llama-3-8B's numbers at 131072 positions with the llama3 rope scaling.
LLAMA3_1_8B: dict[str, Any] = {
    **LLAMA3_8B, "max_position_embeddings": 131072,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}
#: meta-llama/Llama-3.1-70B, config.json (https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json);
#: meta-llama/Llama-3.3-70B-Instruct has the same numbers.
LLAMA3_1_70B: dict[str, Any] = {
    **LLAMA3_1_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8,
}
#: meta-llama/Llama-3.1-405B, config.json (https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json).
LLAMA3_1_405B: dict[str, Any] = {
    **LLAMA3_1_8B, "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
    "num_attention_heads": 128, "num_key_value_heads": 8,
}
#: meta-llama/Llama-2-7b-hf, config.json (https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json).
#: The published weights are fp16.
LLAMA2_7B: dict[str, Any] = {
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16",
}
#: meta-llama/Llama-2-13b-hf, config.json (https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json).
LLAMA2_13B: dict[str, Any] = {
    **LLAMA2_7B, "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
    "num_attention_heads": 40, "num_key_value_heads": 40,
}
#: meta-llama/Llama-2-70b-hf, config.json (https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json):
#: grouped-query attention, 8 KV heads.
LLAMA2_70B: dict[str, Any] = {
    **LLAMA2_7B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8,
}
#: MPT-7B: mosaicml/llm-foundry ``scripts/train/yamls/pretrain/mpt-7b.yaml`` (d_model 4096, 32 heads, 32 layers,
#: expansion_ratio 4, max_seq_len 2048, vocab_size 50368) with MPT's defaults (ALiBi, LayerNorm without bias,
#: no biases, tied LM head), as ``MptConfig`` keys. The released mosaicml/mpt-7b checkpoint pads the vocabulary
#: to 50432; the yaml's 50368 is used here. Trained in bf16 (the yaml's ``amp_bf16``).
MPT_7B: dict[str, Any] = {
    "d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4, "max_seq_len": 2048, "vocab_size": 50368,
    "no_bias": True, "layer_norm_epsilon": 1e-5, "attn_config": {"alibi": True, "alibi_bias_max": 8},
    "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}
#: MPT-13B: llm-foundry ``scripts/train/yamls/pretrain/mpt-13b.yaml`` (d_model 5120, 40 heads, 40 layers; the
#: rest as MPT-7B).
MPT_13B: dict[str, Any] = {**MPT_7B, "d_model": 5120, "n_heads": 40, "n_layers": 40}
#: Megatron's 22B GPT: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
#: (arXiv:2205.05198), Table 1 (hidden 6144, 48 layers, 64 heads, sequence 2048), as ``GPT2Config`` keys:
#: learned positions, LayerNorm and linears with biases, GELU MLP of 4 h, tied embeddings, vocabulary 51200 (the
#: GPT-2 BPE padded to a multiple of 1024 x TP 8: Narayanan et al. 2021). No checkpoint is published: bf16.
MEGATRON_22B: dict[str, Any] = {
    "n_embd": 6144, "n_layer": 48, "n_head": 64, "n_inner": 4 * 6144, "n_positions": 2048, "n_ctx": 2048,
    "vocab_size": 51200, "activation_function": "gelu", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
#: GPT-3 175B: the same Table 1 (Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: hidden
#: 12288, 96 layers, 96 heads, context 2048), vocabulary 51200 as Megatron's.
GPT3_175B: dict[str, Any] = {**MEGATRON_22B, "n_embd": 12288, "n_layer": 96, "n_head": 96, "n_inner": 4 * 12288}
#: Megatron-Turing NLG 530B: the same Table 1 (hidden 20480, 105 layers, 128 heads, FFN 81920, sequence 2048).
TURING_530B: dict[str, Any] = {**MEGATRON_22B, "n_embd": 20480, "n_layer": 105, "n_head": 128, "n_inner": 4 * 20480}
#: Megatron's 1T GPT: the same Table 1 and Narayanan et al. 2021 (arXiv:2104.04473), Table 1 (hidden 25600, 128
#: layers, 160 heads, FFN 102400, sequence 2048).
MEGATRON_1T: dict[str, Any] = {**MEGATRON_22B, "n_embd": 25600, "n_layer": 128, "n_head": 160, "n_inner": 4 * 25600}
#: openai-community/gpt2 (gpt2), config.json (https://huggingface.co/openai-community/gpt2/blob/main/config.json).
#: The published weights are fp32.
GPT2: dict[str, Any] = {
    "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "attn_pdrop": 0.1, "embd_pdrop": 0.1,
    "resid_pdrop": 0.1, "bos_token_id": 50256, "eos_token_id": 50256, "torch_dtype": "float32",
}
#: google-bert/bert-base-uncased, config.json (https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json).
BERT_BASE: dict[str, Any] = {
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "hidden_act": "gelu", "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2,
    "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "pad_token_id": 0, "position_embedding_type": "absolute", "torch_dtype": "float32",
}
#: microsoft/resnet-50, config.json (https://huggingface.co/microsoft/resnet-50/blob/main/config.json);
#: built as ``ResNetModel`` (the backbone and its pooler, without the 1000-class head).
RESNET50: dict[str, Any] = {
    "num_channels": 3, "embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3],
    "layer_type": "bottleneck", "hidden_act": "relu", "downsample_in_first_stage": False,
    "downsample_in_bottleneck": False, "torch_dtype": "float32",
}

#: The attention implementation the transformer builders select (see the module docstring).
ATTENTION = "kernbench_sdpa"


def _torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise WorkloadError("the model builders need torch and transformers: pip install 'kernbench[torch]'") from e
    return torch


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    if ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION, sdpa_attention_forward)


def _config(numbers: dict[str, Any], layers: int | None, layers_key: str) -> tuple[dict[str, Any], Any]:
    torch = _torch()
    kw = dict(numbers)
    dtype = getattr(torch, kw.pop("torch_dtype"))
    if layers is not None:
        if layers < 1:
            raise WorkloadError(f"layers={layers}: a model needs at least one layer")
        kw[layers_key] = int(layers)
    return kw, dtype


def _build(cls, config, dtype, dtype_override):
    torch = _torch()
    # _from_config builds under the dtype as from_pretrained would: parameters
    # in it, while buffers the modelling code makes in fp32 (LLaMA's rotary
    # inv_freq) stay fp32, as in the published checkpoints' runs.
    with torch.device("meta"):
        model = cls._from_config(config, dtype=dtype_override if dtype_override is not None else dtype)
    return model.eval()


def _dtype(d):
    if d is None or not isinstance(d, str):
        return d
    torch = _torch()
    names = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if d not in names:
        raise WorkloadError(f"dtype {d!r} (known: {', '.join(names)})")
    return names[d]


def _ids(batch: int, seq: int, vocab: int, limit: int | None = None):
    torch = _torch()
    if batch < 1 or seq < 1:
        raise WorkloadError(f"batch={batch}, seq={seq}: both must be at least 1")
    if limit is not None and seq > limit:
        raise WorkloadError(f"seq={seq} exceeds the model's {limit} positions")
    return torch.zeros(batch, seq, dtype=torch.long, device="meta")


def _llama(numbers, batch, seq, layers, dtype):
    _torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    _register_attention()
    kw, dt = _config(numbers, layers, "num_hidden_layers")
    cfg = LlamaConfig(**kw, use_cache=False, attn_implementation=ATTENTION)
    return _build(LlamaForCausalLM, cfg, dt, _dtype(dtype)), (_ids(batch, seq, cfg.vocab_size,
                                                                 cfg.max_position_embeddings),)


def llama3_8b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Meta-Llama-3-8B's configuration (bf16; untied LM head), and ``(input_ids,)``."""
    return _llama(LLAMA3_8B, batch, seq, layers, dtype)


def llama3_70b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Meta-Llama-3-70B's configuration (80 layers, bf16), and ``(input_ids,)``."""
    return _llama(LLAMA3_70B, batch, seq, layers, dtype)


def llama3_1_8b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-3.1-8B's configuration (131072 positions, bf16), and ``(input_ids,)``."""
    return _llama(LLAMA3_1_8B, batch, seq, layers, dtype)


def llama3_1_70b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-3.1-70B's (and Llama-3.3-70B's) configuration, and ``(input_ids,)``."""
    return _llama(LLAMA3_1_70B, batch, seq, layers, dtype)


def llama3_1_405b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-3.1-405B's configuration (126 layers), and ``(input_ids,)``."""
    return _llama(LLAMA3_1_405B, batch, seq, layers, dtype)


def llama2_7b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-2-7b-hf's configuration (fp16; untied LM head), and ``(input_ids,)``."""
    return _llama(LLAMA2_7B, batch, seq, layers, dtype)


def llama2_13b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-2-13b-hf's configuration (40 layers, fp16), and ``(input_ids,)``."""
    return _llama(LLAMA2_13B, batch, seq, layers, dtype)


def llama2_70b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``LlamaForCausalLM`` with Llama-2-70b-hf's configuration (80 layers, GQA, fp16), and ``(input_ids,)``."""
    return _llama(LLAMA2_70B, batch, seq, layers, dtype)


def _gpt(numbers, batch, seq, layers, dtype):
    _torch()
    from transformers import GPT2Config, GPT2LMHeadModel
    _register_attention()
    kw, dt = _config(numbers, layers, "n_layer")
    cfg = GPT2Config(**kw, use_cache=False, attn_implementation=ATTENTION)
    return _build(GPT2LMHeadModel, cfg, dt, _dtype(dtype)), (_ids(batch, seq, cfg.vocab_size, cfg.n_positions),)


def gpt2(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``GPT2LMHeadModel`` with gpt2's configuration (fp32; the LM head is tied to ``wte``), and ``(input_ids,)``."""
    return _gpt(GPT2, batch, seq, layers, dtype)


def megatron_22b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``GPT2LMHeadModel`` with Megatron's 22B GPT configuration (48 layers, 2048 positions, bf16), and
    ``(input_ids,)``."""
    return _gpt(MEGATRON_22B, batch, seq, layers, dtype)


def gpt3_175b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``GPT2LMHeadModel`` with GPT-3 175B's configuration (96 layers, 2048 positions, bf16), and
    ``(input_ids,)``."""
    return _gpt(GPT3_175B, batch, seq, layers, dtype)


def turing_530b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``GPT2LMHeadModel`` with Megatron-Turing NLG 530B's configuration (105 layers, 2048 positions, bf16), and
    ``(input_ids,)``."""
    return _gpt(TURING_530B, batch, seq, layers, dtype)


def megatron_1t(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``GPT2LMHeadModel`` with Megatron's 1T GPT configuration (128 layers, 2048 positions, bf16), and
    ``(input_ids,)``."""
    return _gpt(MEGATRON_1T, batch, seq, layers, dtype)


@functools.cache
def _mpt_sdpa_class():
    """``MptAttention`` with its eager matmul-softmax-matmul replaced by ``scaled_dot_product_attention`` taking the
    ALiBi bias (and the causal mask) as its additive ``attn_mask``: the same maths, as llm-foundry's
    torch/flash/triton attention computes it, and one attention op for the lowering."""
    import torch
    from transformers.models.mpt.modeling_mpt import MptAttention

    class MptSdpaAttention(MptAttention):
        def forward(self, hidden_states, position_bias, cache=None, attention_mask=None, **kwargs):
            b, s = hidden_states.shape[:2]
            qkv = self.Wqkv(hidden_states)
            if self.clip_qkv:
                qkv = qkv.clamp(min=-self.clip_qkv, max=self.clip_qkv)
            q, k, v = (t.reshape(b, s, self.n_heads, self.head_dim).transpose(1, 2) for t in qkv.chunk(3, dim=2))
            bias = position_bias[:, :, position_bias.size(2) - s:]  # MptAttention's slice: heads x 1 x keys
            if attention_mask is not None:
                bias = bias.masked_fill(attention_mask, torch.finfo(q.dtype).min)
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype),
                                                                   scale=self.softmax_scale)
            return self.out_proj(out.transpose(1, 2).reshape(b, s, -1)), None

    return MptSdpaAttention


def _mpt(numbers, batch, seq, layers, dtype):
    _torch()
    from transformers import MptConfig, MptForCausalLM
    kw, dt = _config(numbers, layers, "n_layers")
    cfg = MptConfig(**kw, use_cache=False)
    model = _build(MptForCausalLM, cfg, dt, _dtype(dtype))
    cls = _mpt_sdpa_class()
    for block in model.transformer.blocks:
        block.attn.__class__ = cls
    return model, (_ids(batch, seq, cfg.vocab_size, cfg.max_seq_len),)


def mpt_7b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``MptForCausalLM`` with MPT-7B's configuration (ALiBi, bf16; SDPA attention, see ``_mpt_sdpa_class``), and
    ``(input_ids,)``."""
    return _mpt(MPT_7B, batch, seq, layers, dtype)


def mpt_13b(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``MptForCausalLM`` with MPT-13B's configuration (40 layers, bf16), and ``(input_ids,)``."""
    return _mpt(MPT_13B, batch, seq, layers, dtype)


def bert_base(batch: int = 1, seq: int = 128, *, layers: int | None = None, dtype=None):
    """``BertModel`` (encoder and pooler) with bert-base-uncased's configuration (fp32), and ``(input_ids,)``."""
    _torch()
    from transformers import BertConfig, BertModel
    _register_attention()
    kw, dt = _config(BERT_BASE, layers, "num_hidden_layers")
    cfg = BertConfig(**kw, use_cache=False, attn_implementation=ATTENTION)
    return _build(BertModel, cfg, dt, _dtype(dtype)), (_ids(batch, seq, cfg.vocab_size,
                                                          cfg.max_position_embeddings),)


def resnet50(batch: int = 1, seq: int = 224, *, layers: int | None = None, dtype=None):
    """``ResNetModel`` with microsoft/resnet-50's configuration (fp32), and ``(pixel_values,)`` of seq x seq pixels.

    ``seq`` is the image side (224 for ImageNet); ``layers`` is not used
    (ResNet's stages are not identical blocks).
    """
    torch = _torch()
    from transformers import ResNetConfig, ResNetModel
    if layers is not None:
        raise WorkloadError("resnet50: layers= does not apply (the stages differ)")
    kw, dt = _config(RESNET50, None, "")
    cfg = ResNetConfig(**kw)
    model = _build(ResNetModel, cfg, dt, _dtype(dtype))
    if batch < 1 or seq < 32:
        raise WorkloadError(f"resnet50: batch={batch}, image side {seq}: batch >= 1, side >= 32")
    pix = torch.zeros(batch, cfg.num_channels, seq, seq, dtype=_dtype(dtype) or dt, device="meta")
    return model, (pix,)


#: name -> torch builder (``import_model`` looks names up here). Not ``kernbench.workloads.MODELS``, which is the
#: model catalog (``kernbench.workloads.catalog``: specs that also build by hand).
TORCH_BUILDERS: dict[str, Callable] = {
    "llama3-8b": llama3_8b, "llama3-70b": llama3_70b, "llama2-7b": llama2_7b, "llama2-13b": llama2_13b,
    "llama2-70b": llama2_70b, "mpt-7b": mpt_7b, "mpt-13b": mpt_13b, "megatron-22b": megatron_22b,
    "gpt3-175b": gpt3_175b, "turing-530b": turing_530b, "megatron-1t": megatron_1t, "gpt2": gpt2,
    "bert-base": bert_base, "resnet50": resnet50, "llama3.1-8b": llama3_1_8b, "llama3.1-70b": llama3_1_70b,
    "llama3.1-405b": llama3_1_405b, "llama3.3-70b": llama3_1_70b}
#: The name this table had before the catalog (kept for callers of ``models.MODELS``).
MODELS = TORCH_BUILDERS


def build(name: str, batch: int = 1, seq: int | None = None, **kw):
    """``(module, example_inputs)`` of a model in ``TORCH_BUILDERS`` (``seq`` defaults to 128, 224 for resnet50)."""
    key = name.lower().replace("_", "-")
    if key not in TORCH_BUILDERS:
        raise WorkloadError(f"unknown model {name!r} (known: {', '.join(TORCH_BUILDERS)})")
    fn = TORCH_BUILDERS[key]
    return fn(batch, seq if seq is not None else (224 if key == "resnet50" else 128), **kw)


def import_model(name: str, batch: int = 1, seq: int | None = None, *, layers: int | None = None, dtype=None,
                 repeat: str | bool = "auto", fuse_modules: bool = True) -> WorkloadGraph:
    """The op graph of a model in ``TORCH_BUILDERS``: ``build`` then ``from_torch`` (the layer stack traced once).

    ``meta`` records the model, batch, seq and the configuration numbers.
    """
    from kernbench.workloads.torch_import import from_torch
    key = name.lower().replace("_", "-")
    module, inputs = build(key, batch, seq, layers=layers, dtype=dtype)
    g = from_torch(module, inputs, name=key, repeat=repeat, fuse_modules=fuse_modules)
    g.meta.update({"model": key, "batch": int(batch), "seq": int(inputs[0].shape[-1]),
                   "config": {k: v for k, v in module.config.to_dict().items()
                              if isinstance(v, (int, float, str, bool, list)) and not k.startswith("_")}})
    return g

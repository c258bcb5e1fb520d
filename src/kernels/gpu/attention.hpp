// attention.hpp -- fused attention on a GPU (FlashAttention-style: scores,
// softmax and the context product in one kernel, nothing of S x S in memory).
//  - prefill (q_len > kDecodeMaxQ): CTAs of kQueryTile query rows per head
//    in waves over the SMs; each runs QK^T and PV over its keys at
//    gpu.attention_efficiency of one SM's tensor rate; a causal mask skips
//    the keys after each query (half the work when q_len == kv_len). Q, K,
//    V and O stream once; the kernel takes the larger of the two times.
//  - decode (q_len <= kDecodeMaxQ): the KV cache is read once at the
//    streaming rate. Split-KV (FlashDecoding) cuts each (sequence, KV head)
//    into chunks of at least kSplitChunk keys to give every SM work; with
//    fewer CTAs than SMs the rate falls in proportion. The split results
//    merge in L2 (not charged).
// Both pay gpu.kernel_latency.
#pragma once

#include <cstdint>

#include "kernels/gpu/spec.hpp"

namespace kernbench::kernels::gpu {

inline constexpr std::int64_t kQueryTile = 128;   ///< query rows per prefill CTA (FlashAttention-2, d <= 128)
inline constexpr std::int64_t kDecodeMaxQ = 16;   ///< up to this many new tokens: the decode kernel
inline constexpr std::int64_t kSplitChunk = 256;  ///< fewest keys one split-KV CTA takes

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, head_dim = 128;
  Bytes elem_bytes = 2;
  bool causal = true;
  Precision precision = Precision::Bf16;
};

struct AttentionKernel {
  bool decode = false;
  std::int64_t ctas = 0, waves = 0, splits = 1;
  double flops = 0.0;  ///< useful work (after the causal mask)
  Bytes bytes = 0;     ///< memory traffic (decode: the KV cache)
  sim::Time compute = 0;
  sim::Time memory = 0;
  sim::Time duration = 0;  ///< kernel_latency + max(compute, memory)
};

AttentionKernel plan_attention(const GpuSpec& gpu, const AttentionShape& a);

}  // namespace kernbench::kernels::gpu

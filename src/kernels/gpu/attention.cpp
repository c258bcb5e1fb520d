// attention.cpp -- see attention.hpp.
#include "kernels/gpu/attention.hpp"

#include <algorithm>
#include <string>

#include "sim/errors.hpp"

namespace kernbench::kernels::gpu {

AttentionKernel plan_attention(const GpuSpec& gpu, const AttentionShape& a) {
  const auto bad = [&](const char* what, std::int64_t v) {
    throw UsageError("gpu attention on " + gpu.name + ": " + what + " = " + std::to_string(v) + " (expected >= 1)");
  };
  for (const auto& [v, w] :
       {std::pair{a.batch, "batch"}, std::pair{a.heads, "heads"}, std::pair{a.kv_heads, "kv_heads"},
        std::pair{a.q_len, "q_len"}, std::pair{a.kv_len, "kv_len"}, std::pair{a.head_dim, "head_dim"}})
    if (v < 1 || v > (std::int64_t{1} << 31)) bad(w, v);
  if (a.heads % a.kv_heads)
    throw UsageError("gpu attention on " + gpu.name + ": " + std::to_string(a.heads) +
                     " query heads are not a multiple of " + std::to_string(a.kv_heads) + " KV heads");
  if (a.q_len > a.kv_len)
    throw UsageError("gpu attention on " + gpu.name + ": q_len " + std::to_string(a.q_len) + " > kv_len " +
                     std::to_string(a.kv_len));
  AttentionKernel k;
  // Keys each query attends on average: all of them, or under a causal mask
  // the cache before the new tokens plus (q + 1) / 2 of them.
  const double keys =
      a.causal ? static_cast<double>(a.kv_len - a.q_len) + (a.q_len + 1) / 2.0 : static_cast<double>(a.kv_len);
  const double rows = static_cast<double>(a.batch) * a.heads * a.q_len;
  k.flops = 4.0 * rows * keys * a.head_dim;
  const double rate = gpu.sm_flops(a.precision) * gpu.cfg.attention_efficiency;  // per SM
  const Bytes kv_bytes = 2 * a.batch * a.kv_heads * a.kv_len * a.head_dim * a.elem_bytes;
  if (a.q_len <= kDecodeMaxQ) {
    k.decode = true;
    const std::int64_t groups = a.batch * a.kv_heads;
    k.splits =
        std::clamp<std::int64_t>(ceil_div(gpu.sms, groups), 1, std::max<std::int64_t>(1, a.kv_len / kSplitChunk));
    k.ctas = groups * k.splits;
    k.waves = ceil_div(k.ctas, gpu.sms);
    k.bytes = kv_bytes;
    const double cover = std::min(1.0, static_cast<double>(k.ctas) / gpu.sms);
    k.memory = sim::transfer_time(kv_bytes, gpu.scaled(gpu.cfg.stream_efficiency * cover));
    // Each CTA's share of the work runs on one SM.
    k.compute = sim::ps_from_double(
        k.flops / (rate * static_cast<double>(std::min<std::int64_t>(k.ctas, gpu.sms))) * 1e12, "gpu decode attention");
  } else {
    const std::int64_t q_tiles = ceil_div(a.q_len, kQueryTile);
    k.ctas = a.batch * a.heads * q_tiles;
    k.waves = ceil_div(k.ctas, gpu.sms);
    // A CTA's work: its kQueryTile rows (the last tile padded) over the mean keys.
    const double cta_flops = 4.0 * kQueryTile * keys * a.head_dim;
    k.compute = sim::ps_from_double(static_cast<double>(k.waves) * cta_flops / rate * 1e12, "gpu prefill attention");
    k.bytes = kv_bytes + 2 * a.batch * a.heads * a.q_len * a.head_dim * a.elem_bytes;  // + Q read, O written
    k.memory = sim::transfer_time(k.bytes, gpu.stream_bw());
  }
  k.duration = gpu.cfg.kernel_latency + std::max(k.compute, k.memory);
  return k;
}

}  // namespace kernbench::kernels::gpu

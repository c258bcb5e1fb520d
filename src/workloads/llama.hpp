// llama.hpp -- one LLaMA-3.1-70B decoder layer as a single Program:
// RMSNorm, QKV projection, GQA attention of all 8 KV groups, output
// projection, all-reduce, residual + RMSNorm, gate/up GEMMs, SiLU x up, down
// projection, all-reduce, residual -- tensor-parallel over a set of PEs,
// optionally replicated data-parallel over the rest of the machine.
//
// Dimensions (Meta's config.json for Llama-3.1-70B): hidden 8192, 64 query
// heads, 8 KV heads, head dim 128, MLP intermediate 28672, 2-byte (bf16)
// weights and activations.
//
// Sharding (Megatron-style tensor parallelism over `tp` ranks, tp | 64):
//   QKV     column-parallel: rank r holds 64/tp query heads and, for tp <= 8,
//           8/tp KV heads; for tp > 8 the KV head of its group is replicated
//           on the tp/8 ranks of the group (the K/V projection is then
//           computed tp/8 times: "executed" FLOPs exceed the model's).
//   attn    one KV group (8 query heads, 1 KV head) runs on G = max(1, tp/8)
//           PEs. tp <= 8: each rank runs its 8/tp groups one after another on
//           its PE. tp > 8: the group's G PEs (always inside one cube) run a
//           GQA case (kernels/gqa.hpp) chosen by the phase:
//             prefill -> case 1 with one cube: T_q split G ways, every PE
//                        streams the whole K/V (striped over the G slices);
//                        queries are plentiful, so no partial merges;
//             decode  -> case 4 with one cube: S_kv split G ways and the G
//                        partial softmaxes merged by a binomial tree
//                        (flash-decoding): the one query row set is tiny,
//                        S_kv is the only dimension worth splitting.
//           Either case leaves O split by tokens (prefill) or on one writer
//           (decode), while the row-parallel O projection wants it split by
//           heads, so a re-layout follows: every PE that holds O sends each
//           other PE of the group that PE's heads of its tokens over the IPCQ
//           (tagged "relayout").
//           Decode: every sequence of the batch has its own K/V, so each
//           sequence is one GQA program with T_q = 1 (sequences of a group
//           run one after another: each program claims the PEs' scratch).
//           Attention is NOT causally masked (as in the GQA model): every
//           query attends all S_kv keys, 4 T S_kv d h_q FLOPs -- an upper
//           bound; causal prefill would do about half.
//   O proj  row-parallel: rank r multiplies its 8192/tp columns of O by its
//           8192/tp x 8192 rows of Wo, giving a partial [T, 8192].
//   AR 1    all-reduce of the partial over the tp ranks (ccl, buffers in HBM).
//   norm 2  residual add + RMSNorm, computed redundantly on every rank.
//   MLP     gate and up column-parallel (one GEMM of N = 2 x 28672/tp),
//           SiLU(gate) x up on the vector engine, down row-parallel
//           (K = 28672/tp); AR 2 all-reduces its partial; residual add.
// Every GEMM is one gemm_program on the rank's own PE (operands in its own
// HBM slice); vector steps are composite tile pipelines (HBM -> scratch ->
// vector engine -> HBM) on each rank.
//
// Schedule and overlap: the tokens (prefill) or sequences (decode) are cut
// into `chunks` micro-batches. Norm 1 and the QKV GEMM run once over all
// tokens (every query attends the whole K/V). Then, per rank, compute runs
// in the software-pipelined order attn_0, o_0, attn_1, o_1, mlp_0, attn_2,
// o_2, mlp_1, ..., mlp_{C-1}: while AR 1 of chunk c is in flight the rank
// computes the attention of chunk c + 1, and AR 2 of chunk c overlaps later
// chunks' compute. Compute steps on one PE are chained (each claims the PE's
// scratch); communication only waits for its data.
//
// FLOPs: GEMM-engine work only (projections 2 T in out each, attention
// 4 T S d h_q); RMSNorm, SiLU and residual adds are vector work, counted in
// bytes through the vector engine (LlamaPlan::vector_bytes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ccl/ccl.hpp"
#include "runtime/executor.hpp"
#include "runtime/program.hpp"
#include "topology/system.hpp"

namespace kernbench::workloads {

enum class LlamaPhase { Prefill, Decode };
const char* to_string(LlamaPhase phase);
LlamaPhase llama_phase_from(const std::string& name);  // UsageError naming the choices

/// The model's dimensions (defaults: LLaMA-3.1-70B).
struct LlamaDims {
  std::int64_t hidden = 8192;
  int heads = 64;
  int kv_heads = 8;
  std::int64_t head_dim = 128;
  std::int64_t intermediate = 28672;
  runtime::Bytes elem_bytes = 2;  ///< bf16
};

struct LlamaSpec {
  LlamaPhase phase = LlamaPhase::Prefill;
  std::int64_t tokens = 2048;        ///< prefill: prompt tokens (T_q); decode: batch of sequences (one token each)
  std::int64_t s_kv = 0;             ///< K/V length (prefill: 0 or = tokens; decode: per sequence, required)
  int tp = 8;                        ///< tensor-parallel degree (divides the 64 query heads)
  int replicas = 1;                  ///< data-parallel copies of the layer, on the next tp PEs each
  int first_pe = 0;                  ///< placement: first rank at this index of the placement order
  std::vector<runtime::NodeId> pes;  ///< explicit placement (tp x replicas PEs, rank-major); empty: from first_pe
  int chunks = 0;                    ///< micro-batches (0: prefill 4, decode 1 -- each chunk re-reads the weights)
  runtime::Precision precision = runtime::Precision::Bf16;
  std::string allreduce = "ring";  ///< ccl algorithm of both all-reduces
  std::int64_t tile_q = 256;       ///< GQA tiles
  std::int64_t tile_s = 256;
  LlamaDims dims;
};

/// Decisions and analytic counts of one layer.
struct LlamaPlan {
  LlamaSpec spec;                                   ///< resolved (s_kv, chunks, pes)
  std::vector<std::vector<runtime::NodeId>> ranks;  ///< [replica][rank]
  int group_pes = 1;                                ///< G: PEs per KV group
  int groups_per_rank = 1;                          ///< KV groups one rank runs (tp <= 8)
  int gqa_case = 2;                                 ///< the GQA case of a group (see the header)
  std::int64_t chunk_tokens = 0;                    ///< tokens (prefill) or sequences (decode) per chunk
  std::int64_t tokens_total = 0;                    ///< query tokens of one replica (prefill T, decode batch)
  // Analytic FLOPs of the model's dims (all replicas).
  double flops_qkv = 0, flops_attention = 0, flops_o = 0, flops_mlp = 0;
  double flops_model = 0;              ///< sum of the above
  double flops_executed = 0;           ///< what the program runs (+ replicated K/V projection when tp > 8)
  runtime::Bytes vector_bytes = 0;     ///< bytes through vector engines in norms, SiLU, residuals (all ranks)
  runtime::Bytes allreduce_bytes = 0;  ///< per rank and all-reduce: T x hidden x e (summed over chunks)
  runtime::Bytes weight_bytes_per_rank = 0;
  runtime::Bytes kv_cache_bytes = 0;  ///< K/V of the layer, one replica
};

/// Checks the spec (UsageError naming the field) and plans.
LlamaPlan plan_llama(const topology::System& system, const LlamaSpec& spec);

/// Phase op ranges of a built layer (program op ids), for windows.
struct LlamaPhases {
  std::map<std::string, std::vector<std::pair<runtime::OpId, runtime::OpId>>> ranges;  ///< phase -> [lo, hi)
};

/// The phases in order: norm, qkv, attention, relayout, o_proj, allreduce1, mlp, allreduce2.
const std::vector<std::string>& llama_phase_names();

runtime::Program llama_program(const topology::System& system, const LlamaSpec& spec, LlamaPlan* plan = nullptr,
                               LlamaPhases* phases = nullptr);

struct LlamaPhaseTime {
  runtime::Time first_start = -1;  ///< earliest start of the phase's ops
  runtime::Time last_end = -1;     ///< latest end
  runtime::Time active = 0;        ///< length of the union of its ops' [start, end] intervals
  /// Its part of the latency: each instant in which k phases have an op at
  /// work counts 1/k to each, so the parts and LlamaResult::idle add up to
  /// the latency exactly (active times overlap; these do not).
  double share = 0;
  double flops = 0;               ///< GEMM-engine FLOPs of its ops
  runtime::Bytes send_bytes = 0;  ///< IPCQ bytes sent by its ops
};

struct LlamaResult {
  LlamaPlan plan;
  runtime::RunResult run;
  runtime::Time latency = 0;  ///< makespan, ps
  double idle = 0;            ///< of the latency, instants no phase had an op at work (dependencies, dispatch)
  double tokens_per_s = 0;    ///< replicas x tokens / latency
  std::map<std::string, LlamaPhaseTime> phases;
  double flops_program = 0;  ///< summed over the program's ops (GEMMs, composites' tiles)
  std::map<std::string, runtime::Bytes> link_bytes;
  runtime::Program program;  ///< the Program that ran (energy, HBM traffic)
};

/// Sum of GEMM-engine FLOPs of a program's ops (plain and composite tiles).
double program_flops(const runtime::Program& program);

LlamaResult run_llama(topology::System& system, const LlamaSpec& spec);

}  // namespace kernbench::workloads

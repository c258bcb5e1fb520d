// test_gqa.cpp -- the GQA attention model: op counts against the closed
// forms of each case's schedule, scratch within budget, CapacityError,
// compute work and K/V bytes per case, determinism.
#include <catch2/catch.hpp>

#include "kernels/gqa.hpp"
#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::kernels;
using kernbench::sim::kMiB;

namespace {

// One SIP of 4 x 2 cubes x 8 PEs (the default 2 x 4 snake), 1 MiB scratch.
Config gqa_machine() { return program_config(4, 2); }

GqaSpec spec(GqaPhase phase, int c, std::int64_t t_q, std::int64_t s_kv, std::int64_t tile_q = 256,
             std::int64_t tile_s = 256) {
  GqaSpec s;
  s.phase = phase;
  s.gqa_case = c;
  s.t_q = t_q;
  s.s_kv = s_kv;
  s.tile_q = tile_q;
  s.tile_s = tile_s;
  return s;
}

std::uint64_t count(const GqaResult& r, const char* kind) {
  const auto it = r.run.op_counts.find(kind);
  return it == r.run.op_counts.end() ? 0 : it->second;
}

GqaResult run(const GqaSpec& s) {
  System system(gqa_machine());
  return run_gqa(system, s);
}

}  // namespace

TEST_CASE("gqa: the default sub-mesh is the 2 x 4 snake of cubes", "[gqa]") {
  System system(gqa_machine());
  const GqaPlan p = plan_gqa(system, spec(GqaPhase::Prefill, 4, 512, 512));
  CHECK(p.spec.cubes == std::vector<int>{0, 1, 2, 3, 7, 6, 5, 4});
  CHECK(p.n_cubes == 8);
  CHECK(p.pes_per_cube == 8);
}

TEST_CASE("gqa: op counts are the closed forms of each schedule", "[gqa]") {
  // Prefill, T_q = S_kv = 512, tiles 256 x 256 (the per-PE shares: see each case).
  const std::int64_t T = 512, S = 512;
  for (int c = 1; c <= 4; ++c) {
    DYNAMIC_SECTION("prefill case " << c) {
      const GqaResult r = run(spec(GqaPhase::Prefill, c, T, S));
      const GqaPlan& p = r.plan;
      CHECK(count(r, "dma") == p.dma_q + p.dma_kv + p.dma_out);
      CHECK(count(r, "send") == p.ipcq_ring + p.ipcq_merge);
      CHECK(count(r, "recv") == p.ipcq_ring + p.ipcq_merge);
      CHECK(count(r, "gemm") == p.gemm_ops);
      CHECK(count(r, "vector") == p.vector_ops);
      if (c == 1) {
        // Q: 512 / 64 = 8 tokens x 8 heads = 64 rows, one Q tile; K/V: 64 tokens per cube, one tile.
        CHECK(p.rows_per_pe == 64);
        CHECK(p.ipcq_ring == 7u * 2 * 64);
        CHECK(p.ipcq_merge == 0);
        CHECK(p.dma_out == 64);
        CHECK(p.dma_kv == 64u * 2);        // step 0 only, one tile
        CHECK(p.gemm_ops == 64u * 8 * 2);  // 8 ring steps x QK, PV
      } else if (c == 2) {
        // Cube 0 only: 64 tokens x 8 heads = 512 rows -> 2 Q tiles; 512 / 256 = 2 K/V tiles each.
        CHECK(p.q_tiles == 2);
        CHECK(p.dma_kv == 8u * 2 * 2 * 2);
        CHECK(p.dma_out == 8u * 2);
        CHECK(count(r, "send") == 0);
      } else if (c == 3) {
        // 4096 rows -> 16 Q tiles; S / 8 = 64 tokens per PE; 7 merges x 3 sends per cube per Q tile.
        CHECK(p.q_tiles == 16);
        CHECK(p.ipcq_merge == 16u * 8 * 7 * 3);
        CHECK(p.dma_out == 16u * 8);
      } else {
        // Cube rows: 64 tokens x 8 heads = 512 -> 2 Q tiles; S / 64 = 8 tokens per chunk, ring re-run per Q tile.
        CHECK(p.q_tiles == 2);
        CHECK(p.ipcq_ring == 2u * 7 * 2 * 64);
        CHECK(p.ipcq_merge == 2u * 8 * 7 * 3);
        CHECK(p.dma_out == 2u * 8);
      }
    }
  }
}

TEST_CASE("gqa: case 4 prefill with one Q tile rotates 896 K/V copies", "[gqa]") {
  // T_q = 256: 32 tokens x 8 heads = 256 rows per cube, one Q tile; S / 64 fits one tile.
  const GqaResult r = run(spec(GqaPhase::Prefill, 4, 256, 2048));
  CHECK(r.plan.ipcq_ring == 896);
  CHECK(count(r, "send") == 896 + 8 * 7 * 3);
  CHECK(count(r, "dma") == 64 + 64 * 2 + 8);
}

TEST_CASE("gqa: a ring whose chunks span many tiles completes (no IPCQ deadlock)", "[gqa]") {
  // Case 1: 4096 / 8 = 512 K/V tokens per cube in 64-token tiles: 8 tiles per chunk, far more than
  // the IPCQ slots between two PEs hold; the tile-major order keeps every sender one tile ahead.
  const GqaResult r = run(spec(GqaPhase::Prefill, 1, 512, 4096, 256, 64));
  CHECK(r.plan.ipcq_ring == 7u * 2 * 64 * 8);
  CHECK(count(r, "send") == 7u * 2 * 64 * 8);
  CHECK(r.latency > 0);
}

TEST_CASE("gqa: decode counts (189 IPCQ copies, 1 write for case 4)", "[gqa]") {
  const GqaResult r4 = run(spec(GqaPhase::Decode, 4, 1, 4096));
  CHECK(count(r4, "send") == 189);
  CHECK(r4.plan.dma_out == 1);
  CHECK(count(r4, "dma") == 64 + 64 * 2 + 1);
  const GqaResult r1 = run(spec(GqaPhase::Decode, 1, 1, 4096));
  CHECK(count(r1, "send") == 8u * 7 * 3);  // per head: 7 cross-cube merges
  CHECK(r1.plan.dma_out == 8);
  CHECK(r1.plan.rows_per_pe == 1);
  const GqaResult r2 = run(spec(GqaPhase::Decode, 2, 1, 4096));
  CHECK(count(r2, "send") == 0);
  CHECK(r2.plan.active_pes == 8);  // 56 of 64 idle
}

TEST_CASE("gqa: compute work, active PEs and K/V bytes per cube", "[gqa]") {
  System system(gqa_machine());
  const std::int64_t T = 1024, S = 4096;
  const GqaPlan p1 = plan_gqa(system, spec(GqaPhase::Prefill, 1, T, S));
  const GqaPlan p2 = plan_gqa(system, spec(GqaPhase::Prefill, 2, T, S));
  const GqaPlan p3 = plan_gqa(system, spec(GqaPhase::Prefill, 3, T, S));
  const GqaPlan p4 = plan_gqa(system, spec(GqaPhase::Prefill, 4, T, S));
  const double full = 8.0 * T * S;  // rows (tokens x heads) x K/V tokens
  CHECK(p1.compute_work == full);
  CHECK(p2.compute_work == full);
  CHECK(p4.compute_work == full);
  CHECK(p3.compute_work == 8 * p1.compute_work);
  CHECK(p3.compute_work == 8 * p4.compute_work);
  CHECK(p2.active_pes == 8);
  CHECK(p1.active_pes == 64);
  const kernbench::sim::Bytes kv_full = 2 * S * 128 * 2;
  CHECK(p2.kv_bytes_per_cube == kv_full);
  CHECK(p3.kv_bytes_per_cube == kv_full);
  CHECK(p1.kv_bytes_per_cube == kv_full / 8);
  CHECK(p4.kv_bytes_per_cube == kv_full / 8);
}

TEST_CASE("gqa: scratch stays within the budget whatever T_q", "[gqa]") {
  System system(gqa_machine());
  for (std::int64_t t_q : {128, 1024, 8192, 65536})
    for (int c = 1; c <= 4; ++c) {
      const GqaPlan p = plan_gqa(system, spec(GqaPhase::Prefill, c, t_q, 8192));
      CHECK(p.scratch_per_pe <= kMiB);
      CHECK(p.tile_q <= 256);
    }
  // And the run's peak is the planned allocation.
  const GqaResult r = run(spec(GqaPhase::Prefill, 3, 512, 512));
  CHECK(r.peak_scratch == r.plan.scratch_per_pe);
  CHECK(r.peak_scratch <= kMiB);
}

TEST_CASE("gqa: a tiling that cannot fit is a CapacityError with the numbers", "[gqa]") {
  System system(gqa_machine());
  // 1024 rows x 1024 tokens of fp32 scores alone is 4 MiB.
  try {
    plan_gqa(system, spec(GqaPhase::Prefill, 3, 1024, 8192, 1024, 1024));
    FAIL("no CapacityError");
  } catch (const kernbench::CapacityError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("scores 1024 x 1024 x 4 B = 4096 KiB"));
    CHECK_THAT(msg, Catch::Contains("budget pe.scratch = 1024 KiB"));
    CHECK_THAT(msg, Catch::Contains("tile_q = 1024"));
  }
}

TEST_CASE("gqa: bad specs are ConfigErrors naming the field", "[gqa]") {
  System system(gqa_machine());
  CHECK_THROWS_WITH(plan_gqa(system, spec(GqaPhase::Prefill, 5, 512, 512)),
                    Catch::Contains("case must be 1, 2, 3 or 4"));
  CHECK_THROWS_WITH(plan_gqa(system, spec(GqaPhase::Prefill, 1, 100, 512)), Catch::Contains("not a multiple of 64"));
  CHECK_THROWS_WITH(plan_gqa(system, spec(GqaPhase::Decode, 4, 1, 32)), Catch::Contains("too short"));
  CHECK_THROWS_WITH(plan_gqa(system, spec(GqaPhase::Decode, 4, 0, 4096)), Catch::Contains("T_q and S_kv must be >= 1"));
  Config small = system_config(1, 1, SipTopology::Ring, 2, 1);
  System s2(small);
  CHECK_THROWS_WITH(plan_gqa(s2, spec(GqaPhase::Prefill, 4, 512, 512)), Catch::Contains("snake"));
}

TEST_CASE("gqa: reruns are bit-identical", "[gqa]") {
  const GqaResult a = run(spec(GqaPhase::Prefill, 4, 512, 1024));
  const GqaResult b = run(spec(GqaPhase::Prefill, 4, 512, 1024));
  CHECK(a.latency == b.latency);
  CHECK(a.link_bytes == b.link_bytes);
  CHECK(a.engine_busy == b.engine_busy);
  CHECK(a.latency > 0);
}

TEST_CASE("gqa: the data table covers every op and leaves the Program unchanged", "[gqa]") {
  using kernbench::runtime::OpKind;
  for (int c = 1; c <= 4; ++c)
    for (GqaPhase phase : {GqaPhase::Prefill, GqaPhase::Decode}) {
      DYNAMIC_SECTION(to_string(phase) << " case " << c) {
        System system(gqa_machine());
        const GqaSpec s =
            phase == GqaPhase::Prefill ? spec(phase, c, 128, 256, 32, 16) : spec(phase, c, 3, 300, 32, 16);
        std::vector<GqaOpData> data;
        GqaPlan plan;
        const auto with = gqa_program(system, s, &plan, &data);
        const auto without = gqa_program(system, s);
        REQUIRE(data.size() == with.size());
        REQUIRE(with.size() == without.size());
        std::int64_t q_rows = 0, o_rows = 0;
        for (std::size_t i = 0; i < data.size(); ++i) {
          const auto& o = with.op(static_cast<kernbench::runtime::OpId>(i));
          CHECK(o.deps == without.op(static_cast<kernbench::runtime::OpId>(i)).deps);
          CHECK(o.key == without.op(static_cast<kernbench::runtime::OpId>(i)).key);
          switch (data[i].role) {
            case GqaRole::Qk:
            case GqaRole::Pv: CHECK(o.kind == OpKind::Gemm); break;
            case GqaRole::Softmax:
            case GqaRole::Merge:
            case GqaRole::Finalize: CHECK(o.kind == OpKind::Vector); break;
            case GqaRole::LoadQ:
              q_rows += static_cast<std::int64_t>(data[i].rows.size());
              CHECK(o.kind == OpKind::Dma);
              break;
            case GqaRole::StoreO:
              o_rows += static_cast<std::int64_t>(data[i].rows.size());
              CHECK(o.kind == OpKind::Dma);
              break;
            case GqaRole::LoadK:
            case GqaRole::LoadV:
              CHECK(o.kind == OpKind::Dma);
              CHECK(data[i].hi - data[i].lo == o.move.bytes / (s.d_head * s.elem_bytes));
              break;
            case GqaRole::None:
              CHECK((o.kind == OpKind::Alloc || o.kind == OpKind::Free || o.kind == OpKind::Barrier));
              break;
            default: CHECK((o.kind == OpKind::Send || o.kind == OpKind::Recv)); break;
          }
        }
        CHECK(q_rows == plan.rows_per_pe * plan.active_pes);
        CHECK(o_rows >= s.t_q * s.h_q);  // every row written at least once (case 3: once per cube)
      }
    }
}

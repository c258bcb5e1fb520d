// fuzz_program.cpp -- libFuzzer target: random small Programs (DAGs of every
// op kind, composites, cycles, unmatched recvs, scratch overflows) run on a
// small machine must finish or raise a kernbench::Error -- never crash, hang
// (the run is capped by max_events) or break an invariant silently.
// Op kind 10 plans a whole GEMM kernel and op kind 11 a collective whose shape
// and grid come from extreme values (products that wrap 64 and 32 bits; issue 31).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "ccl/ccl.hpp"
#include "kernels/gemm.hpp"
#include "runtime/config_section.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"
#include "topology/config/config.hpp"

using namespace kernbench;
using namespace kernbench::runtime;

namespace {

// Reads the fuzzer's bytes as small integers; zeros once exhausted.
class Input {
 public:
  Input(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint32_t next(std::uint32_t bound) { return bound == 0 ? 0 : (i_ < n_ ? d_[i_++] : 0U) % bound; }
  bool more() const { return i_ < n_; }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
};

topology::Config small_machine() {
  using topology::LinkParams;
  topology::Config c;
  c.source = "fuzz";
  topology::SystemConfig s;
  s.sips = {1, 1};
  s.cubes = {2, 1};
  s.routers = {2, 2};
  s.pes_per_cube = 4;
  s.nodes.pe = {1000, true};
  s.nodes.router = {1000, true};
  s.nodes.hbm_ctrl = {5000, true};
  s.nodes.ucie = {1000, true};
  s.nodes.pcie_ep = {20000, false};
  const LinkParams l{sim::Bandwidth::gb_per_s(256), 500, 1};
  s.links = {l, l, l, l, LinkParams{sim::Bandwidth::gb_per_s(128), 500, 4}, l, l};
  c.system = s;
  c.fabric.chunk = 1024;
  pe_config(c).scratch = 64 * 1024;
  pe_config(c).gemm_macs_int8 = 0;  // asking for int8 is an error the fuzzer should meet
  return c;
}

// GEMM dimensions and grid sides: 2^40 x 4096 x 4096 wrapped the tile search's step count to 0 (SIGFPE);
// 5128 x 6700417 wrapped an int grid product to 8.
constexpr std::int64_t kDims[] = {
    0, 1, 7, 4096, 16384, std::int64_t{1} << 36, std::int64_t{1} << 40, std::int64_t{1} << 41, std::int64_t{1} << 62,
    -1};
constexpr int kSides[] = {0, 1, 2, 4, 8, 5128, 6700417, 715827883, 2147483647, -3};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const topology::Config config = small_machine();
  topology::System system(config, 1);
  system.sim().set_limits(2'000'000, sim::kTimeInfinity);
  const topology::Machine& m = system.machine();
  const auto& pes = m.pes();
  Input in(data, size);
  Program p("fuzz");
  std::vector<OpId> allocs;
  auto pe = [&] { return pes[in.next(static_cast<std::uint32_t>(pes.size()))]; };
  auto hbm = [&] { return m.hbm_ctrl(0, static_cast<int>(in.next(2)), static_cast<int>(in.next(4))); };
  auto bytes = [&] { return static_cast<sim::Bytes>(in.next(64)) * 256; };
  try {
    const std::uint32_t n_ops = 1 + in.next(24);
    for (std::uint32_t i = 0; i < n_ops && in.more(); ++i) {
      std::vector<OpId> deps;
      for (std::uint32_t d = in.next(3); d > 0 && p.size() > 0; --d)
        deps.push_back(in.next(static_cast<std::uint32_t>(p.size())));
      const NodeId agent = pe();
      switch (in.next(12)) {
        case 10: {
          kernels::GemmSpec g;
          g.m = kDims[in.next(std::size(kDims))];
          g.n = kDims[in.next(std::size(kDims))];
          g.k = kDims[in.next(std::size(kDims))];
          g.pes = {agent};
          (void)kernels::plan_gemm(system, g);  // a plan, not a run: the shapes are huge
          break;
        }
        case 11: {
          ccl::CollectiveSpec c;
          c.collective = ccl::Collective::AllReduce;
          c.algorithm = in.next(2) ? "torus2d" : "ring";
          c.bytes_per_pe = 1 + static_cast<sim::Bytes>(in.next(64));
          c.grid_w = kSides[in.next(std::size(kSides))];
          c.grid_h = kSides[in.next(std::size(kSides))];
          c.pieces = 1 + static_cast<int>(in.next(200));
          (void)ccl::build_collective(m, config, c);
          break;
        }
        case 0: p.dma(agent, Move{hbm(), agent, bytes()}, deps); break;
        case 1: p.dma(agent, Move{agent, hbm(), bytes()}, deps); break;
        case 2: p.gemm(agent, 1000.0 * in.next(100), static_cast<Precision>(in.next(4)), deps); break;
        case 3: p.vector(agent, bytes(), deps); break;
        case 4: allocs.push_back(p.alloc(agent, bytes() * 8, deps)); break;
        case 5:
          if (!allocs.empty()) p.free(allocs[in.next(static_cast<std::uint32_t>(allocs.size()))], deps);
          break;
        case 6: p.send(agent, pe(), bytes(), in.next(4), deps); break;
        case 7: p.recv(agent, pe(), in.next(4), deps); break;
        case 8: {
          Pipeline pipe;
          pipe.tiles = 1 + in.next(6);
          pipe.loads = {Move{hbm(), agent, bytes()}};
          pipe.flops = 1000.0 * in.next(50);
          pipe.precision = static_cast<Precision>(in.next(4));
          pipe.stores = {Move{agent, hbm(), bytes()}};
          pipe.buffers = 1 + in.next(3);
          p.composite(agent, pipe, deps);
          break;
        }
        default:
          if (p.size() >= 2 && in.next(4) == 0) {
            p.depend(in.next(static_cast<std::uint32_t>(p.size())), in.next(static_cast<std::uint32_t>(p.size())));
          } else {
            p.barrier(agent, deps);
          }
      }
    }
    const RunResult r = Executor(system).run(p);
    // What a finished run must satisfy.
    for (const OpTiming& t : r.ops)
      if (!t.done() || t.ready > t.start || t.start > t.end) __builtin_trap();
  } catch (const Error&) {
    // Deadlocks, capacity, precision and usage errors are the expected failures.
  }
  return 0;
}

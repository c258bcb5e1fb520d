// fuzz_transfer.cpp -- libFuzzer target: System transfers, DMA ops and
// traffic with extreme values -- sizes from 0 to past 1 TiB, link
// bandwidths from 1 B/s up, latencies up to past the time range, start
// times anywhere in int64, any node pair (routers, HBM controllers, ids out
// of range), either fabric model -- must finish or raise a kernbench::Error
// (a typed, clear error); never crash, overflow time, recurse without end or
// fail an allocation. Runs are capped by max_events and by wall time: a
// re-solve of the flow model moves every flow sharing the channels, so the
// work per event grows with the flows in flight, and a fuzzed traffic
// generator can keep thousands in flight -- slow (events x flows), not wrong.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>

#include "sim/errors.hpp"
#include "topology/config/config.hpp"
#include "topology/system.hpp"

using namespace kernbench;

namespace {

// Reads the fuzzer's bytes; zeros once exhausted.
class Input {
 public:
  Input(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint32_t next(std::uint32_t bound) { return bound == 0 ? 0 : byte() % bound; }
  std::uint64_t next64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  bool more() const { return i_ < n_; }

 private:
  std::uint32_t byte() { return i_ < n_ ? d_[i_++] : 0U; }
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
};

// Values that sit on the edges: zero, one, powers of two around the limits
// (1 TiB, 2^32 chunks, 2^62 ps, int64 max), negatives and random 64-bit.
std::int64_t extreme(Input& in) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  switch (in.next(12)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return std::int64_t{1} << 40;
    case 4: return (std::int64_t{1} << 40) + 1;
    case 5: return std::int64_t{1} << 62;
    case 6: return (std::int64_t{1} << 62) + 1;
    case 7: return kMax;
    case 8: return std::numeric_limits<std::int64_t>::min();
    case 9: return static_cast<std::int64_t>(in.next64());
    case 10: return static_cast<std::int64_t>(in.next64() >> in.next(64));
    default: return static_cast<std::int64_t>(in.next(1U << 16)) * 64;
  }
}

sim::Bandwidth bandwidth(Input& in) {
  switch (in.next(5)) {
    case 0: return {1};     // 1 B/s: durations past the time range
    case 1: return {1000};  // 1 KB/s
    case 2: return {static_cast<std::int64_t>(1 + (in.next64() >> 1))};
    default: return sim::Bandwidth::gb_per_s(1 + in.next(512));
  }
}

topology::Config machine(Input& in) {
  using topology::LinkParams;
  topology::Config c;
  c.source = "fuzz";
  topology::SystemConfig s;
  s.sips = {1, 1};
  s.cubes = {2, 1};
  s.routers = {2, 2};
  s.pes_per_cube = 4;
  s.nodes.pe = {static_cast<sim::Time>(in.next(4)) * 1000, true};
  s.nodes.router = {1000, true};
  s.nodes.hbm_ctrl = {5000, true};
  s.nodes.ucie = {1000, true};
  s.nodes.pcie_ep = {20000, in.next(2) == 0};
  const auto link = [&] {
    const sim::Time lat = in.next(4) == 0 ? static_cast<sim::Time>(in.next64() >> (1 + in.next(63))) : 500;
    return LinkParams{bandwidth(in), lat, 1 + static_cast<int>(in.next(4))};
  };
  s.links = {link(), link(), link(), link(), link(), link(), link()};
  c.system = s;
  c.fabric.model = in.next(2) == 0 ? topology::FabricModel::Packet : topology::FabricModel::Flow;
  c.fabric.chunk = 64 * (1 + static_cast<sim::Bytes>(in.next(64)));
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  try {
    topology::System system(machine(in), 1);
    system.sim().set_limits(200'000, sim::kTimeInfinity);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    system.sim().set_poll(256, [deadline] {
      if (std::chrono::steady_clock::now() > deadline) throw LimitError("fuzz_transfer: past the 2 s wall-time budget");
    });
    const std::uint32_t nodes = static_cast<std::uint32_t>(system.machine().num_nodes());
    // Mostly real nodes (of every kind), sometimes one past the end.
    auto node = [&] { return static_cast<topology::NodeId>(in.next(nodes + 2)); };
    const std::uint32_t n_ops = 1 + in.next(8);
    for (std::uint32_t i = 0; i < n_ops && in.more(); ++i) {
      try {
        const sim::Time at = in.next(3) == 0 ? extreme(in) : static_cast<sim::Time>(in.next(1000)) * 1000;
        switch (in.next(4)) {
          case 0:
          case 1: system.transfer(node(), node(), extreme(in), at, 0, in.next64()); break;
          case 2:
            system.dma(in.next(2) == 0 ? topology::DmaKind::Read : topology::DmaKind::Write, node(), node(),
                       extreme(in), at, 0, in.next64());
            break;
          default: {
            topology::TrafficSpec t;
            t.endpoints = system.machine().pes();
            t.pattern = topology::TrafficPattern::Neighbour;
            t.injection = in.next(2) == 0 ? topology::Injection::Poisson : topology::Injection::Periodic;
            t.offered = bandwidth(in);
            t.packet = extreme(in);
            t.start = in.next(2) == 0 ? 0 : extreme(in);
            t.stop = in.next(2) == 0 ? 1'000'000 : extreme(in);
            system.traffic(t);
          }
        }
      } catch (const Error&) {
        // Refused up front: the System is untouched and takes the next op.
      }
    }
    system.run();
    // What a finished run must satisfy: every record done, in order, its
    // breakdown within the time range.
    for (const topology::TransferRecord& r : system.fabric().records())
      if (!r.done() || r.end < r.issue || r.end > sim::kMaxTime) __builtin_trap();
  } catch (const Error&) {
    // Time-range, size, limit and usage errors are the expected failures.
  } catch (const std::bad_alloc&) {
    __builtin_trap();  // a count that was not guarded up front
  }
  return 0;
}

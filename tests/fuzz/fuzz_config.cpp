// fuzz_config.cpp -- libFuzzer target: any bytes fed to the YAML loader must
// either load or raise a ConfigError; nothing else may escape, crash or hang.
// Inputs starting with 'L' instead pick an explicit graph's layout (graph.layout
// grid, packages, groups, pes_per_group) and a link buffer from extreme values
// (products that wrap 32 or 64 bits, 0, 1, INT_MAX): a layout that loads must
// build and run a 2-D all-reduce, or fail with a typed error (issue 31).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "ccl/ccl.hpp"
#include "kernbench.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"
#include "topology/graph/machine.hpp"
#include "topology/system.hpp"

namespace {

// Sides whose products wrap: 1282 x 6700417 = 2^33 + 2, 641 x 6700417 = 2^32 + 1, 65536^2 = 2^32.
constexpr std::int64_t kSides[] = {0, 1, 2, 3, 4, 6, 641, 1282, 5128, 65536, 6700417, 715827883, 2147483647, -1};
constexpr const char* kBuffers[] = {"unbounded", "1 flit", "63 B", "64 B", "1 KiB", "4 KiB", "8 flits", "0 flits"};

std::string layout_yaml(const std::uint8_t* data, std::size_t size) {
  std::size_t i = 1;
  const auto pick = [&](std::size_t n) { return i < size ? data[i++] % n : 0; };
  const auto side = [&] { return std::to_string(kSides[pick(std::size(kSides))]); };
  const int pes = 2 + static_cast<int>(pick(7));
  std::string y = "graph:\n  nodes:\n    - {name: s, kind: switch, overhead: 1 ns}\n";
  for (int p = 0; p < pes; ++p) y += "    - {name: p" + std::to_string(p) + ", kind: pe, overhead: 1 ns}\n";
  y += "  edges:\n";
  const std::string buffer = kBuffers[pick(std::size(kBuffers))];
  for (int p = 0; p < pes; ++p)
    y += "    - {a: p" + std::to_string(p) + ", b: s, bandwidth: 256 GB/s, latency: 1 ns, buffer: " + buffer + "}\n";
  y += "  layout:\n";
  if (pick(2)) y += "    grid: {w: " + side() + ", h: " + side() + "}\n";
  if (pick(2)) {
    y += "    packages: {w: " + side() + ", h: " + side() + "}\n";
    y += "    groups: {w: " + side() + ", h: " + side() + "}\n";
    y += "    pes_per_group: " + side() + "\n";
  }
  y += "fabric: {model: " + std::string(pick(2) ? "packet" : "flow") + "}\n";
  return y;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool layout = size > 0 && data[0] == 'L';
  const std::string text = layout ? layout_yaml(data, size) : std::string(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = kernbench::parse_config(text, "fuzz.yaml");
    // A config that loads must also build, or fail with a typed error.
    if (config.system && config.system->sips.count() * config.system->cubes.count() <= 64) {
      kernbench::topology::Machine machine(config);
      (void)machine.num_nodes();
    }
    if (layout && config.graph) {
      kernbench::topology::System system(config, 1);
      kernbench::ccl::CollectiveSpec spec;
      spec.collective = kernbench::ccl::Collective::AllReduce;
      spec.algorithm = "torus2d";
      spec.bytes_per_pe = 4096;
      (void)kernbench::ccl::run_collective(system, spec);
    }
  } catch (const kernbench::Error&) {
    // Expected for bad input.
  }
  return 0;
}

// fuzz_config.cpp -- libFuzzer target: any bytes fed to the YAML loader must
// either load or raise a ConfigError; nothing else may escape, crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernbench.hpp"
#include "sim/errors.hpp"
#include "topology/config_loader.hpp"
#include "topology/machine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = kernbench::parse_config(text, "fuzz.yaml");
    // A config that loads must also build, or fail with a typed error.
    if (config.system && config.system->sips.count() * config.system->cubes.count() <= 64) {
      kernbench::topology::Machine machine(config);
      (void)machine.num_nodes();
    }
  } catch (const kernbench::Error&) {
    // Expected for bad input.
  }
  return 0;
}

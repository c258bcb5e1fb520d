// gemm_example.cpp -- kernbench from C++: build a machine from YAML, run the
// GEMM kernel model on it, print what the simulator measured.
//
//   gemm_example CONFIG.yaml [M N K [PES]]
//
// Built against the installed package (find_package(kernbench) +
// kernbench::core); see examples/cpp/CMakeLists.txt and docs/cpp.md.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "kernbench.hpp"
#include "kernels/gemm.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"
#include "topology/system.hpp"

namespace kb = kernbench;

int main(int argc, char** argv) {
  if (argc != 2 && argc != 5 && argc != 6) {
    std::cerr << "usage: " << argv[0] << " CONFIG.yaml [M N K [PES]]\n";
    return 2;
  }
  try {
    const std::int64_t m = argc > 2 ? std::stoll(argv[2]) : 1024;
    const std::int64_t n = argc > 3 ? std::stoll(argv[3]) : 1024;
    const std::int64_t k = argc > 4 ? std::stoll(argv[4]) : 1024;
    const std::size_t pes = argc > 5 ? std::stoul(argv[5]) : 8;

    // One small SIP is enough for the example; any --set path works here.
    kb::topology::Config config = kb::load_config(argv[1], {{"system.sips.w", "1"}, {"system.sips.h", "1"}});
    kb::topology::System system(std::move(config), /*seed=*/1);
    const auto& all = system.machine().pes();
    if (pes == 0 || pes > all.size()) {
      std::cerr << "PES must be 1.." << all.size() << "\n";
      return 2;
    }

    kb::kernels::GemmSpec spec;
    spec.m = m;
    spec.n = n;
    spec.k = k;
    spec.precision = kb::runtime::Precision::Fp16;
    spec.pes.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(pes));
    kb::kernels::GemmPlan plan;
    kb::runtime::Program program = kb::kernels::gemm_program(system, spec, &plan);
    kb::runtime::RunResult result = kb::runtime::Executor(system).run(program);

    const double seconds = static_cast<double>(result.makespan()) * 1e-12;
    const double eff = plan.flops / seconds / plan.peak_flops_per_s;
    std::cout << "GEMM " << m << "x" << n << "x" << k << " fp16 on " << pes << " PEs\n"
              << "  tiles " << plan.tile_m << "x" << plan.tile_n << "x" << plan.tile_k << ", " << plan.steps_total
              << " pipeline steps, " << plan.limit << "-bound\n"
              << "  makespan_ps " << result.makespan() << "\n"
              << "  plan_ideal_ps " << plan.ideal_ps << "\n"
              << "  efficiency " << eff << "\n"
              << "  dma_bytes " << result.op_bytes["dma"] << "\n";
    return 0;
  } catch (const std::exception& e) {  // ConfigError, CapacityError, ... name what is wrong
    std::cerr << "gemm_example: error: " << e.what() << "\n";
    return 1;
  }
}

// hbm_config.hpp -- the typed `pe.hbm:` section: each PE's HBM slice.
//
// Every PE of a generated machine has an HBM controller slice (node
// hbm_ctrl.pe<i> of its cube). Its capacity bounds what a workload may keep
// resident there (weights, KV cache, operands): runtime::HbmAllocator hands
// out addresses and raises CapacityError past it. Addresses are striped over
// the slice's pseudo-channels in units of `stripe` bytes, which is how the
// traffic per pseudo-channel is accounted (runtime/hbm.hpp).
#pragma once

#include "sim/units.hpp"

namespace kernbench::runtime {

struct HbmConfig {
  sim::Bytes capacity = sim::kGiB;  ///< per PE slice
  int pseudo_channels = 2;          ///< per PE slice
  sim::Bytes stripe = 256;          ///< address interleave unit over the pseudo-channels
};

}  // namespace kernbench::runtime

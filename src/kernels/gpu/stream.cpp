// stream.cpp -- see stream.hpp.
#include "kernels/gpu/stream.hpp"

#include "sim/errors.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::kernels::gpu {

StreamKernel plan_stream(const GpuSpec& gpu, Bytes bytes) {
  if (bytes < 0) throw UsageError("gpu stream kernel on " + gpu.name + ": negative bytes");
  topology::check_transfer_size(bytes, "gpu stream kernel on " + gpu.name);
  StreamKernel s;
  s.bytes = bytes;
  s.memory = sim::transfer_time(bytes, gpu.stream_bw());
  s.duration = gpu.cfg.kernel_latency + s.memory;
  return s;
}

}  // namespace kernbench::kernels::gpu

// config.cpp -- names of the config enums, both ways.
//
// The value lists sit next to the to_string switches on purpose: adding an
// enumerator means touching this file, and -Wswitch points here.
#include "topology/config/config.hpp"

#include <array>
#include <cctype>

#include "config/quantity.hpp"

namespace kernbench::topology {
namespace {

constexpr std::array kNodeKinds = {NodeKind::Pe,     NodeKind::Router, NodeKind::HbmCtrl, NodeKind::Ucie,
                                   NodeKind::PcieEp, NodeKind::Host,   NodeKind::Cpu,     NodeKind::Memory,
                                   NodeKind::Switch, NodeKind::Engine, NodeKind::Gsp,     NodeKind::Nic,
                                   NodeKind::Other};
constexpr std::array kSipTopologies = {SipTopology::Ring, SipTopology::Torus, SipTopology::Mesh};
constexpr std::array kFabricModels = {FabricModel::Packet, FabricModel::Flow};

template <typename E, std::size_t N>
std::optional<E> from_name(const std::array<E, N>& all, std::string_view name) {
  for (E e : all)
    if (name == to_string(e)) return e;
  return std::nullopt;
}

template <typename E, std::size_t N>
std::vector<std::string> names(const std::array<E, N>& all) {
  std::vector<std::string> out;
  out.reserve(N);
  for (E e : all) out.emplace_back(to_string(e));
  return out;
}

}  // namespace

const char* to_string(NodeKind kind) {
  switch (kind) {
    case NodeKind::Pe: return "pe";
    case NodeKind::Router: return "router";
    case NodeKind::HbmCtrl: return "hbm_ctrl";
    case NodeKind::Ucie: return "ucie";
    case NodeKind::PcieEp: return "pcie_ep";
    case NodeKind::Host: return "host";
    case NodeKind::Cpu: return "cpu";
    case NodeKind::Memory: return "memory";
    case NodeKind::Switch: return "switch";
    case NodeKind::Engine: return "engine";
    case NodeKind::Gsp: return "gsp";
    case NodeKind::Nic: return "nic";
    case NodeKind::Other: return "other";
  }
  return "?";
}

const char* to_string(SipTopology topology) {
  switch (topology) {
    case SipTopology::Ring: return "ring";
    case SipTopology::Torus: return "torus";
    case SipTopology::Mesh: return "mesh";
  }
  return "?";
}

Bytes element_bytes(Precision precision) {
  switch (precision) {
    case Precision::Fp32:
    case Precision::Tf32: return 4;
    case Precision::Fp16:
    case Precision::Bf16: return 2;
    case Precision::Int8:
    case Precision::Fp8: return 1;
  }
  return 0;
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
    case Precision::Int8: return "int8";
    case Precision::Tf32: return "tf32";
    case Precision::Fp8: return "fp8";
  }
  return "?";
}

const char* to_string(FabricModel model) {
  switch (model) {
    case FabricModel::Packet: return "packet";
    case FabricModel::Flow: return "flow";
  }
  return "?";
}

std::optional<NodeKind> node_kind_from_string(std::string_view name) { return from_name(kNodeKinds, name); }
std::optional<SipTopology> sip_topology_from_string(std::string_view name) { return from_name(kSipTopologies, name); }
std::optional<FabricModel> fabric_model_from_string(std::string_view name) { return from_name(kFabricModels, name); }

std::vector<std::string> node_kind_names() { return names(kNodeKinds); }
std::vector<std::string> sip_topology_names() { return names(kSipTopologies); }
std::vector<std::string> fabric_model_names() { return names(kFabricModels); }

Time pipeline_time(const NodeParams& node) {
  const std::int64_t cycles = node.pipeline.cycles();
  if (cycles <= 0 || node.clock_hz <= 0) return 0;
  // cycles <= 3 x INT_MAX and 1e12 ps/s: use 128 bits, round up like every duration.
  const __int128 num = static_cast<__int128>(cycles) * 1'000'000'000'000LL;
  return static_cast<Time>((num + node.clock_hz - 1) / node.clock_hz);
}

std::string to_string(const BufferSize& b) {
  switch (b.unit) {
    case BufferSize::Unit::Unbounded: return "unbounded";
    case BufferSize::Unit::Flits: return std::to_string(b.amount) + (b.amount == 1 ? " flit" : " flits");
    case BufferSize::Unit::Bytes: return config::format_bytes(b.amount);
  }
  return "?";
}

std::optional<BufferSize> parse_buffer_size(std::string_view text, std::string& error) {
  error.clear();
  if (text == "unbounded") return BufferSize{};
  // "N flits" / "N flit": a positive integer count.
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  std::size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  const std::string_view unit = text.substr(j);
  if (i > 0 && i <= 12 && (unit == "flits" || unit == "flit")) {
    const std::int64_t n = std::stoll(std::string(text.substr(0, i)));
    if (n <= 0) {
      error = "a buffer holds at least one flit, got \"" + std::string(text) + "\"";
      return std::nullopt;
    }
    return BufferSize{BufferSize::Unit::Flits, n};
  }
  std::int64_t bytes = 0;
  if (config::parse_quantity(text, config::kSize, bytes).empty() && bytes > 0)
    return BufferSize{BufferSize::Unit::Bytes, bytes};
  error = "expected unbounded, a flit count like \"8 flits\" or a positive size like \"4 KiB\", got \"" +
          std::string(text) + "\"";
  return std::nullopt;
}

}  // namespace kernbench::topology

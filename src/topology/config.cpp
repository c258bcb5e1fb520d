// config.cpp -- names of the config enums (placeholder until the loader lands).
#include "topology/config.hpp"

namespace kernbench::topology {

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

const char* to_string(FabricModel model) {
  switch (model) {
    case FabricModel::Packet: return "packet";
    case FabricModel::Flow: return "flow";
  }
  return "?";
}

}  // namespace kernbench::topology

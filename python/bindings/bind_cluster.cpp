// bind_cluster.cpp -- a cluster's generated structure (topology::ClusterInfo) as a Python dict: System.cluster()
// and the loader's summary (docs/cluster.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "topology/config/cluster.hpp"

namespace py = pybind11;
using namespace kernbench::topology;

namespace kernbench::bindings {
namespace {

py::list switches(const std::vector<ClusterSwitch>& v, std::int64_t rate) {
  py::list out;
  for (const ClusterSwitch& s : v) {
    py::dict d;
    d["name"] = s.name;
    d["tier"] = s.tier;
    d["group"] = s.group;
    d["pod"] = s.pod;
    d["down_links"] = s.down_links;
    d["up_links"] = s.up_links;
    d["down_Bps"] = static_cast<std::int64_t>(s.down_links) * rate;
    d["up_Bps"] = static_cast<std::int64_t>(s.up_links) * rate;
    out.append(d);
  }
  return out;
}

}  // namespace

py::object cluster_dict(const Config& c, bool full) {
  if (!c.cluster) return py::none();
  const ClusterInfo& i = *c.cluster;
  const ClusterConfig& cc = i.config;
  py::dict d;
  d["nodes"] = cc.nodes;
  d["box"] = cc.box;
  d["gpus_per_node"] = i.gpus_per_node;
  d["gpus"] = i.ranks.size();
  d["nics_per_node"] = cc.nics_per_node;
  py::dict nic;
  nic["name"] = i.nic.name;
  nic["line_rate_Bps"] = i.nic.line_rate.bytes_per_s;
  nic["host_rate_Bps"] = i.nic.host_rate.bytes_per_s;
  nic["switch"] = i.nic.switch_name;
  d["nic"] = nic;
  d["kind"] = cc.fabric.kind;
  d["tiers"] = cc.fabric.tiers;
  d["radix"] = cc.fabric.radix;
  d["oversubscription"] = cc.fabric.oversubscription;
  d["reduction_Bps"] = cc.fabric.reduction.bytes_per_s;
  d["leaf_down"] = i.leaf_down;
  d["leaf_up"] = i.leaf_up;
  d["pods"] = i.pods;
  d["max_nodes"] = i.max_nodes;
  d["counts"] = py::dict(py::arg("leaves") = i.leaves.size(), py::arg("spines") = i.spines.size(),
                         py::arg("cores") = i.cores.size(), py::arg("nics") = i.nics.size());
  if (!full) return d;
  const std::int64_t rate = i.nic.line_rate.bytes_per_s;
  d["leaves"] = switches(i.leaves, rate);
  d["spines"] = switches(i.spines, rate);
  d["cores"] = switches(i.cores, rate);
  d["nic_names"] = i.nics;
  d["nic_leaf"] = i.nic_leaf;
  d["ranks"] = i.ranks;
  py::list rank_node;
  for (std::size_t r = 0; r < i.ranks.size(); ++r) rank_node.append(static_cast<int>(r) / i.gpus_per_node);
  d["rank_node"] = rank_node;
  return d;
}

}  // namespace kernbench::bindings

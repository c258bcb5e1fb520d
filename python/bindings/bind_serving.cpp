// bind_serving.cpp -- the serving request loop (src/workloads/serving): requests
// in as numpy columns, the hardware model's iteration price as a Python
// callable (called once per new lattice corner, never per event), records out
// as numpy columns.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "workloads/serving/serving.hpp"

namespace py = pybind11;

namespace kernbench::bindings {

using namespace workloads::serving;

namespace {

// One numpy column of records (requests or iterations): f(record) each.
template <typename T, typename R, typename F>
py::array_t<T> column(const std::vector<R>& v, F f) {
  py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
  auto m = a.template mutable_unchecked<1>();
  for (std::size_t i = 0; i < v.size(); ++i) m(static_cast<py::ssize_t>(i)) = f(v[i]);
  return a;
}

}  // namespace

void bind_serving(py::module_& m) {
  m.def(
      "serving_simulate",
      [](py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> arrival,
         py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> prompt,
         py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> output, const std::string& policy,
         int max_num_seqs, std::int64_t max_batched_tokens, std::int64_t block_size, std::int64_t kv_blocks,
         const std::string& preemption, std::int64_t block_bytes, std::function<double(py::dict)> price,
         std::optional<std::function<double(std::int64_t)>> swap, std::int64_t max_tokens, std::int64_t max_keys,
         const std::vector<std::vector<double>>& breaks, const std::vector<std::string>& roles,
         const std::vector<std::vector<NodeRef>>& devices, const std::string& routing, std::int64_t kv_bytes_per_token,
         topology::System* system,
         std::optional<py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>> prefix_group,
         std::optional<py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>> prefix_tokens,
         bool prefix_caching) {
        if (arrival.size() != prompt.size() || arrival.size() != output.size())
          throw UsageError("serving: arrival, prompt and output must have the same length");
        std::vector<RequestSpec> reqs(static_cast<std::size_t>(arrival.size()));
        for (py::ssize_t i = 0; i < arrival.size(); ++i)
          reqs[static_cast<std::size_t>(i)] =
              RequestSpec{arrival.at(i), prompt.at(i), output.at(i), prefix_group ? prefix_group->at(i) : -1,
                          prefix_tokens ? prefix_tokens->at(i) : 0};
        if ((prefix_group && prefix_group->size() != arrival.size()) ||
            (prefix_tokens && prefix_tokens->size() != arrival.size()))
          throw UsageError("serving: prefix_group and prefix_tokens must have one value per request");
        ClusterSpec cluster;
        cluster.routing = routing_from_string(routing);
        cluster.kv_bytes_per_token = kv_bytes_per_token;
        cluster.system = system;
        if (roles.size() != devices.size()) throw UsageError("serving: one device list per instance role");
        for (std::size_t k = 0; k < roles.size(); ++k) {
          InstanceSpec in;
          in.role = roles[k] == "both"      ? Role::Both
                    : roles[k] == "prefill" ? Role::Prefill
                    : roles[k] == "decode"
                        ? Role::Decode
                        : throw UsageError("serving: instance role '" + roles[k] + "' (known: both, prefill, decode)");
          if (system)
            for (const NodeRef& d : devices[k]) in.devices.push_back(resolve(*system, d, "serving: instance device"));
          cluster.instances.push_back(std::move(in));
        }
        SchedulerConfig cfg;
        cfg.policy = policy_from_string(policy);
        cfg.max_num_seqs = max_num_seqs;
        cfg.max_batched_tokens = max_batched_tokens;
        cfg.block_size = block_size;
        cfg.kv_blocks = kv_blocks;
        cfg.preemption = preemption_from_string(preemption);
        cfg.block_bytes = block_bytes;
        cfg.prefix_caching = prefix_caching;
        IterationCost cost(
            [&](const IterationShape& s) {
              py::gil_scoped_acquire gil;
              py::dict d;
              d["prefill_tokens"] = s.prefill_tokens;
              d["prefill_keys"] = s.prefill_keys;
              d["decode_seqs"] = s.decode_seqs;
              d["decode_keys"] = s.decode_keys;
              return price(d);
            },
            max_tokens, max_num_seqs, max_keys, breaks);
        SwapCost sw;
        if (swap)
          sw = [&](std::int64_t bytes) {
            py::gil_scoped_acquire gil;
            return (*swap)(bytes);
          };
        std::optional<Using> use;
        if (system) use.emplace(*system);
        const ServingResult r = simulate(reqs, cfg, cost, sw, cluster);
        py::dict out;
        const auto& q = r.requests;
        out["arrival_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.arrival; });
        out["scheduled_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.scheduled; });
        out["first_token_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.first_token; });
        out["finish_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.finish; });
        out["prompt"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.prompt; });
        out["output"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.output; });
        out["generated"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.generated; });
        out["preemptions"] = column<std::int32_t>(q, [](const RequestRecord& x) { return x.preemptions; });
        out["instance"] = column<std::int32_t>(q, [](const RequestRecord& x) { return x.instance; });
        out["decoder"] = column<std::int32_t>(q, [](const RequestRecord& x) { return x.decoder; });
        out["kv_start_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.kv_start; });
        out["kv_end_ps"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.kv_end; });
        out["kv_bytes"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.kv_bytes; });
        out["cached_tokens"] = column<std::int64_t>(q, [](const RequestRecord& x) { return x.cached_tokens; });
        py::list rejected;
        for (const RequestRecord& x : q) rejected.append(x.rejected);
        out["rejected"] = rejected;
        const auto& it = r.iterations;
        py::dict iters;
        iters["start_ps"] = column<std::int64_t>(it, [](const IterationRecord& x) { return x.start; });
        iters["end_ps"] = column<std::int64_t>(it, [](const IterationRecord& x) { return x.end; });
        iters["swap_ps"] = column<std::int64_t>(it, [](const IterationRecord& x) { return x.swap; });
        iters["prefill_tokens"] =
            column<std::int64_t>(it, [](const IterationRecord& x) { return x.shape.prefill_tokens; });
        iters["prefill_keys"] = column<double>(it, [](const IterationRecord& x) { return x.shape.prefill_keys; });
        iters["decode_seqs"] = column<std::int64_t>(it, [](const IterationRecord& x) { return x.shape.decode_seqs; });
        iters["decode_keys"] = column<double>(it, [](const IterationRecord& x) { return x.shape.decode_keys; });
        iters["running"] = column<std::int32_t>(it, [](const IterationRecord& x) { return x.running; });
        iters["waiting"] = column<std::int32_t>(it, [](const IterationRecord& x) { return x.waiting; });
        iters["kv_used"] = column<std::int64_t>(it, [](const IterationRecord& x) { return x.kv_used; });
        iters["instance"] = column<std::int32_t>(it, [](const IterationRecord& x) { return x.instance; });
        out["iterations"] = iters;
        out["kv_blocks"] = r.kv_blocks;
        out["blocks_allocated"] = r.blocks_allocated;
        out["blocks_freed"] = r.blocks_freed;
        out["blocks_held"] = r.blocks_held;
        out["preemptions_total"] = r.preemptions;
        out["swaps"] = r.swaps;
        out["cost_lookups"] = r.cost_lookups;
        out["cost_simulated"] = r.cost_simulated;
        out["cost_reads"] = r.cost_reads;
        out["events"] = r.events;
        out["prefix_hit_tokens"] = r.prefix_hit_tokens;
        out["prompt_tokens"] = r.prompt_tokens;
        py::list axes;
        for (int a = 0; a < 4; ++a) axes.append(cost.axis(a));
        out["lattice"] = axes;
        return out;
      },
      py::arg("arrival_ps"), py::arg("prompt"), py::arg("output"), py::arg("policy"), py::arg("max_num_seqs"),
      py::arg("max_batched_tokens"), py::arg("block_size"), py::arg("kv_blocks"), py::arg("preemption"),
      py::arg("block_bytes"), py::arg("price"), py::arg("swap"), py::arg("max_tokens"), py::arg("max_keys"),
      py::arg("breaks") = std::vector<std::vector<double>>{}, py::arg("roles") = std::vector<std::string>{},
      py::arg("devices") = std::vector<std::vector<NodeRef>>{}, py::arg("routing") = "round_robin",
      py::arg("kv_bytes_per_token") = 0, py::arg("system") = nullptr, py::arg("prefix_group") = py::none(),
      py::arg("prefix_tokens") = py::none(), py::arg("prefix_caching") = false,
      "Serve the requests through one instance (src/workloads/serving/serving.hpp): `price(shape) -> ps` is "
      "the hardware model's time of an iteration (called once per lattice corner); `swap(bytes) -> ps` the "
      "host link's (None: no swap). Returns per-request and per-iteration numpy columns.");
}

}  // namespace kernbench::bindings

// op_log.hpp -- the column-wise record of every op a run performed.
//
// Columns are generic ids and numbers; the layers above own the names
// behind them (an agent id is a PE to the runtime, a customer to a queue
// model). Column-wise storage lets Python view each column as a numpy array
// without a copy, and keeps appends to a handful of vector push_backs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::sim {

/// One op, as handed to OpLog::record().
struct OpRecord {
  std::int64_t op = 0;        ///< op id (unique within a run)
  std::int32_t agent = 0;     ///< who issued it (PE, host thread, customer...)
  std::int32_t resource = 0;  ///< where it ran (engine, server, link...)
  std::int32_t kind = 0;      ///< what it was (dma, gemm, service...)
  std::int32_t tag = 0;       ///< free label (pipeline stage, case...)
  Time issue = 0;             ///< when it was asked for
  Time start = 0;             ///< when it got its resource
  Time end = 0;               ///< when it finished
  Bytes bytes = 0;            ///< payload moved, if any
  double work = 0.0;          ///< FLOPs, cycles or other work units, if any
};

class OpLog {
 public:
  void record(const OpRecord& r) {
    op_.push_back(r.op);
    agent_.push_back(r.agent);
    resource_.push_back(r.resource);
    kind_.push_back(r.kind);
    tag_.push_back(r.tag);
    issue_.push_back(r.issue);
    start_.push_back(r.start);
    end_.push_back(r.end);
    bytes_.push_back(r.bytes);
    work_.push_back(r.work);
  }

  std::size_t size() const { return op_.size(); }
  bool empty() const { return op_.empty(); }
  void reserve(std::size_t n);
  void clear();
  /// Row i as a struct (for tests and small reports).
  OpRecord row(std::size_t i) const;

  /// The code of kind `name`, registering it on first use (codes are
  /// indices into kind_names(), so they are stable within a run).
  std::int32_t kind_code(const std::string& name) {
    for (std::size_t i = 0; i < kind_names_.size(); ++i)
      if (kind_names_[i] == name) return static_cast<std::int32_t>(i);
    kind_names_.push_back(name);
    return static_cast<std::int32_t>(kind_names_.size() - 1);
  }

  /// Names for the kind codes, owned by whoever records (index = code).
  std::vector<std::string>& kind_names() { return kind_names_; }
  const std::vector<std::string>& kind_names() const { return kind_names_; }

  const std::vector<std::int64_t>& op() const { return op_; }
  const std::vector<std::int32_t>& agent() const { return agent_; }
  const std::vector<std::int32_t>& resource() const { return resource_; }
  const std::vector<std::int32_t>& kind() const { return kind_; }
  const std::vector<std::int32_t>& tag() const { return tag_; }
  const std::vector<Time>& issue() const { return issue_; }
  const std::vector<Time>& start() const { return start_; }
  const std::vector<Time>& end() const { return end_; }
  const std::vector<Bytes>& bytes() const { return bytes_; }
  const std::vector<double>& work() const { return work_; }

 private:
  std::vector<std::int64_t> op_;
  std::vector<std::int32_t> agent_;
  std::vector<std::int32_t> resource_;
  std::vector<std::int32_t> kind_;
  std::vector<std::int32_t> tag_;
  std::vector<Time> issue_;
  std::vector<Time> start_;
  std::vector<Time> end_;
  std::vector<Bytes> bytes_;
  std::vector<double> work_;
  std::vector<std::string> kind_names_;
};

}  // namespace kernbench::sim

// op_log.cpp -- bulk operations on the column store.
#include "sim/op_log.hpp"

namespace kernbench::sim {

void OpLog::reserve(std::size_t n) {
  op_.reserve(n);
  agent_.reserve(n);
  resource_.reserve(n);
  kind_.reserve(n);
  tag_.reserve(n);
  issue_.reserve(n);
  start_.reserve(n);
  end_.reserve(n);
  bytes_.reserve(n);
  work_.reserve(n);
}

void OpLog::clear() {
  op_.clear();
  agent_.clear();
  resource_.clear();
  kind_.clear();
  tag_.clear();
  issue_.clear();
  start_.clear();
  end_.clear();
  bytes_.clear();
  work_.clear();
}

OpRecord OpLog::row(std::size_t i) const {
  return OpRecord{op_.at(i),    agent_.at(i), resource_.at(i), kind_.at(i),  tag_.at(i),
                  issue_.at(i), start_.at(i), end_.at(i),      bytes_.at(i), work_.at(i)};
}

}  // namespace kernbench::sim

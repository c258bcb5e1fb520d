// deadlock_report.cpp -- why a program cannot finish: a DeadlockError naming
// up to 8 stuck ops, each with its reason (a recv whose send never came or
// that took only some segments, a send blocked on full IPCQ slots, an op
// waiting for ops that never end, one that never started).
#include <algorithm>
#include <string>

#include "runtime/executor_impl.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

void Executor::Impl::report_deadlock() const {
  std::string msg = program.name() + ": deadlock: " + std::to_string(remaining) + " of " +
                    std::to_string(nodes.size()) + " ops and stages can never finish";
  int shown = 0;
  for (std::uint32_t n = 0; n < nodes.size() && shown < 8; ++n) {
    const Node& nd = nodes[n];
    if (nd.end >= 0 || (nd.program_op < 0 && nd.waiting > 0)) continue;
    msg += shown++ ? "; " : ": ";
    msg += describe(n);
    if (nd.kind == OpKind::Recv && nd.ready >= 0 && nd.waiting == 0) {
      const auto it = message_index.find(MessageKey{nd.agent, nd.peer, nd.key});
      const Message* m = it == message_index.end() ? nullptr : &messages[it->second];
      if (m == nullptr || m->send == Message::kNone) {
        msg += " waits for a send from " + system.machine().node(nd.peer).name + " with key " + std::to_string(nd.key) +
               " that never came";
      } else {
        msg += " has taken " + std::to_string(m->taken) + " of " + std::to_string(m->segments) + " segments from " +
               system.machine().node(nd.peer).name;
      }
      continue;
    }
    if (nd.kind == OpKind::Send && nd.start >= 0) {
      const auto it = message_index.find(MessageKey{nd.move.dst, nd.agent, nd.key});
      const Message& m = messages[it->second];
      msg += " is blocked: " + std::to_string(m.arrived) + " of " + std::to_string(m.segments) +
             " segments delivered, and all " + std::to_string(cfg.ipcq_slots) + " slots of " +
             system.machine().node(nd.move.dst).name + "'s queue from " + system.machine().node(nd.agent).name +
             (m.recv == Message::kNone ? " are full and no recv for key " + std::to_string(nd.key) + " was posted"
                                       : " are full");
      continue;
    }
    std::string on;
    for (std::uint32_t m = 0; m < nodes.size(); ++m) {
      const Node& other = nodes[m];
      if (other.end >= 0) continue;
      if (std::find(other.dependents.begin(), other.dependents.end(), n) == other.dependents.end()) continue;
      on += (on.empty() ? "" : ", ") +
            (other.program_op >= 0 ? "op " + std::to_string(other.program_op) : "stage '" + other.name + "'");
    }
    msg += on.empty() ? " never started" : " waits for " + on;
  }
  throw DeadlockError(msg);
}

}  // namespace kernbench::runtime

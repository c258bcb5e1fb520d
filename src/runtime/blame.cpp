// blame.cpp -- what a wait inside a send or a recv was waiting for, so the
// critical path names it (cause_export.cpp turns the pieces into labelled
// parts). A send blocked on a slot credit waited for the slot life whose
// credit came back (SlotLife, ipcq.hpp): its wait is apportioned over that
// slot's round trip, in proportion to the phases' lengths:
//   [inject, arrive)  its segment in flight     -> the send's route: link:<class>
//   [arrive, take)    not taken yet: before the recv was posted -> wait:dependency,
//                     after it -> the receiver's engine (busy with earlier segments)
//   [take, freed)     read or reduced            -> engine:ipcq_rx / engine:vector
//   [freed, back)     its credit in flight back  -> the reverse route: link:<class>
// A recv waiting for its segment k waited for
//   [inject_k, arrival)  the segment in flight   -> the send's route
//   before inject_k      the send blocked on a slot -> that slot, blamed as above;
//                        the send not there yet -> wait:dependency
// The pieces sum to the wait exactly; time no phase explains (none is
// expected) keeps the wait's own label (wait:resource:ipcq_slots,
// wait:dependency).
#include <algorithm>
#include <vector>

#include "runtime/executor_impl.hpp"

namespace kernbench::runtime {

void Executor::Impl::blame(Node& nd, Blame::Kind kind, std::int32_t what, Time t) {
  if (t <= 0) return;
  auto it =
      std::find_if(nd.blame.begin(), nd.blame.end(), [&](const Blame& b) { return b.kind == kind && b.what == what; });
  if (it != nd.blame.end())
    it->time += t;
  else
    nd.blame.push_back(Blame{kind, what, t});
}

Time Executor::Impl::blame_slot(Node& w, std::int32_t life, Time a, Time b) {
  const Time wait = b - a;
  Time given = 0;
  if (life >= 0 && wait > 0) {
    // The sender waited for the slot's whole round trip, not only for the
    // phase that happened to overlap its wait (the credit's way back, in a
    // stream whose slots cycle): the wait is apportioned over the phases of
    // the slot's life in proportion to their lengths.
    const SlotLife& s = lives[static_cast<std::size_t>(life)];
    const Message& m = messages[s.message];
    const Node& rcv = nodes[m.recv];
    const Time arrive = std::min(s.arrive, s.take);
    const Time posted = std::clamp(rcv.dispatch_end, arrive, s.take);  // the recv was running from here
    const double phase[4] = {static_cast<double>(arrive - s.inject), static_cast<double>(posted - arrive),
                             static_cast<double>(s.freed - posted), static_cast<double>(s.back - s.freed)};
    const double total = phase[0] + phase[1] + phase[2] + phase[3];
    if (s.inject >= 0 && s.back >= s.freed && total > 0) {
      const std::vector<double> weights(phase, phase + 4);
      std::vector<Time> shares;
      apportion(wait, weights, total, shares);
      const auto snd = static_cast<std::int32_t>(m.send);
      blame(w, Blame::Route, snd, shares[0]);
      blame(w, Blame::Label, label("wait:dependency"), shares[1]);
      blame(w, Blame::Label,
            label(rcv.recv_mode == RecvMode::Reduce    ? "engine:vector"
                  : rcv.recv_mode == RecvMode::Consume ? "engine:ipcq_rx"
                                                       : "wait:dependency"),
            shares[2]);
      blame(w, Blame::Credit, snd, shares[3]);
      given = wait;
    }
  }
  if (given < wait) blame(w, Blame::Label, label("wait:resource:ipcq_slots"), wait - given);
  return wait;
}

void Executor::Impl::blame_segment(Node& w, std::uint32_t life, Time a, Time b) {
  const SlotLife& s = lives[life];
  const auto snd = static_cast<std::int32_t>(messages[s.message].send);
  Time given = 0;
  if (s.inject >= 0 && s.inject < b) {  // in flight over [inject, b)
    const Time from = std::max(a, s.inject);
    blame(w, Blame::Route, snd, b - from);
    given += b - from;
  }
  const Time before = std::min(b, std::max(a, s.inject));  // [a, before): not sent yet
  if (before > a && s.credit >= 0 && s.wait_from < before) {
    const Time from = std::max(a, s.wait_from);  // the send was blocked on a slot over [from, before)
    given += blame_slot(w, s.credit, from, before);
  }
  if (given < b - a) blame(w, Blame::Label, label("wait:dependency"), b - a - given);
}

}  // namespace kernbench::runtime

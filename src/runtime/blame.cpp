// blame.cpp -- what a wait inside a send or a recv was waiting for, so the
// critical path names it (cause_export.cpp turns the pieces into labelled
// parts), from each segment's slot life (SlotLife, ipcq.hpp: injected,
// arrived, taken and freed by the recv, its credit back at the sender).
//
// A send blocked on a slot credit: credits come back one credit flight after
// the recv freed their slots, so the wait is read off the recv's timeline
// that much earlier: the recv reading or reducing segments -> its engine
// (engine:ipcq_rx, engine:vector); the recv waiting for a segment in flight
// -> the send's route (link:<class>); for a segment the send held back for
// want of a credit in flight -> the reverse route (link:<class>); the recv
// not posted yet -> wait:dependency. A receiver-bound stream is its
// receiver's engine, a window-limited one its links (data and credits).
// A recv waiting for its segment k: the segment in flight -> the send's
// route; before it was sent, the send waiting for a slot -> what that slot
// was doing (in flight, in its recv, its credit in flight); the send not
// there yet -> wait:dependency.
// The pieces sum to the wait exactly; time no phase explains (none is
// expected) is wait:dependency.
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
    const auto j = static_cast<std::uint32_t>(life);
    const SlotLife& s = lives[j];
    const Message& m = messages[s.message];
    const Node& rcv = nodes[m.recv];
    const auto snd = static_cast<std::int32_t>(m.send);
    const std::int32_t engine = label(rcv.recv_mode == RecvMode::Reduce    ? "engine:vector"
                                      : rcv.recv_mode == RecvMode::Consume ? "engine:ipcq_rx"
                                                                           : "wait:dependency");
    // The credits reach the sender one credit flight after the recv freed
    // their slots, so the wait [a, b) is the recv's timeline over
    // [a - flight, freed): what it was doing then is what the sender waited
    // for. Walk it back from slot j: each segment's read or reduction (the
    // recv's engine), and the gaps before them (the recv waiting: for a
    // segment in flight -- the send's route --, a credit in flight that
    // held the segment back -- the reverse route --, or anything else: the
    // recv not posted, the send not there: wait:dependency).
    Time hi = s.freed, lo = s.freed - wait;
    const auto piece = [&](Time from, Time to, Blame::Kind kind, std::int32_t what) {
      from = std::max(from, lo);
      to = std::min(to, hi);
      if (to <= from) return;
      blame(w, kind, what, to - from);
      given += to - from;
    };
    const std::int32_t dependency = label("wait:dependency");
    for (std::uint32_t i = j + 1; i-- > m.life0 && hi > lo;) {
      const SlotLife& x = lives[i];
      piece(x.take, x.freed, Blame::Label, engine);
      hi = std::min(hi, x.take);
      const Time prev = i > m.life0 ? lives[i - 1].freed : lo;  // the recv was free for segment i from here
      const Time arrive = std::min(x.arrive, x.take);
      const Time posted = std::clamp(rcv.dispatch_end, arrive, x.take);
      piece(arrive, posted, Blame::Label, dependency);  // here, the recv not posted
      piece(posted, x.take, Blame::Label, engine);      // here, the recv's engine busy elsewhere
      piece(x.inject, arrive, Blame::Route, snd);       // in flight
      if (x.credit >= 0) piece(lives[static_cast<std::size_t>(x.credit)].freed, x.inject, Blame::Credit, snd);
      hi = std::min(hi, std::max(prev, lo));
    }
    given = std::min(given, wait);
    if (given < wait) blame(w, Blame::Label, dependency, wait - given);
    given = wait;
  }
  if (given < wait) blame(w, Blame::Label, label("wait:resource:ipcq_slots"), wait - given);
  return wait;
}

void Executor::Impl::blame_segment(Node& w, std::uint32_t life, Time a, Time b) {
  // The segment was held back by the slot `life` while [a, b): what that slot
  // was doing then (its segment in flight, waiting for or in its recv, its
  // credit in flight).
  const auto held = [this](Node& w, std::int32_t life, Time a, Time b) -> Time {
    Time given = 0;
    if (life >= 0) {
      const SlotLife& s = lives[static_cast<std::size_t>(life)];
      const Message& m = messages[s.message];
      const Node& rcv = nodes[m.recv];
      const auto snd = static_cast<std::int32_t>(m.send);
      const auto piece = [&](Time from, Time to, Blame::Kind kind, std::int32_t what) {
        from = std::max(from, a);
        to = std::min(to, b);
        if (to <= from) return;
        blame(w, kind, what, to - from);
        given += to - from;
      };
      const std::int32_t engine = label(rcv.recv_mode == RecvMode::Reduce    ? "engine:vector"
                                        : rcv.recv_mode == RecvMode::Consume ? "engine:ipcq_rx"
                                                                             : "wait:dependency");
      const Time arrive = std::min(s.arrive, s.take);
      const Time posted = std::clamp(rcv.dispatch_end, arrive, s.take);
      piece(s.inject, arrive, Blame::Route, snd);
      piece(arrive, posted, Blame::Label, label("wait:dependency"));
      piece(posted, s.freed, Blame::Label, engine);
      piece(s.freed, s.back, Blame::Credit, snd);
    }
    if (given < b - a) blame(w, Blame::Label, label("wait:dependency"), b - a - given);
    return b - a;
  };
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
    given += held(w, s.credit, from, before);
  }
  if (given < b - a) blame(w, Blame::Label, label("wait:dependency"), b - a - given);
}

}  // namespace kernbench::runtime

// test_busy_histogram.cpp -- busy time per bin in bounded memory: exact
// totals, intervals cut at bin edges, pairwise merging when a run outgrows
// the bins.
#include <catch2/catch.hpp>

#include "sim/busy_histogram.hpp"

using kernbench::sim::BusyHistogram;
using kernbench::sim::Time;

TEST_CASE("busy intervals are cut at bin edges and sum exactly", "[busy-histogram]") {
  BusyHistogram h(5000);
  CHECK(h.bins().empty());
  h.add(5000 + 500, 5000 + 2500);  // 500 ps in bin 0, 1000 in bin 1, 500 in bin 2
  REQUIRE(h.bins().size() == BusyHistogram::kBins);
  CHECK(h.width() == BusyHistogram::kFirstWidth);
  CHECK(h.bins()[0] == 500);
  CHECK(h.bins()[1] == 1000);
  CHECK(h.bins()[2] == 500);
  h.add(4000, 5200);  // clipped at the origin
  CHECK(h.bins()[0] == 700);
  h.add(7000, 7000);  // empty
  CHECK(h.total() == 2200);
}

TEST_CASE("a run past the last bin doubles the width and keeps the total", "[busy-histogram]") {
  BusyHistogram h(0);
  const Time w = BusyHistogram::kFirstWidth;
  const auto n = static_cast<Time>(BusyHistogram::kBins);
  h.add(0, w);               // bin 0
  h.add(3 * w, 4 * w);       // bin 3
  h.add(n * w, n * w + 10);  // past the end: one doubling
  CHECK(h.width() == 2 * w);
  CHECK(h.bins()[0] == w);  // bins 0+1
  CHECK(h.bins()[1] == w);  // bins 2+3
  CHECK(h.bins()[n / 2] == 10);
  CHECK(h.total() == 2 * w + 10);
  h.add(0, 10 * n * w);  // far past: width 16 w, every bin full but the edges add up
  CHECK(h.width() == 16 * w);
  CHECK(h.total() == 2 * w + 10 + 10 * n * w);
  h.coarsen_to(64 * w);
  CHECK(h.width() == 64 * w);
  CHECK(h.total() == 2 * w + 10 + 10 * n * w);
  for (Time b : h.bins()) CHECK(b <= h.width() * 2);  // at most the overlap of two intervals per bin
}

// test_units.cpp -- the rounding rule for bytes / bandwidth.
#include <catch2/catch.hpp>

#include "sim/errors.hpp"
#include "sim/units.hpp"

using namespace kernbench::sim;

TEST_CASE("transfer_time is exact when the division is exact", "[units]") {
  // 16 KiB over the 256 GB/s HBM-controller link: 16384 / 256e9 s = 64 ns.
  CHECK(transfer_time(16384, Bandwidth::gb_per_s(256)) == 64'000);
  CHECK(transfer_time(128, Bandwidth::gb_per_s(128)) == 1'000);
  CHECK(transfer_time(0, Bandwidth::gb_per_s(1)) == 0);
}

TEST_CASE("transfer_time rounds up to the next picosecond", "[units]") {
  // 1 B at 3 B/s = 333333333333.33 ps -> 333333333334 ps.
  CHECK(transfer_time(1, Bandwidth{3}) == 333'333'333'334);
  // 1 B at 1e12 + 1 B/s is just under 1 ps -> 1 ps, never 0.
  CHECK(transfer_time(1, Bandwidth{1'000'000'000'001}) == 1);
  // Large transfers stay exact: 1 GiB at 12.5 GB/s.
  CHECK(transfer_time(kGiB, Bandwidth::gb_per_s(12.5)) == 85'899'345'920);
}

TEST_CASE("transfer_time rejects nonsense", "[units]") {
  CHECK_THROWS_AS(transfer_time(-1, Bandwidth{1}), kernbench::InternalError);
  CHECK_THROWS_WITH(transfer_time(1, Bandwidth{0}), Catch::Contains("bandwidth must be positive"));
}

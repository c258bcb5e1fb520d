// test_config_provenance.cpp -- a value's provenance declared beside it
// ({value: V, datasheet|fitted|assumed: ...}): unwrapped before typing, kept
// through includes, dropped when a file or a --set sets the value again, and
// one REQUIRE_THROWS per malformed record, each naming the file, the path and
// the line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernbench.hpp"
#include "runtime/config_section.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

using namespace kernbench::topology;
using Catch::Contains;
using kernbench::ConfigError;
using kernbench::config::Provenance;
namespace fs = std::filesystem;

namespace {

// A two-node graph; `pe:` is line 6.
const std::string kBase = R"(graph:
  nodes:
    - {name: a, kind: pe, overhead: 0 ns}
    - {name: b, kind: pe, overhead: 0 ns}
  edges: [{a: a, b: b, class: link, bandwidth: 10 GB/s, latency: 1 ns}]
pe:
  clock: {value: 1830 MHz, datasheet: "a datasheet, table 3"}
  dispatch: {value: 250 ns, assumed: "a guess", note: "not measured"}
  scratch:
    value: 4 MiB
    fitted: {data: m.measured.yaml, rows: [row-1, group-b], by: "kernbench calibrate --free pe.scratch=1..8"}
)";

Config parse(const std::string& text, const std::vector<Override>& overrides = {}) {
  return kernbench::parse_config(text, "test.yaml", overrides);
}

const kernbench::config::ProvenanceEntry* find(const Config& c, const std::string& path) {
  for (const auto& e : c.provenance)
    if (e.path == path) return &e;
  return nullptr;
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a value with its provenance beside it reads as the value, and the record is kept", "[config][provenance]") {
  const Config c = parse(kBase);
  const auto& pe = c.section<kernbench::runtime::PeConfig>();
  CHECK(pe.clock_hz == 1'830'000'000);
  CHECK(pe.dispatch == 250'000);  // ps
  CHECK(pe.scratch == (std::int64_t{4} << 20));
  REQUIRE(c.provenance.size() == 3);
  const auto* clock = find(c, "pe.clock");
  REQUIRE(clock);
  CHECK(clock->record.kind == Provenance::Kind::Datasheet);
  CHECK(clock->record.text == "a datasheet, table 3");
  CHECK(clock->value == "1830 MHz");
  CHECK(clock->file == "test.yaml");
  CHECK(clock->record.where.line == 7);
  const auto* dispatch = find(c, "pe.dispatch");
  REQUIRE(dispatch);
  CHECK(dispatch->record.kind == Provenance::Kind::Assumed);
  CHECK(dispatch->record.note == "not measured");
  const auto* scratch = find(c, "pe.scratch");
  REQUIRE(scratch);
  CHECK(scratch->record.kind == Provenance::Kind::Fitted);
  CHECK(scratch->record.data == "m.measured.yaml");
  CHECK(scratch->record.rows == std::vector<std::string>{"row-1", "group-b"});
  CHECK(scratch->record.text == "kernbench calibrate --free pe.scratch=1..8");
}

TEST_CASE("a --set replaces the value and its provenance", "[config][provenance]") {
  const Config c = parse(kBase, {{"pe.clock", "1 GHz"}});
  CHECK(c.section<kernbench::runtime::PeConfig>().clock_hz == 1'000'000'000);
  CHECK_FALSE(find(c, "pe.clock"));
  CHECK(find(c, "pe.dispatch"));
}

TEST_CASE("an including file inherits values with their provenance; setting one again drops it",
          "[config][provenance]") {
  static int counter = 0;
  const fs::path dir =
      fs::temp_directory_path() / ("kernbench_prov_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(dir);
  std::ofstream(dir / "base.yaml") << kBase;
  std::ofstream(dir / "top.yaml") << "include: base.yaml\npe:\n  dispatch: 100 ns\n"
                                     "  scratch: {value: 8 MiB, assumed: \"the top file's own\"}\n";
  const Config c = kernbench::load_config((dir / "top.yaml").string(), {});
  const auto* clock = find(c, "pe.clock");
  REQUIRE(clock);
  CHECK(clock->file == (dir / "base.yaml").lexically_normal().string());
  CHECK_FALSE(find(c, "pe.dispatch"));  // set again, without a record
  const auto* scratch = find(c, "pe.scratch");
  REQUIRE(scratch);
  CHECK(scratch->record.kind == Provenance::Kind::Assumed);  // replaced whole, not merged with the base's record
  CHECK(scratch->record.data.empty());
  CHECK(c.section<kernbench::runtime::PeConfig>().scratch == (std::int64_t{8} << 20));
  fs::remove_all(dir);
}

TEST_CASE("malformed provenance records are refused, naming the file, the path and the line", "[config][provenance]") {
  const std::string two = with(kBase, R"(clock: {value: 1830 MHz, datasheet: "a datasheet, table 3"})",
                               R"(clock: {value: 1830 MHz, datasheet: "x", assumed: "y"})");
  REQUIRE_THROWS_WITH(parse(two), Contains("test.yaml: pe.clock.assumed: a value has one provenance: datasheet "
                                           "is given already") &&
                                      Contains("(line 7)"));
  REQUIRE_THROWS_WITH(parse(with(kBase, "{value: 250 ns, assumed", "{valu: 250 ns, assumed")),
                      Contains("test.yaml: pe.dispatch: a provenance record (assumed) sits beside a value") &&
                          Contains("found no `value`"));
  REQUIRE_THROWS_WITH(parse(with(kBase, "note: \"not measured\"", "source: \"x\"")),
                      Contains("pe.dispatch.source: unknown key beside a value's provenance (known: value, "
                               "datasheet, fitted, assumed, note)"));
  REQUIRE_THROWS_WITH(parse(with(kBase, R"(datasheet: "a datasheet, table 3")", "datasheet: \"\"")),
                      Contains("pe.clock.datasheet: expected the datasheet or public source"));
  REQUIRE_THROWS_WITH(parse(with(kBase, "rows: [row-1, group-b], ", "")),
                      Contains("pe.scratch.fitted: a fitted record needs `rows`"));
  REQUIRE_THROWS_WITH(parse(with(kBase, "rows: [row-1, group-b]", "rows: []")),
                      Contains("pe.scratch.fitted.rows: expected at least one row id or group name"));
  REQUIRE_THROWS_WITH(parse(with(kBase, "by: ", "with: ")),
                      Contains("pe.scratch.fitted.with: unknown key in a fitted record (known: data, rows, by)"));
  REQUIRE_THROWS_WITH(parse(with(kBase,
                                 "fitted: {data: m.measured.yaml, rows: [row-1, group-b], by: \"kernbench "
                                 "calibrate --free pe.scratch=1..8\"}",
                                 "fitted: m.measured.yaml")),
                      Contains("pe.scratch.fitted: expected a map {data: FILE, rows: [ROW or GROUP, ...], by: "
                               "COMMAND}"));
  // The typed reader still checks the unwrapped value.
  REQUIRE_THROWS_WITH(parse(with(kBase, "{value: 1830 MHz,", "{value: 1830,")), Contains("test.yaml: pe.clock"));
}

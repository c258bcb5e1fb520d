// provenance.hpp -- where a config value came from, declared beside the value.
//
// A calibrated or cited value says what it rests on in the file that sets it:
//
//   sustained_clock_ratio: {value: 0.82449, fitted: {data: h100.measured.yaml,
//                           rows: [gemm-torch, gemm-cublas], by: scripts/calibrate_gpu.sh}}
//   clock: {value: 900 MHz, datasheet: "K200 reference: clock locked at 900 MHz"}
//   wait_overhead: {value: 2 us, assumed: "the wait call's own cost"}
//
// The YAML tree (yaml_tree.cpp) unwraps such a map into its `value` as it
// copies a file, and keeps the record on the value: a file that includes
// another inherits its values with their provenance, a file (or a --set)
// that sets the value again replaces both. The typed reader never sees the
// wrapper. `collect_provenance` lists what the finished tree carries, for
// `kernbench schema --config F`, `calibrate --check` (the rows a value was
// fitted on are judged as fitted) and the validation report
// (docs/calibrate.md, "Provenance").
#pragma once

#include <string>
#include <vector>

#include "config/yaml_tree.hpp"

namespace kernbench::config {

struct Provenance {
  enum class Kind { Datasheet, Fitted, Assumed };
  Kind kind = Kind::Assumed;
  /// datasheet: the source cited; assumed: the reason; fitted: the command that made the fit (`by`).
  std::string text;
  /// fitted: the measured-data file of the rows, as written (relative to the declaring file's folder).
  std::string data;
  /// fitted: row ids or group names of `data`, at least one.
  std::vector<std::string> rows;
  /// Optional words beside the record.
  std::string note;
  /// The map that declared it.
  Where where;
};

const char* to_string(Provenance::Kind kind);

/// One value of a loaded config with its provenance.
struct ProvenanceEntry {
  std::string path;   ///< dotted YAML path, list items as [i]
  std::string value;  ///< the value's text (a scalar) or describe() of it
  std::string file;   ///< the file that declared the provenance ("" when unknown)
  Provenance record;
};

/// The keys a provenance map may hold besides `value`.
inline constexpr const char* kProvenanceKeys = "datasheet, fitted, assumed, note";

/// When `v` is a map `{value: X, <datasheet|fitted|assumed>: ..., [note: ...]}`, replaces it by X carrying the
/// record; a map with a provenance key but no `value`, two kinds, an unknown key or a malformed record is a
/// ConfigError naming the file, the line and `path`. Any other node is left as it is.
void unwrap_provenance(const Loader& l, Value& v, const std::string& path);

/// Every value of `root` that carries a provenance, in tree order.
std::vector<ProvenanceEntry> collect_provenance(const Loader& l, const Value& root);

}  // namespace kernbench::config

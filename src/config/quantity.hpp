// quantity.hpp -- quantities as text: "<number> <unit>" parsed exactly into
// integers of a base unit, and the inverse for messages and schema defaults.
//
// Kinds and base units: time (ps), size (B), bandwidth (B/s), frequency (Hz),
// energy per byte (aJ/B), energy per operation (aJ/flop; a MAC is 2 flops),
// power (uW). A missing or unknown unit is an error; decimals are kept exact
// (no binary floating point), so "0.1 KB" is 100 B. sim/units.hpp keeps
// Time, Bytes, Bandwidth and the unit constants; this file is their text.
// format_bytes() is the one size formatter of the project (ByteUnits picks
// the style each message has always used).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::config {

/// value_in_base_unit = number * num / den (den 8 turns bits into bytes).
struct Unit {
  std::string_view name;
  std::int64_t num;
  std::int64_t den;
};

inline constexpr std::int64_t k1e3 = 1'000, k1e6 = 1'000'000, k1e9 = 1'000'000'000, k1e12 = 1'000'000'000'000;

inline constexpr Unit kTimeUnits[] = {{"ps", 1, 1}, {"ns", k1e3, 1}, {"us", k1e6, 1}, {"ms", k1e9, 1}, {"s", k1e12, 1}};
inline constexpr Unit kByteUnits[] = {{"B", 1, 1},          {"KB", k1e3, 1},       {"MB", k1e6, 1},
                                      {"GB", k1e9, 1},      {"KiB", 1LL << 10, 1}, {"MiB", 1LL << 20, 1},
                                      {"GiB", 1LL << 30, 1}};
inline constexpr Unit kBandwidthUnits[] = {
    {"B/s", 1, 1},           {"KB/s", k1e3, 1},       {"MB/s", k1e6, 1},       {"GB/s", k1e9, 1}, {"TB/s", k1e12, 1},
    {"KiB/s", 1LL << 10, 1}, {"MiB/s", 1LL << 20, 1}, {"GiB/s", 1LL << 30, 1}, {"b/s", 1, 8},     {"Kb/s", k1e3, 8},
    {"Mb/s", k1e6, 8},       {"Gb/s", k1e9, 8},       {"Tb/s", k1e12, 8},      {"Gbps", k1e9, 8}};
inline constexpr Unit kFrequencyUnits[] = {{"Hz", 1, 1}, {"kHz", k1e3, 1}, {"MHz", k1e6, 1}, {"GHz", k1e9, 1}};
inline constexpr Unit kEnergyPerByteUnits[] = {{"pJ/bit", 8 * k1e6, 1}, {"fJ/bit", 8 * k1e3, 1}, {"pJ/B", k1e6, 1},
                                               {"fJ/B", k1e3, 1},       {"aJ/B", 1, 1},          {"nJ/B", k1e9, 1}};
inline constexpr Unit kEnergyPerFlopUnits[] = {{"pJ/flop", k1e6, 1}, {"fJ/flop", k1e3, 1}, {"aJ/flop", 1, 1},
                                               {"pJ/MAC", k1e6, 2},  {"fJ/MAC", k1e3, 2},  {"nJ/flop", k1e9, 1}};
inline constexpr Unit kPowerUnits[] = {{"W", k1e6, 1}, {"mW", k1e3, 1}, {"uW", 1, 1}, {"kW", k1e9, 1}};

/// One family of quantities: how to name it in messages and how to round.
struct QuantityKind {
  std::string_view what;     ///< "a time"
  std::string_view noun;     ///< "time", used with a bound: "expected a time >= 0"
  std::string_view example;  ///< "5 ns"
  std::string_view base;     ///< unit of the integer result
  std::span<const Unit> units;
  bool whole;  ///< must come out integral (bytes) instead of rounding to nearest
  /// When > 0: rounding to the base unit may move a non-zero value by at most
  /// this fraction of it (bandwidths: 1e-6, so "0.5 B/s" is refused rather
  /// than read as 1 B/s; a value that rounds to 0 meets the key's bound).
  double max_rounding = 0;
};

inline constexpr QuantityKind kTime{"a time", "time", "5 ns", "ps", kTimeUnits, false};
inline constexpr QuantityKind kSize{"a size", "size", "4 KiB", "B", kByteUnits, true};
inline constexpr QuantityKind kRate{"a bandwidth", "bandwidth", "256 GB/s", "B/s", kBandwidthUnits, false, 1e-6};
inline constexpr QuantityKind kFrequency{"a frequency", "frequency", "900 MHz", "Hz", kFrequencyUnits, false};
inline constexpr QuantityKind kEnergyPerByte{
    "an energy per byte", "energy per byte", "3.9 pJ/bit", "aJ/B", kEnergyPerByteUnits, false};
inline constexpr QuantityKind kEnergyPerFlop{
    "an energy per operation", "energy per operation", "1.5 pJ/MAC", "aJ/flop", kEnergyPerFlopUnits, false};
inline constexpr QuantityKind kPower{"a power", "power", "5 W", "uW", kPowerUnits, false};

std::vector<std::string> unit_names(const QuantityKind& k);

/// "expected a time like "5 ns" (units: ...), got <got>" (+ a GT/s hint).
std::string expected_quantity(const QuantityKind& k, const std::string& got, std::string_view unit);

/// Parses `text` as a quantity of kind `k` into `out` (base units); returns
/// the error message, empty on success.
std::string parse_quantity(std::string_view text, const QuantityKind& k, std::int64_t& out);

// Strict parsing that throws ConfigError; `where` prefixes the message.
sim::Time parse_time(const std::string& text, const std::string& where);
sim::Bytes parse_bytes(const std::string& text, const std::string& where);
sim::Bandwidth parse_bandwidth(const std::string& text, const std::string& where);
double parse_frequency_hz(const std::string& text, const std::string& where);

/// How format_bytes writes a size.
enum class ByteUnits {
  Exact,    ///< the largest of GiB, MiB, KiB, GB, MB, KB dividing exactly, else B ("4 KiB", "3 KB"); parses back
  UpToMiB,  ///< MiB or KiB when it divides exactly, else B ("2048 MiB", "3000 B")
  UpToKiB,  ///< KiB when it divides exactly, else B ("2048 KiB")
  Rounded,  ///< the largest of GiB, MiB, KiB not above it, two decimals when inexact ("1.50 GiB")
};

// The inverse of parsing, for messages and schema defaults: the largest unit
// that divides the value exactly ("1500 ps", "256 GB/s"); parsing the result
// gives the value back.
std::string format_time(sim::Time t);
std::string format_bytes(sim::Bytes b, ByteUnits units = ByteUnits::Exact);
std::string format_bandwidth(sim::Bandwidth bw);
/// "900 MHz" (whole MHz, as the schema's defaults read).
std::string format_mhz(std::int64_t hz);
/// The energy model's values as they read in the YAML: "3.9 pJ/bit", "1.5 pJ/MAC", "0.5 W".
std::string format_energy_per_byte(std::int64_t aj_per_byte);
std::string format_energy_per_flop(std::int64_t aj_per_flop);
std::string format_power(std::int64_t uw);

}  // namespace kernbench::config

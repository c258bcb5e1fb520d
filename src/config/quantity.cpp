// quantity.cpp -- see quantity.hpp.
#include "config/quantity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <limits>

#include "config/text.hpp"

namespace kernbench::config {
namespace {

using u128 = unsigned __int128;

/// A decimal number kept exact: (-1)^negative * mantissa * 10^exp10.
struct Decimal {
  bool negative = false;
  std::uint64_t mantissa = 0;
  int exp10 = 0;
};

constexpr std::size_t kMaxDigits = 18;  // mantissa < 1e18, so mantissa * unit fits in 128 bits

enum class SplitResult { Ok, NoNumber, TooManyDigits };

// "<number>[ ]<unit>" with number = [+-]digits[.digits][e[+-]digits]. Parsing
// the decimal digits ourselves keeps "0.1 KB" exactly 100 B (a double would not).
SplitResult split_quantity(std::string_view text, Decimal& d, std::string_view& unit) {
  text = trim(text);
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) d.negative = text[i++] == '-';
  std::string digits;
  int frac = 0;
  bool dot = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (is_digit(c)) {
      digits += c;
      any = true;
      if (dot) ++frac;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any) return SplitResult::NoNumber;
  long exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    bool neg_exp = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) neg_exp = text[j++] == '-';
    if (j < text.size() && is_digit(text[j])) {
      for (; j < text.size() && is_digit(text[j]); ++j) exp = std::min(exp * 10 + (text[j] - '0'), 100000L);
      if (neg_exp) exp = -exp;
      i = j;
    }  // else the 'e' belongs to the unit (and will be rejected there)
  }
  unit = trim(text.substr(i));
  long exp10 = exp - frac;
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return SplitResult::Ok;  // zero
  digits.erase(0, first);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back(), ++exp10;
  if (digits.size() > kMaxDigits) return SplitResult::TooManyDigits;
  d.mantissa = std::stoull(digits);
  d.exp10 = static_cast<int>(exp10);
  return SplitResult::Ok;
}

enum class ScaleResult { Ok, TooLarge, NotWhole, Rounded };

// number * unit in the base unit as an int64, exactly: rounded half away from
// zero, or required to be integral when `whole`; with `max_rounding` > 0 a
// non-zero result that rounding moved by more than that fraction is Rounded.
ScaleResult scale(const Decimal& d, const Unit& u, bool whole, std::int64_t& out, double max_rounding = 0) {
  out = 0;
  if (d.mantissa == 0) return ScaleResult::Ok;
  const u128 limit = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
  u128 n = static_cast<u128>(d.mantissa) * static_cast<u128>(u.num);
  u128 den = static_cast<u128>(u.den);
  if (d.exp10 >= 0) {
    for (int k = 0; k < d.exp10; ++k) {
      if (n > limit * den) return ScaleResult::TooLarge;
      n *= 10;
    }
  } else {
    // n < 1.2e30, so beyond 10^36 the value rounds to zero (and is not whole).
    if (-d.exp10 > 36) return whole ? ScaleResult::NotWhole : ScaleResult::Ok;
    for (int k = 0; k < -d.exp10; ++k) den *= 10;
  }
  u128 q = n / den;
  const u128 r = n % den;
  if (whole && r != 0) return ScaleResult::NotWhole;
  const bool up = 2 * r >= den;
  if (up) ++q;
  if (q > limit) return ScaleResult::TooLarge;
  out = d.negative ? -static_cast<std::int64_t>(q) : static_cast<std::int64_t>(q);
  // |rounded - exact| / exact = (up ? den - r : r) / n; in doubles (den can pass 2^120).
  if (max_rounding > 0 && q != 0 && static_cast<double>(up ? den - r : r) > max_rounding * static_cast<double>(n))
    return ScaleResult::Rounded;
  return ScaleResult::Ok;
}

std::int64_t parse_or_throw(const std::string& text, const QuantityKind& k, const std::string& where) {
  std::int64_t v = 0;
  const std::string err = parse_quantity(text, k, v);
  if (!err.empty()) throw_config(where.empty() ? err : where + ": " + err);
  return v;
}

std::string format_with(std::int64_t v, std::initializer_list<Unit> units, std::string_view zero) {
  if (v == 0) return std::string(zero);
  for (const Unit& u : units)
    if (v % u.num == 0) return std::to_string(v / u.num) + " " + std::string(u.name);
  return std::to_string(v);  // not reached: the last unit is always 1
}

// n / 10^6 as an exact decimal ("3.9", "0.15", "5").
std::string micro_decimal(std::int64_t n) {
  std::string out = n < 0 ? "-" : "";
  const std::uint64_t a = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  out += std::to_string(a / 1'000'000);
  std::string frac = std::to_string(a % 1'000'000);
  frac.insert(0, 6 - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? out : out + "." + frac;
}

}  // namespace

std::vector<std::string> unit_names(const QuantityKind& k) {
  std::vector<std::string> out;
  for (const Unit& u : k.units) out.emplace_back(u.name);
  return out;
}

// `got` is what was given, already quoted or described ("a map").
std::string expected_quantity(const QuantityKind& k, const std::string& got, std::string_view unit) {
  std::string msg = "expected " + std::string(k.what) + " like " + in_quotes(k.example) +
                    " (units: " + join(unit_names(k), ", ") + "), got " + got;
  // The one confusion seen in practice: PCIe/UCIe datasheets quote GT/s.
  if (unit.size() >= 3 && unit.substr(unit.size() - 3) == "T/s")
    msg += "; " + in_quotes(unit) + " is a transfer rate, not a bandwidth";
  return msg;
}

std::string parse_quantity(std::string_view text, const QuantityKind& k, std::int64_t& out) {
  Decimal d;
  std::string_view unit;
  const SplitResult s = split_quantity(text, d, unit);
  if (s == SplitResult::NoNumber) return expected_quantity(k, in_quotes(text), "");
  if (s == SplitResult::TooManyDigits)
    return in_quotes(text) + " has too many significant digits (at most " + std::to_string(kMaxDigits) + ")";
  const auto it = std::find_if(k.units.begin(), k.units.end(), [&](const Unit& u) { return u.name == unit; });
  if (it == k.units.end()) return expected_quantity(k, in_quotes(text), unit);
  switch (scale(d, *it, k.whole, out, k.max_rounding)) {
    case ScaleResult::Ok: return "";
    case ScaleResult::Rounded:
      return in_quotes(text) + " is not a whole number of " + std::string(k.base) + ": it would be read as " +
             std::to_string(out) + " " + std::string(k.base) + " (" + std::string(k.noun) + "s are whole " +
             std::string(k.base) + ", kept within 1 part in a million)";
    case ScaleResult::TooLarge:
      return in_quotes(text) + " is too large (at most " + std::to_string(std::numeric_limits<std::int64_t>::max()) +
             " " + std::string(k.base) + ")";
    case ScaleResult::NotWhole: return in_quotes(text) + " is not a whole number of bytes";
  }
  return "";
}

sim::Time parse_time(const std::string& text, const std::string& where) { return parse_or_throw(text, kTime, where); }
sim::Bytes parse_bytes(const std::string& text, const std::string& where) { return parse_or_throw(text, kSize, where); }
sim::Bandwidth parse_bandwidth(const std::string& text, const std::string& where) {
  return sim::Bandwidth{parse_or_throw(text, kRate, where)};
}

double parse_frequency_hz(const std::string& text, const std::string& where) {
  // A frequency is a double (Hz): convert exactly as for the integer kinds,
  // then once to double, so "900 MHz" is exactly 9e8.
  Decimal d;
  std::string_view unit;
  const auto prefix = [&](const std::string& msg) { return where.empty() ? msg : where + ": " + msg; };
  const SplitResult s = split_quantity(text, d, unit);
  if (s == SplitResult::TooManyDigits)
    throw_config(
        prefix(in_quotes(text) + " has too many significant digits (at most " + std::to_string(kMaxDigits) + ")"));
  const auto it = std::find_if(std::begin(kFrequencyUnits), std::end(kFrequencyUnits),
                               [&](const Unit& u) { return u.name == unit; });
  if (s == SplitResult::NoNumber || it == std::end(kFrequencyUnits))
    throw_config(prefix(expected_quantity(kFrequency, in_quotes(text), unit)));
  const long double x = static_cast<long double>(d.mantissa) * std::pow(10.0L, d.exp10) * it->num;
  if (!std::isfinite(static_cast<double>(x))) throw_config(prefix(in_quotes(text) + " is too large"));
  return static_cast<double>(d.negative ? -x : x);
}

std::string format_time(sim::Time t) {
  return format_with(t, {{"s", k1e12, 1}, {"ms", k1e9, 1}, {"us", k1e6, 1}, {"ns", k1e3, 1}, {"ps", 1, 1}}, "0 ns");
}

std::string format_bytes(sim::Bytes b, ByteUnits units) {
  switch (units) {
    case ByteUnits::Exact:
      return format_with(b,
                         {{"GiB", 1LL << 30, 1},
                          {"MiB", 1LL << 20, 1},
                          {"KiB", 1LL << 10, 1},
                          {"GB", k1e9, 1},
                          {"MB", k1e6, 1},
                          {"KB", k1e3, 1},
                          {"B", 1, 1}},
                         "0 B");
    case ByteUnits::UpToMiB:
      if (b >= sim::kMiB && b % sim::kMiB == 0) return std::to_string(b / sim::kMiB) + " MiB";
      [[fallthrough]];
    case ByteUnits::UpToKiB:
      if (b >= sim::kKiB && b % sim::kKiB == 0) return std::to_string(b / sim::kKiB) + " KiB";
      return std::to_string(b) + " B";
    case ByteUnits::Rounded:
      for (const Unit u : {Unit{"GiB", sim::kGiB, 1}, Unit{"MiB", sim::kMiB, 1}, Unit{"KiB", sim::kKiB, 1}}) {
        if (b < u.num) continue;
        if (b % u.num == 0) return std::to_string(b / u.num) + " " + std::string(u.name);
        char buf[48];
        std::snprintf(buf, sizeof buf, "%.2f %s", static_cast<double>(b) / static_cast<double>(u.num),
                      std::string(u.name).c_str());
        return buf;
      }
      return std::to_string(b) + " B";
  }
  return std::to_string(b) + " B";
}

std::string format_bandwidth(sim::Bandwidth bw) {
  return format_with(bw.bytes_per_s,
                     {{"TB/s", k1e12, 1}, {"GB/s", k1e9, 1}, {"MB/s", k1e6, 1}, {"KB/s", k1e3, 1}, {"B/s", 1, 1}},
                     "0 B/s");
}

std::string format_mhz(std::int64_t hz) { return std::to_string(hz / 1'000'000) + " MHz"; }

std::string format_energy_per_byte(std::int64_t aj_per_byte) {
  return aj_per_byte % 8 == 0 ? micro_decimal(aj_per_byte / 8) + " pJ/bit" : micro_decimal(aj_per_byte) + " pJ/B";
}
std::string format_energy_per_flop(std::int64_t aj_per_flop) { return micro_decimal(2 * aj_per_flop) + " pJ/MAC"; }
std::string format_power(std::int64_t uw) { return micro_decimal(uw) + " W"; }

}  // namespace kernbench::config

// text.hpp -- small text helpers of the config layer: quoting, joining,
// trimming, printable messages and "did you mean" suggestions.
//
// Every ConfigError message goes through printable() (via throw_config):
// messages carry user text (keys, values, file names) and end up as Python
// str, so they must stay valid, one-line UTF-8.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kernbench::config {

std::string in_quotes(std::string_view s);
/// `s` itself when short, else its first `keep` bytes (whole UTF-8
/// characters), "..." and its length: long user text stays out of messages.
std::string shortened(std::string_view s, std::size_t keep = 60);
/// Valid UTF-8 kept; control bytes and invalid UTF-8 escaped as \xNN.
std::string printable(std::string_view s);
/// Throws ConfigError(printable(message)).
[[noreturn]] void throw_config(const std::string& message);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view trim(std::string_view s);
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
/// Levenshtein distance.
std::size_t edit_distance(std::string_view a, std::string_view b);
/// "; did you mean "x"?" when one candidate is within two edits, else "".
std::string suggestion(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace kernbench::config

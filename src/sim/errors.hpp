// errors.hpp -- the typed errors of the library.
//
// The library never exits or prints: it throws one of these, the bindings
// map each to a Python exception, and only the CLI turns them into exit codes.
// Context (a process name, a YAML path, an op) is prepended as an error
// travels up, so the final message reads outermost-first.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace kernbench {

/// Base of every error kernbench throws on purpose.
class Error : public std::exception {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  /// Prefix the message with where it happened: "ctx: message".
  void add_context(std::string_view context) { message_ = std::string(context) + ": " + message_; }

 private:
  std::string message_;
};

/// A configuration (YAML file, override, parameter) is wrong.
class ConfigError : public Error {
  using Error::Error;
};
/// A machine graph cannot be built or routed.
class TopologyError : public Error {
  using Error::Error;
};
/// A program can never finish: ops wait on something that never happens.
class DeadlockError : public Error {
  using Error::Error;
};
/// A resource budget (scratch, pool, slots) is exceeded.
class CapacityError : public Error {
  using Error::Error;
};
/// A simulated process failed with a non-kernbench exception.
class ProcessError : public Error {
  using Error::Error;
};
/// An API was called with arguments that make no sense (negative delay,
/// running backwards in time...).
class UsageError : public Error {
  using Error::Error;
};
/// A run hit a guard the user set (max_events, max_time): a runaway model.
class LimitError : public Error {
  using Error::Error;
};
/// A schedule does not compute what it claims (the symbolic check of a
/// collective found a rank's slice missing data or holding some twice).
class VerificationError : public Error {
  using Error::Error;
};
/// The simulator broke one of its own invariants (a bug, not bad input).
class InternalError : public Error {
  using Error::Error;
};

}  // namespace kernbench

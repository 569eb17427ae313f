// Errors: every failure tandem reports is a tandem::Error whose message starts with the
// operation's name in brackets and says what was expected and what was found, e.g.
//   "[idx] /data/train-images-idx3-ubyte: expected magic 0x00000803, found 0x1f8b0808".
// Thread-safety: the functions here are reentrant.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tandem {

/// What kind of failure an Error reports; the CLI maps each to an exit code (usage and
/// input errors exit with 2, everything else with 1).
enum class ErrorCode {
  invalid_argument,  // bad flag, shape, dtype or configuration
  io,                // a file could not be opened, read or written
  format,            // a file's contents are not what its format says (magic, sizes, truncation)
  not_available,     // a device or backend this build or machine does not have
  out_of_memory,     // an allocation failed
  numerical,         // NaN or inf where a finite value was required (e.g. a loss)
  internal,          // a broken invariant: a bug in tandem
  distributed,       // a peer rank died, hung, or disagrees (flags, model) in a multi-process run
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

/// Throws Error(code, "[op] message").
[[noreturn]] void throw_error(ErrorCode code, const std::string& op, const std::string& message);

}  // namespace tandem

/// Checks a condition on user input; on failure throws Error(code, "[op] formatted message").
#define TD_CHECK(cond, code, op, ...)                                              \
  do {                                                                             \
    if (!(cond)) ::tandem::throw_error(code, op, ::fmt::format(__VA_ARGS__));      \
  } while (0)

/// Shorthand for invalid_argument checks, the common case.
#define TD_CHECK_ARG(cond, op, ...) TD_CHECK(cond, ::tandem::ErrorCode::invalid_argument, op, __VA_ARGS__)

/// Checks an invariant that cannot fail unless tandem has a bug; names file and line.
#define TD_ASSERT(cond)                                                                     \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::tandem::throw_error(::tandem::ErrorCode::internal, "internal",                      \
                            ::fmt::format("{}:{}: assertion failed: {}", __FILE__, __LINE__, \
                                          #cond));                                          \
  } while (0)

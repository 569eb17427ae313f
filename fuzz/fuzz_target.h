// Shared pieces of the fuzz targets in fuzz/: each target defines LLVMFuzzerTestOneInput and
// feeds the bytes through the same entry point a user's file takes (a file on disk where the
// reader takes a path). tandem::Error is the expected outcome for bad bytes; anything else
// escaping (another exception, a crash, a sanitizer report) is a finding.
// Built two ways: with clang's libFuzzer (-DTANDEM_FUZZ=ON), and under any compiler as a plain
// replay test (replay_main.cpp runs every file of the committed corpus once; ctest fuzz_*).
// Thread-safety: none; one input at a time per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tandem::fuzz {

/// A folder private to this process (created on first use, under $TMPDIR or /tmp), for
/// targets whose reader takes a path. Throws std::runtime_error if it cannot be made.
const std::string& scratch_dir();

/// Writes `size` bytes to scratch_dir()/name (replacing it) and returns the path.
std::string write_scratch(const std::string& name, const uint8_t* data, size_t size);

/// Runs `fn`; a tandem::Error is swallowed (the expected outcome for bad input), everything
/// else propagates so libFuzzer (or the replay main) reports it. With TANDEM_FUZZ_VERBOSE=1
/// in the environment each input's outcome ("ok" or the error's line) goes to stderr.
void report(const char* outcome);

template <typename F>
int expect_error_or_ok(F&& fn) {
  try {
    fn();
    report("ok");
  } catch (const tandem::Error& e) {
    report(e.what());
  }
  return 0;
}

}  // namespace tandem::fuzz

// System information for `tandem info`: devices, memory, backend library versions, SIMD level.
#pragma once

#include <string>

namespace tandem::train {

/// Multi-line human-readable report. Never throws for a missing device or library: it says so.
std::string system_info();

}  // namespace tandem::train

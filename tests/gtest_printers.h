// GoogleTest printers for tandem's small value types, found by argument-dependent lookup:
// parameterised tests then show "avx2", "bf16", "virt:2" in failure messages and in the
// test names ctest lists, instead of byte dumps ("1-byte object <01>").
#pragma once

#include <ostream>

#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/optim_ops.h"

namespace tandem {
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
inline void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }
}  // namespace tandem

namespace tandem::ops {
inline void PrintTo(SimdLevel level, std::ostream* os) { *os << simd_level_name(level); }
}  // namespace tandem::ops

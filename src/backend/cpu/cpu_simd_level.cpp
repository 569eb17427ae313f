// Run-time choice of the kernels' instruction-set level.
#include <atomic>
#include <cstdlib>
#include <string>

#include "tandem/cpu_isa.h"
#include "tandem/error.h"
#include "tandem/optim_ops.h"

namespace tandem::ops {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_forced{kUnset};

SimdLevel level_from_env() {
  const char* env = std::getenv("TANDEM_SIMD");
  if (env == nullptr || *env == '\0') return best_simd_level();
  const SimdLevel level = parse_simd_level(env);
  TD_CHECK(simd_level_supported(level), ErrorCode::not_available, "simd",
           "TANDEM_SIMD={} asks for a level this CPU does not support (best here: {})", env,
           simd_level_name(best_simd_level()));
  return level;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "?";
}

const char* simd_level_name() { return simd_level_name(simd_level()); }

SimdLevel parse_simd_level(const std::string& name) {
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512})
    if (name == simd_level_name(l)) return l;
  throw_error(ErrorCode::invalid_argument, "simd",
              "unknown SIMD level '" + name + "' (expected scalar, avx2 or avx512)");
}

// The instruction-set level in use (tandem/cpu_isa.h: the CPU's, capped by TANDEM_MAX_CPU_ISA).
bool simd_level_supported(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return true;
    case SimdLevel::avx2: return cpu_isa() >= CpuIsa::avx2;
    case SimdLevel::avx512: return cpu_isa() >= CpuIsa::avx512;
  }
  return false;
}

SimdLevel best_simd_level() {
  for (SimdLevel l : {SimdLevel::avx512, SimdLevel::avx2})
    if (simd_level_supported(l)) return l;
  return SimdLevel::scalar;
}

SimdLevel simd_level() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced != kUnset) return static_cast<SimdLevel>(forced);
  static const SimdLevel from_env = level_from_env();  // throws again on the next call if bad
  return from_env;
}

void set_simd_level(SimdLevel level) {
  TD_CHECK(simd_level_supported(level), ErrorCode::not_available, "simd",
           "set_simd_level({}): this CPU does not support it (best here: {})",
           simd_level_name(level), simd_level_name(best_simd_level()));
  g_forced.store(static_cast<int>(level), std::memory_order_relaxed);
}

}  // namespace tandem::ops

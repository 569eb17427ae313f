// The probe behind cpu::has_avx512() (cpu_isa.h).
#include "backend/cpu/cpu_isa.h"

#include <cstdlib>
#include <cstring>

namespace tandem::ops::cpu {

bool has_avx512() {
  static const bool ok = [] {
    const char* force = std::getenv("TANDEM_CPU_KERNELS");
    if (force && std::strcmp(force, "baseline") == 0) return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }();
  return ok;
}

}  // namespace tandem::ops::cpu

// The cpu backend instance, thread control and version string.
#include <omp.h>

#include <algorithm>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_f16.h"
#include "tandem/cpu_isa.h"

namespace tandem::ops {
namespace {

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

Backend& cpu_backend() {
  static CpuBackend b;
  return cpu::f16_storage_backend(b);  // f16 ops through f32 (cpu_f16.h)
}

// Never more than OMP_THREAD_LIMIT: oneDNN sizes its work split and its barriers by the team it
// asks for (omp_get_max_threads()), and a team cut short by the limit then leaves part of a
// product uncomputed or waits at a barrier for threads that never come.
void set_num_threads(int n) {
  TD_CHECK_ARG(n >= 1, "set_num_threads", "expected a thread count >= 1, found {}", n);
  omp_set_num_threads(std::min(n, omp_get_thread_limit()));
}

int get_num_threads() { return std::min(omp_get_max_threads(), omp_get_thread_limit()); }

std::string backend_versions() {
  apply_cpu_isa_cap();  // before oneDNN settles its ISA (tandem/cpu_isa.h)
  const dnnl::version_t* v = dnnl::version();
  return fmt::format("oneDNN {}.{}.{} (cpu, OpenMP runtime, isa {})", v->major, v->minor, v->patch,
                     isa_name(dnnl::get_effective_cpu_isa()));
}

}  // namespace tandem::ops

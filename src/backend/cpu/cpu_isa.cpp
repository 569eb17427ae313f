// The CPU's instruction-set level (tandem/cpu_isa.h) and the probe behind cpu::has_avx512()
// (cpu_isa.h).
#include "backend/cpu/cpu_isa.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cpuid.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tandem/cpu_isa.h"
#include "tandem/error.h"

namespace tandem::ops {
namespace {

constexpr CpuIsa kAll[] = {CpuIsa::x86_64, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16, CpuIsa::amx};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// oneDNN's variable (upper case, its own names) mapped onto tandem's levels, never below avx2.
std::optional<CpuIsa> onednn_cap() {
  const char* v = env("ONEDNN_MAX_CPU_ISA");
  if (!v) v = env("DNNL_MAX_CPU_ISA");
  if (!v) return std::nullopt;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  if (s == "ALL") return std::nullopt;
  if (s.rfind("AVX512_CORE_AMX", 0) == 0) return CpuIsa::amx;
  if (s == "AVX512_CORE_BF16") return CpuIsa::avx512_bf16;
  if (s.rfind("AVX512", 0) == 0) return CpuIsa::avx512;
  return CpuIsa::avx2;  // SSE41, AVX, AVX2, AVX2_VNNI: tandem itself stays at the floor
}

dnnl::cpu_isa onednn_isa(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::x86_64: return dnnl::cpu_isa::sse41;
    case CpuIsa::avx2: return dnnl::cpu_isa::avx2;
    case CpuIsa::avx512: return dnnl::cpu_isa::avx512_core;
    case CpuIsa::avx512_bf16: return dnnl::cpu_isa::avx512_core_bf16;
    case CpuIsa::amx: return dnnl::cpu_isa::avx512_core_amx;
  }
  return dnnl::cpu_isa::all;
}

// The level TANDEM_MAX_CPU_ISA asks for, nullopt when unset; throws for a bad value.
std::optional<CpuIsa> tandem_cap() {
  const char* v = env("TANDEM_MAX_CPU_ISA");
  if (!v) return std::nullopt;
  const auto isa = parse_cpu_isa(v);
  TD_CHECK_ARG(isa.has_value(), "cpu", "TANDEM_MAX_CPU_ISA={}: expected one of x86_64, avx2, avx512, avx512_bf16, amx",
               v);
  return isa;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::x86_64: return "x86_64";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::amx: return "amx";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(const std::string& name) {
  std::string s(name);
  for (char& c : s) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (CpuIsa isa : kAll)
    if (s == cpu_isa_name(isa)) return isa;
  return std::nullopt;
}

CpuFeatures cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures r;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return r;
    const bool fma = c & (1u << 12), f16c = c & (1u << 29), osxsave = c & (1u << 27);
    // XCR0 (xgetbv 0): the state the OS saves on a context switch. AVX needs XMM and YMM
    // (bits 1, 2), AVX-512 the opmask and upper ZMM state (5, 6, 7), AMX the tile config and
    // data (17, 18). Intel SDM vol. 1, 13.3.
    uint64_t xcr0 = 0;
    if (osxsave) {
      uint32_t lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      xcr0 = uint64_t{hi} << 32 | lo;
    }
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    const bool os_amx = (xcr0 & 0x60000) == 0x60000;
    r.fma = fma && os_avx;
    r.f16c = f16c && os_avx;
    unsigned max_leaf = 0, unused = 0;
    __get_cpuid(0, &max_leaf, &unused, &unused, &unused);
    if (max_leaf < 7) return r;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    const unsigned leaf7_max_subleaf = a;
    r.avx2 = (b & (1u << 5)) && os_avx;
    r.avx512f = (b & (1u << 16)) && os_avx512;
    r.avx512dq = (b & (1u << 17)) && os_avx512;
    r.avx512bw = (b & (1u << 30)) && os_avx512;
    r.avx512vl = (b & (1u << 31)) && os_avx512;
    r.amx_bf16 = (d & (1u << 22)) && os_amx;
    r.amx_tile = (d & (1u << 24)) && os_amx;
    if (leaf7_max_subleaf >= 1) {
      __get_cpuid_count(7, 1, &a, &b, &c, &d);
      r.avx512_bf16 = (a & (1u << 5)) && os_avx512;
    }
    return r;
  }();
  return f;
}

CpuIsa detected_cpu_isa() {
  static const CpuIsa isa = [] {
    const CpuFeatures f = cpu_features();
    if (!(f.avx2 && f.fma && f.f16c)) return CpuIsa::x86_64;
    if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return CpuIsa::avx2;
    if (!f.avx512_bf16) return CpuIsa::avx512;
    if (!(f.amx_bf16 && f.amx_tile)) return CpuIsa::avx512_bf16;
    return CpuIsa::amx;
  }();
  return isa;
}

CpuIsa cpu_isa() {
  CpuIsa isa = detected_cpu_isa();
  if (const auto cap = tandem_cap()) isa = std::min(isa, *cap);
  if (const auto cap = onednn_cap()) isa = std::min(isa, std::max(*cap, CpuIsa::avx2));
  return isa;
}

std::string cpu_floor_problem() {
  const CpuIsa isa = cpu_isa();
  if (isa >= kCpuFloor) return "";
  std::string missing;
  if (detected_cpu_isa() >= kCpuFloor) {
    missing = "TANDEM_MAX_CPU_ISA=x86_64 limits this CPU below AVX2";
  } else {
    const CpuFeatures f = cpu_features();
    const std::pair<const char*, bool> floor[] = {{"avx2", f.avx2}, {"fma", f.fma}, {"f16c", f.f16c}};
    for (const auto& [name, has] : floor) {
      if (has) continue;
      std::string up(name);
      for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      missing += (missing.empty() ? "this CPU lacks " : " and ") + up;
    }
  }
  return missing + ": tandem needs an x86-64 CPU with AVX2, FMA and F16C (Intel Haswell, AMD Zen or newer)";
}

void apply_cpu_isa_cap() noexcept {
  static const bool done = [] {
    try {
      // oneDNN reads its own variable; tandem's sets oneDNN's cap only where that one is unset.
      if (env("TANDEM_MAX_CPU_ISA") && !env("ONEDNN_MAX_CPU_ISA") && !env("DNNL_MAX_CPU_ISA")) {
        const CpuIsa isa = cpu_isa();
        if (isa < detected_cpu_isa()) (void)dnnl::set_max_cpu_isa(onednn_isa(isa));
      }
    } catch (...) {  // a bad TANDEM_MAX_CPU_ISA: cpu_isa() reports it to the caller that asks
    }
    return true;
  }();
  (void)done;
}

namespace cpu {

bool has_avx512() {
  static const bool ok = [] {
    const char* force = std::getenv("TANDEM_CPU_KERNELS");
    if (force && std::strcmp(force, "baseline") == 0) return false;
    return cpu_isa() >= CpuIsa::avx512;
  }();
  return ok;
}

}  // namespace cpu
}  // namespace tandem::ops

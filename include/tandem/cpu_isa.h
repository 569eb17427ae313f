// The CPU's instruction-set level as tandem's cpu backend uses it, one switch for everything
// that depends on it: oneDNN's dispatch, tandem's own loop kernels (AVX-512 or baseline), the
// optimizer kernels' SIMD level, and whether bf16 is computed natively or stored only.
//
// Levels, each including the ones before it:
//  - x86_64:      below tandem's floor (no AVX2 or no FMA or no F16C). `tandem` refuses to
//                 start on such a CPU (cpu_floor_problem()).
//  - avx2:        AVX2 + FMA + F16C: the floor (AMD Zen 1-3, Intel Haswell and later).
//  - avx512:      AVX-512 F, BW, VL and DQ (oneDNN's avx512_core): tandem's AVX-512 loop
//                 kernels, and oneDNN's bf16 convolutions and matmuls (emulated in f32 FMAs).
//  - avx512_bf16: + AVX512_BF16 (oneDNN's avx512_core_bf16: native bf16 dot products).
//  - amx:         + AMX-BF16 and AMX-TILE (oneDNN's avx512_core_amx).
//
// The level in use is the CPU's (CPUID), capped by the environment, read once per process:
//  - TANDEM_MAX_CPU_ISA=x86_64|avx2|avx512|avx512_bf16|amx caps every decision above and
//    oneDNN's dispatch (dnnl::set_max_cpu_isa), so one machine behaves as a lesser one;
//    x86_64 makes `tandem` refuse to start, as on a CPU below the floor.
//  - ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA), oneDNN's own variable, caps tandem too, but
//    never below avx2 (oneDNN dispatching SSE4.1 code on an AVX2 machine is still a machine at
//    the floor).
// Thread-safety: every function here is thread-safe (the level is computed once).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::ops {

enum class CpuIsa : uint8_t { x86_64, avx2, avx512, avx512_bf16, amx };

/// tandem's floor: x86-64 with AVX2, FMA and F16C.
inline constexpr CpuIsa kCpuFloor = CpuIsa::avx2;

/// "x86_64", "avx2", "avx512", "avx512_bf16" or "amx".
const char* cpu_isa_name(CpuIsa isa);

/// The level named `name` (as cpu_isa_name writes it; case-insensitive, '-' for '_'), or
/// nullopt.
std::optional<CpuIsa> parse_cpu_isa(const std::string& name);

/// The instruction-set features the levels are made of, each true only when the CPU has it
/// (CPUID leaf 1 ECX: FMA bit 12, F16C bit 29; leaf 7 subleaf 0 EBX: AVX2 bit 5, AVX512F 16,
/// AVX512DQ 17, AVX512BW 30, AVX512VL 31; EDX: AMX-BF16 bit 22, AMX-TILE 24; leaf 7 subleaf 1
/// EAX: AVX512_BF16 bit 5) and the OS saves its registers (XCR0 through xgetbv: bits 1-2 for
/// AVX, 5-7 for AVX-512, 17-18 for AMX tiles). Source: Intel SDM vol. 2A (CPUID), vol. 1 13.3.
/// Read once per process; ignores the environment.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, amx_bf16 = false, amx_tile = false;
};
CpuFeatures cpu_features();

/// What this CPU has (cpu_features(), ranked into the levels above), ignoring the environment.
CpuIsa detected_cpu_isa();

/// The level in use: detected_cpu_isa() capped by TANDEM_MAX_CPU_ISA and ONEDNN_MAX_CPU_ISA
/// (above). Throws Error(invalid_argument) naming the variable and the accepted values when
/// TANDEM_MAX_CPU_ISA holds anything else (on every call, so the error is not lost).
CpuIsa cpu_isa();

/// "" when cpu_isa() meets the floor; otherwise one line naming what is missing and the
/// floor, e.g. "this CPU lacks AVX2 and FMA: tandem needs an x86-64 CPU with AVX2, FMA and
/// F16C (Intel Haswell, AMD Zen or newer)". Throws as cpu_isa().
std::string cpu_floor_problem();

/// Caps oneDNN's dispatch at cpu_isa() when the environment caps it. Called by the cpu
/// backend before its first oneDNN primitive; has effect only on the first call. Never throws.
void apply_cpu_isa_cap() noexcept;

}  // namespace tandem::ops

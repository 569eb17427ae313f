// The instruction-set switch (tandem/cpu_isa.h): names, the caps from the environment, the
// floor's message, and the `tandem` command refusing a CPU below the floor.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "tandem/cpu_isa.h"
#include "tandem/error.h"
#include "tandem/optim_ops.h"
#include "train/run_tandem.h"

using namespace tandem;
using namespace tandem::ops;

namespace {

// Sets one environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(CpuIsa, NamesRoundTrip) {
  for (CpuIsa isa : {CpuIsa::x86_64, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16, CpuIsa::amx})
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa) << cpu_isa_name(isa);
  EXPECT_EQ(parse_cpu_isa("AVX512-BF16"), CpuIsa::avx512_bf16);
  EXPECT_EQ(parse_cpu_isa("x86-64"), CpuIsa::x86_64);
  EXPECT_FALSE(parse_cpu_isa("avx3").has_value());
  EXPECT_FALSE(parse_cpu_isa("").has_value());
}

TEST(CpuIsa, TheBuildMachineMeetsTheFloor) {
  // Every machine the suite runs on is at the floor or above; a lesser one stops at `tandem`.
  EXPECT_GE(detected_cpu_isa(), kCpuFloor) << cpu_isa_name(detected_cpu_isa());
  EXPECT_LE(cpu_isa(), detected_cpu_isa());
}

// The flags Linux lists for the first CPU in /proc/cpuinfo (the kernel clears a flag whose
// register state it does not save, as cpu_features() does through XCR0); empty elsewhere.
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuIsa, FeaturesAgreeWithTheKernelsFlags) {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "needs Linux's /proc/cpuinfo";
  const CpuFeatures f = cpu_features();
  const std::pair<const char*, bool> expected[] = {
      {"avx2", f.avx2},         {"fma", f.fma},
      {"f16c", f.f16c},         {"avx512f", f.avx512f},
      {"avx512bw", f.avx512bw}, {"avx512vl", f.avx512vl},
      {"avx512dq", f.avx512dq}, {"avx512_bf16", f.avx512_bf16},
      {"amx_bf16", f.amx_bf16}, {"amx_tile", f.amx_tile}};
  for (const auto& [name, has] : expected) EXPECT_EQ(flags.count(name) == 1, has) << name;
  // The level is the features ranked: the floor exactly when AVX2, FMA and F16C are all there.
  EXPECT_EQ(detected_cpu_isa() >= kCpuFloor, f.avx2 && f.fma && f.f16c);
  EXPECT_EQ(detected_cpu_isa() >= CpuIsa::avx512,
            f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
}

TEST(CpuIsa, TandemsVariableCapsTheLevel) {
  {
    ScopedEnv e("TANDEM_MAX_CPU_ISA", "avx2");
    EXPECT_EQ(cpu_isa(), CpuIsa::avx2);
    EXPECT_EQ(cpu_floor_problem(), "");
  }
  {
    ScopedEnv e("TANDEM_MAX_CPU_ISA", "amx"), o("ONEDNN_MAX_CPU_ISA", "ALL");  // a cap above the CPU
    EXPECT_EQ(cpu_isa(), detected_cpu_isa());
  }
  {
    ScopedEnv e("TANDEM_MAX_CPU_ISA", "x86_64");
    EXPECT_EQ(cpu_isa(), CpuIsa::x86_64);
    EXPECT_EQ(cpu_floor_problem(),
              "TANDEM_MAX_CPU_ISA=x86_64 limits this CPU below AVX2: tandem needs an x86-64 CPU with AVX2, FMA and "
              "F16C (Intel Haswell, AMD Zen or newer)");
  }
}

TEST(CpuIsa, ABadValueIsNamed) {
  ScopedEnv e("TANDEM_MAX_CPU_ISA", "avx3");
  try {
    (void)cpu_isa();
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(err.what(), "[cpu] TANDEM_MAX_CPU_ISA=avx3: expected one of x86_64, avx2, avx512, avx512_bf16, amx");
  }
}

TEST(CpuIsa, OneDnnsVariableCapsTandemButNotBelowTheFloor) {
  ScopedEnv t("TANDEM_MAX_CPU_ISA", "amx");
  {
    ScopedEnv e("ONEDNN_MAX_CPU_ISA", "SSE41");
    EXPECT_EQ(cpu_isa(), CpuIsa::avx2);
    EXPECT_EQ(cpu_floor_problem(), "");
  }
  {
    ScopedEnv e("ONEDNN_MAX_CPU_ISA", "AVX512_CORE");
    EXPECT_EQ(cpu_isa(), std::min(detected_cpu_isa(), CpuIsa::avx512));
  }
}

TEST(CpuIsa, TheSimdLevelFollowsTheCap) {
  // The optimizer kernels' levels are bounded by the level in use (read when asked).
  EXPECT_EQ(simd_level_supported(SimdLevel::avx512), cpu_isa() >= CpuIsa::avx512);
  EXPECT_TRUE(simd_level_supported(SimdLevel::avx2));
  ScopedEnv e("TANDEM_MAX_CPU_ISA", "avx2");
  EXPECT_FALSE(simd_level_supported(SimdLevel::avx512));
  EXPECT_EQ(best_simd_level(), SimdLevel::avx2);
}

TEST(CpuIsa, TandemRefusesACpuBelowTheFloorInOneLine) {
  const auto r = tandem::testing::run_tandem("info", "2>&1", "TANDEM_MAX_CPU_ISA=x86_64");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out,
            "tandem: error: TANDEM_MAX_CPU_ISA=x86_64 limits this CPU below AVX2: tandem needs an x86-64 CPU with "
            "AVX2, FMA and F16C (Intel Haswell, AMD Zen or newer)\n");
  const auto bad = tandem::testing::run_tandem("info", "2>&1", "TANDEM_MAX_CPU_ISA=avx3");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_EQ(bad.out,
            "tandem: error: [cpu] TANDEM_MAX_CPU_ISA=avx3: expected one of x86_64, avx2, avx512, avx512_bf16, amx\n");
}

TEST(CpuIsa, InfoNamesTheLevelAndTheBf16Path) {
  const auto r = tandem::testing::run_tandem("info", "2>&1", "TANDEM_MAX_CPU_ISA=avx2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("instruction set avx2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16 stored, computed in f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("isa avx2)"), std::string::npos) << r.out;  // oneDNN capped too
}

}  // namespace

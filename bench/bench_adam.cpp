// Adam/AdamW step throughput of the flat kernels at each SIMD level this CPU supports,
// against the memory-bandwidth ceiling measured in the same run (STREAM-style triad).
// Usage: bench_adam [threads=2] [million_params=50] [repeats=10]
// Prints, per optimizer and level:
//   adam level <l> Mparams_per_s <x> GBps_28B <y> ceiling_frac <z> step_s <t>
// where GBps_28B counts 28 bytes per parameter (read param, grad, exp_avg, exp_avg_sq = 16;
// write param, exp_avg, exp_avg_sq = 12) and ceiling_frac = Mparams_per_s / ceiling; then
//   triad_GBps <t> ceiling_Mparams_per_s <c>
// from a single-precision STREAM triad a[i] = b[i] + s*c[i] (McCalpin's STREAM, 3 arrays of
// floats, 12 bytes counted per element as STREAM does, best of 10), the ceiling being
// triad_GBps / 28 bytes. With few cores the triad's three streams can show less bandwidth than
// Adam's seven reach, so ceiling_frac may exceed 1; compare it between runs and machines.
// Compare with PyTorch: /usr/bin/python3 /work/shared/peers/torch_adam.py 50 2
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tandem/optim/kernels.h"
#include "tandem/tensor.h"

namespace {

using tandem::Tensor;
namespace optim = tandem::optim;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Pages are touched by the threads that will use them (first touch), as the kernels tile.
void parallel_fill(float* p, int64_t n, float value) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

// Single-precision STREAM triad over n floats per array; bytes per element: read b and c,
// write a = 12 (write-allocate traffic not counted, as STREAM).
double triad_gbps(int64_t n) {
  Tensor ta = Tensor::empty({n}), tb = Tensor::empty({n}), tc = Tensor::empty({n});
  float* a = ta.data<float>();
  float* b = tb.data<float>();
  float* c = tc.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  double best = 1e30;
  for (int r = 0; r < 10; ++r) {
    const double t0 = now_s();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    best = std::min(best, now_s() - t0);
  }
  if (a[7] != 7.0f) std::fprintf(stderr, "triad: unexpected a[7] = %g\n", static_cast<double>(a[7]));
  return 12.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t n = static_cast<int64_t>((argc > 2 ? std::atof(argv[2]) : 50.0) * 1e6);
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 10;
  if (threads < 1 || n < 1 || repeats < 1) {
    std::fprintf(stderr, "usage: bench_adam [threads>=1] [million_params>0] [repeats>=1]\n");
    return 2;
  }
  omp_set_num_threads(threads);
  std::printf("threads %d params %lld repeats %d best_level %s\n", threads,
              static_cast<long long>(n), repeats, optim::simd_level_name(optim::best_simd_level()));

  // 3 x 320 MB, far above the caches; measured before and after the Adam runs and the best
  // kept, so that a burst of other load on a shared machine does not lower the ceiling.
  constexpr int64_t kTriadElements = 80'000'000;
  double triad = triad_gbps(kTriadElements);

  Tensor param = Tensor::empty({n}), grad = Tensor::empty({n}), m = Tensor::empty({n}),
         v = Tensor::empty({n});
  parallel_fill(param.data<float>(), n, 0.5f);
  parallel_fill(grad.data<float>(), n, 0.01f);
  parallel_fill(m.data<float>(), n, 0.0f);
  parallel_fill(v.data<float>(), n, 0.0f);

  struct Result {
    const char* algo;
    optim::SimdLevel level;
    double seconds;  // best step time, 0 when the level is unsupported
  };
  std::vector<Result> results;
  for (bool decoupled : {false, true}) {
    for (optim::SimdLevel level :
         {optim::SimdLevel::scalar, optim::SimdLevel::avx2, optim::SimdLevel::avx512}) {
      if (!optim::simd_level_supported(level)) {
        results.push_back({decoupled ? "adamw" : "adam", level, 0.0});
        continue;
      }
      optim::set_simd_level(level);
      optim::AdamParams p;
      p.lr = 1e-3;
      p.weight_decay = 0.01;
      p.decoupled = decoupled;
      const int reps = level == optim::SimdLevel::scalar ? std::min(repeats, 3) : repeats;
      double best = 1e30;
      for (int r = 0; r < reps + 1; ++r) {  // the first call is a warm-up
        p.step = r + 1;
        const double t0 = now_s();
        optim::adam_step(param.data<float>(), grad.data<float>(), m.data<float>(),
                         v.data<float>(), n, p);
        const double t = now_s() - t0;
        if (r > 0) best = std::min(best, t);
      }
      results.push_back({decoupled ? "adamw" : "adam", level, best});
    }
  }
  triad = std::max(triad, triad_gbps(kTriadElements));
  const double ceiling = triad * 1e9 / 28.0 / 1e6;  // Mparams/s at 28 bytes per parameter
  for (const Result& r : results) {
    if (r.seconds == 0) {
      std::printf("%s level %s unsupported on this CPU\n", r.algo, optim::simd_level_name(r.level));
      continue;
    }
    const double mparams = static_cast<double>(n) / r.seconds / 1e6;
    std::printf("%s level %s Mparams_per_s %.0f GBps_28B %.1f ceiling_frac %.2f step_s %.4f\n", r.algo,
                optim::simd_level_name(r.level), mparams, 28.0 * mparams / 1e3, mparams / ceiling, r.seconds);
  }
  std::printf("triad_GBps %.1f ceiling_Mparams_per_s %.0f (float triad, 28 B/param)\n", triad, ceiling);
  return 0;
}

// Adam/AdamW step throughput of the flat kernels at each SIMD level this CPU supports,
// against two memory-bandwidth measurements taken in the same run.
// Usage: bench_adam [threads=2] [million_params=50] [repeats=10]
// Prints, per optimizer and level (Adam and AdamW calls alternating, best and median of
// `repeats` calls after a warm-up call each):
//   adam level <l> Mparams_per_s <x> GBps_28B <y> ceiling_frac <z> triad_frac <w> step_s <t>
//     median_Mparams_per_s <md>
// where GBps_28B counts 28 bytes per parameter (read param, grad, exp_avg, exp_avg_sq = 16;
// write param, exp_avg, exp_avg_sq = 12: the bytes that must cross the memory bus, the three
// written arrays being read first so there is no write-allocate traffic on top), then
//   bytes_per_param 28 ...
//   stream7_GBps <s> ceiling_Mparams_per_s <c>
//   triad_GBps <t> triad_Mparams_per_s <d>
// stream7 is Adam's access pattern without its arithmetic: four float arrays of the same size
// read and three of them written in place (p = h*p + g, m = h*m + g, v = h*v + g), static
// contiguous OpenMP tiles as the kernels use, 28 bytes per element, its best pass (10 before
// the optimizer runs, one after each Adam/AdamW pair of the SIMD levels, 10 after); the ceiling is
// stream7_GBps / 28 bytes and ceiling_frac = Mparams_per_s / ceiling, the fraction of the
// bandwidth this machine gives that pattern (1.0: the update runs at the DRAM limit). The
// triad is McCalpin's STREAM a[i] = b[i] + s*c[i] in single precision (12 bytes counted per
// element as STREAM does, write-allocate reads left out, best of 10) and triad_frac the same
// fraction against it; with few cores a triad's three streams can show less bandwidth than
// seven reach, so triad_frac may exceed 1. The triad is measured before and after the
// optimizer runs and the best kept (a burst of other load on a shared machine lowers one).
// Last, the page size's share: the same Adam step on the allocator's buffers (2 MiB pages for
// large ones, src/core/huge_pages.h) and on buffers held to 4 KiB pages, calls alternating:
//   pages adam level <l> Mparams_per_s_4KiB <a> Mparams_per_s_allocator <b> median_ratio <r>
// with r the median over the pairs of (4 KiB step time / allocator step time).
// Recorded figures: docs/benchmarks.md. PyTorch's Adam on the same machine: scripts/bench.sh
// (make bench) runs the peers' torch_adam.py 50 <threads> right after this and prints tandem's
// ratios to torch.optim.Adam and AdamW, default, foreach and fused.
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

// n floats of `value` in a host tensor, first touched as above.
Tensor filled(int64_t n, float value) {
  Tensor t = Tensor::empty({n});
  parallel_fill(t.data<float>(), n, value);
  return t;
}

// Fastest of 10 calls of `pass`, in seconds.
template <typename Pass>
double best_of_10(Pass pass) {
  double best = 1e30;
  for (int r = 0; r < 10; ++r) {
    const double t0 = now_s();
    pass();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

// Single-precision STREAM triad over n floats per array; bytes per element: read b and c,
// write a = 12 (write-allocate traffic not counted, as STREAM).
double triad_gbps(int64_t n) {
  Tensor ta = filled(n, 0.0f), tb = filled(n, 1.0f), tc = filled(n, 2.0f);
  float *a = ta.data<float>(), *b = tb.data<float>(), *c = tc.data<float>();
  const double best = best_of_10([&] {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
  });
  if (a[7] != 7.0f)
    std::fprintf(stderr, "triad: unexpected a[7] = %g\n", static_cast<double>(a[7]));
  return 12.0 * static_cast<double>(n) / best / 1e9;
}

// Adam's access pattern with trivial arithmetic over n floats per array: p, m and v read and
// written in place, g read; 28 bytes per element. pass() returns one pass's seconds.
class Stream7 {
 public:
  explicit Stream7(int64_t n)
      : n_(n),
        p_(filled(n, 0.5f)),
        g_(filled(n, 0.25f)),
        m_(filled(n, 0.0f)),
        v_(filled(n, 1.0f)) {}
  ~Stream7() {
    // Every array converges towards 2 * 0.25 = 0.5 (p starts there): reading the values back
    // keeps the stores observable.
    const float p = p_.data<float>()[7], m = m_.data<float>()[7], v = v_.data<float>()[7];
    if (p != 0.5f || !(m > 0.4f) || !(v < 0.6f))
      std::fprintf(stderr, "stream7: unexpected values %g %g %g\n", static_cast<double>(p),
                   static_cast<double>(m), static_cast<double>(v));
  }
  double pass() {
    float *p = p_.data<float>(), *g = g_.data<float>(), *m = m_.data<float>(),
          *v = v_.data<float>();
    const int64_t n = n_;
    const double t0 = now_s();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      p[i] = 0.5f * p[i] + gi;
      m[i] = 0.5f * m[i] + gi;
      v[i] = 0.5f * v[i] + gi;
    }
    return now_s() - t0;
  }
  double gbps(double seconds) const {
    return 28.0 * static_cast<double>(n_) / seconds / 1e9;
  }

 private:
  int64_t n_;
  Tensor p_, g_, m_, v_;
};

// Adam at the best level on the allocator's buffers (`on`: 2 MiB pages for buffers of 8 MiB and
// more, src/core/huge_pages.h) and on buffers held to 4 KiB pages (madvise MADV_NOHUGEPAGE), the
// calls alternating; prints the best of each and the median of the pairs' speed ratios.
void compare_pages(const Tensor* on, int64_t n, int repeats) {
  const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 4095) / 4096 * 4096;
  std::vector<std::unique_ptr<float, decltype(&std::free)>> small;
  for (int k = 0; k < 4; ++k) {
    float* p = static_cast<float*>(std::aligned_alloc(4096, bytes));
    if (!p) return;
#ifdef MADV_NOHUGEPAGE
    (void)madvise(p, bytes, MADV_NOHUGEPAGE);
#endif
    parallel_fill(p, n, k == 0 ? 0.5f : k == 1 ? 0.01f : 0.0f);
    small.emplace_back(p, &std::free);
  }
  optim::set_simd_level(optim::best_simd_level());
  optim::AdamParams p;
  p.weight_decay = 0.01;
  double best[2] = {1e30, 1e30};
  std::vector<double> ratios;
  for (int r = 0; r < repeats + 1; ++r) {  // the first pair is a warm-up
    double t[2];
    for (int side = 0; side < 2; ++side) {
      float* b[4];
      for (int k = 0; k < 4; ++k) b[k] = side == 0 ? small[k].get() : on[k].data<float>();
      p.step = r + 1;
      const double t0 = now_s();
      optim::adam_step(b[0], b[1], b[2], b[3], n, p);
      t[side] = now_s() - t0;
    }
    if (r == 0) continue;
    for (int side = 0; side < 2; ++side) best[side] = std::min(best[side], t[side]);
    ratios.push_back(t[0] / t[1]);
  }
  std::sort(ratios.begin(), ratios.end());
  const double mp = static_cast<double>(n) / 1e6;
  std::printf(
      "pages adam level %s Mparams_per_s_4KiB %.0f Mparams_per_s_allocator %.0f median_ratio %.3f"
      " (%zu alternating pairs)\n",
      optim::simd_level_name(optim::best_simd_level()), mp / best[0], mp / best[1],
      ratios[ratios.size() / 2], ratios.size());
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

  // Triad: 3 x 320 MB, far above the caches. stream7: as many elements as the optimizer's
  // arrays. Both measured before and after the Adam runs and the best kept, so that a burst of
  // other load on a shared machine does not lower the ceiling.
  constexpr int64_t kTriadElements = 80'000'000;
  double triad = triad_gbps(kTriadElements);
  Stream7 stream7_arrays(n);
  double stream7_s = best_of_10([&] { stream7_arrays.pass(); });

  Tensor param = filled(n, 0.5f), grad = filled(n, 0.01f), m = filled(n, 0.0f), v = filled(n, 0.0f);

  struct Result {
    const char* algo;
    optim::SimdLevel level;
    double seconds;  // best step time, 0 when the level is unsupported
    double median;   // median step time
  };
  std::vector<Result> results;
  // Per level, Adam and AdamW calls alternate (one warm-up call each first), so that both see
  // the same moments of a shared machine; the scalar level, a reference only, runs 2 calls each.
  for (optim::SimdLevel level :
       {optim::SimdLevel::scalar, optim::SimdLevel::avx2, optim::SimdLevel::avx512}) {
    if (!optim::simd_level_supported(level)) {
      results.push_back({"adam", level, 0.0, 0.0});
      results.push_back({"adamw", level, 0.0, 0.0});
      continue;
    }
    optim::set_simd_level(level);
    const int reps = level == optim::SimdLevel::scalar ? std::min(repeats, 2) : repeats;
    std::vector<double> times[2];
    for (int r = 0; r < reps + 1; ++r) {  // the first call of each is a warm-up
      for (int decoupled = 0; decoupled < 2; ++decoupled) {
        optim::AdamParams p;
        p.lr = 1e-3;
        p.weight_decay = 0.01;
        p.decoupled = decoupled == 1;
        p.step = r + 1;
        const double t0 = now_s();
        optim::adam_step(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(),
                         n, p);
        const double t = now_s() - t0;
        if (r > 0) times[decoupled].push_back(t);
      }
      // One stream7 pass after each pair, so that the ceiling sees the same moments too.
      if (level != optim::SimdLevel::scalar) stream7_s = std::min(stream7_s, stream7_arrays.pass());
    }
    for (int decoupled = 0; decoupled < 2; ++decoupled) {
      std::vector<double>& t = times[decoupled];
      std::sort(t.begin(), t.end());
      results.push_back({decoupled ? "adamw" : "adam", level, t.front(), t[t.size() / 2]});
    }
  }
  triad = std::max(triad, triad_gbps(kTriadElements));
  stream7_s = std::min(stream7_s, best_of_10([&] { stream7_arrays.pass(); }));
  const double stream7 = stream7_arrays.gbps(stream7_s);
  const double ceiling = stream7 * 1e9 / 28.0 / 1e6;      // Mparams/s at 28 bytes per parameter
  const double triad_mparams = triad * 1e9 / 28.0 / 1e6;  // the same from the triad's GB/s
  std::printf(
      "bytes_per_param 28 (read param, grad, exp_avg, exp_avg_sq; write param, exp_avg, "
      "exp_avg_sq)\n");
  for (const Result& r : results) {
    if (r.seconds == 0) {
      std::printf("%s level %s unsupported on this CPU\n", r.algo, optim::simd_level_name(r.level));
      continue;
    }
    const double mparams = static_cast<double>(n) / r.seconds / 1e6;
    std::printf(
        "%s level %s Mparams_per_s %.0f GBps_28B %.1f ceiling_frac %.2f triad_frac %.2f step_s "
        "%.4f "
        "median_Mparams_per_s %.0f\n",
        r.algo, optim::simd_level_name(r.level), mparams, 28.0 * mparams / 1e3, mparams / ceiling,
        mparams / triad_mparams, r.seconds, static_cast<double>(n) / r.median / 1e6);
  }
  std::printf(
      "stream7_GBps %.1f ceiling_Mparams_per_s %.0f (4 float arrays read, 3 written in place, 28 "
      "B/param)\n",
      stream7, ceiling);
  std::printf(
      "triad_GBps %.1f triad_Mparams_per_s %.0f (float STREAM triad, 12 B counted per element)\n",
      triad, triad_mparams);
  const Tensor buffers[4] = {param, grad, m, v};
  compare_pages(buffers, n, repeats);
  return 0;
}

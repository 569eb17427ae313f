// Time per call of the cpu pooling kernels on channels_last (NHWC) tensors against the NCHW
// kernels and against running the NCHW kernels on NCHW copies (convert in, pool, convert the
// outputs back: what channels_last pooling cost before it had its own kernels).
// Usage: bench_pool [threads=2] [repeats=50]
// Prints, per case, dtype and path, the fastest time of one call in microseconds (on a
// shared machine the fastest call is the one least disturbed by other work):
//   <op> <shape> <dtype> nhwc_us <a> nchw_us <b> nchw_copies_us <c>
// Cases: max pool 2x2 stride 2 forward with indices and backward on [128, 32, 28, 28] and
// [128, 64, 14, 14], and 3x3 stride 2 padding 1 (ResNet's stem pool) on [32, 64, 56, 56];
// global average pool forward and backward on [128, 512, 4, 4].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tandem/ops.h"
#include "tandem/tensor.h"

namespace {

using namespace tandem;

double best_us(int repeats, const std::function<void()>& f) {
  f();  // warm-up: pages touched, caches filled
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t.front();
}

Tensor random(const Shape& s, DType dt, MemoryFormat f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  uint32_t state = 12345;
  for (float& e : v) {
    state = state * 1664525u + 1013904223u;
    e = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  Tensor t = Tensor::from_vector(s, v);
  if (dt != DType::f32) t = t.to(dt);
  return ops::to_memory_format(t, f);
}

// An NCHW tensor of t's shape and dtype (the copy fallback's buffer).
Tensor other(const Tensor& t) {
  return Tensor::empty(t.shape(), t.dtype(), t.device(), MemoryFormat::contiguous);
}

void report(const char* op, const Shape& s, DType dt, double nhwc, double nchw, double copies) {
  std::printf("%-22s %-18s %-4s nhwc_us %9.1f nchw_us %9.1f nchw_copies_us %9.1f\n", op,
              shape_str(s).c_str(), dtype_name(dt), nhwc, nchw, copies);
}

void bench_max_pool(const char* name, const ops::Pool2dParams& p, const Shape& xs, DType dt,
                    int repeats) {
  const Shape ys = ops::max_pool2d_output_shape(xs, p);
  double fwd[3], bwd[3];
  for (int f = 0; f < 2; ++f) {
    const MemoryFormat mf = f == 0 ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    const Tensor x = random(xs, dt, mf), dy = random(ys, dt, mf);
    const Tensor y = Tensor::empty(ys, dt, {}, mf), idx = Tensor::empty(ys, DType::i32, {}, mf);
    const Tensor dx = Tensor::empty(xs, dt, {}, mf);
    fwd[f] = best_us(repeats, [&] { ops::max_pool2d_forward(x, p, y, idx); });
    bwd[f] = best_us(repeats, [&] { ops::max_pool2d_backward(dy, idx, p, dx); });
    if (f == 1) continue;
    const Tensor xc = other(x), yc = other(y), ic = other(idx), dyc = other(dy), dxc = other(dx);
    fwd[2] = best_us(repeats, [&] {
      ops::convert_memory_format(x, xc);
      ops::max_pool2d_forward(xc, p, yc, ic);
      ops::convert_memory_format(ic, idx);
      ops::convert_memory_format(yc, y);
    });
    bwd[2] = best_us(repeats, [&] {
      ops::convert_memory_format(dy, dyc);
      ops::convert_memory_format(idx, ic);
      ops::max_pool2d_backward(dyc, ic, p, dxc);
      ops::convert_memory_format(dxc, dx);
    });
  }
  report((std::string(name) + "_fwd_idx").c_str(), xs, dt, fwd[0], fwd[1], fwd[2]);
  report((std::string(name) + "_bwd").c_str(), xs, dt, bwd[0], bwd[1], bwd[2]);
}

void bench_global_avg(const Shape& xs, DType dt, int repeats) {
  const Shape ys{xs[0], xs[1], 1, 1};
  double fwd[3], bwd[3];
  for (int f = 0; f < 2; ++f) {
    const MemoryFormat mf = f == 0 ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    const Tensor x = random(xs, dt, mf), dy = random(ys, dt, mf);
    const Tensor y = Tensor::empty(ys, dt, {}, mf), dx = Tensor::empty(xs, dt, {}, mf);
    fwd[f] = best_us(repeats, [&] { ops::global_avg_pool2d_forward(x, y); });
    bwd[f] = best_us(repeats, [&] { ops::global_avg_pool2d_backward(dy, dx); });
    if (f == 1) continue;
    const Tensor xc = other(x), dxc = other(dx);
    fwd[2] = best_us(repeats, [&] {
      ops::convert_memory_format(x, xc);
      ops::global_avg_pool2d_forward(xc, y);
    });
    bwd[2] = best_us(repeats, [&] {
      ops::global_avg_pool2d_backward(dy, dxc);
      ops::convert_memory_format(dxc, dx);
    });
  }
  report("global_avg_pool_fwd", xs, dt, fwd[0], fwd[1], fwd[2]);
  report("global_avg_pool_bwd", xs, dt, bwd[0], bwd[1], bwd[2]);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 50;
  if (threads < 1 || repeats < 1) {
    std::fprintf(stderr, "bench_pool: expected [threads >= 1] [repeats >= 1], found %s %s\n",
                 argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "");
    return 2;
  }
  ops::set_num_threads(threads);
  for (const DType dt : {DType::bf16, DType::f32}) {
    const ops::Pool2dParams k2s2{2, 2, 2, 2, 0, 0}, stem{3, 3, 2, 2, 1, 1};
    bench_max_pool("max_pool2x2", k2s2, {128, 32, 28, 28}, dt, repeats);
    bench_max_pool("max_pool2x2", k2s2, {128, 64, 14, 14}, dt, repeats);
    bench_max_pool("max_pool3x3s2p1", stem, {32, 64, 56, 56}, dt, repeats);
    bench_global_avg({128, 512, 4, 4}, dt, repeats);
  }
  return 0;
}

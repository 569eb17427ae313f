// Batch-norm time per call on the cpu backend for channels_last activations, three ways:
//   nhwc  the NHWC kernels on the channels_last tensors (what the ops run);
//   nchw  the NCHW kernels on contiguous copies of the same data (the layout's own cost);
//   copy  channels_last -> NCHW copies, the NCHW kernel, and the output copied back (the
//         path channels_last batch norm took before it had NHWC kernels).
// Usage: bench_batch_norm [repeats=20]
// Prints per shape, dtype, op (fwd = training forward, bwd = backward, both with the fused
// ReLU) and way: "bn <shape> <dtype> <op> <way> ms <median> min_ms <minimum>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tandem/ops.h"

namespace {

using namespace tandem;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median and minimum of `repeats` calls, in ms (the minimum is the least disturbed by other load).
struct Times {
  double median, min;
};

Times time_ms(int repeats, const std::function<void()>& f) {
  f();  // warm up
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_s();
    f();
    t.push_back((now_s() - t0) * 1e3);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

Tensor random(const Shape& s, DType dt, MemoryFormat f, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(shape_numel(s));
  for (float& e : v) e = dist(gen);
  Tensor t = Tensor::from_vector(s, v);
  if (dt != DType::f32) t = t.to(dt);
  return s.size() == 4 ? ops::to_memory_format(t, f) : t;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const MemoryFormat cl = MemoryFormat::channels_last, nc = MemoryFormat::contiguous;
  for (const Shape& s : {Shape{128, 32, 28, 28}, Shape{128, 64, 14, 14}})
    for (DType dt : {DType::f32, DType::bf16}) {
      if (!ops::supports(ops::Op::batch_norm_forward_training, dt, Device{})) continue;
      const Shape ch{s[1]};
      const Tensor g = random(ch, DType::f32, nc, 1), b = random(ch, DType::f32, nc, 2);
      const Tensor sm = Tensor::empty(ch), sv = Tensor::empty(ch), rm = Tensor::zeros(ch), rv = Tensor::full(ch, 1);
      const Tensor dg = Tensor::empty(ch), db = Tensor::empty(ch);
      Tensor x[2], dy[2], y[2], dx[2];  // [0] NCHW, [1] channels_last
      for (int i = 0; i < 2; ++i) {
        const MemoryFormat f = i ? cl : nc;
        x[i] = random(s, dt, f, 3);
        dy[i] = random(s, dt, f, 4);
        y[i] = Tensor::empty(s, dt, Device{}, f);
        dx[i] = Tensor::empty(s, dt, Device{}, f);
      }
      auto fwd = [&](const Tensor& xi, const Tensor& yi) {
        ops::batch_norm_forward_training(xi, g, b, 1e-5, 0.1, yi, sm, sv, rm, rv, true);
      };
      auto bwd = [&](const Tensor& dyi, const Tensor& xi, const Tensor& yi, const Tensor& dxi) {
        ops::batch_norm_backward(dyi, xi, g, sm, sv, 1e-5, dxi, dg, db, false, true, yi);
      };
      const Tensor yc = Tensor::empty(s, dt), dxc = Tensor::empty(s, dt);
      const Tensor xc = Tensor::empty(s, dt), dyc = Tensor::empty(s, dt), ycc = Tensor::empty(s, dt);
      const Times t_fwd[3] = {time_ms(repeats, [&] { fwd(x[1], y[1]); }),
                               time_ms(repeats, [&] { fwd(x[0], y[0]); }), time_ms(repeats, [&] {
                                 ops::convert_memory_format(x[1], xc);
                                 fwd(xc, yc);
                                 ops::convert_memory_format(yc, y[1]);
                               })};
      const Times t_bwd[3] = {time_ms(repeats, [&] { bwd(dy[1], x[1], y[1], dx[1]); }),
                               time_ms(repeats, [&] { bwd(dy[0], x[0], y[0], dx[0]); }), time_ms(repeats, [&] {
                                 ops::convert_memory_format(dy[1], dyc);
                                 ops::convert_memory_format(x[1], xc);
                                 ops::convert_memory_format(y[1], ycc);
                                 bwd(dyc, xc, ycc, dxc);
                                 ops::convert_memory_format(dxc, dx[1]);
                               })};
      const char* ways[3] = {"nhwc", "nchw", "copy"};
      for (int w = 0; w < 3; ++w)
        std::printf("bn %s %s fwd %s ms %.3f min_ms %.3f\n", shape_str(s).c_str(), dtype_name(dt), ways[w],
                    t_fwd[w].median, t_fwd[w].min);
      for (int w = 0; w < 3; ++w)
        std::printf("bn %s %s bwd %s ms %.3f min_ms %.3f\n", shape_str(s).c_str(), dtype_name(dt), ways[w],
                    t_bwd[w].median, t_bwd[w].min);
    }
  return 0;
}

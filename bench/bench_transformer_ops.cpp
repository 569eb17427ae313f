// Time per call of the transformer ops on the cpu at the small GPT's shapes (6 layers, 6 heads,
// 384 wide, block 256; batch 16, so 4096 tokens; vocabulary 8000): embedding, layer norm, GELU,
// attention forward and backward, and the fused classifier (forward + backward in one call).
// Compare with scripts/peers/torch_transformer_ops.py, which prints the same lines for PyTorch.
// Usage: bench_transformer_ops [repeats=10] [threads=2]
// Prints "lm <op> <dtype> <shape> tandem ms <median> min_ms <minimum>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_transformer.h"
#include "tandem/ops.h"
#include "tandem/rng.h"

namespace {

using namespace tandem;

struct Times {
  double median, min;
};

Times time_ms(int repeats, const std::function<void()>& f) {
  f();  // warm up
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

Tensor random(const Shape& s, DType dt, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 1);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * (2.0f * rng.uniform() - 1.0f);
  return dt == DType::f32 ? t : t.to(dt);
}

Tensor ids(int64_t n, int64_t vocab, uint64_t seed, const Shape& s) {
  Tensor t = Tensor::empty(s, DType::i64);
  Philox rng(seed, 2);
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = rng.randint(static_cast<uint32_t>(vocab));
  return t;
}

void report(const char* op, DType dt, const std::string& shape, const Times& t) {
  std::printf("lm %s %s %s tandem ms %.3f min_ms %.3f\n", op, dtype_name(dt), shape.c_str(), t.median, t.min);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = tandem::ops::cpu;
  ops::CpuBackend cpu;  // the kernels, without the front end's checks
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  ops::set_num_threads(argc > 2 ? std::atoi(argv[2]) : 2);
  const int64_t B = 16, T = 256, C = 384, H = 6, V = 8000, N = B * T;
  for (DType dt : {DType::f32, DType::bf16}) {
    if (dt == DType::bf16 && !k::native_bf16()) continue;
    const Tensor tok = ids(N, V, 1, {B, T}), wte = random({V, C}, dt, 2), wpe = random({T, C}, dt, 3);
    Tensor x = Tensor::empty({B, T, C}, dt), dx = Tensor::empty({N, C}, dt);
    Tensor dwte = Tensor::empty({V, C}), dwpe = Tensor::empty({T, C});
    report("embedding_fwd", dt, "[16, 256, 384]", time_ms(repeats, [&] { cpu.embedding_forward(tok, wte, wpe, x); }));
    const Tensor dy = random({B, T, C}, dt, 4);
    report("embedding_bwd", dt, "[16, 256, 384]",
           time_ms(repeats, [&] { cpu.embedding_backward(dy, tok, dwte, dwpe, false); }));
    const Tensor x2 = x.view({N, C}), g = random({C}, DType::f32, 5), b = random({C}, DType::f32, 6);
    Tensor y = Tensor::empty({N, C}, dt), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
    Tensor dg = Tensor::empty({C}), db = Tensor::empty({C});
    report("layer_norm_fwd", dt, "[4096, 384]",
           time_ms(repeats, [&] { cpu.layer_norm_forward(x2, g, b, 1e-5f, y, mean, rstd); }));
    report("layer_norm_bwd", dt, "[4096, 384]", time_ms(repeats, [&] {
             cpu.layer_norm_backward(dy.view({N, C}), x2, g, mean, rstd, dx, dg, db, false);
           }));
    const Tensor h4 = random({N, 4 * C}, dt, 7, 3.0f), dh4 = random({N, 4 * C}, dt, 8);
    Tensor g4 = Tensor::empty({N, 4 * C}, dt);
    report("gelu_fwd", dt, "[4096, 1536]", time_ms(repeats, [&] { cpu.gelu_forward(h4, g4); }));
    report("gelu_bwd", dt, "[4096, 1536]", time_ms(repeats, [&] { cpu.gelu_backward(dh4, h4, g4); }));
    const Tensor qkv = random({B, T, 3 * C}, dt, 9, 2.0f);
    Tensor att = Tensor::empty({B, T, C}, dt), lse = Tensor::empty({B, H, T}), dqkv = Tensor::empty({B, T, 3 * C}, dt);
    report("attention_fwd", dt, "[16, 256, 1152]",
           time_ms(repeats, [&] { cpu.attention_forward(qkv, H, att, lse); }));
    report("attention_bwd", dt, "[16, 256, 1152]",
           time_ms(repeats, [&] { cpu.attention_backward(dy, qkv, att, lse, H, dqkv); }));
    const Tensor targets = ids(N, V, 10, {N}), hc = random({N, C}, dt, 11), wc = random({V, C}, dt, 12, 0.1f);
    Tensor dw = Tensor::empty({V, C});
    report("classifier_fwd_bwd", dt, "[4096, 384] x [8000, 384]", time_ms(repeats, [&] {
             k::classifier_cross_entropy(hc, wc, targets, -1, 1.0f, dx, dw, false, Tensor());
           }));
  }
  return 0;
}

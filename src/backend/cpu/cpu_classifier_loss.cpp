// The fused classifier + cross-entropy on the cpu (llm.c's fused classifier). For each block
// of rows: logits [R, V] = h_blk w^T into f32 scratch (oneDNN: sgemm for f32, matmul with f32
// output for bf16), the softmax rows in place (cpu_classifier_loss_impl.h), then, in training,
// their gradient folded into dh_blk = dlogits w and dw += dlogits^T h_blk before the next
// block overwrites the scratch. bf16 runs its three products on oneDNN's bf16 matmul (the
// gradient rounded to bf16 once, as llm.c keeps it in the compute dtype); that needs
// cpu::native_bf16(), without which the storage wrapper (cpu_f16.h) widens to f32 first.
#include <oneapi/dnnl/dnnl.hpp>
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_matmul.h"
#include "backend/cpu/cpu_scratch.h"
#include "backend/cpu/cpu_transformer.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "tandem/error.h"

namespace tandem::ops::cpu {
namespace {

constexpr const char* kOp = "classifier_cross_entropy";
constexpr int64_t kBlockBytes = int64_t{32} << 20;

void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc) {
  const dnnl::status s = dnnl::sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  TD_CHECK(s == dnnl::status::success, ErrorCode::internal, kOp, "oneDNN sgemm failed with status {}",
           static_cast<int>(s));
}

std::vector<int64_t> targets_i64(const Tensor& targets) {
  const int64_t n = targets.numel();
  std::vector<int64_t> t(static_cast<size_t>(n));
  if (targets.dtype() == DType::i32) {
    const int32_t* p = targets.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) t[i] = p[i];
  } else if (n > 0) {
    std::memcpy(t.data(), targets.data<int64_t>(), static_cast<size_t>(n) * sizeof(int64_t));
  }
  return t;
}

}  // namespace

int64_t classifier_block_rows(int64_t vocab) {
  return std::max<int64_t>(1, kBlockBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(vocab, 1)));
}

float classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                               float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                               const Tensor& metrics, int64_t max_block_rows) {
  const int64_t n = h.size(0), c = h.size(1), v = w.size(0);
  const DType dt = h.dtype();
  const bool bf16 = dt != DType::f32;
  TD_CHECK(!bf16 || native_bf16(), ErrorCode::internal, kOp, "bf16 without native kernels reached the kernel");
  std::vector<int64_t> tgt = targets_i64(targets);
  int64_t counted = 0, bad = 0;
  for (int64_t& t : tgt) {
    if (t >= 0 && t < v) {
      ++counted;
    } else {
      bad += t == ignore_index ? 0 : 1;
      t = -1;  // the row kernel skips targets outside [0, V)
    }
  }
  const bool grad = dh.defined() || dw.defined();
  if (dw.defined() && !accumulate && (n == 0 || c == 0)) zero(dw.data<float>(), dw.numel());
  std::vector<double> row_loss(static_cast<size_t>(n));
  std::vector<uint8_t> row_correct(static_cast<size_t>(n));
  int64_t block = std::min(classifier_block_rows(v), std::max<int64_t>(n, 1));
  if (max_block_rows > 0) block = std::min(block, max_block_rows);
  float* logits = scratch_f32(0, block * v);
  auto* grad16 = bf16 && grad ? static_cast<uint16_t*>(thread_scratch(1, static_cast<size_t>(block * v) * 2)) : nullptr;
  TD_CHECK(logits && (grad16 || !bf16 || !grad), ErrorCode::out_of_memory, kOp, "cannot allocate {} rows of {} logits",
           block, v);
  const size_t esize = dtype_size(dt);
  const auto* hp = static_cast<const char*>(h.raw_data());
  for (int64_t r0 = 0; r0 < n && c > 0; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    const void* hb = hp + static_cast<size_t>(r0 * c) * esize;
    if (bf16)
      matmul(dt, rows, v, c, {hb, false}, {w.raw_data(), true}, nullptr, logits, DType::f32, false);
    else
      gemm('N', 'T', rows, v, c, static_cast<const float*>(hb), c, w.data<float>(), c, 0.0f, logits, v);
    XentRowsArgs a;
    a.rows = rows;
    a.vocab = v;
    a.logits = logits;
    a.targets = tgt.data() + r0;
    a.row_loss = row_loss.data() + r0;
    a.row_correct = row_correct.data() + r0;
    a.grad = grad;
    a.scale = counted > 0 ? grad_loss / static_cast<float>(counted) : 0.0f;
    a.grad_bf16 = grad16;
    transformer_kernels().xent_rows(a);
    if (!grad) continue;
    const bool acc = accumulate || r0 > 0;
    if (bf16) {
      if (dh.defined())
        matmul(dt, rows, c, v, {grad16, false}, {w.raw_data(), false}, nullptr,
               static_cast<char*>(dh.raw_data()) + static_cast<size_t>(r0 * c) * esize, dt, false);
      if (dw.defined()) matmul(dt, v, c, rows, {grad16, true}, {hb, false}, nullptr, dw.raw_data(), DType::f32, acc);
    } else {
      if (dh.defined()) gemm('N', 'N', rows, c, v, logits, v, w.data<float>(), c, 0.0f, dh.data<float>() + r0 * c, c);
      if (dw.defined())
        gemm('T', 'N', v, c, rows, logits, v, static_cast<const float*>(hb), c, acc ? 1.0f : 0.0f, dw.data<float>(), c);
    }
  }
  double total = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    total += row_loss[i];
    correct += row_correct[i];
  }
  if (metrics.defined()) {
    float* m = metrics.data<float>();
    m[0] += static_cast<float>(total);
    m[1] += static_cast<float>(correct);
    m[2] += static_cast<float>(counted);
    m[3] += static_cast<float>(bad);
  }
  return counted > 0 ? static_cast<float>(total / static_cast<double>(counted))
                     : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace tandem::ops::cpu

// The cpu backend's op (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

// The returned mean loss is dropped: callers read it from metrics, as on cuda. grad_scale's
// element 0 (a loss scaler's scale) multiplies grad_loss.
void CpuBackend::classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                                          float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                                          const Tensor& metrics, const Tensor& grad_scale) {
  // A loss scale on the "device" (the host here) is read when the op runs: stream order.
  const float g = grad_scale.defined() ? grad_loss * grad_scale.data<float>()[0] : grad_loss;
  (void)cpu::classifier_cross_entropy(h, w, targets, ignore_index, g, dh, dw, accumulate, metrics);
}

}  // namespace tandem::ops

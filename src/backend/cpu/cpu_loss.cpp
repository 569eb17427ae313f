// Softmax cross-entropy with label smoothing (mean reduction) and argmax accuracy.
// Per row: log-sum-exp with the row maximum subtracted; sums in double. Logits and their
// gradient are f32 or bf16 (T, widened on load); probabilities and the loss are f32.
#include <cmath>
#include <type_traits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"

namespace tandem::ops {
namespace {

void check_labels(const char* op, const int64_t* lab, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    TD_CHECK_ARG(lab[i] >= 0 && lab[i] < c, op, "label {} in row {} is outside [0, {})", lab[i], i, c);
}

}  // namespace

namespace {

using cpu::ld;
using cpu::st;

// Row i: probs = softmax(z_i) and the smoothed cross-entropy -sum_c q_c log p_c, with
// log p_c = z_c - mx - lse. A label outside [0, C) contributes only the smoothing term.
template <typename T>
double softmax_row(const T* zi, int64_t label, int64_t c, double e, float* pi) {
  float mx = ld(zi[0]);
  for (int64_t j = 1; j < c; ++j) mx = ld(zi[j]) > mx ? ld(zi[j]) : mx;
  double sum = 0.0, sum_z = 0.0;
  for (int64_t j = 0; j < c; ++j) {
    const float ex = std::exp(ld(zi[j]) - mx);
    pi[j] = ex;
    sum += ex;
    sum_z += ld(zi[j]) - mx;
  }
  const double lse = std::log(sum);  // log sum exp(z - mx)
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < c; ++j) pi[j] *= inv;
  const double nll = label >= 0 && label < c ? lse - (ld(zi[label]) - mx) : 0.0;
  const double smooth = lse - sum_z / static_cast<double>(c);
  return (1.0 - e) * nll + e * smooth;
}

// Index of the first maximum of z [c].
template <typename T>
int64_t argmax_row(const T* z, int64_t c) {
  int64_t best = 0;
  for (int64_t j = 1; j < c; ++j)
    if (ld(z[j]) > ld(z[best])) best = j;
  return best;
}

template <typename T>
float ce_forward(const Tensor& logits, const Tensor& labels, float label_smoothing, const Tensor& probs) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const T* z = cpu::elems<T>(logits);
  const int64_t* lab = labels.data<int64_t>();
  float* pr = probs.data<float>();
  check_labels("softmax_cross_entropy_forward", lab, n, c);
  const double e = label_smoothing;
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static) if (n * c > 1 << 14)
  for (int64_t i = 0; i < n; ++i) total += softmax_row(z + i * c, lab[i], c, e, pr + i * c);
  return static_cast<float>(total / static_cast<double>(n));
}

template <typename T>
void ce_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing, const Tensor& probs,
                   const Tensor& metrics) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const T* z = cpu::elems<T>(logits);
  const int64_t* lab = labels.data<int64_t>();
  float* pr = probs.data<float>();
  const double e = label_smoothing;
  double total = 0.0;
  int64_t correct = 0, bad = 0;
#pragma omp parallel for reduction(+ : total, correct, bad) schedule(static) if (n * c > 1 << 14)
  for (int64_t i = 0; i < n; ++i) {
    total += softmax_row(z + i * c, lab[i], c, e, pr + i * c);
    const bool valid = lab[i] >= 0 && lab[i] < c;
    bad += valid ? 0 : 1;
    correct += valid && argmax_row(z + i * c, c) == lab[i] ? 1 : 0;
  }
  float* m = metrics.data<float>();
  m[0] += static_cast<float>(total);
  m[1] += static_cast<float>(correct);
  m[2] += static_cast<float>(n);
  m[3] += static_cast<float>(bad);
}

template <typename T>
void ce_backward(const Tensor& probs, const Tensor& labels, float label_smoothing, float grad_loss,
                 const Tensor& dlogits) {
  const int64_t n = probs.size(0), c = probs.size(1);
  const float* pr = probs.data<float>();
  const int64_t* lab = labels.data<int64_t>();
  T* d = cpu::elems<T>(dlogits);
  check_labels("softmax_cross_entropy_backward", lab, n, c);
  const float scale = n > 0 ? grad_loss / static_cast<float>(n) : 0.0f;
  const float off = label_smoothing / static_cast<float>(c);
  const float on = 1.0f - label_smoothing;
#pragma omp parallel for schedule(static) if (n * c > 1 << 14)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) d[i * c + j] = st((pr[i * c + j] - off) * scale, d);
    if constexpr (std::is_same_v<T, float>) {
      d[i * c + lab[i]] -= on * scale;
    } else {  // the label's entry from f32, rounded once
      const int64_t k = i * c + lab[i];
      d[k] = st((pr[k] - off) * scale - on * scale, d);
    }
  }
}

template <typename T>
int64_t correct_rows(const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const T* z = cpu::elems<T>(logits);
  const int64_t* lab = labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) correct += argmax_row(z + i * c, c) == lab[i] ? 1 : 0;
  return correct;
}

}  // namespace

float CpuBackend::softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                                const Tensor& probs) {
  float loss = 0.0f;
  cpu::by_dtype(logits.dtype(),
                [&](auto t) { loss = ce_forward<decltype(t)>(logits, labels, label_smoothing, probs); });
  return loss;
}

void CpuBackend::softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                                  const Tensor& probs, const Tensor& metrics) {
  cpu::by_dtype(logits.dtype(),
                [&](auto t) { ce_accumulate<decltype(t)>(logits, labels, label_smoothing, probs, metrics); });
}

void CpuBackend::softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                                float grad_loss, const Tensor& dlogits) {
  cpu::by_dtype(dlogits.dtype(),
                [&](auto t) { ce_backward<decltype(t)>(probs, labels, label_smoothing, grad_loss, dlogits); });
}

int64_t CpuBackend::count_correct(const Tensor& logits, const Tensor& labels) {
  int64_t n = 0;
  cpu::by_dtype(logits.dtype(), [&](auto t) { n = correct_rows<decltype(t)>(logits, labels); });
  return n;
}

}  // namespace tandem::ops

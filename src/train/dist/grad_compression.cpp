#include "train/dist/grad_compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem::train {

namespace {

Stream host_stream() { return runtime(DeviceKind::cpu).default_stream(0); }

class HalfCompressor final : public GradCompressor {
 public:
  explicit HalfCompressor(DType dtype) : dtype_(dtype) {}
  size_t reduce(comm::Communicator& comm, int, float* grads, int64_t n) override {
    Tensor half = Tensor::empty({n}, dtype_);
    uint16_t* h = half.data<uint16_t>();
    const bool bf = dtype_ == DType::bf16;
    for (int64_t i = 0; i < n; ++i) h[i] = bf ? float_to_bf16(grads[i]) : float_to_f16(grads[i]);
    comm.all_reduce(half, comm::ReduceOp::mean, host_stream());
    for (int64_t i = 0; i < n; ++i) grads[i] = bf ? bf16_to_float(h[i]) : f16_to_float(h[i]);
    return static_cast<size_t>(n) * 2;
  }

 private:
  DType dtype_;
};

class TopKCompressor final : public GradCompressor {
 public:
  explicit TopKCompressor(double ratio) : ratio_(ratio) {}
  size_t reduce(comm::Communicator& comm, int bucket, float* grads, int64_t n) override {
    if (residual_.size() <= static_cast<size_t>(bucket)) residual_.resize(static_cast<size_t>(bucket) + 1);
    std::vector<float>& res = residual_[static_cast<size_t>(bucket)];
    res.resize(static_cast<size_t>(n), 0.0f);
    for (int64_t i = 0; i < n; ++i) res[static_cast<size_t>(i)] += grads[i];  // gradient + residual
    const int64_t k = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(ratio_ * static_cast<double>(n))), 1, n);
    // The k entries of largest magnitude; ties go to the lower index (deterministic).
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), [&](int32_t a, int32_t b) {
      const float x = std::abs(res[static_cast<size_t>(a)]), y = std::abs(res[static_cast<size_t>(b)]);
      return x > y || (x == y && a < b);
    });
    // Pairs (index, value bits) as i32, gathered from every rank.
    Tensor mine = Tensor::empty({2 * k}, DType::i32), all = Tensor::empty({2 * k * comm.world_size()}, DType::i32);
    int32_t* m = mine.data<int32_t>();
    for (int64_t j = 0; j < k; ++j) {
      const int32_t idx = order[static_cast<size_t>(j)];
      m[2 * j] = idx;
      std::memcpy(&m[2 * j + 1], &res[static_cast<size_t>(idx)], sizeof(float));
      res[static_cast<size_t>(idx)] = 0.0f;  // sent: no longer owed
    }
    comm.all_gather(mine, all, host_stream());
    std::fill(grads, grads + n, 0.0f);
    const int32_t* a = all.data<int32_t>();
    for (int64_t j = 0; j < k * comm.world_size(); ++j) {
      float v = 0;
      std::memcpy(&v, &a[2 * j + 1], sizeof(float));
      grads[a[2 * j]] += v;
    }
    const float w = static_cast<float>(comm.world_size());
    for (int64_t i = 0; i < n; ++i) grads[i] = grads[i] / w;
    return static_cast<size_t>(k) * 8;
  }

 private:
  double ratio_;
  std::vector<std::vector<float>> residual_;  // per bucket
};

[[noreturn]] void bad_spec(const std::string& spec) {
  throw_error(ErrorCode::invalid_argument, "train",
              fmt::format("--grad-compression {}: expected none, fp16, bf16 or topk:RATIO with 0 < RATIO <= 1", spec));
}

}  // namespace

std::unique_ptr<GradCompressor> make_grad_compressor(const std::string& spec) {
  if (spec == "none") return nullptr;
  if (spec == "fp16") return std::make_unique<HalfCompressor>(DType::f16);
  if (spec == "bf16") return std::make_unique<HalfCompressor>(DType::bf16);
  if (spec.rfind("topk:", 0) != 0) bad_spec(spec);
  const std::string r = spec.substr(5);
  char* end = nullptr;
  const double ratio = std::strtod(r.c_str(), &end);
  if (r.empty() || *end != '\0' || !(ratio > 0 && ratio <= 1)) bad_spec(spec);
  return std::make_unique<TopKCompressor>(ratio);
}

void check_grad_compression(const std::string& spec) { (void)make_grad_compressor(spec); }

}  // namespace tandem::train

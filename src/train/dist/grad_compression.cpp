#include "train/dist/grad_compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "tandem/device_traits.h"
#include "tandem/error.h"

namespace tandem::train {

namespace {


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
  TopKCompressor(double ratio, int64_t warmup_steps) : ratio_(ratio), warmup_steps_(warmup_steps) {}

  void set_layout(int bucket, std::vector<std::pair<int64_t, int64_t>> ranges) override {
    state(bucket).ranges = std::move(ranges);
  }

  size_t reduce(comm::Communicator& comm, int bucket, float* grads, int64_t n) override {
    Bucket& b = state(bucket);
    b.residual.resize(static_cast<size_t>(n), 0.0f);
    if (b.ranges.empty()) b.ranges = {{0, n}};
    float* acc = b.residual.data();
    for (int64_t i = 0; i < n; ++i) acc[i] += grads[i];  // gradient + residual
    const double density = density_at(b.steps++);
    std::vector<std::pair<int64_t, int64_t>> dense;  // ranges sent as values
    int64_t dense_count = 0;
    std::vector<int32_t> pairs;                      // (index, value bits) of the sparse tensors
    for (const auto& [off, len] : b.ranges) {
      const int64_t k = entries(density, len);
      if (2 * k >= len || entries(ratio_, len) < kMinSparse) {
        dense.emplace_back(off, len);
        dense_count += len;
        continue;
      }
      select(acc + off, len, k, off, pairs);
    }
    std::fill(grads, grads + n, 0.0f);
    if (dense_count > 0) {  // the small or nearly dense tensors: a plain f32 all-reduce
      Tensor vals = Tensor::empty({dense_count}, DType::f32);
      float* v = vals.data<float>();
      for (const auto& [off, len] : dense) {
        std::copy(acc + off, acc + off + len, v);
        std::fill(acc + off, acc + off + len, 0.0f);  // sent: no longer owed
        v += len;
      }
      comm.all_reduce(vals, comm::ReduceOp::mean, host_stream());
      v = vals.data<float>();
      for (const auto& [off, len] : dense) {
        std::copy(v, v + len, grads + off);
        v += len;
      }
    }
    const int64_t k_total = static_cast<int64_t>(pairs.size() / 2);
    if (k_total > 0) {  // every rank's pairs, summed and divided by the world size
      Tensor mine = Tensor::empty({2 * k_total}, DType::i32);
      Tensor all = Tensor::empty({2 * k_total * comm.world_size()}, DType::i32);
      std::copy(pairs.begin(), pairs.end(), mine.data<int32_t>());
      comm.all_gather(mine, all, host_stream());
      std::vector<char> hit(static_cast<size_t>(n), 0);
      const int32_t* a = all.data<int32_t>();
      for (int64_t j = 0; j < k_total * comm.world_size(); ++j) {
        float v = 0;
        std::memcpy(&v, &a[2 * j + 1], sizeof(float));
        grads[a[2 * j]] += v;
        hit[static_cast<size_t>(a[2 * j])] = 1;
      }
      const float w = static_cast<float>(comm.world_size());
      for (int64_t i = 0; i < n; ++i)
        if (hit[static_cast<size_t>(i)]) grads[i] = grads[i] / w;
    }
    return static_cast<size_t>(k_total) * 8 + static_cast<size_t>(dense_count) * 4;
  }

 private:
  static constexpr int64_t kMinSparse = 16;  // fewer entries than this at RATIO: dense
  struct Bucket {
    std::vector<float> residual;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    int64_t steps = 0;
  };

  Bucket& state(int bucket) {
    if (buckets_.size() <= static_cast<size_t>(bucket)) buckets_.resize(static_cast<size_t>(bucket) + 1);
    return buckets_[static_cast<size_t>(bucket)];
  }
  // DGC's warm-up: from dense at step 0 exponentially down to RATIO at warmup_steps.
  double density_at(int64_t step) const {
    if (step >= warmup_steps_) return ratio_;
    return std::pow(ratio_, static_cast<double>(step) / static_cast<double>(warmup_steps_));
  }
  static int64_t entries(double density, int64_t len) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(density * static_cast<double>(len))), 1, len);
  }
  // Appends the k entries of largest magnitude of a[0, len) as (off + index, value) pairs and
  // zeroes them in `a`; ties go to the lower index (deterministic).
  static void select(float* a, int64_t len, int64_t k, int64_t off, std::vector<int32_t>& pairs) {
    std::vector<int32_t> order(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), [&](int32_t x, int32_t y) {
      const float ax = std::abs(a[x]), ay = std::abs(a[y]);
      return ax > ay || (ax == ay && x < y);
    });
    for (int64_t j = 0; j < k; ++j) {
      const int32_t idx = order[static_cast<size_t>(j)];
      int32_t bits = 0;
      std::memcpy(&bits, &a[idx], sizeof(float));
      pairs.push_back(static_cast<int32_t>(off) + idx);
      pairs.push_back(bits);
      a[idx] = 0.0f;  // sent: no longer owed
    }
  }

  double ratio_;
  int64_t warmup_steps_;
  std::vector<Bucket> buckets_;
};

[[noreturn]] void bad_spec(const std::string& spec) {
  throw_error(ErrorCode::invalid_argument, "train",
              fmt::format("--grad-compression {}: expected none, fp16, bf16 or topk:RATIO with 0 < RATIO <= 1", spec));
}

}  // namespace

std::unique_ptr<GradCompressor> make_grad_compressor(const std::string& spec, int64_t warmup_steps) {
  if (spec == "none") return nullptr;
  if (spec == "fp16") return std::make_unique<HalfCompressor>(DType::f16);
  if (spec == "bf16") return std::make_unique<HalfCompressor>(DType::bf16);
  if (spec.rfind("topk:", 0) != 0) bad_spec(spec);
  const std::string r = spec.substr(5);
  char* end = nullptr;
  const double ratio = std::strtod(r.c_str(), &end);
  if (r.empty() || *end != '\0' || !(ratio > 0 && ratio <= 1)) bad_spec(spec);
  return std::make_unique<TopKCompressor>(ratio, std::max<int64_t>(0, warmup_steps));
}

void check_grad_compression(const std::string& spec) { (void)make_grad_compressor(spec); }

}  // namespace tandem::train

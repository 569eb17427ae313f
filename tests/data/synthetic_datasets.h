// Datasets for loader tests: samples whose pixels and label identify their index, one that
// sleeps in get() (to keep workers busy or blocked), one that throws at a given index, and
// the augmentation the loader tests share.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "tandem/data/dataset.h"
#include "tandem/data/fused_image_transform.h"
#include "tandem/error.h"

namespace tandem::testing {

/// n samples of shape dims; label = 1000 + index; pixel k of sample i = (i * 131 + k * 29) & 255,
/// except pixels 0 and 1 which hold the low and high byte of i (when numel >= 2).
class IndexedDataset : public data::Dataset {
 public:
  IndexedDataset(int64_t n, data::ImageDims dims) : n_(n), dims_(dims), pixels_(static_cast<size_t>(n * dims.numel())) {
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* p = pixels_.data() + i * dims.numel();
      for (int64_t k = 0; k < dims.numel(); ++k) p[k] = static_cast<uint8_t>((i * 131 + k * 29) & 255);
      if (dims.numel() >= 2) {
        p[0] = static_cast<uint8_t>(i & 255);
        p[1] = static_cast<uint8_t>((i >> 8) & 255);
      }
    }
  }
  int64_t size() const override { return n_; }
  data::ImageDims dims() const override { return dims_; }
  int64_t num_classes() const override { return 1000 + n_; }  // labels 1000 .. 1000 + n - 1
  data::Sample get(int64_t index, std::vector<uint8_t>&) const override {
    return {pixels_.data() + index * dims_.numel(), 1000 + index};
  }
  const uint8_t* pixels(int64_t index) const { return pixels_.data() + index * dims_.numel(); }

 private:
  int64_t n_;
  data::ImageDims dims_;
  std::vector<uint8_t> pixels_;
};

/// IndexedDataset whose get() sleeps `delay` first.
class SleepyDataset final : public IndexedDataset {
 public:
  SleepyDataset(int64_t n, data::ImageDims dims, std::chrono::microseconds delay)
      : IndexedDataset(n, dims), delay_(delay) {}
  data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    std::this_thread::sleep_for(delay_);
    return IndexedDataset::get(index, scratch);
  }

 private:
  std::chrono::microseconds delay_;
};

/// IndexedDataset whose get(bad_index) throws Error(format, "[test-record] corrupt record").
class ThrowingDataset final : public IndexedDataset {
 public:
  ThrowingDataset(int64_t n, data::ImageDims dims, int64_t bad_index) : IndexedDataset(n, dims), bad_(bad_index) {}
  data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    if (index == bad_) throw_error(ErrorCode::format, "test-record", "corrupt record");
    return IndexedDataset::get(index, scratch);
  }

 private:
  int64_t bad_;
};

/// The augmentation the loader tests use: pad 2, random crop, flip with p = 0.5, normalize
/// with mean 0.3 and std 0.4 (one channel).
inline std::shared_ptr<data::FusedImageTransform> test_augment() {
  data::FusedImageTransformOptions o;
  o.pad = 2;
  o.flip_p = 0.5f;
  o.mean = {0.3f};
  o.std = {0.4f};
  return std::make_shared<data::FusedImageTransform>(o);
}

}  // namespace tandem::testing

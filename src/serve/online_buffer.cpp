#include "tandem/serve/online_buffer.h"

#include <algorithm>
#include <cstring>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::serve {

OnlineBuffer::OnlineBuffer(int64_t capacity, int64_t sample_numel, int64_t num_classes, uint64_t seed)
    : capacity_(capacity), numel_(sample_numel), classes_(num_classes), seed_(seed) {
  TD_CHECK_ARG(capacity >= 1 && capacity <= (int64_t{1} << 24), "serve",
               "--online-buffer: expected 1..16777216 samples, got {}", capacity);
  TD_CHECK_ARG(sample_numel >= 1 && num_classes >= 1, "serve", "online buffer: sample size {} and classes {} must be >= 1",
               sample_numel, num_classes);
  images_.resize(static_cast<size_t>(capacity * sample_numel));
  labels_.resize(static_cast<size_t>(capacity));
}

int64_t OnlineBuffer::add(const Tensor& images, const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  TD_CHECK_ARG(images.numel() == n * numel_, "samples", "{} images of {} values for {} labels: expected {} values each",
               images.dim() ? images.shape()[0] : 0, images.numel(), n, numel_);
  for (int64_t i = 0; i < n; ++i)
    TD_CHECK_ARG(labels[static_cast<size_t>(i)] >= 0 && labels[static_cast<size_t>(i)] < classes_, "samples",
                 "sample {}: label {} outside the model's classes [0, {})", i, labels[static_cast<size_t>(i)], classes_);
  const float* src = images.data<float>();
  std::lock_guard<std::mutex> lock(mu_);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(images_.data() + next_ * numel_, src + i * numel_, static_cast<size_t>(numel_) * sizeof(float));
    labels_[static_cast<size_t>(next_)] = labels[static_cast<size_t>(i)];
    next_ = (next_ + 1) % capacity_;
    size_ = std::min(size_ + 1, capacity_);
  }
  added_ += n;
  return size_;
}

int64_t OnlineBuffer::draw(int64_t count, int64_t sample_numel, float* images, int64_t* labels, uint64_t step) {
  TD_CHECK_ARG(sample_numel == numel_, "train", "--online-mix: samples of {} values requested, the buffer holds {}",
               sample_numel, numel_);
  std::lock_guard<std::mutex> lock(mu_);
  if (size_ == 0 || count <= 0) return 0;
  Philox rng(seed_, step, 0x0411u);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>(rng.randint64(static_cast<uint64_t>(size_)));
    std::memcpy(images + i * numel_, images_.data() + k * numel_, static_cast<size_t>(numel_) * sizeof(float));
    labels[i] = labels_[static_cast<size_t>(k)];
  }
  drawn_ += count;
  return count;
}

int64_t OnlineBuffer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

int64_t OnlineBuffer::added() const {
  std::lock_guard<std::mutex> lock(mu_);
  return added_;
}

int64_t OnlineBuffer::drawn() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drawn_;
}

}  // namespace tandem::serve

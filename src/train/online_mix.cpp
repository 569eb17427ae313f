#include "train/online_mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tandem/error.h"

namespace tandem::train {

OnlineMixer::OnlineMixer(std::shared_ptr<OnlineSampleSource> source, double fraction, Device device, Stream compute)
    : source_(std::move(source)), fraction_(fraction), device_(device), compute_(std::move(compute)) {
  TD_CHECK_ARG(source_, "train", "--online-mix needs a sample source");
  TD_CHECK_ARG(fraction_ > 0 && fraction_ < 1, "train", "--online-mix: expected a fraction in (0, 1), got {}",
               fraction_);
}

int64_t OnlineMixer::mix(const data::FieldBatch& fields, uint64_t step) {
  const Tensor& images = fields.get(data::FieldRole::input);
  const Tensor& labels = fields.get(data::FieldRole::target);
  if (images.dim() != 4 || images.shape()[0] == 0) return 0;
  const int64_t batch = images.shape()[0];
  const int64_t want = std::min<int64_t>(batch, std::llround(fraction_ * static_cast<double>(batch)));
  if (want == 0) return 0;
  const int64_t numel = images.numel() / batch;
  Tensor host_images = Tensor::empty({want, images.shape()[1], images.shape()[2], images.shape()[3]});
  Tensor host_labels = Tensor::empty({want}, DType::i64);
  const int64_t got = source_->draw(want, numel, host_images.data<float>(), host_labels.data<int64_t>(), step);
  if (got == 0) return 0;
  TD_CHECK(got == want, ErrorCode::internal, "train", "online sample source gave {} of {} samples", got, want);
  // The batch's images are in the run's compute dtype (bf16 or fp16 fields under --precision).
  if (images.dtype() != host_images.dtype()) host_images = host_images.to(images.dtype());
  const Tensor dst_images = images.narrow(0, 0, want), dst_labels = labels.narrow(0, 0, want);
  if (device_.is_host()) {
    std::memcpy(dst_images.raw_data(), host_images.raw_data(), host_images.nbytes());
    std::memcpy(dst_labels.raw_data(), host_labels.raw_data(), host_labels.nbytes());
  } else {
    Runtime& rt = runtime_for(device_);
    rt.copy_async(dst_images.raw_data(), device_, host_images.raw_data(), Device{}, host_images.nbytes(), compute_);
    rt.copy_async(dst_labels.raw_data(), device_, host_labels.raw_data(), Device{}, host_labels.nbytes(), compute_);
    // The copies read the host buffers later: the stream keeps them alive until then.
    compute_.enqueue([a = host_images.storage(), b = host_labels.storage()] {});
  }
  mixed_ += want;
  return want;
}

}  // namespace tandem::train

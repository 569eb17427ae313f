// Mixing online samples into training batches (TrainConfig::online_mix, tandem/train/
// online_samples.h): each step, the first k = round(online_mix * B) samples of the batch are
// replaced by samples drawn from the source, on the host or, on a device, by an asynchronous
// copy ordered on the compute stream before the step's forward (the host buffers are kept
// alive by the stream until the copy ran). While the source is empty the batch is unchanged.
// Thread-safety: one training thread.
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/data/field_batch.h"
#include "tandem/device.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"
#include "tandem/train/online_samples.h"

namespace tandem::train {

class OnlineMixer {
 public:
  /// `fraction` in (0, 1); `compute`: the stream the step's ops run on.
  OnlineMixer(std::shared_ptr<OnlineSampleSource> source, double fraction, Device device, Stream compute);
  /// Replaces the first samples of the batch's input images [B, C, H, W] (f32, or the bf16/fp16
  /// fields of a reduced --precision: the drawn f32 samples are converted) and target labels
  /// [B] i64 (on `device`) for global step `step`; returns how many were replaced (0 for an
  /// input of another rank: token windows). Errors of the source propagate; Error(
  /// invalid_argument) when the batch holds no input or no target field.
  int64_t mix(const data::FieldBatch& fields, uint64_t step);
  /// Samples replaced so far.
  int64_t mixed() const { return mixed_; }

 private:
  std::shared_ptr<OnlineSampleSource> source_;
  double fraction_;
  Device device_;
  Stream compute_;
  int64_t mixed_ = 0;
};

}  // namespace tandem::train

// FieldBatch: a batch as its typed fields, the one form in which the step, the loss and
// evaluation take a batch. Tensor i is field i of fields(): [B] + the field's per-sample
// shape, in the field's dtype (image classification: images [B, C, H, W] f32 input and
// labels [B] i64 target; token windows: tokens [B, T] i32 input and targets [B, T] i64
// target). Consumers pick a tensor by its role (get) instead of by position or convention.
// A view: it holds references to the tensors (their storage stays alive, but a loader or
// prefetcher slot may be refilled once its batch is released) and points at the field list
// of whoever built it (Loader::fields()), which must outlive it.
// Thread-safety: a plain value; const members may be called concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/data/field.h"
#include "tandem/tensor.h"

namespace tandem::data {

class FieldBatch {
 public:
  /// An empty batch (no fields).
  FieldBatch() = default;
  /// `tensors[i]` is the batch of `fields[i]`; `fields` must outlive the batch. Throws
  /// Error(invalid_argument, "[batch] ...") when the counts differ.
  FieldBatch(const std::vector<Field>& fields, std::vector<Tensor> tensors);

  /// The fields (empty for an empty batch).
  const std::vector<Field>& fields() const;
  /// One tensor per field, in the order of fields().
  const std::vector<Tensor>& tensors() const { return tensors_; }
  bool empty() const { return tensors_.empty(); }
  /// Samples in the batch: the first dimension of the first field (0 when empty or when the
  /// first field is a scalar).
  int64_t samples() const;
  /// The tensor of the first field with `role`. Throws Error(invalid_argument, "[batch] the
  /// batch holds no target field (its fields: tokens i32 [8] input): ...") when there is none.
  const Tensor& get(FieldRole role) const;
  /// Drops the references to the tensors (the batch becomes empty).
  void clear();

 private:
  const std::vector<Field>* fields_ = nullptr;
  std::vector<Tensor> tensors_;
};

}  // namespace tandem::data

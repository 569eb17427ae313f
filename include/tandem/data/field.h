// Field: one named, typed part of every sample of a data set, as the loader's batches hold it.
// A data set declares its fields (FieldDataset::fields, tandem/data/field_dataset.h); a batch
// holds one tensor per field, [B] + the field's per-sample shape. Image classification is one
// case: `images` f32 (or bf16/f16) [C, H, W] input and `labels` i64 [] target; a token data set
// declares e.g. `tokens` i32 [T] input and `targets` i64 [T] target (the next token of each).
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/dtype.h"
#include "tandem/tensor.h"

namespace tandem::data {

/// What the step does with a field: feed it to the model, or compare the model's output with it.
enum class FieldRole { input, target };

struct Field {
  std::string name;                   // "images", "labels", "tokens", "targets"
  DType dtype = DType::f32;           // the element type of the batch tensor
  Shape shape;                        // one sample's shape: [C, H, W], [] (a label), [T]
  FieldRole role = FieldRole::input;
  /// Integer fields: every value must be in [0, classes) (the classes of a label, the
  /// vocabulary of token ids); the loader checks each sample and fails the batch with
  /// Error(format) naming the sample. 0: not checked.
  int64_t classes = 0;

  /// Elements of one sample (1 for shape []).
  int64_t numel() const { return shape_numel(shape); }
  /// Bytes of one sample.
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  friend bool operator==(const Field&, const Field&) = default;
};

/// "input" or "target".
const char* role_name(FieldRole role);
/// The position of the first field with `role` in `fields`, or -1 when there is none.
int find_field(const std::vector<Field>& fields, FieldRole role);
/// The position of the field named `name` in `fields`, or -1 when there is none.
int find_field(const std::vector<Field>& fields, std::string_view name);
/// Bytes of one sample over all fields.
size_t sample_bytes(const std::vector<Field>& fields);
/// Token ids per sample: the elements of the integer-typed input fields (a model's token ids);
/// 0 when every input is floating point (images).
int64_t tokens_per_sample(const std::vector<Field>& fields);
/// Whether the first input is an image batch ([C, H, W] of a floating-point type): throughput
/// is then reported in images per second ("img/s"), otherwise in samples per second.
bool image_input(const std::vector<Field>& fields);
/// Throws Error(format, "[op] label 7 is outside the dataset's 4 classes: expected [0, 4)") when
/// a value of an integer field with classes > 0 is outside [0, classes); `sample` holds one
/// pointer per field to one sample's values (as FieldDataset::write writes them).
void check_classes(const std::vector<Field>& fields, const std::byte* const* sample, const char* op);
/// "images f32 [1, 28, 28] input, labels i64 [] target (10 classes)".
std::string describe_fields(const std::vector<Field>& fields);

}  // namespace tandem::data

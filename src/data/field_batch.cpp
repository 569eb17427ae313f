// FieldBatch (tandem/data/field_batch.h): a batch's tensors with their fields, picked by role.
#include "tandem/data/field_batch.h"

#include <string>

#include "tandem/error.h"

namespace tandem::data {

static constexpr const char* kOp = "batch";

FieldBatch::FieldBatch(const std::vector<Field>& fields, std::vector<Tensor> tensors)
    : fields_(&fields), tensors_(std::move(tensors)) {
  TD_CHECK_ARG(tensors_.size() == fields.size(), kOp, "{} tensors for {} fields: expected one tensor per field",
               tensors_.size(), fields.size());
}

const std::vector<Field>& FieldBatch::fields() const {
  static const std::vector<Field> none;
  return fields_ ? *fields_ : none;
}

int64_t FieldBatch::samples() const {
  if (tensors_.empty() || tensors_[0].dim() == 0) return 0;
  return tensors_[0].shape()[0];
}

const Tensor& FieldBatch::get(FieldRole role) const {
  const int i = find_field(fields(), role);
  TD_CHECK_ARG(i >= 0, kOp, "the batch holds no {} field (its fields: {}): expected a data set that declares one",
               role_name(role), tensors_.empty() ? std::string("none") : describe_fields(fields()));
  return tensors_[static_cast<size_t>(i)];
}

void FieldBatch::clear() {
  tensors_.clear();
  fields_ = nullptr;
}

}  // namespace tandem::data

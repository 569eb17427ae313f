#include "train/plan/planned_windows.h"

#include <utility>
#include <vector>

#include "tandem/error.h"

namespace tandem::train {
namespace {

class PlannedWindows final : public data::FieldDataset {
 public:
  PlannedWindows(int64_t block, int64_t vocab, int64_t samples) : samples_(samples) {
    TD_CHECK_ARG(block >= 1 && vocab >= 1 && samples >= 1, "train",
                 "planned token windows: expected sizes >= 1, got block {}, vocabulary {}, {} samples", block, vocab,
                 samples);
    fields_ = {data::Field{"tokens", DType::i32, {block}, data::FieldRole::input, vocab},
               data::Field{"targets", DType::i64, {block}, data::FieldRole::target, vocab}};
  }
  int64_t size() const override { return samples_; }
  const std::vector<data::Field>& fields() const override { return fields_; }
  void write(int64_t, const data::SampleKey&, std::byte* const*, data::SampleScratch&,
             data::WriteTimes*) const override {
    throw_error(ErrorCode::internal, "train", "planned token windows hold no tokens (a plan without --data)");
  }

 private:
  int64_t samples_;
  std::vector<data::Field> fields_;
};

}  // namespace

std::shared_ptr<const data::FieldDataset> planned_windows(int64_t block_size, int64_t vocab_size, int64_t samples) {
  return std::make_shared<const PlannedWindows>(block_size, vocab_size, samples);
}

}  // namespace tandem::train

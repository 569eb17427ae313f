// A GPT planned without token data (`tandem train --model gpt2-xl --plan-only`, no --data):
// token windows that only have a shape, so that the memory plan and the dry run's checks see
// the run the model would make on a corpus of that vocabulary.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/data/field_dataset.h"

namespace tandem::train {

/// GPT-2's BPE vocabulary: the vocabulary a GPT is planned with when no token data and no
/// --vocab-size say another.
inline constexpr int64_t kPlannedVocab = 50257;

/// `samples` windows of `block_size` tokens of a `vocab_size`-token vocabulary (the fields of
/// data::TokenWindows: tokens i32 [T] input, targets i64 [T] target). write() throws
/// Error(internal): a planned set is never read. Errors: Error(invalid_argument) for a size < 1.
std::shared_ptr<const data::FieldDataset> planned_windows(int64_t block_size, int64_t vocab_size, int64_t samples);

}  // namespace tandem::train

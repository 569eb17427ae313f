// Internal: token data for `tandem train` (a language model): --data names a folder holding
// train.tok and val.tok, token shards (tandem/data/token_shard.h, nanoGPT's train.bin /
// val.bin split), read as windows of the model's block size (data::TokenWindows).
// Thread-safety: functions without shared state.
#pragma once

#include <memory>
#include <string>

#include "tandem/data/field_dataset.h"

namespace tandem::train {

/// Whether `data_dir` is a folder holding train.tok (token data rather than images).
bool is_token_data(const std::string& data_dir);

struct TokenSplits {
  std::shared_ptr<const data::FieldDataset> train, test;
  int64_t vocab_size = 0;
};

/// <data_dir>/train.tok and <data_dir>/val.tok as windows of `block_size` tokens (the fields
/// tokens i32 [T] input and targets i64 [T] target). Throws the shards' errors (naming the
/// file: missing, wrong magic or version, truncated, an id >= vocab_size, too short for a
/// window), and Error(invalid_argument, "[train] --data D: ...") when the two shards' vocabularies
/// differ.
TokenSplits open_token_splits(const std::string& data_dir, int64_t block_size);

}  // namespace tandem::train

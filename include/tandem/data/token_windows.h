// TokenWindows: a language model's samples, windows of a token shard (token_shard.h). Sample i
// of epoch e is the block_size + 1 tokens from a start drawn by Philox(seed, epoch, i), so the
// batches are the same for any number of loader workers and a resumed run continues with the
// same windows; the fields are `tokens` i32 [T] (input: the first T) and `targets` i64 [T]
// (target: the last T, each the token after its input), both checked against the vocabulary.
// An epoch has floor((size - 1) / T) samples: as many tokens as the shard, in expectation each
// once. Errors (constructor): a block size < 1 or one the shard cannot hold (it needs at least
// block_size + 1 tokens), Error(invalid_argument) naming the shard, its size and the block size.
// Thread-safety: as FieldDataset (immutable; write() is const and reentrant).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/data/field_dataset.h"
#include "tandem/data/token_shard.h"

namespace tandem::data {

class TokenWindows final : public FieldDataset {
 public:
  TokenWindows(std::shared_ptr<const TokenShard> shard, int64_t block_size);
  int64_t size() const override { return size_; }
  const std::vector<Field>& fields() const override { return fields_; }
  void write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch& scratch,
             WriteTimes* times) const override;
  /// The first token of sample `key.index`'s window, in [0, shard size - block_size - 1].
  int64_t window_start(const SampleKey& key) const;
  int64_t block_size() const { return block_; }
  const TokenShard& shard() const { return *shard_; }

 private:
  std::shared_ptr<const TokenShard> shard_;
  int64_t block_;
  int64_t size_;
  std::vector<Field> fields_;
};

}  // namespace tandem::data

// TokenWindows (tandem/data/token_windows.h).
#include "tandem/data/token_windows.h"

#include <cstring>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::data {

TokenWindows::TokenWindows(std::shared_ptr<const TokenShard> shard, int64_t block_size)
    : shard_(std::move(shard)), block_(block_size) {
  TD_CHECK_ARG(shard_ != nullptr, "token_windows", "expected a token shard");
  TD_CHECK_ARG(block_ >= 1 && block_ <= shard_->size() - 1, "token_windows",
               "{}: a block size of {} needs at least {} tokens, the shard holds {}", shard_->path(), block_, block_ + 1,
               shard_->size());
  size_ = (shard_->size() - 1) / block_;
  const auto vocab = static_cast<int64_t>(shard_->vocab_size());
  fields_ = {Field{"tokens", DType::i32, {block_}, FieldRole::input, vocab},
             Field{"targets", DType::i64, {block_}, FieldRole::target, vocab}};
}

int64_t TokenWindows::window_start(const SampleKey& key) const {
  Philox rng(key.seed, key.epoch, static_cast<uint32_t>(key.index), static_cast<uint32_t>(key.index >> 32));
  const auto starts = static_cast<uint64_t>(shard_->size() - block_);  // starts 0 .. size - block - 1
  return static_cast<int64_t>(rng.randint64(starts));
}

void TokenWindows::write(int64_t index, const SampleKey& key, std::byte* const* out, SampleScratch&,
                         WriteTimes*) const {
  TD_CHECK_ARG(index >= 0 && index < size_, "token_windows", "expected a sample index in [0, {}), found {}", size_,
               index);
  const int64_t start = window_start(key);
  auto* tokens = reinterpret_cast<int32_t*>(out[0]);
  auto* targets = reinterpret_cast<int64_t*>(out[1]);
  for (int64_t t = 0; t < block_; ++t) {
    tokens[t] = static_cast<int32_t>(shard_->token(start + t));
    targets[t] = static_cast<int64_t>(shard_->token(start + t + 1));
  }
}

}  // namespace tandem::data

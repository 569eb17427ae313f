#include "train/token_data.h"

#include <filesystem>

#include "tandem/data/token_shard.h"
#include "tandem/data/token_windows.h"
#include "tandem/error.h"

namespace tandem::train {

bool is_token_data(const std::string& data_dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(data_dir) / "train.tok", ec);
}

TokenSplits open_token_splits(const std::string& data_dir, int64_t block_size) {
  const std::filesystem::path dir(data_dir);
  auto train = std::make_shared<const data::TokenShard>((dir / "train.tok").string());
  auto val = std::make_shared<const data::TokenShard>((dir / "val.tok").string());
  TD_CHECK_ARG(train->vocab_size() == val->vocab_size(), "train",
               "--data {}: train.tok holds a vocabulary of {} tokens and val.tok one of {}: expected the same",
               data_dir, train->vocab_size(), val->vocab_size());
  TokenSplits s;
  s.vocab_size = train->vocab_size();
  s.train = std::make_shared<const data::TokenWindows>(std::move(train), block_size);
  s.test = std::make_shared<const data::TokenWindows>(std::move(val), block_size);
  return s;
}

}  // namespace tandem::train

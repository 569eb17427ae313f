// The token shards the memory CLI tests train on: ids (7 i + i / 13) mod 64, 2,500 of them in
// DIR/train.tok and 500 in DIR/val.tok (vocabulary 64).
#pragma once

#include <cstdint>
#include <vector>

#include "data/temp_dir.h"
#include "tandem/data/token_shard.h"

namespace tandem::testing {

inline void write_rule_shards(const TempDir& dir) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 3000; ++i) ids.push_back((i * 7 + i / 13) % 64);
  data::write_token_shard(dir.file("train.tok"), std::vector<uint32_t>(ids.begin(), ids.begin() + 2500), 64);
  data::write_token_shard(dir.file("val.tok"), std::vector<uint32_t>(ids.begin() + 2500, ids.end()), 64);
}

}  // namespace tandem::testing

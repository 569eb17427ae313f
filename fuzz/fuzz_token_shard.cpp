// Fuzz target: token shards through TokenShard (as `tandem train --model gpt-mini` opens
// them), every token read back. Errors: tandem::Error is expected; see fuzz_target.h.
#include <vector>

#include "fuzz_target.h"
#include "tandem/data/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tandem::fuzz::write_scratch("input.tokens", data, size);
  return tandem::fuzz::expect_error_or_ok([&] {
    const tandem::data::TokenShard shard(path);
    std::vector<int32_t> ids(static_cast<size_t>(std::min<int64_t>(shard.size(), 4096)));
    if (!ids.empty()) shard.tokens(0, static_cast<int64_t>(ids.size()), ids.data());
  });
}

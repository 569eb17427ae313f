// TokenWindows (tandem/data/token_windows.h): windows of a token shard keyed by (seed, epoch,
// index), the same batches for any number of loader workers, and the block size refused by
// name when the shard cannot hold it.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "data/dataset_test_util.h"
#include "data/temp_dir.h"
#include "tandem/data/loader.h"
#include "tandem/data/token_shard.h"
#include "tandem/data/token_windows.h"

namespace tandem::data {
namespace {

using tandem::testing::error_of;
using tandem::testing::TempDir;

std::shared_ptr<const TokenShard> shard_of(const TempDir& dir, int64_t n, uint32_t vocab) {
  std::vector<uint32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>((i * 7919 + 3) % vocab));
  write_token_shard(dir.file("t.tok"), ids, vocab);
  return std::make_shared<const TokenShard>(dir.file("t.tok"));
}

TEST(TokenWindows, WindowsAreShiftedPairsFromKeyedStarts) {
  TempDir dir;
  const auto shard = shard_of(dir, 1001, 500);
  const TokenWindows w(shard, 8);
  EXPECT_EQ(w.size(), 125);  // (1001 - 1) / 8: the shard's tokens once per epoch
  ASSERT_EQ(w.fields().size(), 2u);
  EXPECT_EQ(w.fields()[0].name, "tokens");
  EXPECT_EQ(w.fields()[0].dtype, DType::i32);
  EXPECT_EQ(w.fields()[0].shape, (Shape{8}));
  EXPECT_EQ(w.fields()[1].name, "targets");
  EXPECT_EQ(w.fields()[1].dtype, DType::i64);
  EXPECT_EQ(w.fields()[1].classes, 500);
  std::vector<int32_t> tokens(8);
  std::vector<int64_t> targets(8);
  std::byte* out[2] = {reinterpret_cast<std::byte*>(tokens.data()), reinterpret_cast<std::byte*>(targets.data())};
  SampleScratch scratch;
  std::set<int64_t> starts;
  for (int64_t i = 0; i < w.size(); ++i) {
    const SampleKey key{3, 1, i};
    const int64_t s = w.window_start(key);
    ASSERT_GE(s, 0);
    ASSERT_LE(s, 1001 - 9);
    starts.insert(s);
    w.write(i, key, out, scratch, nullptr);
    for (int t = 0; t < 8; ++t) {
      ASSERT_EQ(tokens[t], static_cast<int32_t>(shard->token(s + t)));
      ASSERT_EQ(targets[t], static_cast<int64_t>(shard->token(s + t + 1)));
    }
    EXPECT_EQ(w.window_start(key), s);  // a pure function of the key
  }
  EXPECT_GT(starts.size(), 100u);  // spread over the shard
  EXPECT_NE(w.window_start({3, 2, 0}), w.window_start({3, 1, 0}));  // another epoch, other windows
}

TEST(TokenWindows, TheSameBatchesForAnyWorkerCount) {
  TempDir dir;
  const auto w = std::make_shared<TokenWindows>(shard_of(dir, 4000, 300), 16);
  std::vector<std::vector<int32_t>> first;
  for (int workers : {0, 1, 2}) {
    LoaderOptions o;
    o.batch_size = 7;
    o.num_workers = workers;
    o.shuffle = true;
    o.seed = 11;
    Loader loader(w, o);
    loader.begin_epoch(4, 0);
    std::vector<std::vector<int32_t>> got;
    Batch b;
    while (loader.next(b)) {
      const Tensor& x = b.input();
      got.emplace_back(x.data<int32_t>(), x.data<int32_t>() + x.numel());
    }
    EXPECT_EQ(got.size(), static_cast<size_t>((w->size() + 6) / 7));
    if (first.empty()) first = got;
    EXPECT_EQ(got, first) << workers << " workers";
  }
}

TEST(TokenWindows, ABlockTheShardCannotHoldIsNamed) {
  TempDir dir;
  const auto shard = shard_of(dir, 10, 50);
  EXPECT_EQ(error_of([&] { TokenWindows w(shard, 10); }, ErrorCode::invalid_argument),
            "[token_windows] " + dir.file("t.tok") + ": a block size of 10 needs at least 11 tokens, the shard holds 10");
  error_of([&] { TokenWindows w(shard, 0); }, ErrorCode::invalid_argument);
  EXPECT_EQ(TokenWindows(shard, 9).size(), 1);
}

}  // namespace
}  // namespace tandem::data

// The sharded checkpoint format (src/train/checkpoint/shard_files.h) without a run: two "ranks"
// (threads) write their shards of a state, rank 0 completes the folder; read back whole it is
// the state; consolidated it is the model's tensors; a missing piece, a failed rank and a
// missing rank are named.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "data/temp_dir.h"
#include "tandem/error.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/consolidate.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::testing {
namespace {

using json = nlohmann::json;
namespace ck = train::checkpoint;

Tensor iota(const Shape& s, float from) {
  Tensor t = Tensor::empty(s, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = from + static_cast<float>(i);
  return t;
}

// Rank r's pieces of "model.w" [3, 4] (elements [6r, 6r + 6)) and "optim.w.step" (rank 0).
struct ShardOf {
  NamedTensors tensors;
  json pieces = json::object();
  ShardOf(int r, bool cover = true) {
    const Tensor w = iota({12}, 0.0f);
    const int64_t n = cover || r == 0 ? 6 : 5;
    tensors.emplace_back("model.w@" + std::to_string(6 * r), w.narrow(0, 6 * r, n).clone());
    pieces["model.w@" + std::to_string(6 * r)] = {{"name", "model.w"}, {"begin", 6 * r}, {"shape", {3, 4}}};
    if (r == 0) {
      Tensor step = Tensor::empty({1}, DType::i64);
      *step.data<int64_t>() = 7;
      tensors.emplace_back("optim.w.step@0", step);
      pieces["optim.w.step@0"] = {{"name", "optim.w.step"}, {"begin", 0}, {"shape", json::array()}};
    }
  }
};

void write_two(const std::string& dir, bool cover = true) {
  const json state = {{"global_step", 3}, {"weights", {{"model", "mlp"}, {"metadata", {{"k", "v"}}}, {"tied", json::array({json::array({"v", "w"})})}}}};
  std::thread other([&] {
    const ShardOf s(1, cover);
    ck::write_shard(dir, "step-0000000003.shards", 1, 2, state, s.pieces, s.tensors, 10);
  });
  const ShardOf s(0);
  try {
    ck::write_shard(dir, "step-0000000003.shards", 0, 2, state, s.pieces, s.tensors, 10);
  } catch (...) {
    other.join();
    throw;
  }
  other.join();
}

TEST(ShardFiles, TwoRanksShardsReadBackWhole) {
  TempDir dir;
  write_two(dir.str());
  const std::string path = dir.file("step-0000000003.shards");
  ASSERT_TRUE(ck::is_sharded_checkpoint(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const json m = ck::read_shard_manifest(path);
  EXPECT_EQ(m["world_size"], 2);
  EXPECT_EQ(m["tensors"]["model.w"]["shape"], json({3, 4}));
  EXPECT_EQ(m["tensors"]["model.w"]["pieces"].size(), 2u);
  const ck::CheckpointFile f = ck::read_any_checkpoint(path);
  EXPECT_EQ(f.state["global_step"], 3);
  const Tensor& w = find_tensor(f.tensors, "model.w", path);
  ASSERT_EQ(w.shape(), (Shape{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(w.data<float>()[i], static_cast<float>(i));
  EXPECT_EQ(*find_tensor(f.tensors, "optim.w.step", path).data<int64_t>(), 7);
  EXPECT_EQ(find_tensor(f.tensors, "optim.w.step", path).shape(), Shape{});
}

TEST(ShardFiles, ConsolidatedHoldsTheModelAndItsTiedAlias) {
  TempDir dir;
  write_two(dir.str());
  const ck::ConsolidateReport r = ck::consolidate_checkpoint(dir.file("step-0000000003.shards"), dir.file("w.safetensors"), false);
  EXPECT_EQ(r.shards, 2);
  std::map<std::string, std::string> meta;
  const NamedTensors t = load_safetensors(dir.file("w.safetensors"), &meta);
  ASSERT_EQ(t.size(), 2u);  // w and its alias v; no optimizer state
  for (const char* name : {"w", "v"}) {
    const Tensor& w = find_tensor(t, name, "w.safetensors");
    for (int i = 0; i < 12; ++i) EXPECT_EQ(w.data<float>()[i], static_cast<float>(i));
  }
  EXPECT_EQ(meta["format"], "pt");
  EXPECT_EQ(meta["model"], "mlp");
  EXPECT_EQ(meta["k"], "v");
  ck::consolidate_checkpoint(dir.str(), dir.file("all.safetensors"), true);  // the folder: its newest
  EXPECT_EQ(load_safetensors(dir.file("all.safetensors")).size(), 3u);
}

TEST(ShardFiles, AnElementInNoShardFailsTheWrite) {
  TempDir dir;
  try {
    write_two(dir.str(), false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'model.w': elements from 11 of 12 are in no shard"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(ck::is_sharded_checkpoint(dir.file("step-0000000003.shards")));
}

TEST(ShardFiles, AMissingRankTimesOutNamingIt) {
  TempDir dir;
  const ShardOf s(0);
  try {
    ck::write_shard(dir.str(), "step-0000000001.shards", 0, 2, json{{"global_step", 1}}, s.pieces, s.tensors, 0.2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::distributed);
    EXPECT_NE(std::string(e.what()).find("the shards of rank 1 did not come within 0.2 s"), std::string::npos)
        << e.what();
  }
  // The unfinished folder is no checkpoint, and preparing the folder removes it.
  EXPECT_TRUE(ck::list_checkpoints(dir.str()).empty());
  ck::prepare_checkpoint_dir(dir.str());
  EXPECT_FALSE(std::filesystem::exists(dir.file("step-0000000001.shards.tmp")));
}

TEST(ShardFiles, AFailedRankIsNamedAtOnce) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("step-0000000001.shards.tmp"));
  {
    std::ofstream(dir.file("step-0000000001.shards.tmp/rank-1.failed")) << "No space left on device";
  }
  const ShardOf s(0);
  try {
    ck::write_shard(dir.str(), "step-0000000001.shards", 0, 2, json{{"global_step", 1}}, s.pieces, s.tensors, 60);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 could not write its shard: No space left on device"), std::string::npos)
        << e.what();
  }
}

TEST(ShardFiles, ACorruptShardIsPassedOverForTheOneBefore) {
  TempDir dir;
  write_two(dir.str());
  ck::publish_checkpoint(dir.str(), "step-0000000003.shards", json{{"global_step", 3}}, 3);
  std::filesystem::rename(dir.file("step-0000000003.shards"), dir.file("step-0000000004.shards"));
  std::filesystem::copy(dir.file("step-0000000004.shards"), dir.file("step-0000000003.shards"));
  {
    std::fstream f(dir.file("step-0000000004.shards/rank-1-of-2.safetensors"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('\x7f');
  }
  ck::publish_checkpoint(dir.str(), "step-0000000004.shards", json{{"global_step", 4}}, 3);
  const ck::Located loc = ck::locate_checkpoint(dir.str());
  EXPECT_EQ(loc.path, dir.file("step-0000000003.shards"));
  EXPECT_NE(loc.fallback.find("fails its CRC-32 check"), std::string::npos) << loc.fallback;
}

}  // namespace
}  // namespace tandem::testing

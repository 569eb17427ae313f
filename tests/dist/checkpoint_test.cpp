// Checkpoints of a data-parallel run, on ranks that are threads: rank 0 alone writes; a run
// resumed on 2 ranks from the middle of an epoch or from an epoch's end ends with the weights
// of the uninterrupted run bit for bit (plain, with --zero 1, whose shards are gathered into
// the checkpoint, and with the optimizer offloaded, on cpu and virt); a checkpoint of 2 ranks refuses to
// resume in 1 process. (mpirun_test.cpp and mpirun_train.sh do the same under mpirun.)
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint_helpers.h"
#include "dist/dist_test_util.h"
#include "tandem/error.h"
#include "tandem/virt.h"
#include "train/checkpoint/checkpoint_dir.h"

namespace tandem::testing {
namespace {

// 2 ranks of batch 8, 2 epochs of 20 steps, a checkpoint every 7 steps (7, 14 | 20 | 21, 28, 35 | 40).
train::TrainConfig ckpt_config(const std::string& dir) {
  train::TrainConfig c = dist_config("adamw");
  c.batch_size = 8;
  c.epochs = 2;
  c.log_interval = 4;  // checkpoints fall between read-backs
  c.checkpoint_dir = dir;
  c.checkpoint_every = 7;
  c.keep_checkpoints = 100;
  return c;
}

struct Outcome {
  std::vector<std::vector<std::vector<float>>> weights;  // per rank
  std::vector<train::TrainResult> results;
};

Outcome on_two_ranks(const train::TrainConfig& cfg) {
  comm::LocalGroup group(2, 60);
  Outcome o;
  o.weights.resize(2);
  o.results.resize(2);
  if (cfg.device == "virt") set_virt_device_count(2);  // replicas in one process: a device each
  on_ranks(2, [&](int r) {
    train::TrainConfig mine = cfg;
    if (cfg.device == "virt") mine.device = "virt:" + std::to_string(r);
    train::Trainer t(mine, dist_train_set(), dist_test_set(), group.communicator(r));
    o.results[static_cast<size_t>(r)] = t.fit();
    o.weights[static_cast<size_t>(r)] = trained_weights(t);
  });
  EXPECT_EQ(o.weights[0], o.weights[1]) << "the ranks' weights differ";
  return o;
}

void check_resumes(train::TrainConfig cfg, const std::string& tag) {
  ScratchDir dir("dist-" + tag);
  cfg.checkpoint_dir = dir.path + "/ck";
  const Outcome full = on_two_ranks(cfg);
  EXPECT_EQ(full.results[0].checkpoints, 7);  // rank 0 wrote them all
  EXPECT_EQ(full.results[1].checkpoints, 0);  // rank 1 none
  const std::vector<std::string> names = train::checkpoint::list_checkpoints(cfg.checkpoint_dir);
  ASSERT_EQ(names.size(), 7u);
  for (const char* name : {"step-0000000014.safetensors", "step-0000000020.safetensors", "step-0000000035.safetensors"}) {
    SCOPED_TRACE(name);
    train::TrainConfig r = cfg;
    r.checkpoint_dir.clear();
    r.checkpoint_every = 0;
    r.resume = cfg.checkpoint_dir + "/" + name;
    const Outcome again = on_two_ranks(r);
    EXPECT_TRUE(again.weights[0] == full.weights[0]) << "the resumed run's weights differ";
    ASSERT_EQ(again.results[0].epochs.size(), 2u);
    EXPECT_EQ(again.results[0].epochs[1].test_accuracy, full.results[0].epochs[1].test_accuracy);
  }
}

TEST(DistCheckpoint, ResumedOnTwoRanksGivesTheUninterruptedWeightsBitForBit) {
  check_resumes(ckpt_config(""), "plain");
}

TEST(DistCheckpoint, ZeroShardsAreGatheredAndResumedBitForBit) {
  train::TrainConfig c = ckpt_config("");
  c.zero = 1;
  check_resumes(c, "zero");
}

TEST(DistCheckpoint, WithTheOffloadedOptimizerBitForBit) {
  train::TrainConfig c = ckpt_config("");
  c.optimizer_device = "cpu";
  check_resumes(c, "offload");
}

// On virt the stop is agreed through a device tensor on the compute stream, and the offloaded
// optimizer's update thread all-reduces on the same communicator.
TEST(DistCheckpoint, OnVirtWithTheOffloadedOptimizerBitForBit) {
  train::TrainConfig c = ckpt_config("");
  c.device = "virt";
  c.optimizer_device = "cpu";
  check_resumes(c, "virt");
}

TEST(DistCheckpoint, OnVirtWithZeroShardsBitForBit) {
  train::TrainConfig c = ckpt_config("");
  c.device = "virt";
  c.zero = 1;
  check_resumes(c, "virt-zero");
}

TEST(DistCheckpoint, AnotherWorldSizeIsRefused) {
  ScratchDir dir("dist-world");
  train::TrainConfig c = ckpt_config(dir.path + "/ck");
  c.epochs = 1;
  on_two_ranks(c);
  train::TrainConfig one = c;
  one.checkpoint_dir.clear();
  one.checkpoint_every = 0;
  one.resume = c.checkpoint_dir;
  try {
    train::Trainer t(one, dist_train_set(), dist_test_set());
    ADD_FAILURE() << "a 2-rank checkpoint resumed in 1 process";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saved by a run of 2 ranks, this one has 1: expected the same world size"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::testing

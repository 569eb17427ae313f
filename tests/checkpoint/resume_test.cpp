// Resuming from a checkpoint gives the uninterrupted run's weights and per-epoch figures bit
// for bit: from the middle of an epoch (between two metrics read-backs), from an epoch's end,
// from the middle of the second epoch, with another worker count, on cpu and on virt with the
// optimizer offloaded to the cpu (also with the one-step delayed update, with and without a
// warm-up, and with an evaluation at each checkpoint; and with gradient accumulation); and
// across the two (one state form).
#include <gtest/gtest.h>

#include <filesystem>

#include "tandem/backend.h"
#include "tandem/error.h"
#include "tandem/virt.h"
#include "checkpoint/checkpoint_helpers.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/checkpoint_file.h"

using namespace tandem;
using tandem::testing::file_bytes;
using tandem::testing::ScratchDir;
using tandem::testing::small_config;
using tandem::testing::train_and_save;

namespace {

void expect_same_epochs(const train::TrainResult& a, const train::TrainResult& b) {
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    SCOPED_TRACE("epoch " + std::to_string(i + 1));
    EXPECT_EQ(a.epochs[i].epoch, b.epochs[i].epoch);
    EXPECT_EQ(a.epochs[i].train_loss, b.epochs[i].train_loss);  // exact: same windows, same sums
    EXPECT_EQ(a.epochs[i].train_accuracy, b.epochs[i].train_accuracy);
    EXPECT_EQ(a.epochs[i].test_loss, b.epochs[i].test_loss);
    EXPECT_EQ(a.epochs[i].test_accuracy, b.epochs[i].test_accuracy);
    EXPECT_EQ(a.epochs[i].lr, b.epochs[i].lr);
  }
  EXPECT_EQ(a.best_epoch, b.best_epoch);
}

void check_resumes(train::TrainConfig cfg, train::TrainConfig resumed_cfg, const std::string& tag) {
  ScratchDir dir(tag);
  cfg.checkpoint_dir = dir.path + "/ck";
  cfg.checkpoint_every = 7;  // steps 7, 14, 21, 28 | 30 (epoch end) | 35, 42, 49, 56 | 60
  cfg.keep_checkpoints = 100;
  const auto full = train_and_save(cfg, dir.path + "/full.safetensors");
  const std::vector<std::string> names = train::checkpoint::list_checkpoints(cfg.checkpoint_dir);
  ASSERT_EQ(names.size(), 10u);
  for (const char* name : {"step-0000000014.safetensors", "step-0000000030.safetensors", "step-0000000049.safetensors"}) {
    SCOPED_TRACE(name);
    train::TrainConfig r = resumed_cfg;
    r.resume = cfg.checkpoint_dir + "/" + name;
    const auto again = train_and_save(r, dir.path + "/resumed.safetensors");
    EXPECT_TRUE(again.weights == full.weights) << "the resumed run's weights differ";
    expect_same_epochs(full.result, again.result);
  }
}

TEST(Resume, MidEpochAndAcrossAnEpochBoundaryOnCpuBitForBit) {
  train::TrainConfig resumed = small_config();
  resumed.num_workers = 2;  // free to differ
  check_resumes(small_config(), resumed, "cpu");
}

// small_config() on virt with the optimizer offloaded to the cpu and the update delayed by
// `delay` steps.
train::TrainConfig offloaded_on_virt(int delay = 0) {
  train::TrainConfig cfg = small_config();
  cfg.device = "virt";
  cfg.optimizer_device = "cpu";
  cfg.offload_delay = delay;
  return cfg;
}

TEST(Resume, OnVirtWithTheOptimizerOffloadedBitForBit) {
  const train::TrainConfig cfg = offloaded_on_virt();
  check_resumes(cfg, cfg, "virt");
}

// In bf16 (and fp16 without a scaler) the offloaded optimizer keeps the f32 master weights
// and moments on the host; a checkpoint writes them into the model's f32 values first, so the
// resumed run continues bit for bit.
TEST(Resume, OnVirtWithTheOptimizerOffloadedInBf16BitForBit) {
  train::TrainConfig cfg = offloaded_on_virt();
  cfg.precision = "bf16";
  check_resumes(cfg, cfg, "virt-bf16");
}

TEST(Resume, OnCpuWithTheOptimizerOffloadedInFp16BitForBit) {
  train::TrainConfig cfg = small_config();
  cfg.optimizer_device = "cpu";
  cfg.precision = "fp16";
  cfg.loss_scale = "none";
  check_resumes(cfg, cfg, "cpu-fp16");
}

// A split run (--devices, fixed parts) resumes bit for bit: the checkpoint holds the first
// device's replica (weights, optimizer, scaler) and the resumed run sends it to the others
// before its first step. With --split auto the parts are not saved: they restart equal and
// are measured again, so only the order of the gradients' sums can differ.
TEST(Resume, SplitOverTwoDevicesBitForBit) {
  set_virt_device_count(2);
  train::TrainConfig cfg = small_config();
  cfg.devices = "virt:0,virt:1";
  cfg.split = "3,1";
  check_resumes(cfg, cfg, "split");
}

TEST(Resume, SplitInBf16WithTheLossScalerBitForBit) {
  set_virt_device_count(2);
  train::TrainConfig cfg = small_config();
  cfg.devices = "virt:1,cpu";
  cfg.split = "1,1";
  cfg.precision = "bf16";
  cfg.loss_scale = "dynamic";
  cfg.clip_grad_norm = 1.0;
  check_resumes(cfg, cfg, "split-scaled");
}

TEST(Resume, SplitWithTheOptimizerOnTheCpuBitForBit) {
  set_virt_device_count(2);
  train::TrainConfig cfg = small_config();
  cfg.devices = "virt:0,virt:1";
  cfg.split = "5,3";
  cfg.optimizer_device = "cpu";
  check_resumes(cfg, cfg, "split-offload");
}

// With --offload-delay 1 a checkpoint taken while an upload is pending must leave the run's
// math alone (the run with checkpoints gives the weights of the one without) and must resume
// with the same stale parameters and the same upload.
// `accum` > 1: the same 30 steps an epoch of accum micro-batches of 16 / accum samples.
void check_delayed_resumes(int64_t warmup, bool pending_at_14, const std::string& tag, int64_t accum = 1) {
  train::TrainConfig cfg = offloaded_on_virt(1);
  cfg.batch_size = 16 / accum;
  cfg.grad_accum_steps = accum;
  cfg.offload_delay_warmup = warmup;
  cfg.bucket_cap_mb = 0.05;  // several buckets
  ScratchDir dir(tag + "-plain");
  const auto plain = train_and_save(cfg, dir.path + "/plain.safetensors");
  train::TrainConfig with_ckpt = cfg;
  with_ckpt.checkpoint_dir = dir.path + "/ck";
  with_ckpt.checkpoint_every = 7;
  with_ckpt.keep_checkpoints = 100;
  const auto checked = train_and_save(with_ckpt, dir.path + "/checked.safetensors");
  EXPECT_TRUE(checked.weights == plain.weights) << "taking checkpoints changed the delayed run's weights";
  expect_same_epochs(plain.result, checked.result);
  auto pending = [&](const char* name) {
    const auto f = train::checkpoint::read_checkpoint_file(with_ckpt.checkpoint_dir + "/" + name);
    bool master = false;
    for (const auto& [n, t] : f.tensors) master = master || n.find(".master") != std::string::npos;
    const bool flag = f.state.at("optimizer").at("upload_pending").get<bool>();
    EXPECT_EQ(flag, master) << name;
    return flag;
  };
  EXPECT_EQ(pending("step-0000000014.safetensors"), pending_at_14);
  EXPECT_FALSE(pending("step-0000000030.safetensors"));  // the epoch's evaluation flushed it
  EXPECT_TRUE(pending("step-0000000049.safetensors"));
  check_resumes(cfg, cfg, tag);
}

TEST(Resume, OnVirtWithTheDelayedUpdateBitForBit) { check_delayed_resumes(0, true, "delay1"); }

// Gradient accumulation with the optimizer offloaded: the checkpoints fall between optimizer
// steps, and the resumed run restarts at the step's first micro-batch (8 x 2 samples a step).
TEST(Resume, AccumulatedWithTheOptimizerOffloadedBitForBit) {
  train::TrainConfig cfg = offloaded_on_virt();
  cfg.bucket_cap_mb = 0.05;
  cfg.batch_size = 8;
  cfg.grad_accum_steps = 2;
  check_resumes(cfg, cfg, "accum-offload");
}

TEST(Resume, AccumulatedWithTheDelayedUpdateBitForBit) { check_delayed_resumes(0, true, "accum-delay1", 2); }

TEST(Resume, OnVirtWithTheDelayedUpdateAfterAWarmUpBitForBit) {
  check_delayed_resumes(20, false, "delay1-warmup");  // step 14 in the warm-up, 21 on delayed
}

// An evaluation flushes the pending delayed update into the weights, which changes the steps
// after it: a checkpoint of a step that evaluates is taken after the evaluation (as at an
// epoch's end), so it holds no pending upload and the resumed run goes on as the whole one.
TEST(Resume, OnVirtWithTheDelayedUpdateAndAnEvaluationAtEachCheckpointBitForBit) {
  train::TrainConfig cfg = offloaded_on_virt(1);
  cfg.eval_interval = 7;  // the steps check_resumes checkpoints at
  check_resumes(cfg, cfg, "delay1-eval");
  ScratchDir dir("delay1-eval-pending");
  cfg.checkpoint_dir = dir.path + "/ck";
  cfg.checkpoint_every = 7;
  cfg.max_steps = 14;
  train_and_save(cfg, dir.path + "/w.safetensors");
  const auto f = train::checkpoint::read_checkpoint_file(cfg.checkpoint_dir + "/step-0000000014.safetensors");
  EXPECT_FALSE(f.state.at("optimizer").at("upload_pending").get<bool>());
}

// A checkpoint whose offloaded optimizer still owes its delayed upload holds the master copy
// only that home can use: another home refuses it in one line that says so, even when forced.
TEST(Resume, APendingOffloadedUpdateIntoAnotherHomeIsRefusedInOneLine) {
  train::TrainConfig cfg = offloaded_on_virt(1);
  cfg.epochs = 1;
  cfg.max_steps = 14;
  ScratchDir dir("delay1-other-home");
  cfg.checkpoint_dir = dir.path + "/ck";
  cfg.checkpoint_every = 7;
  train_and_save(cfg, dir.path + "/w.safetensors");
  const std::string ck = cfg.checkpoint_dir + "/step-0000000007.safetensors";
  ASSERT_TRUE(train::checkpoint::read_checkpoint_file(ck).state.at("optimizer").at("upload_pending").get<bool>());
  train::TrainConfig other = small_config();
  other.device = "virt";
  other.epochs = 1;
  other.max_steps = 14;
  other.force = true;
  other.resume = ck;
  try {
    train::Trainer t(other, tandem::testing::train_set(), tandem::testing::test_set());
    t.fit();
    FAIL() << "a pending offloaded update was resumed into the resident home";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("pending delayed update of the offloaded optimizer"), std::string::npos) << what;
    EXPECT_NE(what.find("expected --optimizer-device cpu"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Resume, FromVirtOffloadedToCpuOnDevice) {
  train::TrainConfig virt = small_config();
  virt.device = "virt";
  virt.optimizer_device = "cpu";
  check_resumes(virt, small_config(), "cross");
}

TEST(Resume, RefusesFlagsThatChangeTheMathUnlessForced) {
  ScratchDir dir("flags");
  train::TrainConfig cfg = small_config();
  cfg.epochs = 1;
  cfg.checkpoint_dir = dir.path;
  train_and_save(cfg, dir.path + "/w.safetensors");
  train::TrainConfig other = small_config();
  other.epochs = 1;
  other.lr = 1e-3;
  other.resume = dir.path;
  try {
    train::Trainer t(other, tandem::testing::train_set(), tandem::testing::test_set());
    FAIL() << "a resume with another --lr was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--lr 0.001 (given or its default) differs from the checkpoint's 0.005"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  other.force = true;
  train::Trainer t(other, tandem::testing::train_set(), tandem::testing::test_set());
  EXPECT_NE(t.describe().find("--lr: now 0.001, checkpoint 0.005"), std::string::npos) << t.describe();
  // Speed-only flags may differ without --force.
  train::TrainConfig faster = small_config();
  faster.epochs = 1;
  faster.num_workers = 2;
  faster.prefetch_factor = 4;
  faster.eval_batch_size = 32;
  faster.resume = dir.path;
  EXPECT_NO_THROW(train::Trainer(faster, tandem::testing::train_set(), tandem::testing::test_set()));
}

// In bf16 the offloaded optimizer takes bf16 gradients, the device's f32 ones: the optimizer
// device changes the math there (in fp32 it does not: FromVirtOffloadedToCpuOnDevice).
TEST(Resume, RefusesAnotherOptimizerDeviceInBf16UnlessForced) {
  if (!ops::cpu_backend().supports(ops::Op::conv2d_forward, DType::bf16)) GTEST_SKIP() << "no bf16 on this CPU";
  ScratchDir dir("bf16-optdev");
  train::TrainConfig cfg = small_config();
  cfg.epochs = 1;
  cfg.precision = "bf16";
  cfg.checkpoint_dir = dir.path;
  train_and_save(cfg, dir.path + "/w.safetensors");
  train::TrainConfig other = cfg;
  other.checkpoint_dir.clear();
  other.device = "virt";
  other.optimizer_device = "cpu";
  other.resume = dir.path;
  try {
    train::Trainer t(other, tandem::testing::train_set(), tandem::testing::test_set());
    FAIL() << "a bf16 resume with another --optimizer-device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer-device \"cpu\" (given or its default) differs from the "
                                         "checkpoint's \"device\""),
              std::string::npos)
        << e.what();
  }
  other.force = true;
  EXPECT_NO_THROW(train::Trainer(other, tandem::testing::train_set(), tandem::testing::test_set()));
}

}  // namespace

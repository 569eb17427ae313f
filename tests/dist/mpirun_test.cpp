// The Trainer on ranks that are processes of mpirun (the mpi communicator): ctest's
// dist_mpi_2ranks starts these under `mpirun -np 2` (label mpi); a plain run skips them.
//  - 2 ranks of batch 8 end 20 steps within the fp32 reduction-order tolerance of 1 process of
//    batch 16 (the bounds of equivalence_test.cpp), and every rank holds the same bits; also
//    with 2 micro-batches a step (--grad-accum-steps 2) against 1 process of 2 of batch 16;
//  - a 2-rank run with checkpoints, resumed on 2 ranks from the middle of an epoch, ends with
//    the uninterrupted run's weights bit for bit (plain and --zero 1);
//  - --zero 3 --param-device cpu: a GPT streamed from host homes sharded over the 2 ranks (each
//    holding half the elements) ends 10 steps of batch 2 per rank within the same tolerance of
//    one unsharded process of batch 4, evaluating test shards of unequal batch counts; with
//    fp16's dynamic loss scaling the ranks skip the overflowing steps that process skips.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "dist/dist_test_util.h"
#include "dist/mpi_ranks.h"
#include "tandem/safetensors.h"
#include "tandem/data/synthetic_dataset.h"
#include "memory/cli_shards.h"
#include "tandem/comm/communicator.h"
#include "tandem/pinned.h"
#include "tandem/train/memory_plan.h"

namespace tandem::testing {
namespace {

// The tests ended normally (passed or failed): finalise MPI at exit rather than abort the job.
class MpiCleanExit : public ::testing::Environment {
 public:
  void TearDown() override { comm::mpi_exit_cleanly(); }
};
[[maybe_unused]] ::testing::Environment* const kCleanExit = ::testing::AddGlobalTestEnvironment(new MpiCleanExit);

comm::CommunicatorPtr world_or_null() {
  if (!comm::mpi_built() || comm::launch_info().world_size != 2) return nullptr;
  comm::CommunicatorPtr w = comm::mpi_world();
  w->set_timeout_seconds(60);
  return w;
}

#define SKIP_UNLESS_MPIRUN(c)                                                                                \
  if (!(c)) GTEST_SKIP() << (comm::mpi_built() ? "not started by mpirun -np 2: ctest -L mpi runs this under mpirun" \
                                               : "built without MPI")

// Every rank's weights, gathered: rank r's flattened after rank r-1's.
std::vector<float> flat(const std::vector<std::vector<float>>& w) {
  std::vector<float> out;
  for (const auto& t : w) out.insert(out.end(), t.begin(), t.end());
  return out;
}

TEST(MpiDist, TwoRanksOfHalfTheBatchTrainLikeOneProcess) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  for (const char* optimizer : {"sgd", "adamw"}) {
    SCOPED_TRACE(optimizer);
    train::TrainConfig half = dist_config(optimizer);
    half.batch_size = 8;
    train::Trainer t(half, dist_train_set(), dist_test_set(), world);
    t.fit();
    const auto mine = trained_weights(t);
    expect_same_on_every_rank(*world, flat(mine));
    train::TrainConfig one = dist_config(optimizer);  // batch 16, one process
    train::Trainer single(one, dist_train_set(), dist_test_set());
    single.fit();
    const auto reference = flat(trained_weights(single));
    const auto got = flat(mine);
    ASSERT_EQ(got.size(), reference.size());
    double largest = 0, worst = 0, sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(reference[i])));
      const double d = std::abs(static_cast<double>(got[i]) - reference[i]);
      worst = std::max(worst, d);
      sum += d;
    }
    const double mean = sum / static_cast<double>(got.size());
    if (world->rank() == 0)
      std::printf("mpirun %s: largest weight %.4g, largest difference %.3g, mean %.3g\n", optimizer, largest, worst,
                  mean);
    if (std::string(optimizer) == "sgd") {
      EXPECT_LE(worst, 1e-5 * largest);
    } else {
      EXPECT_LE(worst, 0.02 * one.lr);
      EXPECT_LE(mean, 1e-4 * one.lr);
    }
  }
}

// --grad-accum-steps 2 under mpirun: each rank sums its 2 micro-batches of 8 and the last one's
// backward all-reduces the sums (no_sync), so 10 steps end within the SGD bound above of one
// process of 2 micro-batches of 16, with the optimizer beside the parameters and offloaded.
TEST(MpiDist, AccumulatedMicroBatchesTrainLikeOneProcess) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  for (const char* optimizer_device : {"device", "cpu"}) {
    SCOPED_TRACE(optimizer_device);
    train::TrainConfig half = dist_config("sgd");
    half.optimizer_device = optimizer_device;
    half.batch_size = 8;
    half.grad_accum_steps = 2;
    train::Trainer t(half, dist_train_set(), dist_test_set(), world);
    t.fit();
    const auto got = flat(trained_weights(t));
    expect_same_on_every_rank(*world, got);
    train::TrainConfig one = half;
    one.batch_size = 16;
    train::Trainer single(one, dist_train_set(), dist_test_set());
    single.fit();
    const auto reference = flat(trained_weights(single));
    ASSERT_EQ(got.size(), reference.size());
    double largest = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(reference[i])));
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - reference[i]));
    }
    if (world->rank() == 0)
      std::printf("mpirun --grad-accum-steps 2, --optimizer-device %s: largest weight %.4g, largest difference %.3g\n",
                  optimizer_device, largest, worst);
    EXPECT_LE(worst, 1e-5 * largest);
  }
}

// `c` resuming from checkpoint `file`, writing none.
train::TrainConfig resumed_from(train::TrainConfig c, const std::string& file) {
  c.checkpoint_dir.clear();
  c.checkpoint_every = 0;
  c.resume = file;
  return c;
}

TEST(MpiDist, ResumedFromACheckpointGivesTheUninterruptedWeightsBitForBit) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  // One folder for both ranks: mpirun is the parent of both.
  const std::string dir = "/tmp/tandem-mpidist-" + std::to_string(::getppid());
  for (int zero : {0, 1}) {
    SCOPED_TRACE("--zero " + std::to_string(zero));
    if (world->rank() == 0) std::filesystem::remove_all(dir);
    world->barrier(runtime(DeviceKind::cpu).default_stream(0));
    train::TrainConfig c = dist_config("adamw");
    c.batch_size = 8;
    c.epochs = 2;
    c.log_interval = 4;
    c.zero = zero;
    c.checkpoint_dir = dir;
    c.checkpoint_every = 7;
    c.keep_checkpoints = 100;
    std::vector<float> full;
    {
      train::Trainer t(c, dist_train_set(), dist_test_set(), world);
      const train::TrainResult r = t.fit();
      EXPECT_EQ(r.checkpoints, world->rank() == 0 ? 7 : 0);
      full = flat(trained_weights(t));
    }
    world->barrier(runtime(DeviceKind::cpu).default_stream(0));
    train::Trainer t(resumed_from(c, dir + "/step-0000000014.safetensors"), dist_train_set(), dist_test_set(), world);
    t.fit();
    const std::vector<float> resumed = flat(trained_weights(t));
    EXPECT_TRUE(resumed == full) << "the resumed run's weights differ";
    expect_same_on_every_rank(*world, resumed);
  }
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  if (world->rank() == 0) std::filesystem::remove_all(dir);
}

// The largest and the mean absolute difference of `got` from `want`, and want's largest magnitude.
struct Diff {
  double worst = 0, mean = 0, largest = 0;
};
Diff diff(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  for (size_t i = 0; i < got.size(); ++i) {
    d.largest = std::max(d.largest, std::abs(static_cast<double>(want[i])));
    const double e = std::abs(static_cast<double>(got[i]) - want[i]);
    d.worst = std::max(d.worst, e);
    d.mean += e;
  }
  d.mean /= static_cast<double>(std::max<size_t>(1, got.size()));
  return d;
}

TEST(MpiDist, Zero3StreamedGptTrainsLikeOneProcessOnHalfTheState) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  // One folder for both ranks (the ranks' flags must agree): mpirun is the parent of both.
  TempDir dir("/tmp/tandem-mpidist-zero3-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  for (const char* optimizer : {"sgd", "adamw"}) {
    SCOPED_TRACE(optimizer);
    train::TrainConfig c = dist_config(optimizer);  // threads, loader, lr, a constant schedule
    c.model = "gpt-mini";
    c.n_layer = 4, c.n_head = 2, c.n_embd = 32, c.block_size = 16;
    c.data_dir = dir.str();
    c.batch_size = 2;
    c.eval_batch_size = 3;  // the ranks' test shards then differ in batch count
    c.max_steps = 10, c.eval_interval = 5;
    c.device = "virt:0", c.param_device = "cpu";
    train::TrainConfig sharded = c;
    sharded.zero = 3;
    train::Trainer t(sharded, nullptr, nullptr, world);
    const std::string banner = t.describe();
    t.fit();
    const std::vector<float> mine = flat(trained_weights(t));
    expect_same_on_every_rank(*world, mine);
    // "ZeRO-3 (--zero 3): this rank holds 1/2 of ... (S of T elements"
    const size_t at = banner.find("ZeRO-3 (--zero 3): this rank holds 1/2");
    ASSERT_NE(at, std::string::npos) << banner;
    long long shard = 0, total = 0;
    ASSERT_EQ(std::sscanf(banner.c_str() + banner.find('(', banner.find("state (", at)), "(%lld of %lld elements",
                          &shard, &total),
              2)
        << banner;
    EXPECT_GE(2 * shard, total);
    EXPECT_LE(2 * shard, total + 10);  // 5 parts, each section padded by at most 1
    train::TrainConfig one = c;  // one process, unsharded, the ranks' whole batch
    one.batch_size = 4;
    train::Trainer single(one, nullptr, nullptr);
    single.fit();
    const std::vector<float> reference = flat(trained_weights(single));
    ASSERT_EQ(mine.size(), reference.size());
    const Diff d = diff(mine, reference);
    if (world->rank() == 0)
      std::printf("mpirun --zero 3 %s: largest weight %.4g, largest difference %.3g, mean %.3g\n", optimizer,
                  d.largest, d.worst, d.mean);
    EXPECT_GT(d.worst, 0.0) << "bit-identical to one process: did each rank train on its own samples?";
    if (std::string(optimizer) == "sgd") {
      EXPECT_LE(d.worst, 1e-5 * d.largest);
    } else {
      EXPECT_LE(d.worst, 0.05 * c.lr);
      EXPECT_LE(d.mean, 1e-3 * c.lr);
    }
  }
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));  // both done with the folder
}

// --zero 3 with checkpoints: the weights and the optimizer's state gathered from the shards, and
// cut into them again on resume; the resumed run ends with the uninterrupted run's bits.
TEST(MpiDist, Zero3ResumesFromACheckpointBitForBit) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir data("/tmp/tandem-mpidist-zero3-ck-" + std::to_string(::getppid()), world->rank() == 0);
  const std::string dir = data.file("ck");
  if (world->rank() == 0) write_rule_shards(data);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  for (const char* optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    if (world->rank() == 0) std::filesystem::remove_all(dir);
    world->barrier(runtime(DeviceKind::cpu).default_stream(0));
    train::TrainConfig c = dist_config(optimizer);
    c.model = "gpt-mini";
    c.n_layer = 3, c.n_head = 2, c.n_embd = 32, c.block_size = 16;
    c.data_dir = data.str();
    c.batch_size = 2, c.eval_batch_size = 3;
    c.max_steps = 12, c.eval_interval = 6;
    c.device = "virt:0", c.param_device = "cpu", c.zero = 3;
    c.checkpoint_dir = dir, c.checkpoint_every = 5, c.keep_checkpoints = 100;
    std::vector<float> full;
    {
      train::Trainer t(c, nullptr, nullptr, world);
      t.fit();
      full = flat(trained_weights(t));
    }
    world->barrier(runtime(DeviceKind::cpu).default_stream(0));
    train::Trainer t(resumed_from(c, dir + "/step-0000000005.safetensors"), nullptr, nullptr, world);
    int64_t steps = 0;
    train::TrainCallbacks cb;
    cb.on_step_done = [&](int64_t) { ++steps; };
    t.fit(cb);
    EXPECT_EQ(steps, 7);  // from the checkpoint's step 5 to 12
    const std::vector<float> resumed = flat(trained_weights(t));
    EXPECT_TRUE(resumed == full) << "the resumed run's weights differ";
    expect_same_on_every_rank(*world, resumed);
  }
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
}

// A ResNet's blocks differ in shape: their shards share stages sized for the largest. BatchNorm
// normalises each rank's own batch (as DDP without SyncBatchNorm), so the run is not one
// process's; its parameters are the same on every rank and the shards hold half of them.
TEST(MpiDist, Zero3StreamsAResNetsUnequalBlocks) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  train::TrainConfig c = dist_config("adamw");
  c.model = "resnet18-cifar";
  c.device = "virt:0", c.param_device = "cpu", c.zero = 3;
  c.max_steps = 6;
  c.batch_size = 4, c.eval_batch_size = 8;
  train::Trainer t(c, std::make_shared<data::SyntheticDataset>(48, 11), std::make_shared<data::SyntheticDataset>(24, 12),
                   world);
  const std::string banner = t.describe();
  const train::TrainResult r = t.fit();
  EXPECT_TRUE(std::isfinite(r.epochs.back().train_loss));
  EXPECT_TRUE(std::isfinite(r.epochs.back().test_loss));
  std::vector<float> params;
  for (const nn::NamedTensor& nt : t.model().host_state_dict())
    if (nt.is_parameter) params.insert(params.end(), nt.tensor.data<float>(), nt.tensor.data<float>() + nt.tensor.numel());
  expect_same_on_every_rank(*world, params);
  EXPECT_NE(banner.find("ZeRO-3 (--zero 3): this rank holds 1/2"), std::string::npos) << banner;
}

// The GPT of the --zero 3 tests beside other features: 3 blocks, batch 2 per rank, AdamW.
train::TrainConfig zero3_gpt(const std::string& data) {
  train::TrainConfig c = small_gpt(data);
  c.param_device = "cpu", c.zero = 3;
  return c;
}

// --zero 3 with --clip-grad-norm (a max norm that bites) and --serve's weight copies: each
// rank's shard clipped by the global norm (the sums of squares all-gathered), within the
// reduction order of one process of the whole batch; the copy taken after the last step (a
// gather from the shards on every rank, as --serve publishes) holds the trained weights' bits.
TEST(MpiDist, Zero3ClipsByTheGlobalNormAndServesTheTrainingWeights) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir dir("/tmp/tandem-mpidist-zero3-clip-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  train::TrainConfig c = zero3_gpt(dir.str());
  c.clip_grad_norm = 0.05;
  train::Trainer t(c, nullptr, nullptr, world);
  std::shared_ptr<const train::WeightCopy> served = t.capture_weights();  // version 0
  train::TrainCallbacks cb;
  cb.on_step_done = [&](int64_t) { served = t.capture_weights(); };
  t.fit(cb);
  served->wait();
  const std::vector<float> mine = flat(trained_weights(t));
  expect_same_on_every_rank(*world, mine);
  std::vector<float> copy;
  for (const auto& [name, tensor] : served->tensors())
    if (tensor.dtype() == DType::f32) copy.insert(copy.end(), tensor.data<float>(), tensor.data<float>() + tensor.numel());
  EXPECT_TRUE(copy == mine) << "the served copy of the last step differs from the trained weights";
  train::TrainConfig one = c;  // one process, unsharded, the ranks' whole batch
  one.zero = 0, one.batch_size = 4;
  train::Trainer single(one, nullptr, nullptr);
  single.fit();
  const Diff d = diff(mine, flat(trained_weights(single)));
  if (world->rank() == 0)
    std::printf("mpirun --zero 3 --clip-grad-norm 0.05: largest difference %.3g, mean %.3g\n", d.worst, d.mean);
  EXPECT_LE(d.worst, 0.05 * c.lr);
  EXPECT_LE(d.mean, 1e-3 * c.lr);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));  // both done with the folder
}

// --zero 3 with fp16's dynamic loss scaling from 2^24, so that the first steps overflow: each
// rank unscales and checks its shard, the flags are summed over the ranks, and every rank skips
// the steps one process of the whole batch skips from 2^25 (each rank's loss is the mean over
// its half of the batch: its scaled gradients are the whole batch's at twice the scale, as
// under DDP), ends at half that process's scale and within its reduction order; also with 2
// micro-batches a step and with a max norm that bites.
TEST(MpiDist, Zero3Fp16SkipsTheOverflowingStepsOfOneProcess) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir dir("/tmp/tandem-mpidist-zero3-fp16-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  for (const std::string variant : {"plain", "accumulated", "clipped"}) {
    SCOPED_TRACE(variant);
    train::TrainConfig c = zero3_gpt(dir.str());
    c.precision = "fp16", c.loss_scale_init = 16777216.0;
    if (variant == "accumulated") c.grad_accum_steps = 2;
    if (variant == "clipped") c.clip_grad_norm = 0.05;
    train::Trainer t(c, nullptr, nullptr, world);
    EXPECT_NE(t.describe().find("(--zero 3): checked once every part's gradients are reduce-scattered"),
              std::string::npos)
        << t.describe();
    const train::TrainResult r = t.fit();
    const std::vector<float> mine = flat(trained_weights(t));
    expect_same_on_every_rank(*world, mine);
    train::TrainConfig one = c;  // one process, unsharded (the streamer's own checks), the ranks' whole batch
    one.zero = 0, one.batch_size = 4, one.loss_scale_init = 2 * c.loss_scale_init;
    train::Trainer single(one, nullptr, nullptr);
    const train::TrainResult rs = single.fit();
    const train::EpochStats &got = r.epochs.back(), &want = rs.epochs.back();
    EXPECT_GE(want.skipped_steps, 2) << "the first steps should overflow";
    EXPECT_EQ(got.skipped_steps, want.skipped_steps);
    EXPECT_EQ(2 * got.loss_scale, want.loss_scale);
    const Diff d = diff(mine, flat(trained_weights(single)));
    if (world->rank() == 0)
      std::printf("mpirun --zero 3 --precision fp16 (%s): %lld steps skipped, scale %g; largest difference %.3g, "
                  "mean %.3g\n",
                  variant.c_str(), static_cast<long long>(got.skipped_steps), got.loss_scale, d.worst, d.mean);
    // fp16's reduction order (Zero3Pairs.Fp16*): the kernels' sums over half the batch round to
    // f16 otherwise, and AdamW turns a near-zero gradient's sign into a whole lr.
    EXPECT_GT(d.worst, 0.0) << "the steps that ran should have moved the weights apart in their last bits";
    EXPECT_LE(d.worst, 3.0 * c.lr);
    EXPECT_LE(d.mean, 3e-3 * c.lr);
  }
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));  // both done with the folder
}

// --zero 3 with bf16 moments (sharded as the f32 ones) and bf16 reduce-scatters
// (--grad-compression bf16): checkpoints gather the bf16 moments and resume cuts them again,
// to the uninterrupted run's weights bit for bit.
TEST(MpiDist, Zero3Bf16MomentsAndCompressedGradientsResumeBitForBit) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir data("/tmp/tandem-mpidist-zero3-bf16-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(data);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  train::TrainConfig c = zero3_gpt(data.str());
  c.optimizer_moments = "bf16", c.grad_compression = "bf16";
  c.checkpoint_dir = data.file("ck"), c.checkpoint_every = 3, c.keep_checkpoints = 100;
  std::vector<float> full;
  {
    train::Trainer t(c, nullptr, nullptr, world);
    const train::TrainResult r = t.fit();
    EXPECT_TRUE(std::isfinite(r.epochs.back().train_loss));
    full = flat(trained_weights(t));
  }
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  train::Trainer t(resumed_from(c, data.file("ck") + "/step-0000000003.safetensors"), nullptr, nullptr, world);
  t.fit();
  const std::vector<float> resumed = flat(trained_weights(t));
  EXPECT_TRUE(resumed == full) << "the resumed run's weights differ";
  expect_same_on_every_rank(*world, resumed);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
}

// --zero 3 never builds the whole model: each rank writes only its shards, from the init or
// from --init's file (pread of its element ranges). Before any step the gathered weights are
// one resident process's, bit for bit: its make_model init, its --init load, and with
// --init-exclude the excluded tensors' init.
TEST(MpiDist, Zero3WritesOnlyItsShardsFromTheInitOrTheFile) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir dir("/tmp/tandem-mpidist-zero3init-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  train::TrainConfig c = dist_config("adamw");
  c.model = "gpt-mini";
  c.n_layer = 3, c.n_head = 2, c.n_embd = 16, c.block_size = 16;
  c.data_dir = dir.str();
  c.batch_size = 2, c.max_steps = 2;
  c.device = "virt:0";
  c.precision = "bf16";
  const auto weights = [](train::Trainer& t) {
    const auto copy = t.capture_weights();
    copy->wait();
    return copy->tensors();
  };
  const auto expect_equal = [](const NamedTensors& got, const NamedTensors& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first) << what;
      ASSERT_EQ(got[i].second.nbytes(), want[i].second.nbytes()) << what << " " << got[i].first;
      EXPECT_EQ(std::memcmp(got[i].second.raw_data(), want[i].second.raw_data(), got[i].second.nbytes()), 0)
          << what << " " << got[i].first;
    }
  };
  train::TrainConfig sharded = c;
  sharded.zero = 3, sharded.param_device = "cpu";
  train::Trainer resident(c, nullptr, nullptr);  // one process, the model built whole
  const NamedTensors init = weights(resident);
  resident.fit();  // two steps: weights unlike the init, the --init file
  const std::string file = dir.file("init.safetensors");  // the ranks' resident runs agree: rank 0's
  if (world->rank() == 0) save_safetensors(file, weights(resident));
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  {
    train::Trainer t(sharded, nullptr, nullptr, world);
    expect_equal(weights(t), init, "the seed's init");
  }
  sharded.init = file;
  {
    train::Trainer t(sharded, nullptr, nullptr, world);
    expect_equal(weights(t), load_safetensors(file), "--init");
  }
  sharded.init_exclude = {"transformer.h.1."};
  train::TrainConfig loaded = c;  // one process, the model built whole, then the file loaded
  loaded.init = file, loaded.init_exclude = sharded.init_exclude;
  train::Trainer one(loaded, nullptr, nullptr);
  train::Trainer t(sharded, nullptr, nullptr, world);
  expect_equal(weights(t), weights(one), "--init with --init-exclude");
  // Each rank reads its own copy of the file (a node-local path): copies that differ are refused
  // on every rank, naming the rank, before anything trains.
  const std::filesystem::path here = std::filesystem::current_path(), own = dir.file("r" + std::to_string(world->rank()));
  std::filesystem::create_directories(own);
  save_safetensors((own / "init.safetensors").string(), world->rank() == 0 ? load_safetensors(file) : init);
  std::filesystem::current_path(own);
  sharded.init = "init.safetensors", sharded.init_exclude = {};
  try {
    train::Trainer differ(sharded, nullptr, nullptr, world);
    ADD_FAILURE() << "copies of --init that differ were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--init init.safetensors differs on rank(s) 1 from rank 0's copy"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::current_path(here);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));  // both done with the folder
}

// --zero 3 keeps 12 bytes per parameter of its share with AdamW (master values and moments):
// the gradients come into one slab the parts take in turn and the compute copies are rounded at
// each gather. The pinned pool holds what the plan says, with and without the clipping that
// keeps a gradient shard per part (4 more bytes per parameter of the share).
TEST(MpiDist, Zero3HoldsTwelveBytesPerParameterAsPlanned) {
  const comm::CommunicatorPtr world = world_or_null();
  SKIP_UNLESS_MPIRUN(world);
  TempDir dir("/tmp/tandem-mpidist-zero3bytes-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));
  train::TrainConfig c = dist_config("adamw");
  c.model = "gpt-mini";
  c.n_layer = 4, c.n_head = 4, c.n_embd = 256, c.block_size = 16;
  c.data_dir = dir.str();
  c.batch_size = 2, c.max_steps = 3;
  c.device = "virt:0", c.param_device = "cpu", c.zero = 3;
  c.precision = "bf16";
  struct Figures {
    double plan_pinned = 0, plan_grads = 0, peak = 0;
  };
  const auto run = [&](double clip) {
    train::TrainConfig k = c;
    k.clip_grad_norm = clip;
    pinned_allocator().empty_cache();  // the peak counts this run's segments only
    pinned_allocator().reset_peak_stats();
    train::Trainer t(k, nullptr, nullptr, world);
    const train::TrainResult r = t.fit();
    Figures out;
    const train::MemoryPlan* plan = t.memory_plan();
    if (plan == nullptr || r.epochs.empty()) return out;
    out.plan_pinned = static_cast<double>(plan->on_host.total());
    out.plan_grads = static_cast<double>(plan->on_host.gradients);
    out.peak = static_cast<double>(r.epochs.back().pinned_peak_bytes);
    return out;
  };
  const Figures plain = run(0), clipped = run(1.0);
  if (world->rank() == 0)
    std::printf("--zero 3 pinned, rank 0: plan %.0f, pool peak %.0f bytes; with clipping plan %.0f, peak %.0f\n",
                plain.plan_pinned, plain.peak, clipped.plan_pinned, clipped.peak);
  // This rank's share: half of 4 blocks of 12 * 256^2 + 13 * 256 elements, and of the outer part.
  const double share = 0.5 * 4 * (12.0 * 256 * 256 + 13 * 256);
  for (const Figures* f : {&plain, &clipped}) {
    ASSERT_GT(f->peak, 0.0);
    EXPECT_GE(f->peak, 0.9 * f->plan_pinned) << f->plan_pinned;
    EXPECT_LE(f->peak, 1.1 * f->plan_pinned) << f->plan_pinned;
  }
  // The held updates keep every part's gradient shard (at least the blocks': 4 bytes per
  // element of the share); without them one slab of the largest part's shard serves all.
  EXPECT_GE(clipped.plan_grads - plain.plan_grads, 0.7 * 4 * share) << clipped.plan_grads << " " << plain.plan_grads;
  // The allocator agrees on the difference: the gradient shards the slab replaces.
  const double planned = clipped.plan_pinned - plain.plan_pinned, measured = clipped.peak - plain.peak;
  EXPECT_GE(measured, 0.9 * planned) << measured << " vs " << planned;
  EXPECT_LE(measured, 1.1 * planned) << measured << " vs " << planned;
  world->barrier(runtime(DeviceKind::cpu).default_stream(0));  // both done with the folder
}

}  // namespace
}  // namespace tandem::testing

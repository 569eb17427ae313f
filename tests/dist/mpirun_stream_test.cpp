// Streamed parameters under mpirun without --zero 3 (train/place/param_stream.h
// set_grad_reduce): every rank streams a GPT from whole host homes of its own and the update
// thread averages each part's host gradients over the ranks before its update. ctest's
// dist_mpi_stream_2ranks starts these under `mpirun -np 2` and dist_mpi_stream_1rank under
// `mpirun -np 1` (label mpi); a plain run skips them.
//  - 2 ranks streamed end with the weights of 2 ranks resident (the device's gradients
//    all-reduced in buckets) bit for bit: both average the same per-rank gradients elementwise;
//    also with 2 micro-batches a step, with clipping that bites and fp16's dynamic loss scaling
//    (the checks read the averaged gradients), with --grad-compression bf16, fp16 and topk
//    against the resident run compressed alike, and with --offload-delay 1 against the delayed
//    CPU optimizer's ranks (its host buckets all-reduced alike);
//    a ResNet's unequal blocks too;
//  - 1 rank of mpirun streams as one process does, bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "dist/dist_test_util.h"
#include "dist/mpi_ranks.h"
#include "memory/cli_shards.h"
#include "tandem/comm/communicator.h"

namespace tandem::testing {
namespace {

// MPI is finalised at exit by mpirun_test.cpp's environment (the same binary).

// The world of mpirun -np `ranks`, or null when this process was not started so.
comm::CommunicatorPtr world_of(int ranks) {
  const comm::LaunchInfo li = comm::launch_info();
  if (!comm::mpi_built() || li.world_size != ranks || li.rendezvous != "mpi") return nullptr;
  comm::CommunicatorPtr w = comm::mpi_world();
  w->set_timeout_seconds(60);
  return w;
}

#define SKIP_UNLESS_MPIRUN(c, n)                                                                          \
  if (!(c))                                                                                               \
  GTEST_SKIP() << (comm::mpi_built() ? "not started by mpirun -np " #n ": ctest -L mpi runs this under mpirun" \
                                     : "built without MPI")

void barrier(comm::Communicator& c) { c.barrier(runtime(DeviceKind::cpu).default_stream(0)); }

std::vector<float> flat_weights(train::Trainer& t) {
  std::vector<float> out;
  for (const auto& w : trained_weights(t)) out.insert(out.end(), w.begin(), w.end());
  return out;
}

// The trained weights of `c` on the ranks of `world` (null: one process), checked alike on
// every rank, and the run's banner.
std::vector<float> train_on(const train::TrainConfig& c, const comm::CommunicatorPtr& world,
                            std::string* banner = nullptr) {
  train::Trainer t(c, nullptr, nullptr, world);
  if (banner) *banner = t.describe();
  t.fit();
  std::vector<float> w = flat_weights(t);
  if (world) expect_same_on_every_rank(*world, w);
  return w;
}

struct Variant {
  const char* name;
  void (*set)(train::TrainConfig&);
  // The reference's home where it is not the device's: the delayed update's is the CPU optimizer.
  void (*reference)(train::TrainConfig&) = nullptr;
};

TEST(MpiStreamDp, StreamedRanksTrainAsResidentRanksBitForBit) {
  const comm::CommunicatorPtr world = world_of(2);
  SKIP_UNLESS_MPIRUN(world, 2);
  TempDir dir("/tmp/tandem-mpistreamdp-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  barrier(*world);
  const Variant variants[] = {
      {"plain", [](train::TrainConfig&) {}},
      {"sgd", [](train::TrainConfig& c) { c.optimizer = "sgd", c.lr = 0.05, c.momentum = 0.9; }},
      {"--grad-accum-steps 2", [](train::TrainConfig& c) { c.grad_accum_steps = 2; }},
      {"--clip-grad-norm 0.05", [](train::TrainConfig& c) { c.clip_grad_norm = 0.05; }},
      {"--precision fp16 (dynamic loss scaling) --clip-grad-norm 0.05",
       [](train::TrainConfig& c) { c.precision = "fp16", c.clip_grad_norm = 0.05; }},
      {"--precision bf16 --grad-compression bf16",
       [](train::TrainConfig& c) { c.precision = "bf16", c.grad_compression = "bf16"; }},
      {"--grad-compression fp16", [](train::TrainConfig& c) { c.grad_compression = "fp16"; }},
      {"--grad-compression topk:0.1", [](train::TrainConfig& c) { c.grad_compression = "topk:0.1"; }},
      {"--offload-delay 1 (against the delayed CPU optimizer)", [](train::TrainConfig& c) { c.offload_delay = 1; },
       [](train::TrainConfig& c) { c.optimizer_device = "cpu"; }},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    train::TrainConfig resident = small_gpt(dir.str());
    v.set(resident);
    train::TrainConfig streamed = resident;
    streamed.param_device = "cpu";
    if (v.reference) v.reference(resident);
    std::string banner;
    const std::vector<float> got = train_on(streamed, world, &banner);
    EXPECT_NE(banner.find("all-reduced (averaged) over the ranks on the host"), std::string::npos) << banner;
    const std::vector<float> want = train_on(resident, world);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "of " << got.size() << " weights differ from the resident ranks'";
    // Each rank trained on its own samples: the weights are not one rank's batch alone.
    if (std::string(v.name) == "plain") {
      EXPECT_NE(train_on(streamed, nullptr), got);
    }
  }
  barrier(*world);  // both done with the folder
}

// A ResNet's blocks differ in shape (slots laid out per fetch) and carry BatchNorm statistics,
// which each rank keeps from its own batches in both runs (DDP without SyncBatchNorm): the
// streamed ranks end with the resident ranks' parameters bit for bit.
TEST(MpiStreamDp, StreamedResNetRanksTrainAsResidentRanksBitForBit) {
  const comm::CommunicatorPtr world = world_of(2);
  SKIP_UNLESS_MPIRUN(world, 2);
  train::TrainConfig resident = dist_config("adamw");
  resident.model = "resnet18-cifar";
  resident.device = "virt:0";
  resident.max_steps = 3;
  resident.batch_size = 4, resident.eval_batch_size = 8;
  train::TrainConfig streamed = resident;
  streamed.param_device = "cpu";
  const auto train = [&](const train::TrainConfig& c) {
    train::Trainer t(c, std::make_shared<data::SyntheticDataset>(48, 11), std::make_shared<data::SyntheticDataset>(16, 12),
                     world);
    t.fit();
    std::vector<float> out;
    for (const nn::NamedTensor& nt : t.model().host_state_dict())
      if (nt.is_parameter) out.insert(out.end(), nt.tensor.data<float>(), nt.tensor.data<float>() + nt.tensor.numel());
    expect_same_on_every_rank(*world, out);
    return out;
  };
  const std::vector<float> got = train(streamed);
  EXPECT_TRUE(got == train(resident)) << "the streamed ranks' ResNet differs from the resident ranks'";
}

// --zero 1 with streamed homes is refused on every rank before anything trains, naming why.
TEST(MpiStreamDp, Zero1WithStreamedHomesIsRefused) {
  const comm::CommunicatorPtr world = world_of(2);
  SKIP_UNLESS_MPIRUN(world, 2);
  TempDir dir("/tmp/tandem-mpistreamdp-z1-" + std::to_string(::getppid()), world->rank() == 0);
  if (world->rank() == 0) write_rule_shards(dir);
  barrier(*world);
  train::TrainConfig c = small_gpt(dir.str());
  c.param_device = "cpu", c.zero = 1;
  try {
    train::Trainer t(c, nullptr, nullptr, world);
    ADD_FAILURE() << "--param-device cpu --zero 1 under mpirun was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--param-device cpu with --zero 1: not supported yet"), std::string::npos)
        << e.what();
  }
  barrier(*world);
}

TEST(MpiStreamDp, OneRankStreamsAsOneProcessBitForBit) {
  const comm::CommunicatorPtr world = world_of(1);
  SKIP_UNLESS_MPIRUN(world, 1);
  TempDir dir("/tmp/tandem-mpistreamdp-1-" + std::to_string(::getppid()), true);
  write_rule_shards(dir);
  for (bool accum : {false, true}) {
    SCOPED_TRACE(accum ? "--grad-accum-steps 2" : "plain");
    train::TrainConfig c = small_gpt(dir.str());
    c.param_device = "cpu", c.clip_grad_norm = 0.05;
    if (accum) c.grad_accum_steps = 2;
    EXPECT_EQ(train_on(c, world), train_on(c, nullptr));
  }
}

}  // namespace
}  // namespace tandem::testing

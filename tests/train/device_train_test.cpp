// Training on the virtual device gives what training on the cpu gives: the same kernels run
// in the same order (on the device's stream thread, batches copied from pinned slots by the
// prefetcher), so after an epoch with the same seed the weights are bit-identical and the
// test accuracy is equal. The pinned pool levels off: its high-water mark after epoch 1 is
// that after epoch 3. Weights saved after training on virt equal the trained ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <filesystem>
#include <map>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/profile/profiler.h"
#include "tandem/rng.h"
#include "tandem/safetensors.h"
#include "tandem/train/trainer.h"

namespace fs = std::filesystem;
using namespace tandem;

namespace {

void write_idx(const fs::path& p, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Class c: noise plus a bright bar at row 2c + 4 (learnable in a few steps).
void write_split(const fs::path& dir, const std::string& split, uint32_t n, uint64_t seed) {
  std::vector<uint8_t> images(static_cast<size_t>(n) * 784), labels(n);
  Philox rng(seed, n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t c = rng.randint(10);
    labels[i] = static_cast<uint8_t>(c);
    uint8_t* img = images.data() + static_cast<size_t>(i) * 784;
    for (int p = 0; p < 784; ++p) img[p] = static_cast<uint8_t>(rng.randint(60));
    for (int x = 0; x < 28; ++x) img[(2 * c + 4) * 28 + x] = 255;
  }
  write_idx(dir / (split + "-images-idx3-ubyte"), {n, 28, 28}, images);
  write_idx(dir / (split + "-labels-idx1-ubyte"), {n}, labels);
}

class DeviceTraining : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tandem_device_train_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write_split(dir_, "train", 384, 1);
    write_split(dir_, "t10k", 200, 2);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static train::TrainConfig config(const std::string& device, int epochs) {
    train::TrainConfig c;
    c.data_dir = dir_.string();
    c.device = device;
    c.epochs = epochs;
    c.batch_size = 64;
    c.eval_batch_size = 128;
    c.seed = 7;
    c.threads = 2;
    c.num_workers = 1;
    c.progress = 0;
    return c;
  }

  static fs::path dir_;
};

fs::path DeviceTraining::dir_;

TEST_F(DeviceTraining, VirtMatchesCpuAfterOneEpoch) {
  train::Trainer cpu(config("cpu", 1));
  const train::TrainResult rc = cpu.fit();
  train::Trainer virt(config("virt:2?latency_us=50", 1));
  const train::TrainResult rv = virt.fit();

  ASSERT_EQ(rc.epochs.size(), 1u);
  ASSERT_EQ(rv.epochs.size(), 1u);
  EXPECT_EQ(rv.epochs[0].test_accuracy, rc.epochs[0].test_accuracy);
  EXPECT_EQ(rv.epochs[0].train_loss, rc.epochs[0].train_loss);
  EXPECT_GT(rc.epochs[0].test_accuracy, 0.3);  // it learned something (10 classes)

  const std::vector<nn::NamedTensor> a = cpu.model().state_dict();
  const std::vector<nn::NamedTensor> b = virt.model().host_state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].name);
    ASSERT_EQ(a[i].name, b[i].name);
    ASSERT_TRUE(b[i].tensor.device().is_host());
    ASSERT_EQ(a[i].tensor.shape(), b[i].tensor.shape());
    ASSERT_EQ(a[i].tensor.dtype(), b[i].tensor.dtype());
    EXPECT_EQ(std::memcmp(a[i].tensor.raw_data(), b[i].tensor.raw_data(), a[i].tensor.nbytes()), 0);
  }
  // The parameters stayed on the device; the counters on the host.
  for (const nn::NamedTensor& t : virt.model().state_dict()) {
    if (t.name.find("num_batches_tracked") != std::string::npos) {
      EXPECT_TRUE(t.tensor.device().is_host());
      EXPECT_EQ(t.tensor.item(), 6.0);  // 384 / 64 steps
    } else {
      EXPECT_EQ(t.tensor.device(), (Device{DeviceKind::virt, 2})) << t.name;
    }
  }

  // Weights saved after training on virt are the trained ones.
  const fs::path file = dir_ / "virt.safetensors";
  virt.save_weights(file.string());
  const NamedTensors saved = load_safetensors(file.string());
  ASSERT_EQ(saved.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor& s = find_tensor(saved, a[i].name, file.string());
    EXPECT_EQ(std::memcmp(s.raw_data(), a[i].tensor.raw_data(), a[i].tensor.nbytes()), 0) << a[i].name;
  }
  // And evaluating them on virt scores as the trainer did.
  train::TrainConfig ec = config("virt:2", 1);
  ec.weights = file.string();
  EXPECT_EQ(train::evaluate_weights(ec).accuracy, rv.epochs[0].test_accuracy);
}

TEST_F(DeviceTraining, PinnedPoolLevelsOffAfterTheFirstEpoch) {
  train::Trainer virt(config("virt:2?bw=1&latency_us=100", 3));
  const train::TrainResult r = virt.fit();
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_GT(r.epochs[0].pinned_peak_bytes, 0u);
  EXPECT_EQ(r.epochs[2].pinned_peak_bytes, r.epochs[0].pinned_peak_bytes);
}

// Progress comes from the asynchronous read-back every log_interval steps (and at the end of
// the epoch), with figures equal to those of a per-step read-back.
TEST_F(DeviceTraining, MetricsAreReadBackEveryLogIntervalSteps) {
  for (const char* device : {"cpu", "virt:2?speed=0.5"}) {
    SCOPED_TRACE(device);
    std::vector<double> results, losses;
    for (int64_t interval : {1, 4}) {
      train::TrainConfig c = config(device, 1);
      c.log_interval = interval;
      std::vector<std::pair<int64_t, int64_t>> calls;  // (step, samples)
      train::TrainCallbacks cb;
      cb.on_step = [&](int64_t step, double loss, int64_t samples) {
        EXPECT_TRUE(std::isfinite(loss));
        calls.emplace_back(step, samples);
      };
      train::Trainer t(c);
      const train::TrainResult r = t.fit(cb);
      if (interval == 1) {
        ASSERT_EQ(calls.size(), 6u);  // 384 / 64 steps
      } else {
        ASSERT_EQ(calls.size(), 2u);
        EXPECT_EQ(calls[0], std::make_pair(int64_t{4}, int64_t{256}));
        EXPECT_EQ(calls[1], std::make_pair(int64_t{6}, int64_t{384}));
      }
      results.push_back(r.epochs[0].train_accuracy);
      results.push_back(r.epochs[0].test_accuracy);
      losses.push_back(r.epochs[0].train_loss);
    }
    EXPECT_EQ(results[0], results[2]);
    EXPECT_EQ(results[1], results[3]);
    EXPECT_NEAR(losses[0], losses[1], 1e-5 * losses[0]);  // f32 sums over windows of 1 and 4 steps
  }
}

// A diverging run stops with an error naming the read-back window that holds the first
// non-finite loss: the window is log_interval steps wide and contains the step found with a
// read-back after every step.
TEST_F(DeviceTraining, NanLossStopsWithinOneReadBackWindow) {
  auto failing_window = [&](const std::string& device, int64_t interval) {
    train::TrainConfig c = config(device, 2);
    c.optimizer = "sgd";
    c.momentum = 0;
    c.lr = 1e30;
    c.schedule = "constant";
    c.log_interval = interval;
    train::Trainer t(c);
    try {
      t.fit();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::numerical) << e.what();
      std::smatch m;
      const std::string msg = e.what();
      // "in steps 5..8" for a window, "in step 3" for a single step; the lr is named.
      if (std::regex_search(msg, m, std::regex("loss is (NaN|infinite) in step (\\d+) of epoch 1 \\(lr 1e\\+30\\)")))
        return std::make_pair(int64_t{std::stoll(m[2])}, int64_t{std::stoll(m[2])});
      EXPECT_TRUE(std::regex_search(
          msg, m, std::regex("loss is (NaN|infinite) in steps (\\d+)\\.\\.(\\d+) of epoch 1 \\(lr 1e\\+30\\)")))
          << msg;
      if (m.size() == 4) return std::make_pair(int64_t{std::stoll(m[2])}, int64_t{std::stoll(m[3])});
    }
    ADD_FAILURE() << "expected the run to stop on a non-finite loss";
    return std::make_pair(int64_t{-1}, int64_t{-1});
  };
  const auto first = failing_window("cpu", 1);
  ASSERT_EQ(first.first, first.second);
  for (const char* device : {"cpu", "virt:2?speed=0.5"}) {
    SCOPED_TRACE(device);
    const auto w = failing_window(device, 4);
    EXPECT_EQ(w.second - w.first + 1, w.second == 6 ? 2 : 4);
    EXPECT_LE(w.first, first.first);
    EXPECT_GE(w.second, first.first);
  }
}

// The offloaded optimizer with delay 0 runs the same kernel on the same fp32 gradients as the
// on-device one: after an epoch on virt the weights are bit-identical. The profiler shows per
// bucket the gradient copy (d2h track), the CPU update ("cpu optimizer" thread) and the upload
// (h2d track). With delay 1 the run still learns.
TEST_F(DeviceTraining, OffloadedOptimizerMatchesTheDeviceOptimizer) {
  train::Trainer device(config("virt:2", 1));
  const train::TrainResult rd = device.fit();
  train::TrainConfig oc = config("virt:2?latency_us=20", 1);
  oc.optimizer_device = "cpu";
  oc.bucket_cap_mb = 0.25;  // the 401k-element Linear alone, the rest in others
  auto& prof = profile::Profiler::global();
  prof.clear();
  prof.set_enabled(true);
  train::Trainer offloaded(oc);
  const train::TrainResult ro = offloaded.fit();
  prof.set_enabled(false);
  EXPECT_NE(offloaded.describe().find("offloaded"), std::string::npos) << offloaded.describe();

  ASSERT_EQ(ro.epochs.size(), 1u);
  EXPECT_EQ(ro.epochs[0].train_loss, rd.epochs[0].train_loss);
  EXPECT_EQ(ro.epochs[0].test_accuracy, rd.epochs[0].test_accuracy);
  const std::vector<nn::NamedTensor> a = device.model().host_state_dict();
  const std::vector<nn::NamedTensor> b = offloaded.model().host_state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].tensor.raw_data(), b[i].tensor.raw_data(), a[i].tensor.nbytes()), 0) << a[i].name;

  std::map<std::string, int> track_of_span;  // "<track> / <span>" -> count
  std::map<int, std::string> names;
  for (const auto& t : prof.tracks()) names[t.id] = t.name;
  for (const auto& s : prof.spans()) track_of_span[names[s.track] + " / " + s.name]++;
  prof.clear();
  const int steps = 384 / 64, buckets = 3;  // fmnist-cnn: 401k-element Linear; 2 more buckets
  EXPECT_EQ(track_of_span["virt:2 d2h / grads bucket"], steps * buckets);
  EXPECT_EQ(track_of_span["cpu optimizer / cpu update bucket"], steps * buckets);
  EXPECT_EQ(track_of_span["virt:2 h2d / params bucket"], steps * buckets);

  oc.offload_delay = 1;
  train::Trainer delayed(oc);
  const train::TrainResult r1 = delayed.fit();
  EXPECT_GT(r1.epochs[0].test_accuracy, 0.3);
  EXPECT_TRUE(std::isfinite(r1.epochs[0].train_loss));
}

// The delayed update on virt (copies and compute really asynchronous, throttled copies) follows
// the same schedule as on the cpu device, where every copy runs inline at its call: after an
// epoch the weights are bit-identical.
TEST_F(DeviceTraining, DelayedUpdateOnVirtFollowsTheCpuSchedule) {
  train::TrainConfig c = config("cpu", 1);
  c.optimizer_device = "cpu";
  c.offload_delay = 1;
  c.offload_delay_warmup = 2;
  c.bucket_cap_mb = 0.25;
  train::Trainer cpu(c);
  cpu.fit();
  c.device = "virt:2?bw=2&latency_us=30";
  train::Trainer virt(c);
  virt.fit();
  const std::vector<nn::NamedTensor> a = cpu.model().state_dict();
  const std::vector<nn::NamedTensor> b = virt.model().host_state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].tensor.raw_data(), b[i].tensor.raw_data(), a[i].tensor.nbytes()), 0) << a[i].name;
}

TEST_F(DeviceTraining, CudaWithoutDeviceFailsClearly) {
  bool have_cuda = false;
  try {
    have_cuda = runtime(DeviceKind::cuda).device_count() > 0;
  } catch (const Error&) {
  }
  if (have_cuda) GTEST_SKIP() << "a CUDA device is present";
  try {
    train::Trainer t(config("cuda", 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("without CUDA") != std::string::npos || msg.find("no CUDA device") != std::string::npos)
        << msg;
  }
}

}  // namespace

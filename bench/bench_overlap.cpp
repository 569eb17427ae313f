// How well the input pipeline overlaps with compute, and what it buys on the cpu.
//
// 1. Two runs of the trainer (model mlp, batch 64) on a throttled virt device, traced with the
//    profiler:  input-bound  -- a dataset that sleeps 150 us per sample, 1 loader worker;
//               compute-bound -- no sleep, virt speed 0.1.
//    For each: overlap efficiency = max(stage time per step) / step time, where a stage's
//    time per step is the busy time of its resource over the steps (the loader's divided by
//    its workers; see tandem/profile/summary.h). 1.0 means the slowest stage never waits for
//    the others. Goal >= 0.95. Prints the limiting stage and the advice line.
// 2. Training images/s on the cpu device with Fashion-MNIST (mlp, batch 128, first `samples`
//    training images): num_workers 0 (every batch made in the training thread, no pipeline)
//    against 1 and 2 workers (batches made ahead, prefetch_factor 2) and auto.
// Usage: bench_overlap [data_dir] [samples=30000] [threads=1]
// Output lines: "overlap <case> efficiency <e> step_ms <ms> input_ms <ms> h2d_ms <ms>
//               compute_ms <ms> limiting <stage>", "advice (<case> run): ...",
//               "cpu_pipeline num_workers <w|auto> img_per_s <images/s>" (the best of two rounds,
//               run in turn so that a change in the machine's load hits every setting).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/mnist_like.h"
#include "tandem/error.h"
#include "tandem/profile/summary.h"
#include "tandem/data/synthetic_dataset.h"
#include "tandem/train/trainer.h"

using namespace tandem;

namespace {

// The first `n` samples of another dataset.
class Prefix final : public data::Dataset {
 public:
  Prefix(std::shared_ptr<const data::Dataset> inner, int64_t n) : inner_(std::move(inner)), n_(std::min(n, inner_->size())) {}
  int64_t size() const override { return n_; }
  data::ImageDims dims() const override { return inner_->dims(); }
  int64_t num_classes() const override { return inner_->num_classes(); }
  data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override { return inner_->get(index, scratch); }

 private:
  std::shared_ptr<const data::Dataset> inner_;
  int64_t n_;
};

train::TrainConfig base_config(const std::string& device, int64_t batch, int threads) {
  train::TrainConfig c;
  c.model = "mlp";
  c.device = device;
  c.epochs = 1;
  c.batch_size = batch;
  c.eval_batch_size = 512;
  c.threads = threads;
  c.progress = 0;
  c.schedule = "constant";
  c.optimizer = "adam";
  c.lr = 1e-3;
  c.weight_decay = 0;
  return c;
}

void overlap_case(const char* name, const std::string& device, std::chrono::microseconds delay, int threads) {
  const train::TrainConfig c = base_config(device, 64, threads);
  auto train_set = std::make_shared<data::SyntheticDataset>(64 * 150, 1, delay);
  auto test_set = std::make_shared<data::SyntheticDataset>(512, 2);
  train::Trainer trainer(c, train_set, test_set);
  profile::Profiler& p = profile::Profiler::global();
  p.clear();
  p.name_this_thread("train");
  p.set_enabled(true);
  const train::TrainResult r = trainer.fit();
  p.set_enabled(false);
  const profile::Summary s = profile::summarize(train::summary_options(c, r));
  p.clear();
  std::printf("overlap %s efficiency %.3f step_ms %.2f input_ms %.2f h2d_ms %.2f compute_ms %.2f limiting %s\n", name,
              s.overlap_efficiency, 1e3 * s.step_seconds, 1e3 * s.input_seconds, 1e3 * s.h2d_seconds,
              1e3 * s.compute_seconds, s.limiting_stage.c_str());
  std::printf("advice (%s run): %s\n", name, s.advice.c_str());
  std::fflush(stdout);
}

train::TrainResult cpu_case(const std::shared_ptr<const data::Dataset>& train_set,
                            const std::shared_ptr<const data::Dataset>& test_set, int num_workers, int threads) {
  train::TrainConfig c = base_config("cpu", 128, threads);
  c.num_workers = num_workers;
  c.prefetch_factor = num_workers < 0 ? -1 : 2;
  train::Trainer trainer(c, train_set, test_set);
  return trainer.fit();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : data::kDefaultFashionMnistDir;
  const int64_t samples = argc > 2 ? std::atoll(argv[2]) : 30000;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  try {
    overlap_case("input-bound", "virt:0?speed=1&latency_us=50", std::chrono::microseconds(150), threads);
    overlap_case("compute-bound", "virt:0?speed=0.1&latency_us=50", std::chrono::microseconds(0), threads);
    auto train_set = std::make_shared<Prefix>(std::make_shared<data::MnistLike>(dir, "train"), samples);
    auto test_set = std::make_shared<Prefix>(std::make_shared<data::MnistLike>(dir, "t10k"), 2000);
    const std::vector<int> workers = {0, 1, 2, -1};
    std::vector<train::TrainResult> best(workers.size());
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < workers.size(); ++i) {
        train::TrainResult r = cpu_case(train_set, test_set, workers[i], threads);
        if (r.samples_per_s > best[i].samples_per_s) best[i] = std::move(r);
      }
    }
    for (size_t i = 0; i < workers.size(); ++i) {
      std::printf("cpu_pipeline num_workers %s img_per_s %.0f%s%s\n",
                  workers[i] < 0 ? "auto" : std::to_string(workers[i]).c_str(), best[i].samples_per_s,
                  best[i].autotune.empty() ? "" : "  # ", best[i].autotune.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == ErrorCode::io || e.code() == ErrorCode::invalid_argument ? 2 : 1;
  }
  return 0;
}

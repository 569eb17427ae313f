// A training loop over Loader + DevicePrefetcher on a throttled virt device, instrumented like
// the trainer (wait for batch, forward, backward, optimizer and step spans on the "train"
// track; no per-step read-back), for the overlap and profiler tests. The model is small
// (Flatten, Linear(64, 32), ReLU, Linear(32, 10)) on 1x8x8 images.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/synthetic_datasets.h"
#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"
#include "tandem/pinned.h"
#include "tandem/profile/summary.h"
#include "tandem/virt.h"

namespace tandem::testing {

struct PipelineRun {
  std::string device = "virt:6";          // options are applied with configure_virt
  std::shared_ptr<const data::Dataset> dataset;
  int64_t batch_size = 16;
  int num_workers = 1;
  int prefetch_factor = 2;
  int prefetch_depth = 2;
  int steps = 30;                         // steps run (stops early at the end of the epoch)
  std::string trace;                      // write a Chrome trace here when not empty
};

struct PipelineResult {
  profile::Summary summary;
  std::vector<profile::Profiler::Span> spans;
  std::vector<profile::Profiler::Track> tracks;
  int64_t steps = 0;
};

/// 1x8x8 images whose label is 1000 + index (see IndexedDataset); the model predicts 10 classes,
/// so labels are taken modulo 10 by the dataset below.
class TenClassDataset final : public data::Dataset {
 public:
  TenClassDataset(int64_t n, std::chrono::microseconds delay) : inner_(n, data::ImageDims{1, 8, 8}), delay_(delay) {}
  int64_t size() const override { return inner_.size(); }
  data::ImageDims dims() const override { return inner_.dims(); }
  int64_t num_classes() const override { return 10; }
  data::Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    data::Sample s = inner_.get(index, scratch);
    s.label = index % 10;
    return s;
  }

 private:
  IndexedDataset inner_;
  std::chrono::microseconds delay_;
};

inline PipelineResult run_pipeline(const PipelineRun& run) {
  using namespace profile;
  ops::set_num_threads(1);  // one kernel thread: steadier on a shared machine
  const DeviceSpec spec = DeviceSpec::parse(run.device);
  configure_virt(spec);
  const Device dev = spec.device;
  auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(32, 10)});
  model->init_parameters(1);
  model->to(dev);
  nn::CrossEntropyLoss loss_fn;
  optim::OptimizerOptions oo;
  oo.lr = 0.01;
  auto opt = optim::make_optimizer("sgd", model->parameters(), oo);

  data::LoaderOptions lo;
  lo.batch_size = run.batch_size;
  lo.num_workers = run.num_workers;
  lo.prefetch_factor = run.prefetch_factor;
  lo.shuffle = true;
  lo.drop_last = true;
  lo.allocator = &pinned_allocator();
  data::Loader loader(run.dataset, nullptr, lo);
  data::PrefetcherOptions po;
  po.prefetch_depth = run.prefetch_depth;
  data::DevicePrefetcher pf(loader, dev, po);

  Profiler& p = Profiler::global();
  p.clear();
  p.name_this_thread("train");
  p.set_enabled(true);
  PipelineResult r;
  pf.begin_epoch(0);
  data::DeviceBatch b;
  for (int i = 0; i < run.steps; ++i) {
    const int64_t t0 = now_ns();
    if (!pf.next(b)) break;
    p.record(Stage::wait_data, "wait for batch", t0, now_ns());
    opt->zero_grad();
    Tensor logits;
    {
      ScopedSpan s(Stage::forward, "forward");
      logits = model->forward(b.input());
      loss_fn.forward(logits, b.target());
    }
    {
      ScopedSpan s(Stage::backward, "backward");
      model->backward(loss_fn.backward());
    }
    {
      ScopedSpan s(Stage::optimizer, "optimizer");
      opt->step();
    }
    p.record(Stage::step, "step", t0, now_ns());
    ++r.steps;
  }
  pf.compute_stream().synchronize();
  pf.copy_stream().synchronize();
  p.set_enabled(false);
  SummaryOptions so;
  so.num_workers = run.num_workers;
  so.cores = 2;
  so.batch_size = run.batch_size;
  so.prefetch_factor = run.prefetch_factor;
  so.prefetch_depth = run.prefetch_depth;
  r.spans = p.spans();
  r.tracks = p.tracks();
  r.summary = summarize(r.spans, r.tracks, so);
  if (!run.trace.empty()) p.write_chrome_trace(run.trace);
  p.clear();
  return r;
}

}  // namespace tandem::testing

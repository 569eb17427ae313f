// OffloadOptimizer: flat pinned host state, per-bucket D2H / CPU update / H2D pipeline with
// one update thread (see tandem/optim/offload.h for the schedule and its guarantees).
#include "tandem/optim/offload.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/optim/kernels.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"

namespace tandem::optim {
namespace {

constexpr const char* kOp = "offload";
namespace prof = tandem::profile;

// The stream the model's ops run on for the calling thread.
Stream compute_stream_of(Device device) { return runtime_for(device).current_stream(device.index); }

float* f32(const Tensor& t) { return static_cast<float*>(t.raw_data()); }

// Enqueues a timestamp before and a span record after the work enqueued between them, on
// `stream`'s profiler track; inactive when the profiler is off at construction.
class StreamSpan {
 public:
  StreamSpan(const Stream& stream, const std::string& track, prof::Stage stage, const char* name)
      : stream_(stream), stage_(stage), name_(name) {
    if (!prof::Profiler::global().enabled()) return;
    track_ = prof::Profiler::global().stream_track(track);
    begin_ = std::make_shared<int64_t>(0);
    stream_.enqueue([b = begin_] { *b = prof::now_ns(); });
  }
  void end() {
    if (!begin_) return;
    stream_.enqueue([b = begin_, track = track_, stage = stage_, name = name_] {
      prof::Profiler::global().record_on(track, stage, name, *b, prof::now_ns());
    });
    begin_.reset();
  }

 private:
  const Stream& stream_;
  prof::Stage stage_;
  const char* name_;
  int track_ = -1;
  std::shared_ptr<int64_t> begin_;
};

}  // namespace

struct OffloadOptimizer::Impl {
  // One bucket's work for the update thread.
  struct Job {
    int bucket = 0;
    int64_t step = 0;             // 1-based update number; 0: upload only
    double lr = 0;
    int grad_slot = 0;            // host grads buffer holding this step's gradients
    Event d2h_done;               // the gradients are in the host buffer
    bool upload_now = true;        // upload this update right after it (not delayed)
    bool upload_previous = false;  // delayed: first upload the bucket's previous update,
    Event gate;                    // after this compute-stream event
    int64_t previous_step = 0;     // the update number that upload carries
  };

  // Configuration.
  bool adam = true, decoupled = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool nesterov = false;
  int delay = 0;
  int64_t delay_warmup_steps = 0;
  int num_threads = 1;
  std::function<void(int, int64_t)> before_update;

  std::vector<nn::Parameter*> params;
  Device device;
  std::vector<OffloadBucket> buckets;
  std::vector<int64_t> offset;  // per parameter; -1 when not updated here
  std::vector<int> bucket_of;   // per parameter; -1 when not updated here
  std::unordered_map<const nn::Parameter*, size_t> index_of;
  Tensor master, grads[2], exp_avg, exp_avg_sq, momentum_buffer;  // flat pinned host buffers
  Stream d2h, h2d;

  // Training-thread state of the step being computed.
  std::vector<char> param_ready, launched, upload_owed;
  std::vector<int> ready_left;
  std::vector<Event> d2h_events;
  nn::Module* attached = nullptr;

  // Shared with the update thread (under mu).
  std::mutex mu;
  std::condition_variable jobs_cv, progress_cv;
  std::deque<Job> jobs;
  bool stop = false;
  uint64_t pushed = 0, done = 0;
  std::vector<int64_t> uploaded;   // per bucket: update number whose upload is enqueued
  std::vector<Event> h2d_events;   // per bucket: that upload's event
  std::exception_ptr error;
  std::thread worker;

  int64_t numel(size_t i) const { return params[i]->value.numel(); }
  // The delay that update `step` (1-based) gets: none during the warm-up.
  int delay_of(int64_t step) const { return delay == 1 && step > delay_warmup_steps ? 1 : 0; }
  size_t bytes(size_t i) const { return params[i]->value.nbytes(); }

  void push(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back(std::move(job));
      ++pushed;
    }
    jobs_cv.notify_one();
  }

  void rethrow_if_failed() {
    std::lock_guard<std::mutex> lock(mu);
    if (error) std::rethrow_exception(error);
  }

  // Copies every parameter's device value into the master buffer and waits.
  void read_master() {
    Runtime& rt = runtime_for(device);
    for (const OffloadBucket& b : buckets) {
      for (size_t i : b.params) {
        const Tensor& v = params[i]->value;
        d2h.wait(v.storage()->pending_write());
        rt.copy_async(f32(master) + offset[i], Device{}, v.raw_data(), device, bytes(i), d2h);
      }
    }
    d2h.synchronize();
  }

  // Training thread: the gradients of bucket k are final; copy them back and queue the update.
  void launch(int k, int64_t step, double lr) {
    const Stream compute = compute_stream_of(device);
    const Event ready = compute.record();
    const int slot = delay == 1 ? static_cast<int>(step % 2) : 0;
    d2h.wait(ready);
    StreamSpan span(d2h, device.str() + " d2h", prof::Stage::d2h, "grads bucket");
    Runtime& rt = runtime_for(device);
    for (size_t i : buckets[static_cast<size_t>(k)].params)
      rt.copy_async(f32(grads[slot]) + offset[i], Device{}, params[i]->grad.raw_data(), device, bytes(i), d2h);
    span.end();
    Job job;
    job.bucket = k;
    job.step = step;
    job.lr = lr;
    job.grad_slot = slot;
    job.d2h_done = d2h.record();
    job.upload_now = delay_of(step) == 0;
    job.upload_previous = upload_owed[static_cast<size_t>(k)] != 0;
    job.gate = ready;
    job.previous_step = step - 1;
    d2h_events[static_cast<size_t>(k)] = job.d2h_done;
    upload_owed[static_cast<size_t>(k)] = !job.upload_now;
    launched[static_cast<size_t>(k)] = 1;
    push(std::move(job));
  }

  void on_grads_ready(const std::vector<nn::Parameter*>& ps, int64_t step, double lr) {
    for (const nn::Parameter* p : ps) {
      const auto it = index_of.find(p);
      if (it == index_of.end() || param_ready[it->second]) continue;
      param_ready[it->second] = 1;
      const int k = bucket_of[it->second];
      if (--ready_left[static_cast<size_t>(k)] == 0 && !launched[static_cast<size_t>(k)]) launch(k, step, lr);
    }
  }

  void reset_step_state() {
    std::fill(param_ready.begin(), param_ready.end(), 0);
    std::fill(launched.begin(), launched.end(), 0);
    for (size_t k = 0; k < buckets.size(); ++k) ready_left[k] = static_cast<int>(buckets[k].params.size());
  }

  // Training thread: the compute stream (and later users of the parameters) wait for the
  // uploads, and zero_grad waits for the gradient copies.
  void order_compute_after_copies(bool host_wait) {
    const Stream compute = compute_stream_of(device);
    for (size_t k = 0; k < buckets.size(); ++k) {
      Event h;
      {
        std::lock_guard<std::mutex> lock(mu);
        h = h2d_events[k];
      }
      if (host_wait) h.synchronize();
      if (!h.query()) {
        compute.wait(h);
        for (size_t i : buckets[k].params) params[i]->value.storage()->set_pending_write(h);
      }
      if (!d2h_events[k].query()) compute.wait(d2h_events[k]);
    }
  }

  // Update thread: enqueue the copies of bucket k's master range into the device parameters.
  void upload(int k, const Event& gate, int64_t step) {
    h2d.wait(gate);
    StreamSpan span(h2d, device.str() + " h2d", prof::Stage::h2d, "params bucket");
    Runtime& rt = runtime_for(device);
    for (size_t i : buckets[static_cast<size_t>(k)].params)
      rt.copy_async(params[i]->value.raw_data(), device, f32(master) + offset[i], Device{}, bytes(i), h2d);
    span.end();
    const Event e = h2d.record();
    {
      std::lock_guard<std::mutex> lock(mu);
      h2d_events[static_cast<size_t>(k)] = e;
      uploaded[static_cast<size_t>(k)] = step;
    }
    progress_cv.notify_all();
  }

  // Update thread: the SIMD kernels over bucket k's parameters.
  void run_kernels(const Job& job) {
    float* g = f32(grads[job.grad_slot]);
    for (size_t i : buckets[static_cast<size_t>(job.bucket)].params) {
      const int64_t off = offset[i];
      const double wd = params[i]->decay ? weight_decay : 0.0;
      if (adam) {
        AdamParams ap;
        ap.lr = job.lr;
        ap.beta1 = beta1;
        ap.beta2 = beta2;
        ap.eps = eps;
        ap.weight_decay = wd;
        ap.decoupled = decoupled;
        ap.step = job.step;
        adam_step(f32(master) + off, g + off, f32(exp_avg) + off, f32(exp_avg_sq) + off, numel(i), ap);
      } else {
        SgdParams sp;
        sp.lr = job.lr;
        sp.momentum = momentum;
        sp.weight_decay = wd;
        sp.nesterov = nesterov;
        sp.init_buffer = job.step == 1;
        sgd_step(f32(master) + off, g + off, momentum != 0 ? f32(momentum_buffer) + off : nullptr, numel(i), sp);
      }
    }
  }

  void process(const Job& job) {
    if (job.upload_previous) upload(job.bucket, job.gate, job.previous_step);
    if (job.step == 0) return;
    job.d2h_done.synchronize();
    Event previous;
    {
      std::lock_guard<std::mutex> lock(mu);
      previous = h2d_events[static_cast<size_t>(job.bucket)];
    }
    previous.synchronize();  // the last upload has read the master range this update rewrites
    if (before_update) before_update(job.bucket, job.step);
    const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
    run_kernels(job);
    if (t0 >= 0) prof::Profiler::global().record(prof::Stage::optimizer, "cpu update bucket", t0, prof::now_ns());
    if (job.upload_now) upload(job.bucket, Event(), job.step);
  }

  void worker_loop() {
    prof::Profiler::global().name_this_thread("cpu optimizer");
    ops::set_num_threads(num_threads);
    for (;;) {
      Job job;
      bool skip;
      {
        std::unique_lock<std::mutex> lock(mu);
        jobs_cv.wait(lock, [&] { return stop || !jobs.empty(); });
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
        skip = error != nullptr || stop;
      }
      if (!skip) {
        try {
          process(job);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ++done;
      }
      progress_cv.notify_all();
    }
  }
};

OffloadOptimizer::OffloadOptimizer(const std::string& name, std::vector<nn::Parameter*> params,
                                   const OptimizerOptions& o, const OffloadOptions& off)
    : Optimizer(kOp, std::move(params), o.lr), name_(name), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  TD_CHECK_ARG(name == "sgd" || name == "adam" || name == "adamw", kOp,
               "unknown optimizer '{}' (expected sgd, adam or adamw)", name);
  TD_CHECK_ARG(std::isfinite(off.bucket_cap_mb) && off.bucket_cap_mb > 0, kOp,
               "bucket_cap_mb must be a finite value > 0, got {}", off.bucket_cap_mb);
  TD_CHECK_ARG(off.delay == 0 || off.delay == 1, kOp, "delay must be 0 or 1, got {}", off.delay);
  TD_CHECK_ARG(off.delay_warmup_steps >= 0, kOp, "delay_warmup_steps must be >= 0, got {}", off.delay_warmup_steps);
  TD_CHECK_ARG(off.num_threads >= 0, kOp, "num_threads must be >= 0, got {}", off.num_threads);
  m.adam = name != "sgd";
  m.decoupled = name == "adamw";
  m.weight_decay = o.weight_decay.value_or(name == "adamw" ? 0.01 : 0.0);
  if (m.adam) {
    AdamParams ap;
    ap.lr = o.lr;
    ap.beta1 = m.beta1 = o.betas[0];
    ap.beta2 = m.beta2 = o.betas[1];
    ap.eps = m.eps = o.eps;
    ap.weight_decay = m.weight_decay;
    ap.decoupled = m.decoupled;
    adam_constants(ap, kOp);
  } else {
    SgdParams sp;
    sp.lr = o.lr;
    sp.momentum = m.momentum = o.momentum;
    sp.nesterov = m.nesterov = o.nesterov;
    sp.weight_decay = m.weight_decay;
    sgd_constants(sp, kOp);
  }
  m.delay = off.delay;
  m.delay_warmup_steps = off.delay_warmup_steps;
  m.num_threads = off.num_threads > 0 ? off.num_threads : ops::get_num_threads();
  m.before_update = off.before_update;
  m.params = Optimizer::params();

  // Members: parameters that get gradients, all on one device.
  std::vector<size_t> members;
  std::vector<int64_t> numels;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const nn::Parameter& p = *m.params[i];
    if (!p.requires_grad || !p.grad.defined()) continue;
    TD_CHECK_ARG(p.grad.dtype() == DType::f32 && p.grad.is_contiguous() && p.grad.shape() == p.value.shape() &&
                     p.grad.device() == p.value.device(),
                 kOp, "parameter '{}': expected a contiguous f32 grad of shape {} on {}, got {} {} on {}",
                 param_name(i), shape_str(p.value.shape()), p.value.device().str(), dtype_name(p.grad.dtype()),
                 shape_str(p.grad.shape()), p.grad.device().str());
    if (members.empty()) m.device = p.value.device();
    TD_CHECK_ARG(p.value.device() == m.device, kOp, "parameter '{}' is on {}, expected {} like '{}'",
                 param_name(i), p.value.device().str(), m.device.str(), param_name(members.front()));
    members.push_back(i);
    numels.push_back(p.value.numel());
  }
  // A cap past any model (2^62 bytes) is one bucket; casting a larger double would be undefined.
  const double cap = std::min(off.bucket_cap_mb * 1024.0 * 1024.0, 0x1p62);
  m.buckets = plan_offload_buckets(numels, cap < 1 ? size_t{1} : static_cast<size_t>(cap));
  m.offset.assign(m.params.size(), -1);
  m.bucket_of.assign(m.params.size(), -1);
  {
    // plan_offload_buckets numbers parameters by position in `members`; recompute offsets.
    int64_t offset = 0;
    for (size_t k = 0; k < m.buckets.size(); ++k) {
      for (size_t& idx : m.buckets[k].params) {
        idx = members[idx];
        m.offset[idx] = offset;
        m.bucket_of[idx] = static_cast<int>(k);
        m.index_of[m.params[idx]] = idx;
        offset += (m.numel(idx) + 15) / 16 * 16;
      }
      TD_ASSERT(offset == m.buckets[k].end);
    }
  }
  const int64_t total = m.buckets.empty() ? 0 : m.buckets.back().end;
  auto flat = [total] {
    Tensor t = pinned_empty({total});
    t.fill(0.0);
    return t;
  };
  m.master = flat();
  m.grads[0] = flat();
  if (m.delay == 1) m.grads[1] = flat();
  if (m.adam) {
    m.exp_avg = flat();
    m.exp_avg_sq = flat();
  } else if (m.momentum != 0) {
    m.momentum_buffer = flat();
  }

  const size_t nb = m.buckets.size();
  m.param_ready.assign(m.params.size(), 0);
  m.launched.assign(nb, 0);
  m.upload_owed.assign(nb, 0);
  m.ready_left.assign(nb, 0);
  m.d2h_events.assign(nb, Event());
  m.uploaded.assign(nb, 0);
  m.h2d_events.assign(nb, Event());
  m.reset_step_state();

  Runtime& rt = runtime_for(m.device);
  m.d2h = rt.new_stream(m.device.index);
  m.h2d = rt.new_stream(m.device.index);
  m.d2h.set_label("offload gradients d2h");
  m.h2d.set_label("offload parameters h2d");
  m.read_master();
  m.worker = std::thread([&m] { m.worker_loop(); });
}

OffloadOptimizer::~OffloadOptimizer() {
  Impl& m = *impl_;
  detach();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stop = true;
  }
  m.jobs_cv.notify_all();
  if (m.worker.joinable()) m.worker.join();
  // The copies in flight read or write the host buffers: let them finish before the buffers
  // go back to the pool. Their errors have nobody left to report to.
  for (Stream* s : {&m.d2h, &m.h2d}) {
    try {
      if (*s) s->synchronize();
    } catch (...) {
    }
  }
}

void OffloadOptimizer::attach(nn::Module& module) {
  detach();
  Impl& m = *impl_;
  module.set_grad_ready_hook([this](const std::vector<nn::Parameter*>& ps) {
    impl_->on_grads_ready(ps, step_count() + 1, lr());
  });
  m.attached = &module;
}

void OffloadOptimizer::detach() {
  if (impl_->attached) impl_->attached->set_grad_ready_hook({});
  impl_->attached = nullptr;
}

void OffloadOptimizer::update_all() {
  Impl& m = *impl_;
  m.rethrow_if_failed();
  const int64_t step = step_count() + 1;
  for (size_t k = 0; k < m.buckets.size(); ++k)
    if (!m.launched[k]) m.launch(static_cast<int>(k), step, lr());
  // The next forward needs update `step` (delay 0) or `step - 1` (delay 1) uploaded.
  const int64_t target = step - m.delay_of(step);
  if (target == step) {
    // Without delay the update needs this step's gradients: the host waits for the device to
    // finish backward anyway; waiting here first shows that time apart from the CPU update's.
    const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
    for (const Event& e : m.d2h_events) e.synchronize();
    if (t0 >= 0) prof::Profiler::global().record(prof::Stage::wait_device, "wait for backward", t0, prof::now_ns());
  }
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.progress_cv.wait(lock, [&] {
      if (m.error) return true;
      for (int64_t u : m.uploaded)
        if (u < target) return false;
      return true;
    });
    if (m.error) std::rethrow_exception(m.error);
  }
  m.order_compute_after_copies(false);
  m.reset_step_state();
}

void OffloadOptimizer::flush() {
  Impl& m = *impl_;
  m.rethrow_if_failed();
  for (char l : m.launched)
    TD_CHECK_ARG(!l, kOp, "flush() called between a backward() that launched gradient copies and its step()");
  Event gate;
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    if (!m.upload_owed[k]) continue;
    if (!gate.impl()) gate = compute_stream_of(m.device).record();
    Impl::Job job;
    job.bucket = static_cast<int>(k);
    job.upload_previous = true;
    job.gate = gate;
    job.previous_step = step_count();
    m.upload_owed[k] = 0;
    m.push(std::move(job));
  }
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.progress_cv.wait(lock, [&] { return m.error || m.done == m.pushed; });
    if (m.error) std::rethrow_exception(m.error);
  }
  m.order_compute_after_copies(true);
  m.d2h.synchronize();
  m.h2d.synchronize();
}

std::vector<nn::NamedTensor> OffloadOptimizer::state() const {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    TD_CHECK_ARG(m.done == m.pushed, kOp, "state() while {} bucket updates are in flight: call flush() first",
                 m.pushed - m.done);
  }
  std::vector<nn::NamedTensor> out;
  if (step_count() == 0) return out;
  auto view = [&](const Tensor& flat, size_t i) {
    return flat.narrow(0, m.offset[i], m.numel(i)).view(m.params[i]->value.shape());
  };
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (m.offset[i] < 0) continue;
    const std::string& n = param_name(i);
    if (m.adam) {
      out.push_back({n + ".exp_avg", view(m.exp_avg, i), false});
      out.push_back({n + ".exp_avg_sq", view(m.exp_avg_sq, i), false});
      Tensor step = Tensor::empty({}, DType::i64);
      *step.data<int64_t>() = step_count();
      out.push_back({n + ".step", step, false});
    } else if (m.momentum != 0) {
      out.push_back({n + ".momentum_buffer", view(m.momentum_buffer, i), false});
    }
  }
  return out;
}

void OffloadOptimizer::load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) {
  Impl& m = *impl_;
  TD_CHECK_ARG(step_count >= 0, kOp, "step_count must be >= 0, got {}", step_count);
  flush();
  struct Target {
    Tensor dst;
    const Tensor* src;
  };
  std::vector<Target> targets;
  const auto keys = state_keys();
  for (const nn::NamedTensor& nt : state) {
    bool found = false;
    for (size_t i = 0; i < m.params.size() && !found; ++i) {
      if (m.offset[i] < 0) continue;
      for (const auto& [key, dtype] : keys) {
        if (nt.name != param_name(i) + "." + key) continue;
        const Shape want = dtype == DType::i64 ? Shape{} : m.params[i]->value.shape();
        TD_CHECK_ARG(nt.tensor.defined() && nt.tensor.dtype() == dtype && nt.tensor.shape() == want &&
                         nt.tensor.device().is_host() && nt.tensor.is_contiguous(),
                     kOp, "state '{}': expected a {} host tensor of shape {}, got {} {}", nt.name, dtype_name(dtype),
                     shape_str(want), nt.tensor.defined() ? dtype_name(nt.tensor.dtype()) : "undefined",
                     nt.tensor.defined() ? shape_str(nt.tensor.shape()) : "");
        if (key == "step") {
          TD_CHECK_ARG(nt.tensor.item() == static_cast<double>(step_count), kOp,
                       "state '{}': step {} differs from step_count {} (one count for all parameters)", nt.name,
                       nt.tensor.item(), step_count);
        } else {
          const Tensor& flat = key == "exp_avg" ? m.exp_avg : key == "exp_avg_sq" ? m.exp_avg_sq : m.momentum_buffer;
          targets.push_back({flat.narrow(0, m.offset[i], m.numel(i)).view(want), &nt.tensor});
        }
        found = true;
        break;
      }
    }
    TD_CHECK_ARG(found, kOp, "state '{}' matches no parameter and key of this optimizer", nt.name);
  }
  for (Target& t : targets) t.dst.copy_from(*t.src);
  set_step_count(step_count);
  {
    std::lock_guard<std::mutex> lock(m.mu);
    std::fill(m.uploaded.begin(), m.uploaded.end(), step_count);
  }
  m.read_master();
}

void OffloadOptimizer::update(size_t, nn::Parameter&) {
  throw_error(ErrorCode::internal, kOp, "update() called: this optimizer updates whole buckets in update_all()");
}

std::vector<std::pair<std::string, DType>> OffloadOptimizer::state_keys() const {
  if (impl_->adam) return {{"exp_avg", DType::f32}, {"exp_avg_sq", DType::f32}, {"step", DType::i64}};
  if (impl_->momentum != 0) return {{"momentum_buffer", DType::f32}};
  return {};
}

const std::vector<OffloadBucket>& OffloadOptimizer::buckets() const { return impl_->buckets; }
int OffloadOptimizer::delay() const { return impl_->delay; }
int OffloadOptimizer::launched_buckets() const {
  return static_cast<int>(std::count(impl_->launched.begin(), impl_->launched.end(), 1));
}
Tensor OffloadOptimizer::master_params() const { return impl_->master; }

size_t OffloadOptimizer::host_bytes() const {
  size_t n = 0;
  for (const Tensor* t : {&impl_->master, &impl_->grads[0], &impl_->grads[1], &impl_->exp_avg, &impl_->exp_avg_sq,
                          &impl_->momentum_buffer})
    if (t->defined()) n += t->nbytes();
  return n;
}

}  // namespace tandem::optim

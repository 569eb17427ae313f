#include "tandem/data/loader.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <condition_variable>
#include <mutex>
#include <string>

#include "tandem/cpu_binding.h"
#include "tandem/data/image_fields.h"
#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::data {

namespace {
constexpr const char* kOp = "loader";
using profile::now_ns;
}

namespace detail {

/// A loader thread's working memory: the data set's and the destinations of one sample.
struct WorkerScratch {
  SampleScratch sample;
  std::vector<std::byte*> out;  // per field: where the sample being written goes
};

struct LoaderWorker {
  std::thread thread;
  int id = 0;
  bool exited = false;  // set under LoaderCore::mu just before the thread returns
};

struct Slot {
  enum class State { free, filling, ready, failed, held };
  std::vector<Tensor> full;   // per field: [batch_size, ...field shape]
  std::vector<Tensor> views;  // per field: the first `view_size` samples
  int64_t view_size = -1;
  State state = State::free;
  int64_t batch = -1;  // batch number it holds
  uint64_t gen = 0;    // epoch generation it was filled for
  ErrorCode error_code = ErrorCode::internal;
  std::string error;  // set when failed
};

struct LoaderCore {
  std::shared_ptr<const FieldDataset> dataset;
  std::vector<Field> fields;  // the dataset's
  std::vector<size_t> field_bytes;  // per field: bytes of one sample
  int input = -1, target = -1;      // the first input and target field
  std::shared_ptr<const Sampler> sampler;
  LoaderOptions opt;
  Allocator* allocator = nullptr;
  int64_t dataset_size = 0;

  std::mutex mu;
  std::condition_variable cv_work;   // workers: a batch can be started, or stop
  std::condition_variable cv_ready;  // consumer: a batch finished, or workers went idle
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<int> free_slots;
  int held = 0;  // slots owned by the consumer's Batch objects
  int busy = 0;  // workers filling a batch
  bool stop = false;
  int num_workers = 0;      // the setting (opt.num_workers is the value at construction)
  int prefetch_factor = 1;  // the setting
  int consumer_slots = 1;   // batches the consumer may hold at once (set_consumer_slots)
  int running = 0;          // worker threads that have not decided to exit

  // Counters for stats(), in nanoseconds.
  std::atomic<int64_t> batches_made{0}, busy_ns{0}, wait_ns{0};

  // The epoch. `gen` changes whenever an epoch is abandoned; fillers poll `gen_now`.
  uint64_t gen = 0;
  std::atomic<uint64_t> gen_now{0};
  bool active = false;
  uint64_t epoch = 0;
  std::vector<int64_t> order;
  int64_t num_batches = 0;
  int64_t next_ticket = 0;   // next batch a worker starts
  int64_t next_consume = 0;  // next batch the consumer receives
  bool failed = false;       // sticky error for this epoch
  ErrorCode fail_code = ErrorCode::internal;
  std::string fail_message;
  WorkerScratch consumer_scratch;  // for num_workers == 0
  // skip_corrupt: samples skipped in the current epoch ("sample <i>: <error>"), any thread.
  static constexpr int64_t kMaxReplacements = 64;  // a batch fails after this many bad in a row
  mutable std::mutex skipped_mu;
  std::vector<std::string> skipped;

  // No batch holds more than the sampler's samples: a batch_size far above that (say 1e11 for
  // evaluation) must not size the buffers.
  int64_t max_batch() const { return std::max<int64_t>(1, std::min<int64_t>(opt.batch_size, sampler->size())); }

  int64_t batches_for(int64_t n) const {
    // n / b rounded up without forming n + b - 1, which overflows for b near 2^63.
    return opt.drop_last ? n / opt.batch_size : n / opt.batch_size + (n % opt.batch_size != 0 ? 1 : 0);
  }

  // Batches filling or ready (not free, not held by the consumer).
  int in_flight() const { return static_cast<int>(slots.size() - free_slots.size()) - held; }
  // A worker may start the next batch (lock held).
  bool can_start() const {
    return active && !failed && next_ticket < num_batches && !free_slots.empty() &&
           in_flight() < num_workers * prefetch_factor;
  }
  // Slots for num_workers * prefetch_factor batches in flight plus those the consumer holds,
  // but neither more than an epoch has batches: 256 workers x prefetch 64 must not allocate
  // 16,385 batch buffers for a 3-batch epoch.
  void ensure_slots() {
    const int64_t per_epoch = std::max<int64_t>(1, batches_for(sampler->size()));
    const size_t want = static_cast<size_t>(std::min<int64_t>(int64_t{num_workers} * prefetch_factor, per_epoch) +
                                            std::min<int64_t>(consumer_slots, per_epoch));
    while (slots.size() < want) add_slot();
  }

  void add_slot() {
    auto s = std::make_unique<Slot>();
    const int64_t b = max_batch();
    for (const Field& f : fields) {
      Shape shape{b};
      shape.insert(shape.end(), f.shape.begin(), f.shape.end());
      s->full.push_back(Tensor::empty_with(shape, f.dtype, *allocator));
    }
    s->views.resize(fields.size());
    slots.push_back(std::move(s));
    free_slots.push_back(static_cast<int>(slots.size()) - 1);
  }

  void release(int slot) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      Slot& s = *slots[static_cast<size_t>(slot)];
      s.state = Slot::State::free;
      s.batch = -1;
      free_slots.push_back(slot);
      --held;
      wake = can_start();
    }
    // Only when a worker can start: a needless wake-up makes it take the mutex just when the
    // consumer wants it (on a busy machine the consumer then sleeps for a scheduler slice).
    if (wake) cv_work.notify_one();
  }

  // Fills `s` with batch `t` of the current order without holding the lock (the slot and the
  // order are not touched by anyone else meanwhile). Returns the state the slot should take
  // (ready or failed; free when cancelled); the caller sets it under the lock, so the slot
  // is never visible as ready while its filler still counts as busy.
  Slot::State fill(Slot& s, int64_t t, uint64_t g, uint64_t ep, WorkerScratch& scratch) {
    const int64_t t0 = now_ns();
    const bool profiling = profile::Profiler::global().enabled();
    WriteTimes times;
    const Slot::State result = fill_samples(s, t, g, ep, scratch, profiling ? &times : nullptr);
    const int64_t load_ns = times.load_ns, augment_ns = times.augment_ns;
    const int64_t t1 = now_ns();
    busy_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    batches_made.fetch_add(1, std::memory_order_relaxed);
    if (profiling) {
      // Consecutive spans with the summed per-sample times (see loader.h).
      profile::Profiler& p = profile::Profiler::global();
      p.record(profile::Stage::load, "load samples", t0, t0 + load_ns);
      p.record(profile::Stage::augment, "augment", t0 + load_ns, t0 + load_ns + augment_ns);
      p.record(profile::Stage::collate, "collate", t0 + load_ns + augment_ns, std::max(t1, t0 + load_ns + augment_ns));
    }
    return result;
  }

  // Writes sample `idx` (or, with skip_corrupt, the first of idx + 1, idx + 2, ... that
  // decodes when it does not) to `out`. Only the dataset's io and format errors are skipped;
  // each is recorded for skipped_samples().
  void write_sample(int64_t idx, std::byte* const* out, uint64_t g, uint64_t ep, WorkerScratch& scratch,
                    WriteTimes* times) {
    for (int64_t k = 0;; ++k) {
      const int64_t i = (idx + k) % dataset_size;
      try {
        dataset->write(i, SampleKey{opt.seed, ep, i}, out, scratch.sample, times);
        return;
      } catch (const Error& e) {
        const bool skippable = e.code() == ErrorCode::format || e.code() == ErrorCode::io;
        if (!opt.skip_corrupt || !skippable) throw;
        if (k + 1 >= kMaxReplacements || k + 1 >= dataset_size)
          throw Error(e.code(), fmt::format("--skip-corrupt gave up: {} samples in a row failed from index {}{}; "
                                            "the last, index {}: {}",
                                            k + 1, idx, k + 1 >= dataset_size ? " (every sample)" : "", i, e.what()));
        std::lock_guard<std::mutex> lock(skipped_mu);
        if (gen_now.load(std::memory_order_relaxed) == g) skipped.push_back(fmt::format("sample {}: {}", i, e.what()));
      }
    }
  }

  Slot::State fill_samples(Slot& s, int64_t t, uint64_t g, uint64_t ep, WorkerScratch& scratch, WriteTimes* times) {
    const int64_t start = t * opt.batch_size;
    const int64_t n = std::min<int64_t>(opt.batch_size, static_cast<int64_t>(order.size()) - start);
    const size_t nf = fields.size();
    if (s.view_size != n) {
      for (size_t f = 0; f < nf; ++f) s.views[f] = s.full[f].narrow(0, 0, n);
      s.view_size = n;
    }
    scratch.out.resize(nf);
    const FieldDataset& ds = *dataset;
    for (int64_t j = 0; j < n; ++j) {
      if (gen_now.load(std::memory_order_relaxed) != g) return Slot::State::free;
      const int64_t idx = order[static_cast<size_t>(start + j)];
      // Random order defeats the hardware prefetcher; ask for the sample after next now.
      if (start + j + 2 < static_cast<int64_t>(order.size())) ds.prefetch(order[static_cast<size_t>(start + j + 2)]);
      try {
        TD_CHECK_ARG(idx >= 0 && idx < dataset_size, kOp, "sampler gave index {}, expected [0, {})", idx,
                     dataset_size);
        for (size_t f = 0; f < nf; ++f)
          scratch.out[f] = static_cast<std::byte*>(s.full[f].raw_data()) + static_cast<size_t>(j) * field_bytes[f];
        write_sample(idx, scratch.out.data(), g, ep, scratch, times);
        check_classes(fields, scratch.out.data(), kOp);
      } catch (const std::exception& e) {
        const Error* te = dynamic_cast<const Error*>(&e);
        s.error_code = te ? te->code() : ErrorCode::internal;
        s.error = fmt::format("sample {} (batch {} of epoch {}): {}", idx, t, ep, e.what());
        return Slot::State::failed;
      }
    }
    return Slot::State::ready;
  }
};

}  // namespace detail

using detail::Slot;

Batch::Batch(Batch&& o) noexcept
    : fields(std::move(o.fields)),
      index(o.index),
      epoch(o.epoch),
      input_(o.input_),
      target_(o.target_),
      core_(std::move(o.core_)),
      slot_(o.slot_) {
  o.slot_ = -1;
}

Batch& Batch::operator=(Batch&& o) noexcept {
  if (this != &o) {
    release();
    fields = std::move(o.fields);
    index = o.index;
    epoch = o.epoch;
    input_ = o.input_;
    target_ = o.target_;
    core_ = std::move(o.core_);
    slot_ = o.slot_;
    o.slot_ = -1;
  }
  return *this;
}

const Tensor& Batch::field_at(int i, const char* role) const {
  TD_CHECK_ARG(i >= 0 && static_cast<size_t>(i) < fields.size(), kOp,
               "the batch holds no {} field ({} fields{}): expected a batch from Loader::next()", role, fields.size(),
               core_ ? "" : ", released");
  return fields[static_cast<size_t>(i)];
}

void Batch::release() noexcept {
  if (!core_) return;
  fields.clear();
  core_->release(slot_);
  core_.reset();
  slot_ = -1;
}

// The option checks of both constructors.
static void check_options(const LoaderOptions& o) {
  TD_CHECK_ARG(o.batch_size >= 1, kOp, "expected batch_size >= 1, found {}", o.batch_size);
  TD_CHECK_ARG(o.num_workers >= 0, kOp, "expected num_workers >= 0, found {}", o.num_workers);
  TD_CHECK_ARG(o.prefetch_factor >= 1, kOp, "expected prefetch_factor >= 1, found {}", o.prefetch_factor);
  TD_CHECK_ARG(!(o.sampler && o.shuffle), kOp,
               "expected either a sampler or shuffle=true, found both (they are mutually exclusive)");
  TD_CHECK_ARG(!o.allocator || o.allocator->device().is_host(), kOp,
               "expected a host-accessible allocator, found one for {}", o.allocator->device().str());
}

// The image fields of `dataset` through `transform`, after the options were checked.
static std::shared_ptr<const FieldDataset> image_fields(std::shared_ptr<const Dataset> dataset,
                                                        std::shared_ptr<const Transform> transform,
                                                        const LoaderOptions& o) {
  check_options(o);
  return std::make_shared<ImageFields>(std::move(dataset), std::move(transform), o.images_dtype);
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Transform> transform,
               LoaderOptions options)
    : Loader(image_fields(std::move(dataset), std::move(transform), options), std::move(options), true) {}

Loader::Loader(std::shared_ptr<const FieldDataset> dataset, LoaderOptions options)
    : Loader(std::move(dataset), std::move(options), false) {}

Loader::Loader(std::shared_ptr<const FieldDataset> dataset, LoaderOptions options, bool images)
    : core_(std::make_shared<detail::LoaderCore>()) {
  auto& c = *core_;
  TD_CHECK_ARG(dataset != nullptr, kOp, "expected a dataset, found null");
  check_options(options);
  TD_CHECK_ARG(images || options.images_dtype == DType::f32, kOp,
               "images_dtype {} with a FieldDataset: its fields declare their dtypes; expected f32 (the default)",
               dtype_name(options.images_dtype));
  c.allocator = options.allocator ? options.allocator : &host_allocator();
  c.dataset = std::move(dataset);
  c.fields = c.dataset->fields();
  TD_CHECK_ARG(!c.fields.empty(), kOp, "the dataset declares no fields: expected at least one");
  for (size_t f = 0; f < c.fields.size(); ++f) {
    TD_CHECK_ARG(find_field(c.fields, c.fields[f].name) == static_cast<int>(f), kOp,
                 "the dataset declares two fields named '{}': expected distinct names", c.fields[f].name);
    c.field_bytes.push_back(c.fields[f].bytes());
  }
  c.input = find_field(c.fields, FieldRole::input);
  c.target = find_field(c.fields, FieldRole::target);
  c.dataset_size = c.dataset->size();
  if (options.sampler)
    c.sampler = options.sampler;
  else if (options.shuffle)
    c.sampler = std::make_shared<RandomSampler>(c.dataset_size, options.seed);
  else
    c.sampler = std::make_shared<SequentialSampler>(c.dataset_size);
  c.opt = std::move(options);
  c.opt.sampler.reset();

  c.num_workers = c.opt.num_workers;
  c.prefetch_factor = c.opt.prefetch_factor;
  c.ensure_slots();
  std::lock_guard<std::mutex> lock(c.mu);
  spawn_workers_locked(c.num_workers);
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->stop = true;
    core_->gen_now.store(++core_->gen);
    core_->active = false;
  }
  core_->cv_work.notify_all();
  for (auto& w : workers_) w->thread.join();
}

void Loader::spawn_workers_locked(int count) {
  // Threads that exited after a reduction are joined here (they returned or are returning).
  std::erase_if(workers_, [](const std::unique_ptr<detail::LoaderWorker>& w) {
    if (!w->exited) return false;
    w->thread.join();
    return true;
  });
  for (int i = 0; i < count; ++i) {
    auto w = std::make_unique<detail::LoaderWorker>();
    w->id = core_->running++;
    detail::LoaderWorker* self = w.get();
    w->thread = std::thread([this, self] { worker_loop(self); });
    workers_.push_back(std::move(w));
  }
}

void Loader::set_num_workers(int num_workers) {
  TD_CHECK_ARG(num_workers >= 0, kOp, "set_num_workers: expected num_workers >= 0, found {}", num_workers);
  auto& c = *core_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.num_workers = num_workers;
    c.ensure_slots();
    if (num_workers > c.running) spawn_workers_locked(num_workers - c.running);
  }
  c.cv_work.notify_all();  // surplus workers see running > num_workers and exit
  c.cv_ready.notify_all();
}

void Loader::set_prefetch_factor(int prefetch_factor) {
  TD_CHECK_ARG(prefetch_factor >= 1, kOp, "set_prefetch_factor: expected prefetch_factor >= 1, found {}",
               prefetch_factor);
  auto& c = *core_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.prefetch_factor = prefetch_factor;
    c.ensure_slots();
  }
  c.cv_work.notify_all();
}

void Loader::set_consumer_slots(int slots) {
  TD_CHECK_ARG(slots >= 1, kOp, "set_consumer_slots: expected slots >= 1, found {}", slots);
  auto& c = *core_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.consumer_slots = std::max(c.consumer_slots, slots);
    c.ensure_slots();
  }
  c.cv_work.notify_all();
}

int Loader::num_workers() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->num_workers;
}

int Loader::prefetch_factor() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->prefetch_factor;
}

std::vector<std::string> Loader::skipped_samples() const {
  const auto& c = *core_;
  std::lock_guard<std::mutex> lock(c.skipped_mu);
  std::vector<std::string> out = c.skipped;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

LoaderStats Loader::stats() const {
  const auto& c = *core_;
  LoaderStats s;
  s.batches = c.batches_made.load(std::memory_order_relaxed);
  s.busy_seconds = static_cast<double>(c.busy_ns.load(std::memory_order_relaxed)) / 1e9;
  s.wait_seconds = static_cast<double>(c.wait_ns.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

void Loader::worker_loop(detail::LoaderWorker* self) {
  ::pthread_setname_np(::pthread_self(), "loader worker");  // the utilisation sampler counts these threads
  bind_this_thread();                                       // --bind: the rank's cores
  auto& c = *core_;
  detail::WorkerScratch scratch;
  bool named = false;
  std::unique_lock<std::mutex> lock(c.mu);
  for (;;) {
    c.cv_work.wait(lock, [&] { return c.stop || c.running > c.num_workers || c.can_start(); });
    if (c.stop) return;
    if (c.running > c.num_workers) {  // surplus after set_num_workers(): leave between batches
      --c.running;
      self->exited = true;
      return;
    }
    if (!named && profile::Profiler::global().enabled()) {
      named = true;
      profile::Profiler::global().name_this_thread(fmt::format("{} worker {}", c.opt.name, self->id));
    }
    const int si = c.free_slots.back();
    c.free_slots.pop_back();
    Slot& s = *c.slots[static_cast<size_t>(si)];
    const int64_t t = c.next_ticket++;
    const uint64_t g = c.gen, ep = c.epoch;
    s.state = Slot::State::filling;
    s.batch = t;
    s.gen = g;
    ++c.busy;
    lock.unlock();
    const Slot::State result = c.fill(s, t, g, ep, scratch);
    lock.lock();
    --c.busy;
    if (result == Slot::State::free || g != c.gen) {  // abandoned epoch: back to the pool
      s.state = Slot::State::free;
      s.batch = -1;
      c.free_slots.push_back(si);
    } else {
      s.state = result;
    }
    c.cv_ready.notify_all();
  }
}

void Loader::begin_epoch(uint64_t epoch, int64_t first_batch) {
  auto& c = *core_;
  TD_CHECK_ARG(first_batch >= 0 && first_batch <= num_batches(), kOp,
               "begin_epoch: expected a first batch in [0, {}], got {}", num_batches(), first_batch);
  std::unique_lock<std::mutex> lock(c.mu);
  c.gen_now.store(++c.gen);
  c.active = false;
  c.cv_ready.wait(lock, [&] { return c.busy == 0; });
  for (size_t i = 0; i < c.slots.size(); ++i) {
    Slot& s = *c.slots[i];
    if (s.state == Slot::State::ready || s.state == Slot::State::failed) {
      s.state = Slot::State::free;
      s.batch = -1;
      c.free_slots.push_back(static_cast<int>(i));
    }
  }
  c.sampler->indices(epoch, c.order);
  {
    std::lock_guard<std::mutex> skipped_lock(c.skipped_mu);
    c.skipped.clear();
  }
  c.epoch = epoch;
  c.num_batches = c.batches_for(static_cast<int64_t>(c.order.size()));
  c.next_ticket = first_batch;
  c.next_consume = first_batch;
  c.failed = false;
  c.fail_message.clear();
  c.active = true;
  lock.unlock();
  c.cv_work.notify_all();
}

bool Loader::next(Batch& batch) {
  batch.release();
  auto& c = *core_;
  std::unique_lock<std::mutex> lock(c.mu);
  TD_CHECK_ARG(c.active || c.failed, kOp, "next() called before begin_epoch()");
  if (c.failed) throw_error(c.fail_code, kOp, c.fail_message);
  if (c.next_consume >= c.num_batches) return false;
  const int64_t t = c.next_consume;
  const int64_t wait_begin = now_ns();
  int si = -1;
  for (;;) {
    for (size_t i = 0; i < c.slots.size(); ++i) {
      const Slot& s = *c.slots[i];
      if (s.batch == t && s.gen == c.gen && (s.state == Slot::State::ready || s.state == Slot::State::failed)) {
        si = static_cast<int>(i);
        break;
      }
    }
    if (si >= 0) break;
    if (c.num_workers == 0 && c.next_ticket == t) {
      // No workers (from the start, or after set_num_workers(0)) and nobody started batch t:
      // make it here. Batches already started by exiting workers are waited for above.
      if (c.free_slots.empty()) c.add_slot();  // the consumer holds every slot
      si = c.free_slots.back();
      c.free_slots.pop_back();
      ++c.next_ticket;
      Slot& s = *c.slots[static_cast<size_t>(si)];
      s.state = Slot::State::filling;
      s.batch = t;
      s.gen = c.gen;
      const uint64_t g = c.gen, ep = c.epoch;
      lock.unlock();  // Batch::release() may run on another thread meanwhile
      const Slot::State result = c.fill(s, t, g, ep, c.consumer_scratch);
      lock.lock();
      s.state = result;
      break;
    }
    if (c.free_slots.empty() && c.held == static_cast<int>(c.slots.size())) {
      c.add_slot();  // every slot is in the consumer's hands: grow rather than deadlock
      c.cv_work.notify_one();
    }
    c.cv_ready.wait(lock);
  }
  c.wait_ns.fetch_add(now_ns() - wait_begin, std::memory_order_relaxed);
  ++c.next_consume;
  Slot& s = *c.slots[static_cast<size_t>(si)];
  if (s.state == Slot::State::failed) {
    c.failed = true;
    c.active = false;
    c.fail_code = s.error_code;
    c.fail_message = s.error;
    s.state = Slot::State::free;
    s.batch = -1;
    c.free_slots.push_back(si);
    throw_error(c.fail_code, kOp, c.fail_message);
  }
  s.state = Slot::State::held;
  ++c.held;
  batch.fields = s.views;
  batch.input_ = c.input;
  batch.target_ = c.target;
  batch.index = t;
  batch.epoch = c.epoch;
  batch.core_ = core_;
  batch.slot_ = si;
  const bool wake = c.can_start();  // one fewer batch in flight: a worker may start the next
  lock.unlock();
  if (wake) c.cv_work.notify_one();
  return true;
}

int64_t Loader::num_batches() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->batches_for(core_->sampler->size());
}

int64_t Loader::num_samples() const { return core_->sampler->size(); }
int64_t Loader::max_batch_size() const { return core_->max_batch(); }
const std::string& Loader::name() const { return core_->opt.name; }
const std::vector<Field>& Loader::fields() const { return core_->fields; }
int Loader::input_field() const { return core_->input; }
int Loader::target_field() const { return core_->target; }

int Loader::num_slots() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return static_cast<int>(core_->slots.size());
}

}  // namespace tandem::data

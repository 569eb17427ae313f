// Loader: turns a FieldDataset (tandem/data/field_dataset.h) + Sampler into batches of typed
// fields, one tensor [B, ...field shape] per field the data set declares, collated straight
// into a fixed set of reusable batch slots. An image Dataset + Transform is one case
// (ImageFields): images [B, C, H, W] f32 (bf16/f16 under mixed precision) and labels [B] i64.
//
// How it works: an epoch's index order comes from the sampler (a pure function of (seed,
// epoch)); batch b holds positions [b * batch_size, (b + 1) * batch_size) of that order.
// Worker threads take the next batch number and a free slot together and fill the whole batch
// (FieldDataset::write per sample, writing each field into the slot; for images the dataset's
// get + the transform); the consumer receives
// batches strictly in order. At most num_workers * prefetch_factor batches are in flight
// (filling or ready); a slot returns to the pool only when the consumer releases its Batch
// (RAII, or Batch::release()). There is no allocation per batch after construction; the pool
// grows by one slot only when the consumer itself holds every slot and asks for another batch,
// and when set_num_workers() / set_prefetch_factor() raise the number of batches in flight.
// With num_workers == 0 batches are made in the consumer's thread inside next().
// Augmentation is keyed by (seed, epoch, sample index), so batches are bit-for-bit the same
// for any num_workers, also when it changes in the middle of an epoch.
//
// Profiling: while the profiler is enabled each batch records, on the thread that made it
// (track "loader worker <i>", or the consumer's), three consecutive spans: load (the summed
// time of the dataset's get() for the batch's samples), augment (the summed time of the
// transform writing them into the slot) and collate (the rest: class checks, views, bookkeeping).
// Per-sample spans would make a trace of one epoch hold hundreds of thousands of events.
// stats() counts the time spent making batches and waiting for them whether or not the
// profiler is on (the autotuner reads it).
//
// Thread-safety: one consumer thread calls begin_epoch(), next(), num_batches(),
// set_num_workers(), set_prefetch_factor() and destroys the loader; Batch::release() may run
// on any thread; stats(), num_workers(), prefetch_factor() and num_slots() on any thread.
// Leaving an epoch early (begin_epoch() again, or destroying the loader) cancels workers
// between samples and returns promptly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tandem/allocator.h"
#include "tandem/data/dataset.h"
#include "tandem/data/field.h"
#include "tandem/data/field_dataset.h"
#include "tandem/data/sampler.h"
#include "tandem/data/transform.h"
#include "tandem/tensor.h"

namespace tandem::data {

struct LoaderOptions {
  int64_t batch_size = 1;
  int num_workers = 0;      // threads making batches; 0 = make them in the consumer's thread
  int prefetch_factor = 2;  // batches in flight per worker (PyTorch's meaning)
  bool drop_last = false;   // drop the last batch when it has fewer than batch_size samples
  bool shuffle = false;     // RandomSampler(seed) instead of SequentialSampler
  uint64_t seed = 0;        // keys the shuffle and the per-sample augmentation
  /// Memory for batch slots (host-accessible, e.g. a pinned pool); nullptr = host_allocator().
  Allocator* allocator = nullptr;
  /// Custom index order (e.g. DistributedSampler); when set, shuffle must be false.
  std::shared_ptr<const Sampler> sampler;
  /// Names the workers' profiler tracks "<name> worker <i>" (e.g. "eval loader worker 0").
  std::string name = "loader";
  /// A sample whose get() or transform throws Error(io) or Error(format) (a corrupt,
  /// truncated or unreadable image) is replaced by the next index that works (idx + 1,
  /// idx + 2, ... modulo the dataset's size, decoded with that index's augmentation), so the
  /// batch stays the same for any num_workers; skipped_samples() lists it. A batch still fails
  /// after 64 bad samples in a row (or the whole dataset), with an error of the last one's code
  /// "--skip-corrupt gave up: N samples in a row failed from index A; the last, index B: ...".
  /// false: the first such error stops the epoch.
  bool skip_corrupt = false;
  /// Image data sets (ImageFields): element type of the batches' images: f32, or bf16 / f16 for
  /// mixed precision (each sample is transformed in f32, then rounded to nearest even once as
  /// it is written into the slot, so the slot and the copy to the device hold half the bytes).
  /// Other types throw Error(invalid_argument) at construction. A FieldDataset declares its
  /// fields' dtypes itself: it must be left at f32.
  DType images_dtype = DType::f32;
};

/// Cumulative counters since construction (all epochs). Units: seconds.
struct LoaderStats {
  int64_t batches = 0;          // batches made (including ones abandoned mid-epoch)
  double busy_seconds = 0;      // time spent making batches, summed over the threads that made them
  double wait_seconds = 0;      // time the consumer spent in next() waiting for (or making) a batch
};

namespace detail {
struct LoaderCore;
struct LoaderWorker;
}

/// One batch, owning its slot until released (destruction, move-assignment, release(), or
/// passing it to Loader::next() again). Its tensors alias the slot: do not keep copies of
/// them past release(), the slot's memory is then refilled.
/// It holds one tensor per field of the loader (Loader::fields(), in that order), each
/// [B, ...field shape], B <= batch_size (smaller for the last batch); for images:
/// fields[0] = images [B, C, H, W], fields[1] = labels [B] i64.
class Batch {
 public:
  Batch() = default;
  ~Batch() { release(); }
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  std::vector<Tensor> fields;  // per field of Loader::fields(): [B, ...field shape], empty when released
  int64_t index = -1;          // batch number within the epoch
  uint64_t epoch = 0;

  /// Samples in the batch (0 when released).
  int64_t size() const { return fields.empty() ? 0 : fields[0].size(0); }
  /// The first input field (images) and the first target field (labels). Throws
  /// Error(invalid_argument) when the batch holds no such field (released, or none declared).
  const Tensor& input() const { return field_at(input_, "input"); }
  const Tensor& target() const { return field_at(target_, "target"); }
  bool valid() const { return core_ != nullptr; }
  /// Returns the slot to the loader (safe after the loader is destroyed). Idempotent.
  void release() noexcept;

 private:
  friend class Loader;
  const Tensor& field_at(int i, const char* role) const;
  int input_ = -1, target_ = -1;
  std::shared_ptr<detail::LoaderCore> core_;
  int slot_ = -1;
};

class Loader {
 public:
  /// An image data set through `transform` (ImageFields: fields images and labels); `transform`
  /// may be null: then pixels become f32 v / 255. Throws Error(invalid_argument) for
  /// batch_size < 1, num_workers < 0, prefetch_factor < 1, a non-host allocator, a sampler
  /// given together with shuffle, a null dataset, a bad images_dtype, or a transform that does
  /// not fit the dataset's dims.
  Loader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Transform> transform, LoaderOptions options);
  /// Any typed fields. Throws as above, and Error(invalid_argument) for images_dtype other
  /// than f32, a data set that declares no fields or two fields of one name.
  Loader(std::shared_ptr<const FieldDataset> dataset, LoaderOptions options);
  /// Cancels the epoch and joins the workers (promptly, even when they are blocked on a full
  /// queue or mid-batch). Batches still held stay valid until released.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Starts epoch `epoch` (abandoning any epoch in progress) and lets workers start filling,
  /// from batch `first_batch` of the epoch (a resumed run: batches first_batch,
  /// first_batch + 1, ... are the ones an uninterrupted epoch gives there, bit for bit).
  /// Throws Error(invalid_argument) for first_batch outside [0, num_batches()].
  void begin_epoch(uint64_t epoch, int64_t first_batch = 0);
  /// Releases what `batch` held, then waits for the next batch of the epoch and moves it into
  /// `batch`. Returns false at the end of the epoch. Throws Error(invalid_argument) before the
  /// first begin_epoch(); when making a batch failed, throws an Error with the original's code
  /// whose message names the sample index, batch and epoch and carries the original message
  /// (a value of a field outside its [0, classes), e.g. a label outside the dataset's
  /// [0, num_classes()), is such a failure, Error(format));
  /// the epoch then stops and next() throws the same error until begin_epoch().
  bool next(Batch& batch);
  /// Batches per epoch: ceil(samples / batch_size), or floor with drop_last.
  int64_t num_batches() const;
  /// Samples per epoch (the sampler's size).
  int64_t num_samples() const;
  /// Samples in the largest batch: min(batch_size, samples), at least 1 (what a batch slot or
  /// a device buffer must hold; an epoch's last batch may be smaller).
  int64_t max_batch_size() const;
  /// LoaderOptions::name ("loader", "eval loader").
  const std::string& name() const;
  /// The fields of every batch (the data set's), in the order of Batch::fields.
  const std::vector<Field>& fields() const;
  /// The position in fields() of the first input and of the first target field (-1: none).
  int input_field() const;
  int target_field() const;
  /// Batch slots allocated so far (min(num_workers * prefetch_factor, num_batches()) +
  /// min(consumer slots, num_batches()), the consumer slots being 1 unless raised by
  /// set_consumer_slots); grows when the consumer holds all of them or when either term grows.
  int num_slots() const;

  /// Changes the number of worker threads, effective at once and between batches: new
  /// workers start taking the next batch numbers; surplus workers finish the batch they are
  /// making, then exit (without being waited for). Batches keep their order and contents.
  /// 0 makes the remaining batches in the consumer's thread. Slots are added when
  /// num_workers * prefetch_factor + 1 exceeds num_slots(); none are freed.
  /// Throws Error(invalid_argument) for num_workers < 0.
  void set_num_workers(int num_workers);
  /// Changes the batches in flight per worker (>= 1; throws Error(invalid_argument) below).
  /// Lowering it lets workers start new batches only once fewer are in flight.
  void set_prefetch_factor(int prefetch_factor);
  /// Declares that the consumer may hold up to `slots` batches at once (default 1; a
  /// DevicePrefetcher holds one per copy in flight). The slots are allocated now, so the
  /// pool's size (pinned memory) does not depend on how long the consumer holds its batches;
  /// never lowered. Throws Error(invalid_argument) for slots < 1. Consumer thread.
  void set_consumer_slots(int slots);
  int num_workers() const;
  int prefetch_factor() const;
  LoaderStats stats() const;
  /// With skip_corrupt: the samples skipped so far in the current epoch, "sample <index>:
  /// <error>" (the error names the file), sorted, each once. Cleared by begin_epoch(). Any thread.
  std::vector<std::string> skipped_samples() const;

 private:
  Loader(std::shared_ptr<const FieldDataset> dataset, LoaderOptions options, bool images);
  void worker_loop(detail::LoaderWorker* self);
  void spawn_workers_locked(int count);
  std::shared_ptr<detail::LoaderCore> core_;
  std::vector<std::unique_ptr<detail::LoaderWorker>> workers_;
};

}  // namespace tandem::data

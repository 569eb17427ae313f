// DevicePrefetcher: moves the Loader's batches to a device ahead of the consumer.
//
// The loader collates each batch into a host slot (pinned when LoaderOptions.allocator is
// pinned_allocator()). The prefetcher copies every field of the batch (images and labels, or
// tokens and targets) host-to-device on its own copy stream, `prefetch_depth` batches ahead of the batch the consumer works on, into a ring
// of prefetch_depth + 1 device buffers allocated once (no allocation per batch after the
// first epoch's largest batch). Per batch it records an event on the copy stream; next()
// makes the compute stream wait for that event (the device waits, the host does not), so
// ops enqueued after next() see the whole batch.
//
// Buffer lifetime (the two hazards of asynchronous copies):
//  - a host slot goes back to the loader only after its copy's event completed (it is also
//    declared with record_pinned_use when it is a pinned block), so the loader never
//    refills a slot a copy is still reading;
//  - a device buffer is overwritten only after the compute stream passed the point where the
//    consumer asked for the following batch: the copy stream waits for an event recorded on
//    the compute stream at that next() call. Hence a DeviceBatch's tensors are valid for
//    work enqueued before the consumer's next call to next() (like Loader's Batch).
// The ring holds prefetch_depth + host_lead + 1 device buffers, used in FIFO order, allocated
// by reserve() or else at first use (grown if a later batch is larger); a copy into a buffer
// allocated at first use also waits for the compute stream's work enqueued so far, since the
// allocator may hand out memory that work ordered on the compute stream released.
//
// Waiting: at most prefetch_depth + host_lead host slots are held at once (the pinned memory
// of copies in flight; the loader allocates that many consumer slots up front, see
// Loader::set_consumer_slots); when that many copies are still pending, next() waits on the
// host for the oldest before taking another batch. With host_lead = 0 this is also the
// throttle that keeps the host at most prefetch_depth batches ahead of the device: the
// pending copies wait for the compute stream to release their buffers. A consumer with its
// own throttle (the trainer waits, every K steps, for the metrics read-back issued K steps
// earlier, so it runs at most 2K steps ahead of the compute stream) sets host_lead to that
// bound: then every copy's buffer was released by steps the compute stream has already run,
// at most 2K + prefetch_depth - 1 copies are pending, and next() never waits on the host
// (docs/design.md). The part of a wait in which the copy itself still waited for the compute
// stream to release its device buffer is back-pressure from compute ("wait for compute"); the
// rest is transfer time ("wait for copy"). While the profiler is enabled both are wait_device
// spans; stats() counts them always (the autotuner reads them).
//
// set_prefetch_depth() changes the depth between batches (the autotuner uses it): raising it
// adds device buffers (allocated at once when the batch size is known), lowering it lets the
// queue drain to the new depth; no batch is lost or reordered.
//
// On the cpu device copies are plain memcpy on the calling thread (everything completes at
// once). Destruction and begin_epoch() wait (on the host) only for the copies already issued
// -- bounded work that always completes -- then return every held slot, so leaving an epoch
// early never hangs.
// Thread-safety: one consumer thread calls next(), begin_epoch() and the destructor. The
// loader must outlive the prefetcher's use of it (calls to next() and begin_epoch()).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "tandem/data/loader.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::data {

/// Largest PrefetcherOptions::host_lead (device buffers beyond the copy queue).
inline constexpr int kMaxHostLead = 256;

struct PrefetcherOptions {
  /// Batches copied ahead of the one the consumer holds (>= 1).
  int prefetch_depth = 2;
  /// Steps the consumer may run ahead of the compute stream, bounded by a wait of its own,
  /// without next() waiting (0 .. kMaxHostLead). Adds as many device buffers to the ring and
  /// as many pinned host slots to the loader (memory: host_lead more batches on each side).
  int host_lead = 0;
  /// Stream the consumer's ops run on; it waits for each batch's copy event. Default: the
  /// device's current stream at construction (virt_current_stream for virt, the default
  /// stream for cuda and cpu).
  Stream compute_stream;
  /// Stream the copies run on. Default: a new stream of the device (runtime.new_stream).
  Stream copy_stream;
};

/// Cumulative counters since construction. Units: seconds.
struct PrefetcherStats {
  int64_t batches = 0;             // batches handed to the consumer
  int64_t waits = 0;               // times next() waited on the host for a pending copy
  double copy_wait_seconds = 0;    // host waiting for a copy that was free to run
  double compute_wait_seconds = 0;  // host waiting for the compute stream to release the
                                    // buffer a copy waits for (back-pressure, not transfer time)
};

/// A batch on the device; its tensors alias the prefetcher's device buffers.
struct DeviceBatch {
  /// Per field of the loader (Loader::fields()), on the device: [B, ...field shape] in the
  /// field's dtype (images [B, C, H, W] in the loader's images dtype, labels [B] i64).
  std::vector<Tensor> fields;
  int64_t index = -1;  // batch number within the epoch
  uint64_t epoch = 0;
  Event ready;         // completes when every field's copy ran (the compute stream waits for it)
  int input_field = -1, target_field = -1;  // Loader::input_field(), Loader::target_field()

  int64_t size() const { return fields.empty() ? 0 : fields[0].size(0); }
  /// The first input and target field; throw Error(invalid_argument) when there is none.
  const Tensor& input() const;
  const Tensor& target() const;
};

class DevicePrefetcher {
 public:
  /// Throws Error(invalid_argument, "[prefetcher] ...") for prefetch_depth < 1, host_lead
  /// outside [0, kMaxHostLead] or streams of
  /// another device, and Error(not_available) for a device this build or machine lacks.
  DevicePrefetcher(Loader& loader, Device device, PrefetcherOptions options = {});
  /// Waits for the copies in flight, then returns every held slot to the loader.
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  /// Allocates every device buffer of the ring for the loader's largest batch
  /// (min(batch_size, samples) samples of every field) and waits on the host for the
  /// work queued on the compute stream, since fresh memory may be memory that work still
  /// uses. Call once before the step loop: then no copy ever waits for the compute stream
  /// because its buffer is new. Without it the buffers are allocated at the first batches and
  /// those copies wait for the compute work queued then. Throws Error(out_of_memory).
  void reserve();
  /// Abandons the batches in flight (after their copies ran) and starts `epoch` on the loader,
  /// from batch `first_batch` (Loader::begin_epoch).
  void begin_epoch(uint64_t epoch, int64_t first_batch = 0);
  /// Moves the next batch of the epoch into `batch` (copies for the following ones are
  /// issued first). Returns false at the end of the epoch. Rethrows the loader's errors.
  bool next(DeviceBatch& batch);

  Device device() const { return device_; }
  const Stream& copy_stream() const { return copy_; }
  const Stream& compute_stream() const { return compute_; }
  /// Host slots held now (waiting for their copies); at most prefetch_depth + host_lead (or
  /// that bound before the depth was lowered, until the queue drained).
  int held_slots() const { return static_cast<int>(held_.size()); }
  /// Changes the number of batches copied ahead (>= 1; throws Error(invalid_argument) below).
  /// Takes effect at the next call to next(). Consumer thread only.
  void set_prefetch_depth(int prefetch_depth);
  int prefetch_depth() const { return depth_; }
  int host_lead() const { return lead_; }
  /// Device buffers in the ring (prefetch_depth + host_lead + 1, more after a depth was lowered).
  int ring_size() const { return static_cast<int>(buffers_.size()); }
  PrefetcherStats stats() const { return stats_; }

 private:
  struct Buffer {
    std::vector<Tensor> fields;  // per field: a flat device buffer, grown to the largest batch
    Event consumed;         // compute stream passed the consumer's use of this buffer
  };
  struct Ready {
    int buffer;
    DeviceBatch batch;
  };
  struct Held {
    Batch host;
    Event copied;
    Event released;  // the compute-stream event the copy waited for (its buffer's release)
  };

  void issue(Batch&& host, int buffer);
  void release_copied(bool wait_oldest);
  void drain();

  Loader& loader_;
  Device device_;
  int depth_;
  int lead_;
  Stream compute_, copy_;
  std::vector<Buffer> buffers_;
  std::deque<int> free_;
  std::deque<Ready> ready_;
  std::deque<Held> held_;
  int current_ = -1;  // buffer the consumer holds
  std::vector<int64_t> reserved_;  // per field: reserved buffer size (elements), empty before reserve()
  bool exhausted_ = false;
  PrefetcherStats stats_;
};

}  // namespace tandem::data

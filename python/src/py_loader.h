// tandem._tandem.Loader: tandem's data::Loader behind a Python iterator whose batch fields leave
// through DLPack without a copy. What it loads:
//   - a path of images (folder, packed shards, CIFAR, IDX): the trainer's own data recipe
//     (data_recipe.h), fields images [B, C, H, W] (f32, bf16 or f16 by precision) and labels [B]
//     i64;
//   - a path of token shards (a folder with train.tok and val.tok, `tandem tokenize`; the split
//     test reads val.tok): windows of block_size tokens (data::TokenWindows), fields tokens
//     [B, block_size] i32 (input ids) and targets [B, block_size] i64 (the next ids);
//   - a Python data set (LoaderArgs::field_dataset, a PyDataset): fields inputs [B, ...] of its
//     arrays' dtype and labels [B] i64 (py_dataset.h).
//
// Memory: each batch holds one slot of the loader's pool until the last Python reference to
// any of its fields dies (the DLPack deleter, or the capsule's destructor when never
// consumed); the slot then goes back to the pool, from any thread. The pool is bounded: it
// has num_workers * prefetch_factor + max_held_batches slots, allocated at construction. A
// batch made while the caller already holds max_held_batches of them is copied into heap
// memory of its own and its slot returned at once (docs/python.md: a copy, never an error
// or a growing pool); that memory is freed with the batch's last reference.
//
// Resume: state_dict() = {"epoch", "batch"} (the next batch the iterator yields);
// load_state_dict() makes the next iteration start there, bit for bit the batches an
// uninterrupted run gives (augmentation is keyed by seed, epoch and sample index).
//
// Processes: a Loader made before fork() cannot be used in the child (its workers are not
// there): the child's begin()/next() raise an error saying so, and its destructor does not
// wait for them.
// Thread-safety: one Python thread iterates a Loader (the GIL is released while waiting for a
// batch); batches may be released on any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/loader.h"

namespace tandem::py {

struct LoaderArgs {
  std::string path;
  std::string dataset = "auto";  // auto | fashion-mnist | cifar10 | cifar100 | folder | packed
  std::string split = "train";   // train | test
  int64_t batch_size = 1;
  int num_workers = 0;
  int prefetch_factor = 2;
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t image_size = 0;   // 0 = the dataset's (folders: 224)
  int64_t resize_size = 0;  // evaluation resize; 0 = image_size * 256 / 224
  bool augment = true;      // train split: the trainer's augmentation (crop + flip)
  std::vector<float> mean, std;
  std::string precision = "fp32";  // fp32 | bf16 | fp16: dtype of the images
  bool drop_last = false;
  bool pin_memory = false;
  int max_held_batches = 8;
  int64_t block_size = 0;  // token shards: tokens per window (required there, refused elsewhere)
  // A data set given as an object rather than a path (a PyDataset); path is then ignored.
  std::shared_ptr<const data::FieldDataset> field_dataset;
};

// Counts what the caller holds: batches in pool slots, and bytes of copied batches.
struct HeldCounters {
  std::atomic<int64_t> slots{0};
  std::atomic<int64_t> copied_bytes{0};
};

// One field of one batch, ready to become a DLPack capsule. Shares ownership of the batch.
struct FieldRef {
  std::shared_ptr<void> owner;  // keeps the slot (or the copied memory) alive
  Tensor tensor;
};

class PyLoader {
 public:
  /// Throws Error(invalid_argument, "[Loader] <argument>: expected ...") for a bad argument
  /// (batch_size < 1, num_workers < 0, max_held_batches < 1, precision, split, a block_size
  /// missing for token shards or given for other data) and the data set's own errors (a
  /// missing or malformed path names the path).
  explicit PyLoader(LoaderArgs args);
  /// In the process that made it: joins the workers. In a forked child (whose copy of the
  /// loader has no worker threads) the loader is left to the process's end, never joined.
  ~PyLoader();
  PyLoader(const PyLoader&) = delete;
  PyLoader& operator=(const PyLoader&) = delete;
  /// Stops and joins the workers (call without the GIL: they may wait for it to finish a
  /// Python data set's __getitem__); begin() and next() then throw. Idempotent. Held batches
  /// stay valid. tandem.data closes every live Loader at interpreter exit (atexit), before
  /// Python stops accepting threads.
  void close();
  // Starts the epoch the state says (from its batch), yields until its end.
  void begin();
  // The next batch's fields, or an empty vector at the end of the epoch (the state then moves
  // to the next epoch's batch 0).
  std::vector<FieldRef> next();
  int64_t epoch() const { return epoch_; }
  int64_t batch() const { return batch_; }
  void set_state(int64_t epoch, int64_t batch);
  int64_t num_batches() const { return num_batches_; }
  int num_slots() const { return num_slots_; }
  const std::vector<data::Field>& fields() const { return fields_; }
  int64_t held_slots() const { return held_->slots.load(); }
  int64_t held_copied_bytes() const { return held_->copied_bytes.load(); }
  const LoaderArgs& args() const { return args_; }

 private:
  LoaderArgs args_;
  std::unique_ptr<data::Loader> loader_;
  std::shared_ptr<HeldCounters> held_;
  // Throws unless the loader is open and this is the process that made it.
  void check_usable(const char* what) const;
  int64_t epoch_ = 0, batch_ = 0;
  bool running_ = false;
  int owner_pid_ = 0;  // getpid() at construction
  int64_t num_batches_ = 0;
  int num_slots_ = 0;
  std::vector<data::Field> fields_;
};

}  // namespace tandem::py

#include "py_loader.h"

#include <unistd.h>

#include "tandem/error.h"
#include "tandem/pinned.h"
#include "tandem/train/config.h"
#include "train/data_recipe.h"
#include "train/token_data.h"

namespace tandem::py {

namespace {

DType images_dtype(const std::string& precision) {
  if (precision == "fp32") return DType::f32;
  if (precision == "bf16") return DType::bf16;
  if (precision == "fp16") return DType::f16;
  TD_CHECK_ARG(false, "Loader", "precision: expected fp32, bf16 or fp16, got '{}'", precision);
  return DType::f32;
}

data::Split parse_split(const std::string& split) {
  if (split == "train") return data::Split::train;
  if (split == "test") return data::Split::test;
  TD_CHECK_ARG(false, "Loader", "split: expected train or test, got '{}'", split);
  return data::Split::train;
}

// The trainer's configuration for the same data (data_recipe.h reads it).
train::TrainConfig recipe_config(const LoaderArgs& a) {
  train::TrainConfig cfg;
  cfg.data_dir = a.path;
  cfg.dataset = a.dataset;
  cfg.image_size = a.image_size;
  cfg.resize_size = a.resize_size;
  cfg.mean = a.mean;
  cfg.std = a.std;
  cfg.augment = a.augment;
  cfg.seed = a.seed;
  return cfg;
}

// A batch held by Python: its slot returns to the pool when this dies.
struct SlotOwner {
  data::Batch batch;
  std::shared_ptr<HeldCounters> held;
  ~SlotOwner() {
    batch.release();
    held->slots.fetch_sub(1);
  }
};

// A copied batch: heap tensors of its own, the slot already back in the pool.
struct CopyOwner {
  std::vector<Tensor> fields;
  int64_t bytes = 0;
  std::shared_ptr<HeldCounters> held;
  ~CopyOwner() { held->copied_bytes.fetch_sub(bytes); }
};

}  // namespace

PyLoader::PyLoader(LoaderArgs args)
    : args_(std::move(args)), held_(std::make_shared<HeldCounters>()) {
  TD_CHECK_ARG(args_.batch_size >= 1, "Loader", "batch_size: expected at least 1, got {}",
               args_.batch_size);
  TD_CHECK_ARG(args_.num_workers >= 0 && args_.num_workers <= 256, "Loader",
               "num_workers: expected 0..256, got {}", args_.num_workers);
  TD_CHECK_ARG(args_.max_held_batches >= 1, "Loader",
               "max_held_batches: expected at least 1, got {}", args_.max_held_batches);
  data::LoaderOptions lo;
  lo.batch_size = args_.batch_size;
  lo.num_workers = args_.num_workers;
  lo.prefetch_factor = args_.prefetch_factor;
  lo.drop_last = args_.drop_last;
  lo.shuffle = args_.shuffle;
  lo.seed = args_.seed;
  lo.allocator = args_.pin_memory ? &pinned_allocator() : nullptr;
  lo.name = "python loader";
  const data::Split split = parse_split(args_.split);
  const bool tokens =
      !args_.field_dataset && (args_.dataset == "tokens" || train::is_token_data(args_.path));
  TD_CHECK_ARG(tokens || args_.block_size == 0, "Loader",
               "block_size: only for token shards (a folder with train.tok), got {} for {}",
               args_.block_size,
               args_.field_dataset ? std::string("a Python data set") : args_.path);
  if (args_.field_dataset || tokens) {
    // Typed fields of their own: the images' precision does not apply.
    TD_CHECK_ARG(args_.precision == "fp32", "Loader",
                 "precision '{}': only for image data; {} keep their own dtypes", args_.precision,
                 tokens ? "token shards" : "a Python data set's arrays");
    std::shared_ptr<const data::FieldDataset> set = args_.field_dataset;
    if (tokens) {
      TD_CHECK_ARG(
          args_.block_size >= 1, "Loader",
          "block_size: expected the tokens per window (>= 1) for the token shards in {}, got {}",
          args_.path, args_.block_size);
      const train::TokenSplits s = train::open_token_splits(args_.path, args_.block_size);
      set = split == data::Split::train ? s.train : s.test;
    }
    loader_ = std::make_unique<data::Loader>(std::move(set), lo);
  } else {
    const train::TrainConfig cfg = recipe_config(args_);
    std::shared_ptr<const data::Dataset> set = train::open_split(cfg, split);
    const train::Transforms t =
        train::make_transforms(*set, train::dataset_options(cfg).format, cfg);
    lo.images_dtype = images_dtype(args_.precision);
    loader_ =
        std::make_unique<data::Loader>(set, split == data::Split::train ? t.train : t.eval, lo);
  }
  // The pool's bound, allocated now: the caller's batches never make it grow.
  loader_->set_consumer_slots(args_.max_held_batches);
  owner_pid_ = static_cast<int>(::getpid());
  num_batches_ = loader_->num_batches();
  num_slots_ = loader_->num_slots();
  fields_ = loader_->fields();
}

PyLoader::~PyLoader() {
  // A forked child's copy: the threads its members would join do not exist there.
  if (loader_ && static_cast<int>(::getpid()) != owner_pid_) (void)loader_.release();
}

void PyLoader::close() {
  if (loader_ && static_cast<int>(::getpid()) == owner_pid_) loader_.reset();
  running_ = false;
}

void PyLoader::check_usable(const char* what) const {
  TD_CHECK_ARG(
      static_cast<int>(::getpid()) == owner_pid_, "Loader",
      "{}: this loader was made in process {} and this is a forked child ({}), where its "
      "workers do not run; make the Loader in the child (e.g. in a DataLoader's worker_init_fn)",
      what, owner_pid_, static_cast<int>(::getpid()));
  TD_CHECK_ARG(loader_ != nullptr, "Loader",
               "{}: the loader is closed (close() or interpreter exit)", what);
}

void PyLoader::set_state(int64_t epoch, int64_t batch) {
  // The epoch counts up from here: leave room so that it never wraps.
  TD_CHECK_ARG(epoch >= 0 && epoch < (int64_t{1} << 62), "Loader.load_state_dict",
               "epoch: expected 0..2^62 - 1, got {}", epoch);
  TD_CHECK_ARG(batch >= 0 && batch <= num_batches_, "Loader.load_state_dict",
               "batch: expected 0..{} (batches per epoch), got {}", num_batches_, batch);
  epoch_ = epoch;
  batch_ = batch;
  running_ = false;
}

void PyLoader::begin() {
  check_usable("iter");
  loader_->begin_epoch(static_cast<uint64_t>(epoch_), batch_);
  running_ = true;
}

std::vector<FieldRef> PyLoader::next() {
  check_usable("next");
  TD_CHECK_ARG(running_, "Loader",
               "next: the iteration was not started (or a state was loaded since)");
  data::Batch b;
  if (!loader_->next(b)) {
    running_ = false;
    ++epoch_;
    batch_ = 0;
    return {};
  }
  ++batch_;
  std::vector<FieldRef> out;
  // One slot stays for the loader's next() itself: past the bound, batches are copies.
  if (held_->slots.load() + 1 < args_.max_held_batches) {
    held_->slots.fetch_add(1);
    auto owner = std::make_shared<SlotOwner>();
    owner->held = held_;
    owner->batch = std::move(b);
    for (const Tensor& f : owner->batch.fields) out.push_back({owner, f});
    return out;
  }
  auto owner = std::make_shared<CopyOwner>();
  owner->held = held_;
  for (const Tensor& f : b.fields) {
    owner->fields.push_back(f.clone());
    owner->bytes += static_cast<int64_t>(f.nbytes());
  }
  held_->copied_bytes.fetch_add(owner->bytes);
  b.release();
  for (const Tensor& f : owner->fields) out.push_back({owner, f});
  return out;
}

}  // namespace tandem::py

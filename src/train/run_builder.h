// Building a run from its TrainConfig: the device, the datasets, the model (sized from the
// datasets' sample shape and classes), the optimizer (on the device or offloaded), the
// learning-rate schedule, the train and test feeds and the pipeline autotuner. Trainer and the
// eval command build through here; the step loop, evaluation and the metrics read-back only
// use what a Run holds.
// Thread-safety: building is done by one thread; a Run is then driven by one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/data/autotune.h"
#include "tandem/data/dataset.h"
#include "tandem/data/open_dataset.h"
#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/nn/module.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/schedule.h"
#include "tandem/train/config.h"
#include "tandem/train/memory_plan.h"
#include "tandem/train/model_card.h"
#include "train/batch_feed.h"
#include "train/data_recipe.h"
#include "train/dist/grad_reducer.h"
#include "train/home/param_home.h"
#include "train/online_mix.h"
#include "train/split/split_runner.h"

namespace tandem::train {

class ActivationOffloads;
class PlacedUpdate;

/// Everything one training run holds. Members are destroyed in reverse order (the tuner and
/// the parameter home before the model, the feeds before the datasets); the destructor first waits
/// for the device's queued work (drain_device).
struct Run {
  TrainConfig cfg;  // as given, with auto loader knobs at their starting values (pipeline_start)
  Device device;
  // The data as typed fields, one train/test pair (tandem/data/field_dataset.h): images through
  // data::ImageFields (the split's transform, in the compute dtype: images [C, H, W], labels []
  // i64), token data (--data a folder with train.tok and val.tok) as windows of the sequence
  // model's block size (tokens i32 [T], targets i64 [T]).
  std::shared_ptr<const data::FieldDataset> train_data, test_data;
  int64_t vocab_size = 0;  // token data: the shards' vocabulary; 0 for images
  data::DatasetFormat format = data::DatasetFormat::detect;  // of --data; detect: sets given in memory
  Transforms transforms;  // images: what each split's samples go through (data_recipe.h)
  std::string data_note;  // the banner's data line: the format, the samples and the transform
  ModelCard image_card;   // images: the classes' names and the evaluation transform (serving)
  nn::ModelSpec spec;     // the model's input [C, H, W] (the transforms' output) and classes
  std::unique_ptr<BatchFeed> train_feed, test_feed;
  nn::ModulePtr model;
  // A model built without memory (streamed homes of a GPT: nn::make_model_lazy): where its
  // values come from (its recorded init, or --init's file); empty when the model holds them.
  nn::ValueSource lazy_values;
  uint64_t init_fingerprint = 0;  // of --init's file when lazy_values reads it (the ranks compare it)
  std::vector<nn::Parameter*> params;
  nn::CrossEntropyLoss loss_fn;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<data::PipelineTuner> tuner;  // --num-workers / --prefetch-factor auto
  bool workers_autotuned = false;               // --num-workers auto (not only --prefetch auto)
  std::string planning;                         // planning_note(device): "" when results are computed
  std::string placement;                        // --place: where the modules are ("" without it)
  std::shared_ptr<ActivationOffloads> activations;  // --activations-device cpu (null without it)
  DType compute_dtype = DType::f32;             // --precision: f32, bf16 or f16 (activations, conv/linear)
  MemoryPlan memory_plan;  // counted before the model was built (memory_plan.h)
  bool planned = false;    // false for --devices and --place (not planned yet)
  std::unique_ptr<optim::LossScaler> scaler;    // --loss-scale dynamic (default for fp16), else null
  Tensor scaled_grad;                           // the scaled loss gradient (compute dtype), reused
  Tensor grad_norm;                             // --clip-grad-norm: [1] f32 on the device
  std::shared_ptr<PlacedUpdate> placed_update;  // --place with a scaler or clipping (null otherwise)
  /// --eval-interval: called by the step loop after every eval_interval-th optimizer step
  /// with the epoch and the steps done (Trainer::fit sets it; the model is put back in train
  /// mode after it).
  std::function<void(int epoch, int64_t global_step)> evaluate_at;
  std::unique_ptr<OnlineMixer> online;          // --online-mix with a source (Trainer::set_online_source)
  // Distributed (null / world of 1: one process): `comm` for host buffers, `device_comm` for
  // the device's (the same, or nccl on cuda).
  comm::CommunicatorPtr comm, device_comm;
  /// Where the parameters, gradients and optimizer state live and how a step updates them
  /// (train/home/param_home.h): the optimizer, the gradient reducer, the offload or the stream.
  std::unique_ptr<ParamHome> home;
  optim::Optimizer& optimizer() const { return home->optimizer(); }
  // --devices: the replicas and the batch split (null for one device). Declared last, so it is
  // destroyed first (it waits for its devices' queued work).
  std::unique_ptr<SplitRunner> split;
  bool token_data() const { return vocab_size > 0; }
  /// Optimizer steps per epoch: the training batches over cfg.grad_accum_steps, rounded down.
  int64_t steps_per_epoch() const {
    return train_feed->loader().num_batches() / cfg.grad_accum_steps;
  }
  Shard shard() const { return comm ? Shard{comm->rank(), comm->world_size()} : Shard{}; }
  /// The stream the steps' work on `device` runs on: the split's first device's, else the feed's.
  Stream train_stream() const { return split ? split->compute_stream() : train_feed->compute_stream(); }
  Run() = default;
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run();
};

/// Validates `cfg` and builds its run on the given datasets; a null one is opened from
/// cfg.data_dir (data::open_dataset). Without given sets, a cfg.data_dir holding train.tok
/// is token data (train/token_data.h) for a sequence model (--model gpt-mini, ...), trained
/// through its fused loss; such a run refuses, naming the flag, what it does not support yet:
/// --devices, --place, --serve (the model card), --shuffle block, loss scaling
/// (fp16, --loss-scale dynamic) and --label-smoothing. With `comm` of several ranks: the flags and
/// model are checked to agree on every rank (dist_setup.h), rank 0's weights are broadcast, each
/// rank trains on its shard and gradients are averaged (GradReducer, or the offloaded optimizer's
/// buckets). Throws Error(invalid_argument) for bad flags or when the
/// train and test sets differ in sample shape or classes (naming both), Error(io/format) for
/// dataset problems, Error(not_available) for devices this build or machine lacks.
std::unique_ptr<Run> build_run(const TrainConfig& cfg, std::shared_ptr<const data::Dataset> train_set,
                               std::shared_ptr<const data::Dataset> test_set,
                               comm::CommunicatorPtr comm = nullptr);

/// Parses the --device flag (or `flag`, e.g. --serve-device) and prepares the device (see
/// trainer.h); every error, a device this build or machine lacks included, names the flag and
/// keeps its code: "[train] --device virt:0?speed=0: ...", "[eval] --device cuda: tandem was
/// built without CUDA".
Device resolve_device(const std::string& text, const char* command = "train", const char* flag = "--device");

/// Rethrows `e` with its code as "[command] FLAG VALUE: message" (its own "[op] " dropped).
[[noreturn]] void rethrow_naming_flag(const Error& e, const char* command, const char* flag,
                                      const std::string& value);

/// Sets the compute threads: `threads`, or every available core for 0.
void set_threads(int threads);

/// --num-workers auto and --prefetch-factor auto (-1) start from 1 worker and prefetch_factor 2;
/// the PipelineTuner then moves them (and the device prefetch depth) during the first steps.
TrainConfig pipeline_start(TrainConfig c);

/// What model `cfg.model` is built for: the shape [C, H, W] `transform` makes of `set`'s
/// samples, and the set's classes.
nn::ModelSpec model_spec(const data::Dataset& set, const data::Transform& transform);

/// The linear warmup in optimizer steps: --warmup-steps when given, else --warmup-epochs of
/// `steps_per_epoch` steps, rounded to the nearest step.
int64_t warmup_steps(const TrainConfig& cfg, int64_t steps_per_epoch);

/// The dtype --precision names: fp32 -> f32, bf16 -> bf16, fp16 -> f16.
DType precision_dtype(const std::string& precision);

/// Waits until the device ran everything queued on its default stream; errors of the queued
/// work are dropped (the error that stopped the run is the one reported). No-op on the host.
void drain_device(Device device) noexcept;

}  // namespace tandem::train

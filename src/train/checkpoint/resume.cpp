#include "train/checkpoint/resume.h"

#include <fmt/format.h>

#include "tandem/error.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/run_flags.h"
#include "train/checkpoint/run_state.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::train::checkpoint {

using json = nlohmann::json;

[[noreturn]] static void bad(const std::string& path, const std::string& what) {
  throw_error(ErrorCode::format, "checkpoint", fmt::format("{}: {}", path, what));
}

// Copies the host tensor `src` into `dst` (host or device) and waits for the copy.
static void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_host()) {
    Tensor(dst).copy_from(src);
    return;
  }
  const Stream s = runtime_for(dst.device()).default_stream(dst.device().index);
  runtime_for(dst.device()).copy_async(dst.raw_data(), dst.device(), src.raw_data(), Device{}, src.nbytes(), s);
  s.synchronize();
}

static void restore_model(nn::Module& model, const NamedTensors& tensors, const std::string& path) {
  for (const nn::NamedTensor& t : model.state_dict()) {
    const std::string name = "model." + t.name;
    const Tensor* src = nullptr;
    for (const auto& [n, v] : tensors)
      if (n == name) src = &v;
    if (!src) bad(path, fmt::format("lacks tensor '{}' of the model", name));
    if (src->shape() != t.tensor.shape() || src->dtype() != t.tensor.dtype())
      bad(path, fmt::format("tensor '{}' is {} {}, the model's is {} {}", name, dtype_name(src->dtype()),
                            shape_str(src->shape()), dtype_name(t.tensor.dtype()), shape_str(t.tensor.shape())));
    copy_into(t.tensor, *src);
  }
}

ResumePoint resume_run(Run& r, const std::string& target) {
  Located loc = locate_checkpoint(target);
  const std::string& path = loc.path;
  const json& st = loc.file.state;
  ResumePoint rp;
  rp.path = path;
  const std::string forced =
      check_resume_flags(state_value<json>(st, "flags", path), r.cfg, r.cfg.force, target);
  const int world_size = r.comm ? r.comm->world_size() : 1;
  const int saved_world = st.contains("world_size") ? state_value<int>(st, "world_size", path) : 1;
  if (saved_world != world_size && !is_sharded_checkpoint(path))
    bad(path, fmt::format("it was saved by a run of {} rank{}, this one has {}: expected the same world size "
                          "(mpirun -np {}; --batch-size is per rank); a sharded checkpoint (--checkpoint-format "
                          "sharded) resumes at any",
                          saved_world, saved_world == 1 ? "" : "s", world_size, saved_world));
  const int64_t steps = r.steps_per_epoch();
  const int64_t saved_steps = state_value<int64_t>(st, "steps_in_epoch", path);
  if (saved_world == world_size && saved_steps != steps)
    bad(path, fmt::format("its epochs hold {} steps, this run's {}: expected the same data and --batch-size",
                          saved_steps, steps));
  rp.epoch = state_value<int>(st, "epoch", path);
  rp.global_step = state_value<int64_t>(st, "global_step", path);
  rp.start.first_batch = state_value<int64_t>(st, "step", path);
  if (rp.epoch < 1 || rp.start.first_batch < 0 || rp.start.first_batch > saved_steps ||
      rp.global_step != (rp.epoch - 1) * saved_steps + rp.start.first_batch)
    bad(path, fmt::format("epoch {}, step {} and global step {} do not agree for {} steps per epoch", rp.epoch,
                          rp.start.first_batch, rp.global_step, saved_steps));
  std::string resharded;
  if (saved_world != world_size) {
    // Another world size: the ranks' batches of a step are one global batch of the epoch's
    // order (DistributedSampler), so the position is the samples taken so far.
    const int64_t saved_batch = state_value<int64_t>(state_value<json>(st, "data_order", path), "batch_size", path);
    const int64_t taken = rp.start.first_batch * saved_batch * saved_world, per = r.cfg.batch_size * world_size;
    if (taken % per != 0 || taken / per > steps)
      bad(path, fmt::format("it was saved by a run of {} rank{} after {} samples of epoch {}, which is no whole number "
                            "of this run's global batches of {} ({} ranks x --batch-size {}): resume at a step where "
                            "it is (or mpirun -np {})",
                            saved_world, saved_world == 1 ? "" : "s", taken, rp.epoch, per, world_size,
                            r.cfg.batch_size, saved_world));
    rp.start.first_batch = taken / per;
    rp.global_step = (rp.epoch - 1) * steps + rp.start.first_batch;
    resharded = fmt::format("\nresharded: saved by {} rank{} (global batch {}), resumed by {} (global batch {})",
                            saved_world, saved_world == 1 ? "" : "s", saved_batch * saved_world, world_size, per);
  }
  const json tally = state_value<json>(st, "tally", path);
  rp.start.loss_sum = state_value<double>(tally, "loss_sum", path);
  rp.start.correct = state_value<int64_t>(tally, "correct", path);
  rp.start.samples = state_value<int64_t>(tally, "samples", path);
  rp.start.seconds = state_value<double>(st, "epoch_seconds", path);
  const Tensor& acc = find_tensor(loc.file.tensors, "metrics.accumulator", path);
  if (acc.shape() != Shape{4} || acc.dtype() != DType::f32) bad(path, "tensor 'metrics.accumulator' is not [4] f32");
  rp.start.accumulator.assign(acc.data<float>(), acc.data<float>() + 4);
  for (const json& e : state_value<json>(st, "epochs", path)) rp.history.epochs.push_back(stats_from_json(e, path));
  rp.history.best_test_accuracy = state_value<double>(st, "best_test_accuracy", path);
  rp.history.best_epoch = state_value<int>(st, "best_epoch", path);
  const json opt = state_value<json>(st, "optimizer", path);
  const int64_t step_count = state_value<int64_t>(opt, "step_count", path);

  // A sharded home first makes the weights whole to load into (a collective; the shards are
  // cut from them again by its restore).
  r.home->gather_weights();
  restore_model(*r.model, loc.file.tensors, path);  // first: an offloaded optimizer reads its master copy from it
  if (r.compute_dtype != DType::f32) r.model->set_compute_dtype(r.compute_dtype);  // the copies of the restored values
  std::vector<nn::NamedTensor> state, pending;  // the optimizer's, and a streamed run's pending delayed update
  for (const auto& [n, v] : loc.file.tensors) {
    if (n.rfind("optim.", 0) == 0) state.push_back({n.substr(6), v, false});
    if (n.rfind("stream.", 0) == 0) pending.push_back({n.substr(7), v, true});
  }
  try {
    r.home->restore(state, step_count, pending);
  } catch (const Error& e) {
    bad(path, e.what());
  }
  if (r.scaler) {
    const Tensor& s = find_tensor(loc.file.tensors, "scaler.state", path);
    if (s.shape() != Shape{ops::kAmpStateSize} || s.dtype() != DType::f32)
      bad(path, "tensor 'scaler.state' is not [4] f32 (the loss scaler's scale, growth tracker, found_inf, skipped)");
    const float* v = s.data<float>();
    r.scaler->load({v[ops::kScale], static_cast<int64_t>(v[ops::kGrowthTracker]),
                    static_cast<int64_t>(v[ops::kSkippedSteps])});
  }

  if (r.split) r.split->sync_replicas();  // the restored weights and scaler state to every replica

  rp.note = fmt::format("resumed from {}: epoch {}, step {} of {} (global step {})", path, rp.epoch,
                        rp.start.first_batch, steps, rp.global_step);
  rp.note += resharded;
  if (!loc.fallback.empty()) rp.note += "\nwarning: " + loc.fallback;
  if (!forced.empty()) rp.note += "\nwarning: --force: resuming with flags that change the math:\n" + forced;
  return rp;
}

}  // namespace tandem::train::checkpoint

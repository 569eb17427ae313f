// ParamStreamer's disk tier (--param-device cpu --optimizer-state-device disk; param_stream.h,
// docs/disk-offload.md): the f32 master values of the parameters uploaded as compute copies
// and the optimizer's state of every streamed part live in a storage::DiskStore (the
// offloaded optimizer's unit store), one unit per part, laid out in the order the host
// updates run (blocks L - 1 .. 0, then the outer part), so that the store's read-ahead (the
// next units in unit order) reads the parts whose updates come next, wrapping into the next
// step. The update thread acquires a part's unit before its update and releases it after
// (written back behind). The host keeps what the uploads read: the compute copies (pinned,
// rewritten by the update's kernel as the upload would have rounded them) and the f32 values
// of the parameters uploaded as they are (pinned, as without the tier).
#include <unordered_map>
#include <utility>

#include "tandem/error.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"
#include "tandem/storage/disk_store.h"
#include "train/place/param_stream.h"

namespace tandem::train {
namespace {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

void ParamStreamer::set_disk_tier(const storage::DiskStoreOptions& options) {
  TD_CHECK_ARG(opt_ && delay() == 0 && !shards_ && !disk_ && kept_values_, "train",
               "--optimizer-state-device disk with --param-device cpu: expected the host update during the "
               "backward (no --clip-grad-norm), --offload-delay 0 and no --zero 3");
  const int64_t align = storage::DiskStore::kUnitAlign;
  // The streamed parts in the order their updates run; each a unit starting on a whole page,
  // each tensor on 16 elements (64 bytes, as the offloaded optimizer's flat buffers).
  std::vector<int> order;
  for (int p = static_cast<int>(blocks_.size()) - 1; p >= nn::kOuterPart; --p)
    if (!resident_[slot_of(p)]) order.push_back(p);
  disk_unit_.assign(blocks_.size() + 1, -1);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<std::vector<int64_t>> at(blocks_.size() + 1);  // per pipeline unit, per entry: its offset
  int64_t total = 0;
  bool copies = false;
  for (int p : order) {
    total = (total + align - 1) / align * align;
    const int64_t begin = total;
    for (const Entry& e : part(p).entries) {
      at[slot_of(p)].push_back(total);
      total += (e.home_value.numel() + 15) / 16 * 16;
      copies = copies || e.upload_compute;
    }
    disk_unit_[slot_of(p)] = static_cast<int>(ranges.size());
    ranges.emplace_back(begin, total);
  }
  auto disk = std::make_shared<storage::DiskStore>(options);
  const Tensor master = copies ? disk->add_flat(total, DType::f32, "master") : Tensor();
  std::vector<std::pair<std::string, Tensor>> flats;
  for (const auto& [key, dtype] : opt_->state_keys())
    if (dtype != DType::i64) flats.emplace_back(key, disk->add_flat(total, dtype, key));
  disk->set_units(ranges);
  // Part by part: the master values into their unit (the model's tensors freed), the compute
  // copies rounded from them, the values uploaded in f32 into pinned homes.
  for (int p : order) {
    const int u = disk_unit_[slot_of(p)];
    disk->acquire(u);
    Part& pt = part(p);
    for (size_t k = 0; k < pt.entries.size(); ++k) {
      Entry& e = pt.entries[k];
      if (e.upload_compute) {
        Tensor v = master.narrow(0, at[slot_of(p)][k], e.home_value.numel()).view(e.home_value.shape());
        if (source_) {  // a model built without memory: written from its source
          source_(*e.param, 0, v.numel(), v.data<float>());
        } else {
          v.copy_from(e.home_value);
        }
        e.home_value = v;
        e.home_compute = pinned_empty(v.shape(), e.up_dtype);
        round_value(e, e.home_compute.raw_data());
      } else {
        e.home_value = value_of(*e.param, true);
      }
      e.param->value = e.home_value;
      e.param->compute = e.home_compute;
    }
    disk->release(u);
  }
  // The optimizer's state slots: views of the flats at their parameter's offset.
  std::unordered_map<size_t, int64_t> state_at;  // index into opt_->params() -> offset
  for (int p : order)
    for (size_t k = 0; k < part(p).entries.size(); ++k)
      state_at[indices_[slot_of(p)][k]] = at[slot_of(p)][k];
  opt_->set_state_home([flats, state_at](size_t index, const std::string& key, const Shape& shape, DType) {
    const auto it = state_at.find(index);
    if (it == state_at.end()) return Tensor();  // --optimizer-split: a device part's
    for (const auto& [name, flat] : flats)
      if (name == key) return flat.narrow(0, it->second, numel_of(shape)).view(shape);
    return Tensor();
  });
  disk_ = std::move(disk);
  kept_values_ = false;
}

void ParamStreamer::disk_acquire(int unit) {
  if (!disk_ || disk_unit_[static_cast<size_t>(unit)] < 0) return;
  const int64_t t0 = profile::now_ns();
  disk_->acquire(disk_unit_[static_cast<size_t>(unit)]);
  if (profile::Profiler::global().enabled())
    profile::Profiler::global().record(profile::Stage::other, "wait for disk", t0, profile::now_ns());
}

void ParamStreamer::disk_release(int unit) {
  if (disk_ && disk_unit_[static_cast<size_t>(unit)] >= 0) disk_->release(disk_unit_[static_cast<size_t>(unit)]);
}

void ParamStreamer::disk_all_in() {
  if (!disk_) return;
  if (opt_) wait_all_updates();
  disk_->acquire_all();
}

void ParamStreamer::disk_reloaded() {
  if (!disk_) return;
  disk_all_in();
  for (int p = nn::kOuterPart; p < static_cast<int>(blocks_.size()); ++p)
    for (Entry& e : part(p).entries)
      if (e.upload_compute && disk_unit_[slot_of(p)] >= 0) {
        round_value(e, e.home_compute.raw_data());
        e.param->compute = e.home_compute;
      }
  invalidate();
}

}  // namespace tandem::train

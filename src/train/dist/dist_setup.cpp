#include "train/dist/dist_setup.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tandem/cpu_binding.h"
#include "tandem/device_traits.h"
#include "tandem/error.h"
#include "train/checkpoint/run_flags.h"
#include "train/split/split_plan.h"

namespace tandem::train {

namespace {


// One "key value" line per flag, then one per parameter: "param <name> <shape>".
std::vector<std::string> run_lines(const TrainConfig& cfg, nn::Module& model) {
  std::vector<std::string> lines;
  const nlohmann::json flags = checkpoint::flags_json(cfg);
  for (auto it = flags.begin(); it != flags.end(); ++it) {
    // Ranks may use different devices of one kind (cuda:0 and cuda:1 on one machine).
    if (it.key() == "--device") continue;
    if (it.key() == "--devices" && !cfg.devices.empty()) {  // each rank splits over its own devices, of the same kinds
      std::string kinds;
      for (const DeviceSpec& d : parse_split(cfg.devices, cfg.split, cfg.batch_size).devices)
        kinds += std::string(kinds.empty() ? "" : ",") + device_kind_name(d.device.kind);
      lines.push_back("--devices of kinds " + kinds);
      continue;
    }
    lines.push_back(it.key() + " " + it.value().dump());
  }
  lines.push_back(fmt::format("device kind {}", device_kind_name(DeviceSpec::parse(cfg.device).device.kind)));
  for (const nn::Parameter* p : model.parameters())
    lines.push_back(fmt::format("model parameter {} {}", p->name, shape_str(p->value.shape())));
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

}  // namespace

void check_same_run(comm::Communicator& comm, const TrainConfig& cfg, nn::Module& model) {
  const std::vector<std::string> mine = run_lines(cfg, model);
  const std::string text = join(mine);
  Tensor length = Tensor::zeros({1}, DType::i64);
  *static_cast<int64_t*>(length.raw_data()) = static_cast<int64_t>(text.size());
  comm.broadcast(length, 0, host_stream());
  const int64_t n = *static_cast<int64_t*>(length.raw_data());
  Tensor bytes = Tensor::zeros({std::max<int64_t>(n, 1)}, DType::u8);
  if (comm.rank() == 0) std::memcpy(bytes.raw_data(), text.data(), text.size());
  comm.broadcast(bytes, 0, host_stream());
  const std::string theirs(static_cast<const char*>(bytes.raw_data()), static_cast<size_t>(n));
  // The first line that differs from rank 0's.
  std::string diff;
  if (theirs != text) {
    std::vector<std::string> zero;
    size_t start = 0;
    for (size_t p; (p = theirs.find('\n', start)) != std::string::npos; start = p + 1)
      zero.push_back(theirs.substr(start, p - start));
    for (size_t i = 0; i < std::max(zero.size(), mine.size()) && diff.empty(); ++i) {
      const std::string a = i < mine.size() ? mine[i] : "(nothing)", b = i < zero.size() ? zero[i] : "(nothing)";
      if (a != b) diff = fmt::format("here '{}', on rank 0 '{}'", a, b);
    }
  }
  Tensor flag = Tensor::zeros({1}, DType::i32), flags = Tensor::zeros({comm.world_size()}, DType::i32);
  *static_cast<int32_t*>(flag.raw_data()) = diff.empty() ? 0 : 1;
  comm.all_gather(flag, flags, host_stream());
  std::string bad;
  for (int r = 0; r < comm.world_size(); ++r)
    if (static_cast<const int32_t*>(flags.raw_data())[r]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (bad.empty()) return;
  if (!diff.empty())
    throw_error(ErrorCode::distributed, "train",
                fmt::format("rank {}: the flags or model differ from rank 0's: {}; expected every rank to run the "
                            "same command",
                            comm.rank(), diff));
  throw_error(ErrorCode::distributed, "train",
              fmt::format("rank {}: rank(s) {} run other flags or another model than rank 0 (see their error); "
                          "expected every rank to run the same command",
                          comm.rank(), bad));
}

void check_same_file(comm::Communicator& comm, uint64_t fingerprint, const std::string& what) {
  Tensor mine = Tensor::zeros({1}, DType::i64), all = Tensor::zeros({comm.world_size()}, DType::i64);
  std::memcpy(mine.raw_data(), &fingerprint, sizeof fingerprint);
  comm.all_gather(mine, all, host_stream());
  const auto* f = static_cast<const uint64_t*>(all.raw_data());
  std::string bad;
  for (int r = 1; r < comm.world_size(); ++r)
    if (f[r] != f[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  TD_CHECK(bad.empty(), ErrorCode::distributed, "train",
           "rank {}: {} differs on rank(s) {} from rank 0's copy (size, header or sampled bytes); expected every "
           "rank to read the same file",
           comm.rank(), what, bad);
}

void broadcast_model(comm::Communicator& comm, nn::Module& model, Device device) {
  const Stream s = runtime_for(device).default_stream(device.index);
  for (const nn::NamedTensor& nt : model.state_dict()) {
    if (!nt.tensor.defined() || nt.tensor.numel() == 0) continue;
    if (!nt.tensor.storage()->pending_write().query()) s.wait(nt.tensor.storage()->pending_write());
    comm.broadcast(nt.tensor, 0, s);
  }
  s.synchronize();
}

void check_same_resume(comm::Communicator& comm, int64_t global_step, const std::string& path) {
  Tensor mine = Tensor::zeros({1}, DType::i64), all = Tensor::zeros({comm.world_size()}, DType::i64);
  *static_cast<int64_t*>(mine.raw_data()) = global_step;
  comm.all_gather(mine, all, host_stream());
  const auto* a = static_cast<const int64_t*>(all.raw_data());
  std::string steps;
  bool same = true;
  for (int k = 0; k < comm.world_size(); ++k) {
    steps += fmt::format("{}rank {}: {}", k ? ", " : "", k, a[k]);
    same = same && a[k] == a[0];
  }
  TD_CHECK(same, ErrorCode::distributed, "train",
           "rank {}: --resume {}: the ranks loaded checkpoints of different steps ({}); expected one checkpoint "
           "folder that every rank sees",
           comm.rank(), path, steps);
}

int64_t max_over_ranks(comm::Communicator& comm, int64_t mine) {
  Tensor one = Tensor::zeros({1}, DType::i64), all = Tensor::zeros({comm.world_size()}, DType::i64);
  *static_cast<int64_t*>(one.raw_data()) = mine;
  comm.all_gather(one, all, host_stream());
  const auto* a = static_cast<const int64_t*>(all.raw_data());
  return *std::max_element(a, a + comm.world_size());
}

EvalResult sum_over_ranks(comm::Communicator& comm, const EvalResult& local) {
  Tensor mine = Tensor::zeros({3}, DType::i64), all = Tensor::zeros({3 * comm.world_size()}, DType::i64);
  // The loss sum travels as the bits of a double (all_gather copies bytes); summed in rank order.
  double loss_sum = local.loss * static_cast<double>(local.samples);
  auto* m = static_cast<int64_t*>(mine.raw_data());
  std::memcpy(&m[0], &loss_sum, sizeof(double));
  m[1] = local.correct;
  m[2] = local.samples;
  comm.all_gather(mine, all, host_stream());
  EvalResult r;
  double loss = 0;
  const auto* a = static_cast<const int64_t*>(all.raw_data());
  for (int k = 0; k < comm.world_size(); ++k) {
    double l = 0;
    std::memcpy(&l, &a[3 * k], sizeof(double));
    loss += l;
    r.correct += a[3 * k + 1];
    r.samples += a[3 * k + 2];
  }
  r.loss = r.samples ? loss / static_cast<double>(r.samples) : 0;
  r.accuracy = r.samples ? static_cast<double>(r.correct) / static_cast<double>(r.samples) : 0;
  if (std::isnan(local.accuracy)) r.loss = r.accuracy = NAN;  // a device that does not compute
  return r;
}

void bind_host_threads(const std::string& bind) {
  const comm::LaunchInfo launch = comm::launch_info();
  const BindMode mode = bind != "auto"                   ? parse_bind_mode(bind, "--bind")
                        : launch.local_world_size > 1 ? BindMode::cores
                                                        : BindMode::none;
  set_cpu_binding(plan_cpu_binding(mode, launch.local_rank, launch.local_world_size));
}

std::string rank_note(const comm::Communicator* comm) {
  if (!comm || comm->world_size() == 1) return "";
  return fmt::format("rank {} of {}", comm->rank(), comm->world_size());
}

}  // namespace tandem::train

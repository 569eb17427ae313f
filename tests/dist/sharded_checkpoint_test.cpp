// Sharded checkpoints (--checkpoint-format sharded, src/train/checkpoint/shard_files.h) of
// `tandem train` jobs under mpirun: every rank writes its shard; resumed at 1, 2 and 3 ranks
// (the same global batch of 6: --batch-size 6, 3 and 2) the run continues (2 ranks: the
// uninterrupted run's weights byte for byte; 1 and 3: within the tolerance of the gradient
// average's summation order); kill -9 of a rank while a checkpoint is being written leaves
// the previous one loadable; `tandem checkpoint consolidate` gives the --save file's tensors.
// Each test launches mpirun itself (skipped without it).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "data/temp_dir.h"
#include "memory/cli_shards.h"
#include "tandem/safetensors.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/run_tandem.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

struct Job {
  TempDir dir;
  Job() { write_rule_shards(dir); }
  // The model and the steps (a GPT of 2 blocks of width 32, 8 steps).
  std::string model = "--n-layer 2 --n-head 2 --n-embd 32 --epochs 1 --max-steps 8";
  // `tandem train` on `ranks` ranks (1: no mpirun) with a global batch of 6.
  std::string train(int ranks, const std::string& flags) const {
    const std::string args = fmt::format(
        "train --model gpt2 {} --block-size 32 --data {} --eval-batch-size 4 --warmup-steps 1 --lr 1e-3 --seed 1 "
        "--device virt:0 --threads 1 --num-workers 0 --progress 0 --dist-timeout 60 --batch-size {} {}",
        model, dir.str(), 6 / ranks, flags);
    if (ranks == 1) return std::string(TANDEM_BINARY_DIR) + "/tandem " + args;
    return fmt::format("mpirun --oversubscribe --bind-to none -np {} {}/tandem {}", ranks, TANDEM_BINARY_DIR, args);
  }
  CmdResult run(int ranks, const std::string& flags) const {
    const std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 " + train(ranks, flags) + " 2>&1";
    CmdResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The largest absolute difference between the tensors of two weight files (same names).
double max_diff(const std::string& a, const std::string& b) {
  const NamedTensors x = load_safetensors(a), y = load_safetensors(b);
  EXPECT_EQ(x.size(), y.size());
  double d = 0;
  for (const auto& [name, t] : x) {
    const Tensor& u = find_tensor(y, name, b);
    EXPECT_EQ(t.shape(), u.shape()) << name;
    if (t.dtype() != DType::f32 || t.shape() != u.shape()) continue;
    for (int64_t i = 0; i < t.numel(); ++i) d = std::max(d, std::fabs(double(t.data<float>()[i]) - u.data<float>()[i]));
  }
  return d;
}

// Writes sharded checkpoints with 2 ranks and resumes the step-4 one at 1, 2 and 3 ranks.
// `mode(ranks)`: the run's flags at that many ranks.
template <typename Mode>
void resumes_at_other_world_sizes(Mode mode, double tolerance) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
  Job job;
  const std::string ck = job.dir.file("ck"), full = job.dir.file("full.safetensors");
  const CmdResult a = job.run(2, mode(2) + " --checkpoint-format sharded --checkpoint-every 4 --checkpoint-dir " + ck +
                                     " --save " + full);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  const std::string step4 = ck + "/step-0000000004.shards";
  for (const char* f : {"manifest.json", "rank-0-of-2.safetensors", "rank-1-of-2.safetensors"})
    EXPECT_TRUE(fs::exists(step4 + "/" + f)) << f << "\n" << a.out;
  EXPECT_NE(read_file(ck + "/latest.json").find("step-0000000008.shards"), std::string::npos);
  EXPECT_EQ(a.out.find("rank 1"), std::string::npos) << a.out;
  // Consolidated: the --save file's tensors (the step-8 checkpoint holds the final weights).
  const std::string one = job.dir.file("one.safetensors");
  const CmdResult c = run_tandem("checkpoint consolidate " + ck + " " + one);
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(max_diff(one, full), 0.0);
  std::map<std::string, std::string> m1, m2;
  const NamedTensors x = load_safetensors(one, &m1), y = load_safetensors(full, &m2);
  EXPECT_EQ(x.size(), y.size());
  EXPECT_EQ(m1["model"], m2["model"]);
  EXPECT_EQ(m1["n_embd"], m2["n_embd"]);
  // transformers' GPT2LMHeadModel takes it with strict=True (where /opt/peers has it).
  if (std::system("/opt/peers/bin/python -c 'import transformers, safetensors' >/dev/null 2>&1") == 0) {
    const std::string py = fmt::format(
        "/opt/peers/bin/python -c \"import sys; from safetensors import safe_open; from safetensors.torch import "
        "load_file; from transformers import GPT2Config, GPT2LMHeadModel; p = sys.argv[1]; m = safe_open(p, 'pt')."
        "metadata(); k = ('vocab_size', 'n_positions', 'n_embd', 'n_layer', 'n_head'); "
        "GPT2LMHeadModel(GPT2Config(**{{x: int(m[x]) for x in k}})).load_state_dict(load_file(p), strict=True); "
        "print('strict ok')\" {} 2>&1",
        one);
    const CmdResult h = [&] {
      CmdResult r;
      FILE* p = ::popen(py.c_str(), "r");
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) r.out += buf;
      r.exit_code = ::pclose(p);
      return r;
    }();
    EXPECT_NE(h.out.find("strict ok"), std::string::npos) << h.out;
  } else {
    std::printf("not checked in transformers: /opt/peers/bin/python has no transformers\n");
  }
  for (int ranks : {2, 1, 3}) {
    SCOPED_TRACE(fmt::format("resumed at {} ranks", ranks));
    const std::string out = job.dir.file(fmt::format("r{}.safetensors", ranks));
    const CmdResult r = job.run(ranks, mode(ranks) + " --force --resume " + step4 + " --save " + out);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("resumed from " + step4 + ": epoch 1, step"), std::string::npos) << r.out;
    if (ranks == 2) {
      EXPECT_EQ(read_file(out), read_file(full));  // byte for byte
    } else {
      EXPECT_NE(r.out.find("resharded: saved by 2 ranks (global batch 6)"), std::string::npos) << r.out;
      const double d = max_diff(out, full);
      EXPECT_LE(d, tolerance);
      std::printf("resumed at %d ranks: largest weight difference to the 2-rank run %.3g\n", ranks, d);
    }
  }
}

TEST(ShardedCheckpoint, Zero3ParamDeviceCpuResumesAt1To3Ranks) {
  resumes_at_other_world_sizes(
      [](int ranks) { return ranks == 1 ? std::string("--param-device cpu") : "--zero 3 --param-device cpu"; }, 1e-4);
}

TEST(ShardedCheckpoint, Zero1CpuOptimizerResumesAt1To3Ranks) {
  resumes_at_other_world_sizes(
      [](int ranks) { return ranks == 1 ? std::string("--optimizer-device cpu") : "--zero 1 --optimizer-device cpu"; },
      1e-4);
}

TEST(ShardedCheckpoint, Zero1OnTheDeviceResumesAt1To3Ranks) {
  resumes_at_other_world_sizes([](int ranks) { return ranks == 1 ? std::string() : "--zero 1"; }, 1e-4);
}

// One process writes a sharded checkpoint (one shard); 2 ranks resume it.
TEST(ShardedCheckpoint, OneProcessCheckpointResumesAtTwoRanks) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
  Job job;
  const std::string ck = job.dir.file("ck"), full = job.dir.file("full.safetensors");
  const CmdResult a = job.run(1, "--checkpoint-format sharded --checkpoint-every 4 --checkpoint-dir " + ck + " --save " + full);
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_TRUE(fs::exists(ck + "/step-0000000004.shards/rank-0-of-1.safetensors"));
  const std::string out = job.dir.file("r2.safetensors");
  const CmdResult r = job.run(2, "--force --resume " + ck + "/step-0000000004.shards --save " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("resharded: saved by 1 rank (global batch 6), resumed by 2"), std::string::npos) << r.out;
  EXPECT_LE(max_diff(out, full), 1e-4);
}

// kill -9 of rank 1 while a checkpoint's shards are being written: the checkpoint latest.json
// names verifies, and the next run clears the unfinished folder.
TEST(ShardedCheckpoint, KillDuringTheWriteLeavesThePreviousOneLoadable) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
  Job job;
  const std::string ck = job.dir.file("ck"), pids = job.dir.str();
  const std::string cmd = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe --bind-to none "
      "-np 2 bash -c 'echo $$ > {}/pid.$OMPI_COMM_WORLD_RANK; exec \"$0\" \"$@\"' {}/tandem train --model gpt2 "
      "--n-layer 4 --n-head 4 --n-embd 256 --block-size 32 --data {} --batch-size 3 --eval-batch-size 4 "
      "--warmup-steps 1 --lr 1e-3 --seed 1 --device virt:0 --dist-timeout 60 "
      "--threads 1 --num-workers 0 --progress 0 --epochs 20 --zero 1 --optimizer-device cpu --checkpoint-every 1 "
      "--checkpoint-dir {} >{}/kill.log 2>&1 & echo $! > {}/job.pid",
      pids, TANDEM_BINARY_DIR, job.dir.str(), ck, pids, pids);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  // Wait for a published checkpoint and a later one in writing (its ".tmp" folder), then kill.
  const auto t0 = std::chrono::steady_clock::now();
  bool killed = false;
  std::string tmp_seen;
  while (!killed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(200)) {
    if (fs::exists(ck + "/latest.json") && fs::exists(pids + "/pid.1")) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(ck, ec)) {
        const std::string n = e.path().filename().string();
        if (n.size() > 11 && n.compare(n.size() - 11, 11, ".shards.tmp") == 0) tmp_seen = n;
      }
      if (!tmp_seen.empty()) {
        ::kill(std::stoi(read_file(pids + "/pid.1")), SIGKILL);
        killed = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ASSERT_TRUE(killed) << read_file(pids + "/kill.log");
  const std::string job_pid = read_file(pids + "/job.pid");
  for (int i = 0; i < 600 && ::kill(std::stoi(job_pid), 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string named = read_file(ck + "/latest.json");
  const train::checkpoint::Located loc = train::checkpoint::locate_checkpoint(ck);
  EXPECT_TRUE(loc.fallback.empty()) << loc.fallback;
  EXPECT_NE(named.find(fs::path(loc.path).filename().string()), std::string::npos) << named << " vs " << loc.path;
  std::printf("killed rank 1 while %s was being written; latest.json names %s, which loads\n", tmp_seen.c_str(),
              loc.path.c_str());
  // The next run resumes from it and clears the unfinished folder.
  job.model = fmt::format("--n-layer 4 --n-head 4 --n-embd 256 --epochs 20 --max-steps {}",
                          loc.file.state["global_step"].get<int64_t>() + 1);
  // --force: --max-steps (a run of one more step) is not the killed run's.
  const CmdResult r = job.run(2, "--zero 1 --optimizer-device cpu --force --resume --checkpoint-dir " + ck);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from " + loc.path), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(ck + "/" + tmp_seen));
}

}  // namespace
}  // namespace tandem::testing

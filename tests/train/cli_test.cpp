// End-to-end tests of the `tandem` command: bad input gives one line naming the flag or file,
// exit code 2, and leaves no output file behind; --save writes weights that `tandem eval`
// scores exactly as the training run did.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/thread_pool.h"
#include "tandem/rng.h"
#include "train/idx_split.h"
#include "train/run_tandem.h"

namespace fs = std::filesystem;
using tandem::testing::CmdResult;
using tandem::testing::last_line;
using tandem::testing::run_tandem;
using tandem::testing::idx_bytes;
using tandem::testing::write_file;
using tandem::testing::write_split;

namespace {

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_split(dir_ / "data", "train", 512, true, 1);
    write_split(dir_ / "data", "t10k", 200, false, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data() const { return "--data " + (dir_ / "data").string(); }

  // Bad input: exit code 2, the last line is one "tandem: error: [...]" line with `needle`,
  // no signal, and the --save file (when given) does not exist.
  void expect_bad(const std::string& args, const std::string& needle) {
    const fs::path save = dir_ / "w.safetensors";
    CmdResult r = run_tandem(args + " --save " + save.string());
    EXPECT_FALSE(r.signaled) << args;
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    const std::string line = last_line(r.out);
    EXPECT_NE(line.find("tandem"), std::string::npos) << line;
    EXPECT_NE(line.find(needle), std::string::npos) << "expected '" << needle << "' in: " << line;
    EXPECT_FALSE(fs::exists(save)) << args;
    for (auto& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
  }
  fs::path dir_;
};

// --init: a file of another model names the tensor and both shapes; the recipe flags are checked.
TEST_F(Cli, InitAndRecipeFlagErrorsAreOneLine) {
  const std::string cnn = (dir_ / "cnn.safetensors").string();
  ASSERT_EQ(run_tandem("train " + data() + " --epochs 1 --progress 0 --save " + cnn).exit_code, 0);
  expect_bad("train " + data() + " --model mlp --init " + cnn,
             "[train] --init " + cnn + ": tensor '1.weight' has shape [32] in the file, expected [256, 784]");
  const CmdResult plan = run_tandem("train " + data() + " --model mlp --plan-only --init " + cnn);  // checked, not read
  EXPECT_EQ(plan.exit_code, 2) << plan.out;
  EXPECT_NE(last_line(plan.out).find("tensor '1.weight' has shape [32] in the file, expected [256, 784]"),
            std::string::npos)
      << plan.out;
  expect_bad("train " + data() + " --init " + (dir_ / "missing.safetensors").string(),
             "--init " + (dir_ / "missing.safetensors").string() + ": expected an existing safetensors file");
  expect_bad("train " + data() + " --init-exclude fc.", "[train] --init-exclude fc.: expected --init FILE too");
  expect_bad("train " + data() + " --schedule one-cycle --pct-start 1", "--pct-start: expected a value in (0, 1)");
  expect_bad("train " + data() + " --device virt --optimizer-device cpu --no-decay-bn-bias", "--no-decay-bn-bias");
  // Excluding what differs starts from the rest: fmnist-cnn's convolutions into fmnist-cnn, a fresh head.
  CmdResult ok = run_tandem("train " + data() + " --epochs 1 --progress 0 --init " + cnn +
                            " --init-exclude 9. --init-exclude 11. --schedule one-cycle --optimizer sgd --nesterov "
                            "--no-decay-bn-bias --lr 0.05");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

TEST_F(Cli, HelpExplainsEveryFlag) {
  CmdResult r = run_tandem("train --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--data", "--model", "--epochs", "--batch-size", "--lr", "--optimizer", "--weight-decay",
                           "--schedule", "--num-workers", "--seed", "--threads", "--device", "--save",
                           "--optimizer-device", "--bucket-cap-mb", "--offload-delay", "--simd", "--init", "--init-exclude",
                           "--no-decay-bn-bias", "--zero-init-residual", "--pct-start", "--nesterov"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(r.out.find("  --no-augment "), std::string::npos) << r.out;  // no "{false}" after it
  EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seed for initialisation, shuffling and augmentation"), std::string::npos)
      << r.out;
  EXPECT_EQ(run_tandem("--help").exit_code, 0);
  // eval neither initialises the weights it scores nor shuffles or augments.
  const CmdResult e = run_tandem("eval --help");
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_NE(e.out.find("--seed"), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find("shuffling"), std::string::npos) << e.out;
}

TEST_F(Cli, BadFlagsAreOneLineErrors) {
  expect_bad("train " + data() + " --model resnet9", "model");
  expect_bad("train " + data() + " --optimizer adagrad", "optimizer");
  expect_bad("train " + data() + " --batch-size 0", "--batch-size");
  expect_bad("train " + data() + " --schedule linear", "schedule");
  expect_bad("train " + data() + " --lr -1", "--lr");
  expect_bad("train " + data() + " --epochs two", "--epochs");
  expect_bad("train " + data() + " --no-such-flag", "no-such-flag");
  expect_bad("train " + data() + " --device tpu", "device");
  expect_bad("train " + data() + " --device cuda", "CUDA");
  expect_bad("train " + data() + " --device virt --optimizer-device gpu", "--optimizer-device");
  expect_bad("train " + data() + " --device virt --optimizer-device cpu --offload-delay 2", "--offload-delay");
  expect_bad("train " + data() + " --device virt --offload-delay 1", "--offload-delay 1");
  expect_bad("train " + data() + " --device virt --offload-delay-warmup 5",
             "[train] --offload-delay-warmup 5: expected --optimizer-device cpu or --param-device cpu, got "
             "--optimizer-device device");
  expect_bad("train " + data() + " --device virt --optimizer-device cpu --bucket-cap-mb 0", "--bucket-cap-mb");
  expect_bad("train " + data() + " --device virt --optimizer-device cpu --bucket-cap-mb -5", "--bucket-cap-mb");
  expect_bad("train " + data() + " --device virt --optimizer-device cpu --offload-delay 1 --offload-delay-warmup -1",
             "--offload-delay-warmup");
  expect_bad("train " + data() + " --simd sse9", "--simd");
  // A parse error inside a command points to that command's help; an unknown command is named.
  expect_bad("train " + data() + " --no-such-flag", "(see tandem train --help)");
  expect_bad("eval " + data() + " --no-such-flag", "(see tandem eval --help)");
  expect_bad("trian " + data(), "unknown command 'trian': expected one of train, eval, info");
  // More compute threads than cores: allowed, with a warning (the error here is the missing file).
  const int over = tandem::available_cores() + 1;
  CmdResult r = run_tandem("eval " + data() + " --threads " + std::to_string(over) + " --weights missing.safetensors");
  EXPECT_NE(r.out.find("tandem: warning: --threads " + std::to_string(over) + " is more than the " +
                       std::to_string(tandem::available_cores()) + " available cores"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(run_tandem("eval " + data() + " --threads 1 --weights missing.safetensors").out.find("warning"),
            std::string::npos);
}

// --no-augment reaches the run: without random crop and flip the first epoch's figures change.
TEST_F(Cli, NoAugmentTurnsAugmentationOff) {
  const std::string run =
      "train " + data() + " --model mlp --epochs 1 --batch-size 64 --progress 0 --threads 1";
  const auto epoch_line = [](const std::string& out) {
    return out.substr(out.find("epoch 1/1"), 60);
  };
  const CmdResult on = run_tandem(run), off = run_tandem(run + " --no-augment");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_NE(epoch_line(on.out), epoch_line(off.out));
  EXPECT_EQ(epoch_line(off.out),
            epoch_line(run_tandem(run + " --no-augment").out));  // deterministic
}

// A device the build or the machine lacks is refused before the dataset is read (here there is
// none to read), in one line naming the flag.
TEST_F(Cli, DeviceErrorsNameTheFlagBeforeTheDataIsRead) {
  const std::string none = "--data " + (dir_ / "missing").string();
  expect_bad("train " + none + " --device cpu:1",
             "tandem: error: [train] --device cpu:1: cpu has one device: expected cpu or cpu:0, got 'cpu:1'");
  expect_bad("train " + none + " --device gpu", "[train] --device gpu: unknown device 'gpu': expected cpu, cuda[:N]");
  // Without the toolkit "tandem was built without CUDA", with it but no GPU "no CUDA device found".
  // With a GPU the device is fine and the missing dataset is the error.
  const CmdResult cuda = run_tandem("train " + none + " --device cuda");
  EXPECT_EQ(cuda.exit_code, 2) << cuda.out;
  const std::string line = last_line(cuda.out);
  if (line.find("CUDA") != std::string::npos)
    EXPECT_EQ(line.rfind("tandem: error: [train] --device cuda: ", 0), 0u) << line;
  else
    EXPECT_NE(line.find((dir_ / "missing").string()), std::string::npos) << line;
  const CmdResult e = run_tandem("eval " + none + " --weights w.safetensors --device cpu:1");
  EXPECT_EQ(e.exit_code, 2) << e.out;
  EXPECT_NE(last_line(e.out).find("[eval] --device cpu:1: cpu has one device"), std::string::npos)
      << e.out;
}

// The names of the model, optimizer and schedule are refused before the dataset is read, in one
// line naming the flag, with the names that exist.
TEST_F(Cli, UnknownNamesNameTheFlagBeforeTheDataIsRead) {
  const std::string none = "train --data " + (dir_ / "missing").string();
  expect_bad(none + " --optimizer rmsprop",
             "tandem: error: [train] --optimizer rmsprop: unknown optimizer 'rmsprop' (expected "
             "sgd, adam or adamw)");
  expect_bad(none + " --optimizer-device cpu --optimizer rmsprop",
             "[train] --optimizer rmsprop: unknown optimizer");
  expect_bad(none + " --schedule linear",
             "tandem: error: [train] --schedule linear: unknown schedule 'linear' (expected "
             "constant, step, cosine or one-cycle)");
  expect_bad(
      none + " --model resnet",
      "tandem: error: [train] --model resnet: unknown model 'resnet' (expected fmnist-cnn, mlp, resnet18, resnet34, resnet50, resnet18-cifar, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt-mini)");
  const CmdResult e =
      run_tandem("eval --data " + (dir_ / "missing").string() + " --weights w.st --model resnet");
  EXPECT_EQ(e.exit_code, 2) << e.out;
  EXPECT_NE(last_line(e.out).find("[eval] --model resnet: unknown model 'resnet'"),
            std::string::npos)
      << e.out;
}

// --optimizer-device cpu trains on virt and on cpu (there the "offload" is a host-to-host
// copy), with and without the delayed update.
TEST_F(Cli, OffloadedOptimizerTrains) {
  for (const char* extra : {"--device virt --optimizer-device cpu --offload-delay 1 --bucket-cap-mb 0.1",
                            "--device cpu --optimizer-device cpu"}) {
    CmdResult r = run_tandem("train " + data() + " --model mlp --epochs 1 --batch-size 64 --progress 0 " + extra);
    ASSERT_EQ(r.exit_code, 0) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find("offloaded"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("done: best test_acc"), std::string::npos) << r.out;
  }
}

TEST_F(Cli, MissingDatasetSaysHowToInstallIt) {
  expect_bad("train --data " + (dir_ / "nowhere").string(), "dataset-fashion-mnist");
}

TEST_F(Cli, CorruptFilesAreNamed) {
  const fs::path d = dir_ / "data";
  // Wrong magic.
  write_file(d / "train-labels-idx1-ubyte.gz", {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 1, 0}, true);
  expect_bad("train " + data(), "train-labels-idx1-ubyte");
  // Truncated gzip stream.
  write_split(d, "train", 512, true, 1);
  const fs::path img = d / "train-images-idx3-ubyte.gz";
  fs::resize_file(img, fs::file_size(img) / 2);
  expect_bad("train " + data(), "train-images-idx3-ubyte");
  // Image/label count mismatch.
  write_split(d, "train", 512, true, 1);
  write_file(d / "train-labels-idx1-ubyte.gz", idx_bytes({100}, std::vector<uint8_t>(100, 1)), true);
  expect_bad("train " + data(), "train-labels-idx1-ubyte");
}

TEST_F(Cli, ImagesOfTheWrongSizeAreRefusedUpFront) {
  const fs::path d = dir_ / "data";
  write_file(d / "t10k-images-idx3-ubyte", idx_bytes({4, 30, 30}, std::vector<uint8_t>(4 * 900, 7)), false);
  write_file(d / "t10k-labels-idx1-ubyte", idx_bytes({4}, {1, 2, 3, 4}), false);
  expect_bad("train " + data() + " --model mlp",
             "the training and test sets differ (--data " + (dir_ / "data").string() +
                 "): train holds 1x28x28 images of 10 classes, test 1x30x30 images of 10 classes");
}

TEST_F(Cli, UnreadableFileIsNamed) {
  // A directory where the file should be: opening may succeed, reading fails (also as root).
  const fs::path img = dir_ / "data" / "train-images-idx3-ubyte.gz";
  fs::remove(img);
  fs::create_directories(img);
  expect_bad("train " + data(), "train-images-idx3-ubyte");
}

TEST_F(Cli, NanLossStopsTheRunWithoutSaving) {
  expect_bad("train " + data() + " --model mlp --optimizer sgd --momentum 0 --lr 1e30 --schedule constant "
                                 "--epochs 2 --progress 0",
             "loss");
}

TEST_F(Cli, SavedWeightsEvaluateToTheTrainingAccuracy) {
  const fs::path save = dir_ / "w.safetensors";
  CmdResult t = run_tandem("train " + data() + " --model mlp --epochs 2 --batch-size 32 --no-augment --progress 0 --save " +
                     save.string());
  ASSERT_EQ(t.exit_code, 0) << t.out;
  ASSERT_TRUE(fs::exists(save));
  // "epoch 2/2 ... test_acc 97.50% ..." -> accuracy string
  const size_t e2 = t.out.find("epoch 2/2");
  ASSERT_NE(e2, std::string::npos) << t.out;
  const size_t a = t.out.find("test_acc ", e2);
  const std::string train_acc = t.out.substr(a + 9, t.out.find('%', a) - a - 9);
  EXPECT_GT(std::stod(train_acc), 90.0) << "the bar dataset is easy: " << t.out;
  CmdResult e = run_tandem("eval " + data() + " --model mlp --weights " + save.string());
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_NE(e.out.find("test_acc " + train_acc + "%"), std::string::npos) << e.out << "\nvs " << train_acc;
  // PyTorch loads the file into the equivalent nn.Sequential (strict) and scores the same.
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) {
    std::printf("[  NOTE    ] python3-torch not installed: PyTorch load check not run\n");
  } else {
    CmdResult py;
    {
      const std::string cmd = std::string("/usr/bin/python3 ") + TANDEM_SOURCE_DIR + "/scripts/check_weights_torch.py " +
                              save.string() + " --model mlp --data " + (dir_ / "data").string() + " 2>&1";
      FILE* p = ::popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::array<char, 4096> buf;
      size_t n;
      while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) py.out.append(buf.data(), n);
      py.exit_code = WEXITSTATUS(::pclose(p));
    }
    ASSERT_EQ(py.exit_code, 0) << py.out;
    const size_t c = e.out.find("(");
    const std::string correct = e.out.substr(c + 1, e.out.find(' ', c) - c - 1);
    EXPECT_NE(py.out.find("correct " + correct + " "), std::string::npos) << py.out << " vs tandem " << e.out;
  }
  // The wrong model for the file: the error names the model the file records and the flag.
  CmdResult bad = run_tandem("eval " + data() + " --model fmnist-cnn --weights " + save.string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(last_line(bad.out).find("holds weights of model 'mlp', expected 'fmnist-cnn' (--model): pass --model mlp"),
            std::string::npos)
      << bad.out;
  // Without --model, eval takes the model the file records: the same figures as --model mlp.
  CmdResult recorded = run_tandem("eval " + data() + " --weights " + save.string());
  EXPECT_EQ(recorded.exit_code, 0) << recorded.out;
  EXPECT_EQ(last_line(recorded.out), last_line(e.out)) << recorded.out;
}

}  // namespace

namespace {

TEST_F(Cli, TraceHasTheTrainTrackWithStagesNestedInSteps) {
  const fs::path trace = dir_ / "trace.json";
  CmdResult r = run_tandem("train " + data() + " --model mlp --epochs 1 --batch-size 64 --progress 0 --trace " +
                           trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("advice: "), std::string::npos) << r.out;
  std::ifstream in(trace);
  const nlohmann::json doc = nlohmann::json::parse(in);
  int train_tid = -1;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "train") train_tid = e["tid"];
  ASSERT_GE(train_tid, 0) << "no track named 'train'";
  std::vector<std::pair<double, double>> steps;
  std::map<std::string, int> inside;  // stage -> spans inside some step
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == train_tid && e["cat"] == "step")
      steps.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  EXPECT_EQ(steps.size(), 512u / 64u);  // 512 training samples, batch 64, drop_last
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != train_tid || e["cat"] == "step") continue;
    const double b = e["ts"], en = b + e["dur"].get<double>();
    for (const auto& [sb, se] : steps)
      if (b >= sb - 0.01 && en <= se + 0.01) {
        inside[e["cat"]]++;
        break;
      }
  }
  for (const char* stage : {"wait_data", "forward", "backward", "optimizer"})
    EXPECT_EQ(inside[stage], static_cast<int>(steps.size())) << stage;
}

}  // namespace
